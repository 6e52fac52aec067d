// Ansible's INI inventory format (inventory.h):
//
//   gpu-spare ansible_host=10.1.230.180          # before any section: ungrouped
//   [kimi]
//   gpu[01:04] ansible_user=root model_dir=/shared/kimi
//   gpu05:2222 cuda_visible_devices="0,1,2,3"
//   [kimi:vars]
//   port=8000
//   [serving:children]
//   kimi
//
// Lines starting with '#' or ';' are comments, as is the rest of a host line from a '#' that
// starts a word. Host variables are words KEY=VALUE, quoted as a shell would ("a b", 'a b');
// a [GROUP:vars] line is KEY=VALUE with the rest of the line as the value (surrounding quotes
// removed). Values are kept as written: deployd's variables are strings.
#include <string>
#include <string_view>
#include <vector>

#include "ctl/inventory_builder.h"

namespace deployd::ctl {

namespace {

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r'))
    s.remove_suffix(1);
  return s;
}

std::string Unquote(std::string_view v) {
  if (v.size() >= 2 && (v.front() == '"' || v.front() == '\'') && v.back() == v.front())
    return std::string(v.substr(1, v.size() - 2));
  return std::string(v);
}

// Words as a shell splits them: quotes group, a backslash escapes (outside single quotes), and
// a word starting with '#' ends the line. False on an unterminated quote.
bool SplitWords(std::string_view line, std::vector<std::string>& words) {
  std::string word;
  bool in_word = false;
  for (size_t i = 0; i < line.size(); ++i) {
    char c = line[i];
    if (c == ' ' || c == '\t' || c == '\r') {
      if (in_word) words.push_back(word);
      word.clear();
      in_word = false;
      continue;
    }
    if (c == '#' && !in_word) return true;
    in_word = true;
    if (c == '\'' || c == '"') {
      size_t end = i + 1;
      for (; end < line.size() && line[end] != c; ++end) {
        if (c == '"' && line[end] == '\\' && end + 1 < line.size()) ++end;
        word += line[end];
      }
      if (end >= line.size()) return false;
      i = end;
    } else if (c == '\\' && i + 1 < line.size()) {
      word += line[++i];
    } else {
      word += c;
    }
  }
  if (in_word) words.push_back(word);
  return true;
}

class IniReader {
 public:
  explicit IniReader(InventoryBuilder& out) : out_(out) {}

  void Line(std::string_view raw, int number) {
    line_ = number;
    std::string_view line = Trim(raw);
    if (line.empty() || line.front() == '#' || line.front() == ';') return;
    if (line.front() == '[') return Section(line);
    if (kind_ == Kind::kVars) return VarsLine(line);
    if (kind_ == Kind::kChildren) return ChildLine(line);
    HostLine(line);
  }

 private:
  enum class Kind { kHosts, kVars, kChildren };

  void Section(std::string_view line) {
    size_t close = line.find(']');
    std::string_view after = close == std::string_view::npos ? "" : Trim(line.substr(close + 1));
    std::string_view inside = close == std::string_view::npos ? "" : line.substr(1, close - 1);
    if (close == std::string_view::npos || inside.empty() ||
        (!after.empty() && after.front() != '#' && after.front() != ';') ||
        inside.find_first_of(" \t[") != std::string_view::npos) {
      kind_ = Kind::kHosts;
      group_.clear();
      return Error("invalid section header '" + std::string(line) +
                   "' (expected [GROUP], [GROUP:vars] or [GROUP:children])");
    }
    size_t colon = inside.find(':');
    group_ = std::string(inside.substr(0, colon));
    std::string_view type = colon == std::string_view::npos ? "" : inside.substr(colon + 1);
    if (type.empty()) {
      kind_ = Kind::kHosts;
    } else if (type == "vars") {
      kind_ = Kind::kVars;
    } else if (type == "children") {
      kind_ = Kind::kChildren;
    } else {
      kind_ = Kind::kHosts;
      group_.clear();
      return Error("section '[" + std::string(inside) + "]' has an unknown type '" +
                   std::string(type) + "' (expected [GROUP], [GROUP:vars] or [GROUP:children])");
    }
    if (group_.empty()) return Error("a section needs a group name: '" + std::string(line) + "'");
    out_.Group(group_, line_);
  }

  void VarsLine(std::string_view line) {
    size_t eq = line.find('=');
    if (eq == std::string_view::npos || Trim(line.substr(0, eq)).empty())
      return Error("expected KEY=VALUE in [" + group_ + ":vars], not '" + std::string(line) + "'");
    out_.GroupVar(group_, std::string(Trim(line.substr(0, eq))),
                  InventoryValue{Unquote(Trim(line.substr(eq + 1))), line_, ""});
  }

  void ChildLine(std::string_view line) {
    std::vector<std::string> words;
    if (!SplitWords(line, words) || words.size() != 1)
      return Error("expected one group name in [" + group_ + ":children], not '" +
                   std::string(line) + "'");
    out_.Child(group_, words[0], line_);
  }

  void HostLine(std::string_view line) {
    std::vector<std::string> words;
    if (!SplitWords(line, words)) return Error("unterminated quote in '" + std::string(line) + "'");
    if (words.empty()) return;
    std::string pattern = words[0];
    InventoryVars vars;
    // "host:port", but not an IPv6 address (more than one ':'), nor a range's ':'.
    size_t after_range = pattern.rfind(']');
    after_range = after_range == std::string::npos ? 0 : after_range;
    if (size_t colon = pattern.rfind(':'); colon != std::string::npos && colon > after_range &&
                                           pattern.find(':', after_range) == colon) {
      std::string port = pattern.substr(colon + 1);
      pattern.erase(colon);
      if (port.empty() || port.find_first_not_of("0123456789") != std::string::npos)
        return Error("invalid port '" + port + "' in '" + words[0] + "'");
      vars["ansible_port"] = InventoryValue{port, line_, ""};
    }
    for (size_t i = 1; i < words.size(); ++i) {
      size_t eq = words[i].find('=');
      if (eq == std::string::npos || eq == 0)
        return Error("host '" + pattern + "': '" + words[i] + "' is not KEY=VALUE");
      vars[words[i].substr(0, eq)] = InventoryValue{words[i].substr(eq + 1), line_, ""};
    }
    Result<std::vector<std::string>> names = ExpandHostRange(pattern);
    if (!names.ok()) return Error(names.status().message());
    for (const std::string& name : names.value()) out_.Host(group_, name, line_, vars);
  }

  void Error(const std::string& message) { out_.Error(line_, 0, message); }

  InventoryBuilder& out_;
  Kind kind_ = Kind::kHosts;
  std::string group_;  // "" before any section: ungrouped
  int line_ = 0;
};

}  // namespace

void ReadIniInventory(std::string_view text, InventoryBuilder& out) {
  IniReader reader(out);
  int number = 0;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string_view::npos) end = text.size();
    reader.Line(text.substr(start, end - start), ++number);
    start = end + 1;
  }
}

}  // namespace deployd::ctl
