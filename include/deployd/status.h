// Status: the one error type of deployd. A Status is either ok or carries a message that is
// ready to show a user ("cannot open /x: No such file or directory"). Exceptions do not cross
// module boundaries; functions that can fail return a Status or a Result<T>.
#ifndef DEPLOYD_STATUS_H_
#define DEPLOYD_STATUS_H_

#include <optional>
#include <string>
#include <utility>

namespace deployd {

class Status {
 public:
  Status() = default;
  static Status Ok() { return Status(); }
  static Status Error(std::string message) { return Status(std::move(message)); }

  bool ok() const { return !message_.has_value(); }
  // REQUIRES: !ok()
  const std::string& message() const { return *message_; }

 private:
  explicit Status(std::string message) : message_(std::move(message)) {}
  std::optional<std::string> message_;
};

// A value or the Status that explains why there is none.
template <typename T>
class Result {
 public:
  Result(T value) : value_(std::move(value)) {}          // NOLINT: implicit by design
  Result(Status status) : status_(std::move(status)) {}  // NOLINT
  bool ok() const { return value_.has_value(); }
  const Status& status() const { return status_; }
  T& value() { return *value_; }
  const T& value() const { return *value_; }
  T* operator->() { return &*value_; }
  const T* operator->() const { return &*value_; }
  T& operator*() { return *value_; }

 private:
  std::optional<T> value_;
  Status status_;
};

}  // namespace deployd

#endif  // DEPLOYD_STATUS_H_
