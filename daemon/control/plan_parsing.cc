#include "control/plan_parsing.h"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/thread_pool.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <utility>

namespace deployd {

namespace asio = boost::asio;

namespace {

// A coroutine function, not a capturing lambda: with GCC 12, the captures of a lambda given to
// co_spawn were freed twice (a crash in their destructor).
asio::awaitable<ParseResult> Parse(std::string text, std::string file,
                                   std::map<std::string, std::string> vars) {
  co_return ParsePlan(text, file, vars);
}

}  // namespace

asio::awaitable<ParseResult> ParsePlanAside(std::string text, std::string file,
                                            std::map<std::string, std::string> vars) {
  static asio::thread_pool parsing(1);
  co_return co_await asio::co_spawn(
      parsing, Parse(std::move(text), std::move(file), std::move(vars)), asio::use_awaitable);
}

}  // namespace deployd
