// Plans submitted to the daemon are parsed on a thread of their own (control/plan_parsing.h):
// the daemon's io_context keeps running its handlers meanwhile, and the result comes back to it.
#include "control/plan_parsing.h"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <catch2/catch.hpp>
#include <functional>
#include <optional>
#include <string>
#include <thread>

using namespace deployd;
namespace asio = boost::asio;

TEST_CASE("plan parsing: a large plan is parsed aside while the daemon's thread runs on") {
  // 50,000 nodes, the most a plan may have: some 0.2 s of CPU.
  std::string plan = "version: 1\nname: t\nsteps: [{id: a, run: b}]\nvars:\n";
  for (int i = 0; i < 24'990; ++i) plan += "  v" + std::to_string(i) + ": x\n";
  asio::io_context io;
  std::optional<ParseResult> result;
  std::thread::id resumed_on;
  asio::co_spawn(io, ParsePlanAside(plan, "p.yaml", {}), [&](std::exception_ptr e, ParseResult r) {
    REQUIRE_FALSE(e);
    resumed_on = std::this_thread::get_id();
    result = std::move(r);
  });
  int turns = 0;  // handlers the io_context ran before the result came
  std::function<void()> spin = [&] {
    if (result) return;
    ++turns;
    asio::post(io, spin);
  };
  asio::post(io, spin);
  io.run();
  REQUIRE(result);
  CHECK(result->plan.has_value());
  CHECK(result->plan->vars.size() == 24'990);
  // Starting the coroutine takes a turn or two; a parse on the io_context's own thread would
  // leave no more (measured: 1), one aside lets it run on for the whole parse (millions).
  CHECK(turns > 100);
  CHECK(resumed_on == std::this_thread::get_id());
}

TEST_CASE("plan parsing: a plan's diagnostics come back as ParsePlan gives them") {
  asio::io_context io;
  std::optional<ParseResult> result;
  asio::co_spawn(io, ParsePlanAside(",", "comma.yaml", {}),
                 [&](std::exception_ptr, ParseResult r) { result = std::move(r); });
  io.run();
  REQUIRE(result);
  REQUIRE(result->errors.size() == 1);
  CHECK(result->errors[0].Format() == "comma.yaml:1:1: error: invalid YAML: unexpected ','\n,\n^");
}
