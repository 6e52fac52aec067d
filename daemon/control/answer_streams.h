// The answers that are streams (include/deployd/protocol.h, protocol/follow_stream.h):
// `follow RUN` — the run's snapshot, its past events, then its events as they are committed,
// until it ends — and `logs RUN STEP -f` — the step's output as it grows, until the step has
// ended and the processes of its actions have exited.
//
// A stream is a queue of lines the connection sends as they come (control_server.cc): Take()
// hands over what is ready; `wake` (given at the start) is called whenever a line arrives
// from the run, so that a connection waiting for one looks again. A line of "type": "end" is
// the stream's last. Each stream holds at most its budget of lines its client has not read
// (stream_queue.h): past it, lines are dropped and the client is told how many it missed; a
// `follow` stream then sends the run as it is now. Dropping the stream stops following. One
// thread: the io_context's.
#ifndef DEPLOYD_CONTROL_ANSWER_STREAMS_H_
#define DEPLOYD_CONTROL_ANSWER_STREAMS_H_

#include <boost/asio/any_io_executor.hpp>
#include <boost/json/object.hpp>
#include <deque>
#include <functional>
#include <memory>
#include <variant>

#include "control/request_handlers.h"
#include "control/stream_queue.h"

namespace deployd {

class AnswerStream {
 public:
  virtual ~AnswerStream() = default;
  // The lines ready now, in order.
  virtual std::deque<StreamLine> Take() = 0;
  // Whether Take() would hand over something now.
  virtual bool Ready() const = 0;
};

// A refusal (one answer line, {"ok": false, …}) or the stream.
using StreamAnswer = std::variant<boost::json::object, std::unique_ptr<AnswerStream>>;

// `follow`: {"run"}. `wake` may be called until the stream is dropped.
StreamAnswer FollowRun(RequestContext& context, const boost::json::object& request,
                       std::function<void()> wake);
// `logs` with "follow": {"run", "step"}. The log is followed on `ex`. `wake` may be called
// until the stream is dropped, and must stay safe to call after (a posted exit notice).
StreamAnswer FollowLog(RequestContext& context, const boost::json::object& request,
                       boost::asio::any_io_executor ex, std::function<void()> wake);

}  // namespace deployd

#endif  // DEPLOYD_CONTROL_ANSWER_STREAMS_H_
