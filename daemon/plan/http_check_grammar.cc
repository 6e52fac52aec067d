#include "plan/http_check_grammar.h"

#include <algorithm>
#include <array>
#include <string>
#include <string_view>
#include <vector>

#include "plan/plan_limits.h"
#include "util/pattern.h"
#include "util/units.h"

namespace deployd {
namespace {

constexpr std::array<std::string_view, 6> kHttpKeys = {"url",    "method",        "body",
                                                       "status", "body_contains", "json"};
constexpr std::array<std::string_view, 3> kJsonKeys = {"path", "equals", "contains"};

// --- the request body ---

void AppendJsonString(std::string_view s, std::string& out) {
  static constexpr char kHex[] = "0123456789abcdef";
  out += '"';
  for (char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (c == '\n') {
      out += "\\n";
    } else if (static_cast<unsigned char>(c) < 0x20) {
      out += "\\u00";
      out += kHex[(c >> 4) & 0xf];
      out += kHex[c & 0xf];
    } else {
      out += c;
    }
  }
  out += '"';
}

bool IsJsonNumber(std::string_view s) {
  static const PatternSet kNumber =
      CompilePattern(R"(^-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?$)").value();
  return kNumber.Matches(s);
}

// A YAML body becomes compact JSON. Plain scalars that look like JSON numbers, true, false or
// null keep that type; quoted scalars are always strings. The recursion is bounded by the
// document's nesting (plan_limits.h); an alias that would make a node contain itself is refused
// before (plan_document.h).
bool AppendJson(FieldReader& in, const YAML::Node& node, std::string& out) {
  if (node.IsNull()) {
    out += "null";
  } else if (node.IsScalar()) {
    std::optional<std::string> s = in.Substitute(node, PosOf(node));
    if (!s) return false;
    bool plain = node.Tag() == "?";
    if (plain && s->size() > kMaxNumberChars && IsJsonNumber(*s)) {
      in.Error(PosOf(node), "a number in 'body' longer than " + std::to_string(kMaxNumberChars) +
                                " characters (quote it to send a string)");
      return false;
    }
    if (plain && (*s == "true" || *s == "false" || IsJsonNumber(*s))) {
      out += *s;
    } else {
      AppendJsonString(*s, out);
    }
  } else if (node.IsSequence()) {
    out += '[';
    bool first = true;
    for (auto it = node.begin(); it != node.end(); ++it) {
      if (!first) out += ',';
      first = false;
      if (!AppendJson(in, *it, out)) return false;
    }
    out += ']';
  } else if (node.IsMap()) {
    out += '{';
    bool first = true;
    for (const Field& e : in.Entries(node)) {
      if (!first) out += ',';
      first = false;
      AppendJsonString(e.name, out);
      out += ':';
      if (!AppendJson(in, e.value, out)) return false;
    }
    out += '}';
  }
  return true;
}

// --- the url ---

// http://HOST[:PORT]/PATH, HOST possibly a bracketed IPv6 address.
bool IsHttpUrl(std::string_view url) {
  if (url.find_first_of(" \t\n") != std::string_view::npos) return false;
  std::string_view rest = url.substr(7);
  std::string_view authority = rest.substr(0, rest.find_first_of("/?#"));
  std::string_view host = authority;
  std::string_view port;
  if (authority.starts_with('[')) {
    std::size_t close = authority.find(']');
    if (close == std::string_view::npos || close <= 1) return false;
    host = authority.substr(1, close - 1);
    std::string_view after = authority.substr(close + 1);
    if (!after.empty() && !after.starts_with(':')) return false;
    if (!after.empty()) port = after.substr(1);
  } else if (std::size_t colon = authority.rfind(':'); colon != std::string_view::npos) {
    host = authority.substr(0, colon);
    port = authority.substr(colon + 1);
    if (port.empty()) port = "x";  // "http://h:/" has a colon and no port
  }
  if (host.empty()) return false;
  if (port.empty()) return true;
  std::optional<std::int64_t> p = ParseInteger(port);
  return p && *p >= 1 && *p <= 65535;
}

}  // namespace

std::optional<std::string> ReadHttpUrl(FieldReader& in, const std::string& url, SourcePos pos,
                                       std::string_view kind) {
  std::size_t separator = url.find("://");
  std::string scheme = url.substr(0, separator == std::string::npos ? 0 : separator);
  std::transform(scheme.begin(), scheme.end(), scheme.begin(),
                 [](char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c + 32) : c; });
  if (scheme == "https") {
    in.Error(pos, "https is not supported in " + Quoted(kind) +
                      " checks (probe the server on loopback over http://)");
    return std::nullopt;
  }
  if (scheme != "http" || !IsHttpUrl(url)) {
    in.Error(pos, "invalid url " + Quoted(url) + " (expected http://HOST[:PORT]/PATH)");
    return std::nullopt;
  }
  return url;
}

namespace {

void CheckUrl(FieldReader& in, const std::string& url, SourcePos pos, Check& check) {
  if (std::optional<std::string> checked = ReadHttpUrl(in, url, pos, "http")) check.url = *checked;
}

// --- what the response must show ---

void ReadJsonExpectation(FieldReader& in, const YAML::Node& item, Check& check) {
  Fields f = in.ReadMap(item, kJsonKeys, "in 'json'");
  JsonExpectation x;
  if (const Field* path = f.Get("path")) {
    x.path = in.NonEmptyString(*path).value_or("");
  } else {
    in.Error(PosOf(item), "missing required key 'path' in 'json'");
  }
  const Field* equals = f.Get("equals");
  const Field* contains = f.Get("contains");
  if (equals && contains) {
    in.Error(PosOf(contains->key), "a 'json' expectation takes 'equals' or 'contains', not both");
  } else if (equals || contains) {
    const Field* which = equals ? equals : contains;
    x.op = equals ? JsonExpectation::Op::kEquals : JsonExpectation::Op::kContains;
    if (!which->value.IsScalar()) {
      in.Error(ValuePos(*which), Quoted(which->name) + " must be a string, a number or a boolean");
    } else {
      x.value = in.String(*which).value_or("");
    }
  } else {
    in.Error(PosOf(item), "a 'json' expectation needs 'equals' or 'contains'");
  }
  check.json.push_back(std::move(x));
}

// json: [{path: data.*.id, contains: /models/kimi}, {path: object, equals: list}]
void ReadJsonExpectations(FieldReader& in, const Field& e, Check& check) {
  const YAML::Node& v = e.value;
  if (!v.IsSequence() && !v.IsMap()) {
    in.Error(ValuePos(e), "'json' must be a list of {path, equals|contains}");
    return;
  }
  std::vector<YAML::Node> items;
  if (v.IsMap()) {
    items.push_back(v);
  } else {
    for (auto it = v.begin(); it != v.end(); ++it) items.push_back(*it);
  }
  for (const YAML::Node& item : items) {
    if (!item.IsMap()) {
      in.Error(PosOf(item), "each 'json' expectation must be a map {path, equals|contains}");
      continue;
    }
    ReadJsonExpectation(in, item, check);
  }
}

// A bad method is reported once; 'body' is then not judged against it.
void ReadRequest(FieldReader& in, const Fields& f, Check& check) {
  bool method_known = true;
  if (const Field* method = f.Get("method")) {
    std::optional<std::string> m = in.String(*method);
    method_known = m && (*m == "GET" || *m == "POST");
    if (method_known) {
      check.method = *m;
    } else if (m) {
      in.Error(ValuePos(*method), "'method' must be GET or POST");
    }
  }
  if (const Field* body = f.Get("body")) {
    if (body->value.IsNull()) {
      in.Error(ValuePos(*body), "'body' must be a string, a map or a list");
    } else if (body->value.IsScalar()) {
      check.body = in.String(*body).value_or("");
    } else {
      std::string json;
      if (AppendJson(in, body->value, json)) check.body = json;
    }
    if (method_known && check.method != "POST")
      in.Error(PosOf(body->key), "'body' requires 'method: POST'");
  }
}

}  // namespace

void ReadHttpCheck(FieldReader& in, const Field& e, Check& check) {
  const YAML::Node& v = e.value;
  if (v.IsScalar()) {
    if (std::optional<std::string> url = in.String(e)) CheckUrl(in, *url, ValuePos(e), check);
    return;
  }
  if (!v.IsMap()) {
    in.Error(ValuePos(e), "'http' must be a URL or a map with 'url'");
    return;
  }
  Fields f = in.ReadMap(v, kHttpKeys, "in 'http'");
  if (const Field* url = f.Get("url")) {
    if (std::optional<std::string> s = in.String(*url)) CheckUrl(in, *s, ValuePos(*url), check);
  } else {
    in.Error(PosOf(v), "missing required key 'url' in 'http'");
  }
  ReadRequest(in, f, check);
  if (const Field* status = f.Get("status"))
    check.status = static_cast<int>(in.Integer(*status, 100, 599).value_or(200));
  if (const Field* contains = f.Get("body_contains"))
    check.body_contains = in.String(*contains).value_or("");
  if (const Field* json = f.Get("json")) ReadJsonExpectations(in, *json, check);
}

}  // namespace deployd
