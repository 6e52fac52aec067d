#include "control/run_records.h"

#include <boost/json.hpp>
#include <chrono>

#include "engine/wire_records.h"
#include "protocol/answer.h"

namespace deployd {

namespace json = boost::json;

namespace {

// A member that must be a whole number of at least `least` when it is there.
Result<std::optional<std::int64_t>> WholeNumber(const json::object& request, std::string_view key,
                                                std::int64_t least) {
  const json::value* v = request.if_contains(key);
  if (!v) return std::optional<std::int64_t>();
  if (!v->is_int64() || v->as_int64() < least)
    return Status::Error("bad request: \"" + std::string(key) + "\" must be a whole number from " +
                         std::to_string(least));
  return std::optional<std::int64_t>(v->as_int64());
}

std::string StateList() {
  std::vector<std::string> names = RunStateNames();
  std::string list;
  for (size_t i = 0; i < names.size(); ++i)
    list += (i == 0 ? "" : i + 1 == names.size() ? " or " : ", ") + names[i];
  return list;
}

Result<RunFilter> DecodeRunFilter(const json::object& request) {
  RunFilter filter;
  filter.limit = kMaxRunsPerRequest;
  if (const json::value* plan = request.if_contains("plan")) {
    if (!plan->is_string()) return Status::Error("bad request: \"plan\" must be a plan's name");
    filter.plan = std::string(plan->as_string());
  }
  if (const json::value* state = request.if_contains("state")) {
    filter.state = state->is_string() ? ParseRunState(state->as_string()) : std::nullopt;
    if (!filter.state)
      return Status::Error("bad request: \"state\" must be a run state (" + StateList() +
                           "), not " + json::serialize(*state));
  }
  Result<std::optional<std::int64_t>> since = WholeNumber(request, "since_ms", 0);
  if (!since.ok()) return since.status();
  Result<std::optional<std::int64_t>> limit = WholeNumber(request, "limit", 1);
  if (!limit.ok()) return limit.status();
  Result<std::optional<std::int64_t>> before = WholeNumber(request, "before_seq", 1);
  if (!before.ok()) return before.status();
  filter.since_ms = since->value_or(0);
  filter.before_seq = before->value_or(0);
  // Above a page's worth, the rest comes with "next", as for any page.
  if (*limit && **limit < kMaxRunsPerRequest) filter.limit = static_cast<int>(**limit);
  return filter;
}

}  // namespace

json::object HandleRuns(RequestContext& context, const json::object& request) {
  Result<RunFilter> filter = DecodeRunFilter(request);
  if (!filter.ok()) return ErrorAnswer(filter.status().message());
  Result<RunPage> page = context.store.FindRuns(filter.value(), true);
  if (!page.ok()) return ErrorAnswer(page.status().message());
  json::array runs;
  for (const RunRecord& r : page->runs) runs.push_back(RunToJson(r));
  json::object o = OkAnswer();
  o["runs"] = std::move(runs);
  if (page->next_before_seq > 0) o["next"] = json::object{{"before_seq", page->next_before_seq}};
  return o;
}

json::object HandleShow(RequestContext& context, const std::string& run, bool plan_text) {
  Result<std::optional<RunRecord>> loaded = context.store.LoadRun(run, false);
  if (!loaded.ok()) return ErrorAnswer(loaded.status().message());
  if (!loaded.value()) return ErrorAnswer("no run '" + run + "'");
  json::object o = OkAnswer();
  o["run"] = RunToJson(*loaded.value());
  // The text exactly as applied; a secret's value is never in it, only where it is read from.
  if (plan_text) o["plan_text"] = loaded.value()->plan_text;
  return o;
}

json::object HandleDelete(RequestContext& context, const std::string& run) {
  Result<std::vector<std::string>> deleted = context.runs.Delete(run, context.peer);
  if (!deleted.ok()) return ErrorAnswer(deleted.status().message());
  json::object o = OkAnswer();
  o["deleted"] = json::value_from(deleted.value());
  return o;
}

json::object HandlePrune(RequestContext& context, const json::object& request) {
  Result<std::optional<std::int64_t>> older = WholeNumber(request, "older_than_ms", 0);
  if (!older.ok() || !*older)
    return ErrorAnswer("bad request: prune needs \"older_than_ms\", a whole number from 0");
  Result<std::vector<std::string>> deleted =
      context.runs.Prune(std::chrono::milliseconds(**older), kMaxRunsPerRequest, context.peer);
  if (!deleted.ok()) return ErrorAnswer(deleted.status().message());
  json::object o = OkAnswer();
  o["deleted"] = json::value_from(deleted.value());
  o["more"] = deleted->size() == static_cast<size_t>(kMaxRunsPerRequest);
  return o;
}

}  // namespace deployd
