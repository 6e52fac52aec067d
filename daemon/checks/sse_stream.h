// Reading a streamed completion: Server-Sent Events (the `data:` lines an OpenAI-compatible
// server streams with `"stream": true`) and the completion chunk each event carries. Pure
// functions and a small incremental parser, fed bytes as they arrive; no I/O.
//
// SSE (the WHATWG event-stream format): lines end with "\n" or "\r\n"; a blank line ends an
// event; `data:` lines of one event are joined with "\n" (one space after the colon is
// dropped); comments (":…") and other fields (event:, id:, retry:) are ignored. An event is
// bounded (kMaxSseEventBytes): a server that streams one endless line is an error, not memory.
#ifndef DEPLOYD_CHECKS_SSE_STREAM_H_
#define DEPLOYD_CHECKS_SSE_STREAM_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "deployd/status.h"

namespace deployd {

inline constexpr std::size_t kMaxSseEventBytes = 1u << 20;

class SseParser {
 public:
  // Appends `bytes`; the data of every event they complete is added to `events`, in order. An
  // error (an event over the bound) is final.
  Status Feed(std::string_view bytes, std::vector<std::string>& events);
  // The stream ended: an event not closed by a blank line still counts.
  void Finish(std::vector<std::string>& events);

 private:
  void Line(std::string_view line, std::vector<std::string>& events);

  std::string line_;  // the line being received, without its end
  std::string data_;  // the event being received
  bool has_data_ = false;
};

// What one event of a completion stream says.
struct CompletionChunk {
  bool done = false;  // "[DONE]": the server's end of the stream
  // The text the chunk adds: choices[0].text (completions) or choices[0].delta.content (chat).
  std::string text;
  // A chat model's reasoning (choices[0].delta.reasoning_content): output tokens, not answer.
  std::string reasoning;
  std::optional<std::int64_t> completion_tokens;  // usage.completion_tokens, when sent
  std::string error;                              // the server reported an error in the stream
};

// "[DONE]", or a JSON chunk; anything else is an error ("not a JSON chunk: …").
Result<CompletionChunk> ReadCompletionChunk(std::string_view data);

}  // namespace deployd

#endif  // DEPLOYD_CHECKS_SSE_STREAM_H_
