// PlanDocument: a plan's text → its one YAML map, read within the limits of plan_limits.h.
//
// yaml-cpp builds a node tree of any size, accepts what a plan must not hold (tags, NUL, bytes
// that are not UTF-8, a quote left open at the end), and its LoadAll never gets past a stray
// top-level ',' (it returns empty documents forever). So the text is first checked byte by byte,
// then read once as events (yaml-cpp's Parser) that count and check every node and stop at the
// first limit, asking for at most two documents; only a document that passes is loaded as a
// tree. Every problem is reported to the FieldReader with its position.
#ifndef DEPLOYD_PLAN_PLAN_DOCUMENT_H_
#define DEPLOYD_PLAN_PLAN_DOCUMENT_H_

#include <yaml-cpp/yaml.h>

#include <optional>
#include <string_view>

#include "plan/field_reader.h"

namespace deployd {

// The document's root map, or nullopt when there is none (reported).
std::optional<YAML::Node> LoadPlanDocument(FieldReader& in, std::string_view text);

}  // namespace deployd

#endif  // DEPLOYD_PLAN_PLAN_DOCUMENT_H_
