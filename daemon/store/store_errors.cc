#include "store/store_errors.h"

namespace deployd {

Status StoreDamage(const std::string& path, std::string_view what) {
  return Status::Error(path + ": state database is damaged (" + std::string(what) + ")");
}

Status StoreDamageAtOpen(const std::string& path, std::string_view what) {
  return Status::Error(path + ": state database is damaged (" + std::string(what) +
                       "); it was left untouched: move it away to start afresh");
}

}  // namespace deployd
