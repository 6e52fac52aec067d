// Who follows which run (engine/run_followers.h) and who waits for a step's processes to be
// gone (engine/alive_actions.h).
#include "engine/run_followers.h"

#include <catch2/catch.hpp>

#include "engine/alive_actions.h"

using namespace deployd;
namespace json = boost::json;

TEST_CASE("run followers: a line reaches the listeners of its run only") {
  RunFollowers followers;
  CHECK(followers.empty());
  std::vector<std::string> seen;
  std::uint64_t a = followers.Add("a-1", [&](const json::object&) { seen.push_back("first"); });
  followers.Add("a-1", [&](const json::object&) { seen.push_back("second"); });
  followers.Add("b-1", [&](const json::object&) { seen.push_back("other run"); });
  followers.Publish("a-1", {{"type", "event"}});
  CHECK(seen == std::vector<std::string>{"first", "second"});
  followers.Remove(a);
  seen.clear();
  followers.Publish("a-1", {{"type", "event"}});
  CHECK(seen == std::vector<std::string>{"second"});
  followers.Clear();
  CHECK(followers.empty());
}

TEST_CASE("run followers: a listener may remove itself, or add another, while it is called") {
  RunFollowers followers;
  int calls = 0;
  std::uint64_t token = 0;
  token = followers.Add("a-1", [&](const json::object&) {
    ++calls;
    followers.Remove(token);
    followers.Add("a-1", [&](const json::object&) { calls += 10; });
  });
  followers.Publish("a-1", {});
  CHECK(calls == 1);  // the one added meanwhile hears the next line
  followers.Publish("a-1", {});
  CHECK(calls == 11);
}

TEST_CASE("alive actions: waiters are called once the last process of the step has exited") {
  AliveActions alive;
  int done = 0;
  CHECK_FALSE(alive.WaitForNone("r/s", [&] { ++done; }));  // none alive: nothing kept
  alive.Started("r/s");
  alive.Started("r/s");
  alive.Started("r/other");
  CHECK(alive.WaitForNone("r/s", [&] { ++done; }));
  alive.Exited("r/s");
  CHECK(done == 0);
  alive.Exited("r/s");
  CHECK(done == 1);
  alive.Started("r/s");
  alive.Exited("r/s");
  CHECK(done == 1);  // called once only
  CHECK(alive.WaitForNone("r/other", [&] { ++done; }));
}
