// needle_session_complete with arbitrary input text on the tiny model (examples/tools.json, two
// new tokens per turn): any text, chat markers included, gives a NUL-terminated envelope within
// the output capacity. The first input byte picks the output capacity (cut envelopes included);
// the session is reset after every turn.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "capi/needle.h"
#include "fuzz_util.h"

namespace {
needle_session* Session() {
  static needle_session* s = [] {
    char err[512];
    needle_model* m =
        needle_model_open(needle::fuzz::DataPath("models/tiny.cact").c_str(), err, sizeof err);
    if (!m) {
      std::fprintf(stderr, "fuzz: %s\n", err);
      std::abort();
    }
    const std::string tools = [] {
      const auto b = needle::fuzz::ReadAll(std::string(NEEDLE_EXAMPLES_DIR) + "/tools.json");
      return std::string(b.begin(), b.end());
    }();
    needle_session* sess = needle_session_new(m, "", tools.c_str(), 1, err, sizeof err);
    if (!sess) {
      std::fprintf(stderr, "fuzz: %s\n", err);
      std::abort();
    }
    return sess;  // lives for the whole run (as does its model)
  }();
  return s;
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  needle_session* s = Session();
  const int capacity = data[0] < 16 ? data[0] : 8192;
  const std::string input(reinterpret_cast<const char*>(data + 1), size - 1);  // NUL-terminated
  std::vector<char> out(static_cast<size_t>(capacity) + 1, '\x7f');
  const int n = needle_session_complete(s, input.c_str(), 2, out.data(), capacity);
  if (n < -1) __builtin_trap();
  if (capacity > 0) {
    const size_t len = strnlen(out.data(), static_cast<size_t>(capacity));
    if (len >= static_cast<size_t>(capacity)) __builtin_trap();  // NUL within capacity
  }
  if (out[static_cast<size_t>(capacity)] != '\x7f') __builtin_trap();  // nothing written past it
  needle_session_reset(s);
  return 0;
}
