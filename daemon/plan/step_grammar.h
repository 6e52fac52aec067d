// The step grammar: the lists under `steps:` and `on_failure:`. A step is a map with an `id`,
// exactly one action key (action_grammar.h) and the keys about its process, its retries, its
// checks (check_grammar.h) and its watch (watch_grammar.h); plan_defaults.h fills in what a
// built-in action implies. Problems go to the FieldReader.
//
// One StepReader per plan: step ids must be unique across both lists.
#ifndef DEPLOYD_PLAN_STEP_GRAMMAR_H_
#define DEPLOYD_PLAN_STEP_GRAMMAR_H_

#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "deployd/plan.h"
#include "plan/field_reader.h"

namespace deployd {

class StepReader {
 public:
  // `secrets`: the names the plan's `secrets:` defines; a step may ask only for those. Both
  // must outlive the reader.
  StepReader(FieldReader& in, const std::set<std::string>& secrets);

  // `e` is the `steps:` or (with `on_failure`) the `on_failure:` entry; only `steps` must not be
  // empty.
  std::vector<Step> ReadSteps(const Field& e, bool on_failure);

 private:
  std::optional<Step> ReadStep(const YAML::Node& node, int index, bool on_failure);
  void ReadId(const Fields& f, const std::string& label, Step& step);
  void ReadActionOf(const Fields& f, const std::string& label, Step& step);
  void ReadOptions(const Fields& f, Step& step);
  std::vector<std::string> SecretNames(const Field& e);

  FieldReader& in_;
  const std::set<std::string>& secrets_;
  std::map<std::string, SourcePos> step_ids_;  // where each id was first defined
  std::size_t steps_counted_ = 0;              // of the lists read so far
};

}  // namespace deployd

#endif  // DEPLOYD_PLAN_STEP_GRAMMAR_H_
