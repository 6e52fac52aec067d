#include "plan/plan_document.h"

#include <yaml-cpp/eventhandler.h>

#include <algorithm>
#include <cstdio>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "plan/plan_limits.h"
#include "util/units.h"
#include "util/utf8_text.h"

namespace deployd {
namespace {

// NUL would cut a string where it is used; the other control characters have no business in a
// plan and would bloat its JSON form. Tab and line ends are text.
bool IsControl(unsigned char c) {
  return (c < 0x20 && c != '\t' && c != '\n' && c != '\r') || c == 0x7F;
}

std::string ControlMessage(unsigned char c) {
  char code[8];
  std::snprintf(code, sizeof code, "U+%04X", c);
  return std::string("control character ") + code + " is not allowed in a plan";
}

// 1-based line and byte column of text[offset], as yaml-cpp counts them.
SourcePos PosAt(std::string_view text, std::size_t offset) {
  std::string_view before = text.substr(0, offset);
  int line = 1 + static_cast<int>(std::count(before.begin(), before.end(), '\n'));
  std::size_t line_start = before.rfind('\n');
  line_start = line_start == std::string_view::npos ? 0 : line_start + 1;
  return {line, static_cast<int>(offset - line_start) + 1};
}

// The text as a whole: its size, its encoding, no control characters.
bool CheckBytes(FieldReader& in, std::string_view text) {
  if (text.size() > kMaxPlanBytes) {
    in.Error({}, "the plan is larger than " + FormatSize(kMaxPlanBytes) + " (" +
                     std::to_string(text.size()) + " bytes)");
    return false;
  }
  if (std::size_t bad = FirstInvalidUtf8(text); bad != std::string_view::npos) {
    char hex[8];
    std::snprintf(hex, sizeof hex, "0x%02X", static_cast<unsigned char>(text[bad]));
    in.Error(PosAt(text, bad), std::string("invalid UTF-8 (byte ") + hex + ")");
    return false;
  }
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (IsControl(static_cast<unsigned char>(text[i]))) {
      in.Error(PosAt(text, i), ControlMessage(static_cast<unsigned char>(text[i])));
      return false;
    }
  }
  return true;
}

// Thrown by the event handler to stop reading at the first limit crossed.
struct Stop {
  YAML::Mark mark;
  std::string message;
};

// Counts and checks every node of the stream as yaml-cpp's parser reports it, without building
// anything: tags, string length, nesting, the number of nodes (an alias counts the nodes of what
// it names), and where a second document starts.
class BoundedEvents : public YAML::EventHandler {
 public:
  explicit BoundedEvents(std::string_view text) : text_(text) {}

  int documents() const { return documents_; }
  // The last scalar, where an unterminated quote would be (yaml-cpp ends it at the end of the
  // text without a word).
  const std::optional<YAML::Mark>& last_scalar() const { return last_scalar_; }

  void OnDocumentStart(const YAML::Mark& mark) override {
    if (++documents_ == 1) return;
    // A second document: one the author started with '---', or the parser stuck on a token that
    // starts none (a stray ',' gives an empty document at the same place forever).
    std::string_view rest = text_.substr(static_cast<std::size_t>(mark.pos));
    if (rest.starts_with("---")) throw Stop{mark, "the plan must be a single YAML document"};
    throw Stop{mark, "invalid YAML: unexpected '" + std::string(rest.substr(0, 1)) + "'"};
  }
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark& mark, YAML::anchor_t anchor) override { Leaf(mark, "", anchor); }
  void OnAlias(const YAML::Mark& mark, YAML::anchor_t anchor) override {
    if (anchor >= sizes_.size() || sizes_[anchor] == 0)
      throw Stop{mark, "an alias cannot name a node that contains it"};
    Count(mark, sizes_[anchor]);
  }
  void OnScalar(const YAML::Mark& mark, const std::string& tag, YAML::anchor_t anchor,
                const std::string& value) override {
    if (value.size() > kMaxStringBytes)
      throw Stop{mark, "a string longer than " + FormatSize(kMaxStringBytes)};
    // A double-quoted string can spell one with an escape ("\0", "\x07").
    for (char c : value)
      if (IsControl(static_cast<unsigned char>(c)))
        throw Stop{mark, ControlMessage(static_cast<unsigned char>(c))};
    last_scalar_ = mark;
    Leaf(mark, tag, anchor);
  }
  void OnSequenceStart(const YAML::Mark& mark, const std::string& tag, YAML::anchor_t anchor,
                       YAML::EmitterStyle::value) override {
    Open(mark, tag, anchor);
  }
  void OnSequenceEnd() override { Close(); }
  void OnMapStart(const YAML::Mark& mark, const std::string& tag, YAML::anchor_t anchor,
                  YAML::EmitterStyle::value) override {
    Open(mark, tag, anchor);
  }
  void OnMapEnd() override { Close(); }

 private:
  struct Collection {
    YAML::anchor_t anchor;
    std::size_t first;  // nodes_ when it opened, itself counted
  };

  void CheckTag(const YAML::Mark& mark, const std::string& tag) {
    // "?" is a plain scalar's or a collection's, "!" a quoted scalar's: no tag was written.
    if (tag.empty() || tag == "?" || tag == "!") return;
    constexpr std::string_view kCore = "tag:yaml.org,2002:";
    std::string shown = tag.starts_with(kCore) ? "!!" + tag.substr(kCore.size()) : tag;
    throw Stop{mark, "YAML tags are not supported ('" + shown + "')"};
  }
  void Count(const YAML::Mark& mark, std::size_t n) {
    nodes_ += n;
    if (nodes_ > kMaxPlanNodes)
      throw Stop{mark, "the plan has more than " + std::to_string(kMaxPlanNodes) +
                           " keys, values and items (an alias counts those it repeats)"};
  }
  void Name(YAML::anchor_t anchor, std::size_t size) {
    if (anchor == 0) return;
    if (anchor >= sizes_.size()) sizes_.resize(anchor + 1, 0);
    sizes_[anchor] = size;
  }
  void Leaf(const YAML::Mark& mark, const std::string& tag, YAML::anchor_t anchor) {
    CheckTag(mark, tag);
    Count(mark, 1);
    Name(anchor, 1);
  }
  void Open(const YAML::Mark& mark, const std::string& tag, YAML::anchor_t anchor) {
    CheckTag(mark, tag);
    if (open_.size() >= static_cast<std::size_t>(kMaxPlanNesting))
      throw Stop{mark, "the plan nests deeper than " + std::to_string(kMaxPlanNesting) +
                           " levels of maps and lists"};
    Count(mark, 1);
    open_.push_back({anchor, nodes_});
  }
  void Close() {
    Collection closed = open_.back();
    open_.pop_back();
    Name(closed.anchor, nodes_ - closed.first + 1);
  }

  std::string_view text_;
  int documents_ = 0;
  std::size_t nodes_ = 0;
  std::vector<Collection> open_;
  std::vector<std::size_t> sizes_;  // by anchor: the nodes it stands for; 0 while still open
  std::optional<YAML::Mark> last_scalar_;
};

// Whether the quoted scalar at text[pos] has its closing quote.
bool QuoteClosed(std::string_view text, std::size_t pos) {
  char quote = text[pos];
  for (std::size_t i = pos + 1; i < text.size(); ++i) {
    if (quote == '"' && text[i] == '\\') {
      ++i;
    } else if (text[i] == quote) {
      if (quote == '\'' && i + 1 < text.size() && text[i + 1] == '\'') {
        ++i;  // '' is a quote inside single quotes
      } else {
        return true;
      }
    }
  }
  return false;
}

// Reads the stream as events: false (reported) at the first problem.
bool CheckEvents(FieldReader& in, std::string_view text, bool& empty) {
  std::istringstream stream{std::string(text)};
  YAML::Parser parser(stream);
  BoundedEvents events(text);
  try {
    // At most two calls: the second stops at the start of a second document, if any.
    if (parser.HandleNextDocument(events)) parser.HandleNextDocument(events);
  } catch (const Stop& stop) {
    in.Error(PosOf(stop.mark), stop.message);
    return false;
  } catch (const YAML::Exception& e) {
    in.Error(PosOf(e.mark), "invalid YAML: " + e.msg);
    return false;
  }
  if (const std::optional<YAML::Mark>& last = events.last_scalar()) {
    auto pos = static_cast<std::size_t>(last->pos);
    if ((text[pos] == '"' || text[pos] == '\'') && !QuoteClosed(text, pos)) {
      in.Error(PosOf(*last), "unterminated quoted string (its closing quote is missing)");
      return false;
    }
  }
  empty = events.documents() == 0;
  return true;
}

}  // namespace

std::optional<YAML::Node> LoadPlanDocument(FieldReader& in, std::string_view text) {
  bool empty = false;
  if (!CheckBytes(in, text) || !CheckEvents(in, text, empty)) return std::nullopt;
  YAML::Node root;
  if (!empty) {
    try {
      root = YAML::Load(std::string(text));
    } catch (const YAML::Exception& e) {
      in.Error(PosOf(e.mark), "invalid YAML: " + e.msg);
      return std::nullopt;
    }
  }
  if (!root || root.IsNull()) {
    in.Error({}, "the plan is empty (expected a map with 'version', 'name' and 'steps')");
    return std::nullopt;
  }
  if (!root.IsMap()) {
    in.Error(PosOf(root), "the plan must be a map with 'version', 'name' and 'steps'");
    return std::nullopt;
  }
  return root;
}

}  // namespace deployd
