// The wall clock of deployd's records and messages: Unix time in milliseconds, as the store,
// the events and the wire protocol carry it (created_at_ms, at_ms, …). Durations and timeouts
// use std::chrono::steady_clock instead; this clock may jump. Thread-safe.
#ifndef DEPLOYD_UTIL_CLOCK_H_
#define DEPLOYD_UTIL_CLOCK_H_

#include <cstdint>

namespace deployd {

// Milliseconds since the Unix epoch, now (std::chrono::system_clock).
std::int64_t NowMs();

}  // namespace deployd

#endif  // DEPLOYD_UTIL_CLOCK_H_
