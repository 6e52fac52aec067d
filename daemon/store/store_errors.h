// How the store reports what goes wrong: a damaged file, and exceptions (in practice only
// std::bad_alloc) turned into a Status at the store's edge, so that none leaves RunStore.
// Pure; no threading concerns.
#ifndef DEPLOYD_STORE_STORE_ERRORS_H_
#define DEPLOYD_STORE_STORE_ERRORS_H_

#include <exception>
#include <string>
#include <string_view>

#include "deployd/status.h"

namespace deployd {

// "<path>: state database is damaged (<what>)"
Status StoreDamage(const std::string& path, std::string_view what);

// At open the promise is stronger: nothing has been written yet, and nothing will be.
// "<path>: state database is damaged (<what>); it was left untouched: move it away to start
// afresh"
Status StoreDamageAtOpen(const std::string& path, std::string_view what);

// f(), or "<path>: <what>: <the exception's what()>" when it throws.
template <typename F>
auto ExceptionsAsStatus(const std::string& path, const char* what, F&& f) -> decltype(f()) {
  try {
    return f();
  } catch (const std::exception& e) {
    return Status::Error(path + ": " + what + ": " + e.what());
  }
}

}  // namespace deployd

#endif  // DEPLOYD_STORE_STORE_ERRORS_H_
