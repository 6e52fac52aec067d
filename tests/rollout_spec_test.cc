// A rollout's spec (ctl/rollout_spec.h): Ansible's serial list and max-fail, the spec through
// its JSON, and the coordinator's plan, which deployd's own parser must accept.
#include "ctl/rollout_spec.h"

#include <boost/json.hpp>
#include <catch2/catch.hpp>

#include "plan/plan_parser.h"

using namespace deployd;
using namespace deployd::ctl;

namespace {

std::vector<std::string> Hosts(int n) {
  std::vector<std::string> hosts;
  for (int i = 1; i <= n; ++i) hosts.push_back("h" + std::to_string(i));
  return hosts;
}

std::vector<size_t> Sizes(const std::vector<std::vector<std::string>>& batches) {
  std::vector<size_t> sizes;
  for (const auto& b : batches) sizes.push_back(b.size());
  return sizes;
}

Count C(const char* text) { return ParseCount(text, "--serial").value(); }

}  // namespace

TEST_CASE("serial: counts and percentages in turn, the last one repeating", "[rollout_spec]") {
  using V = std::vector<size_t>;
  CHECK(Sizes(MakeBatches(Hosts(6), {})) == V{6});
  CHECK(Sizes(MakeBatches(Hosts(6), {C("1"), C("50%")})) == V{1, 3, 2});
  CHECK(Sizes(MakeBatches(Hosts(10), {C("1"), C("25%")})) == V{1, 2, 2, 2, 2, 1});
  CHECK(Sizes(MakeBatches(Hosts(3), {C("10%")})) == V{1, 1, 1});  // at least one host
  CHECK(Sizes(MakeBatches(Hosts(5), {C("2"), C("10")})) == V{2, 3});
  CHECK(MakeBatches(Hosts(4), {C("3")})[1] == std::vector<std::string>{"h4"});
}

TEST_CASE("max-fail: more failed hosts than allowed, strictly", "[rollout_spec]") {
  CHECK_FALSE(TooManyFailed(C("0"), 0, 3));
  CHECK(TooManyFailed(C("0"), 1, 3));
  CHECK_FALSE(TooManyFailed(C("1"), 1, 3));
  CHECK(TooManyFailed(C("1"), 2, 3));
  CHECK_FALSE(TooManyFailed(C("34%"), 1, 3));  // 33.3% is not more than 34%
  CHECK(TooManyFailed(C("33%"), 1, 3));
  CHECK_FALSE(TooManyFailed(C("50%"), 2, 4));
  CHECK(TooManyFailed(C("50%"), 3, 4));
  CHECK(ParseCount("x", "--max-fail").status().message() ==
        "--max-fail expects a number of hosts or a percentage (e.g. 2 or 25%), not 'x'");
  CHECK_FALSE(ParseCount("101%", "--serial").ok());
  CHECK_FALSE(ParseCount("-1", "--serial").ok());
  CHECK_FALSE(ParseCount("", "--serial").ok());
}

TEST_CASE("the spec goes through its JSON and comes back the same", "[rollout_spec]") {
  RolloutSpec spec;
  spec.id = "7f3a0c1d2e4b";
  spec.plan_file = "plans/kimi.yaml";
  spec.plan_name = "kimi";
  spec.plan_text = "version: 1\nname: kimi\n";
  spec.inventory = "hosts.ini";
  spec.hosts = {{"gpu1", "ssh://root@10.0.0.1", {{"model_dir", "/shared/${x}"}}},
                {"gpu2", "ssh://gpu2:2222", {}}};
  spec.batches = {{"gpu1"}, {"gpu2"}};
  spec.max_fail = {25, true};
  spec.unreachable_after_ms = 90'000;
  Result<RolloutSpec> back = DecodeSpec(boost::json::serialize(EncodeSpec(spec)));
  REQUIRE(back.ok());
  CHECK(back->id == spec.id);
  CHECK(back->plan_text == spec.plan_text);
  CHECK(back->hosts[0].vars == spec.hosts[0].vars);
  CHECK(back->hosts[1].address == "ssh://gpu2:2222");
  CHECK(back->batches == spec.batches);
  CHECK(back->max_fail.Text() == "25%");
  CHECK(back->unreachable_after_ms == 90'000);
  CHECK(back->HostKey("gpu2") == "rollout/7f3a0c1d2e4b/gpu2");

  CHECK(DecodeSpec("{}").status().message() ==
        "the rollout's record is damaged (its 'rollout' variable)");
  CHECK_FALSE(DecodeSpec("not json").ok());
  // A batch naming a host the spec does not have.
  boost::json::object broken = EncodeSpec(spec);
  broken["batches"] = boost::json::array{boost::json::array{"gpu9"}};
  CHECK_FALSE(DecodeSpec(boost::json::serialize(broken)).ok());
}

TEST_CASE("the coordinator's plan: a step per batch and the verdict, read as written",
          "[rollout_spec]") {
  RolloutSpec spec;
  spec.id = "abc";
  spec.plan_file = "${odd}.yaml";
  spec.plan_name = "kimi";
  spec.inventory = "hosts.ini";
  spec.hosts = {{"a", "ssh://a", {}}, {"b", "ssh://b", {}}, {"c", "ssh://c", {}}};
  spec.batches = {{"a"}, {"b", "c"}};
  std::string text = GeneratedPlan(spec, "/usr/bin/deployctl", "/run/d.sock",
                                   {{"DEPLOYD_SSH_COMMAND", "ssh -F /etc/${cfg}"}});
  ParseResult parsed = ParsePlan(text, "rollout", {{"rollout", "{}"}});
  for (const auto& d : parsed.errors) INFO(d.Format());
  REQUIRE(parsed.plan.has_value());
  const Plan& plan = *parsed.plan;
  CHECK(plan.name == "rollout-kimi");
  CHECK(plan.description == "rollout of ${odd}.yaml over 3 hosts of hosts.ini");
  REQUIRE(plan.steps.size() == 3);
  CHECK(plan.steps[0].id == "batch-1");
  CHECK(plan.steps[1].id == "batch-2");
  CHECK(plan.steps[2].id == "verdict");
  for (const Step& step : plan.steps) CHECK(step.idempotent);
  CHECK(plan.steps[2].env.at("DEPLOYD_SSH_COMMAND") == "ssh -F /etc/${cfg}");
}
