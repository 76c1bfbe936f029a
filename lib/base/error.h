// Typed exceptions thrown by the library; apps/needle catches them once and maps them to exit
// codes.
#pragma once

#include <fmt/format.h>

#include <stdexcept>
#include <string>

namespace needle {

// Exit codes used by the CLI for each error kind (0 = success, 1 = tolerance/verification failed).
enum class ErrorKind : int {
  kUsage = 2,      // bad command-line arguments or option values
  kIo = 3,         // file cannot be opened, read, written or renamed
  kFormat = 4,     // a model / safetensors / JSON file is malformed
  kInvalid = 5,    // well-formed input with values we cannot accept (NaN, bad shapes, ...)
  kInternal = 70,  // a bug: an invariant of ours broke
};

class Error : public std::runtime_error {
 public:
  Error(ErrorKind kind, const std::string& message) : std::runtime_error(message), kind_(kind) {}
  ErrorKind kind() const { return kind_; }

 private:
  ErrorKind kind_;
};

struct IoError : Error {
  explicit IoError(const std::string& m) : Error(ErrorKind::kIo, m) {}
};
struct FormatError : Error {
  explicit FormatError(const std::string& m) : Error(ErrorKind::kFormat, m) {}
};
struct InvalidInput : Error {
  explicit InvalidInput(const std::string& m) : Error(ErrorKind::kInvalid, m) {}
};
struct UsageError : Error {
  explicit UsageError(const std::string& m) : Error(ErrorKind::kUsage, m) {}
};

// Throws E with a fmt-formatted message.
template <class E, class... Args>
[[noreturn]] void Fail(fmt::format_string<Args...> f, Args&&... args) {
  throw E(fmt::format(f, std::forward<Args>(args)...));
}

}  // namespace needle
