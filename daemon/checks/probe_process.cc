#include "checks/probe_process.h"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/cancellation_type.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/system/system_error.hpp>

namespace deployd {
namespace {

namespace asio = boost::asio;

constexpr auto kAsTuple = asio::as_tuple(asio::use_awaitable);

}  // namespace

Result<std::shared_ptr<ChildProcess>> StartProbeChild(asio::any_io_executor ex,
                                                      const SpawnOptions& options,
                                                      std::shared_ptr<ProbeChildExit> state,
                                                      ChildProcess::LineHandler on_line) {
  return ChildProcess::Start(ex, options, std::move(on_line), [state](const ExitStatus& status) {
    state->exit = status;
    state->wake.cancel();
  });
}

asio::awaitable<bool> WaitForProbeChild(ProbeChildExit& state, ChildProcess& child,
                                        Duration limit) {
  if (state.exit) co_return true;
  state.wake.expires_after(limit);
  co_await state.wake.async_wait(kAsTuple);
  if (state.exit) co_return true;
  asio::cancellation_state cancellation = co_await asio::this_coro::cancellation_state;
  if (cancellation.cancelled() != asio::cancellation_type::none) {
    child.Terminate(kProbeChildGrace);
    throw boost::system::system_error(asio::error::operation_aborted);
  }
  co_return false;
}

}  // namespace deployd
