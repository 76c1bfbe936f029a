// The C API's model loader on arbitrary bytes: needle_model_load validates the image (container,
// geometry, tokenizer) and returns null with a message, or a model on which a session (no tools)
// starts, or refuses to with a message, and then answers one turn of one token.
#include <cstddef>
#include <cstdint>

#include "capi/needle.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  char err[256];
  needle_model* m = needle_model_load(data, size, err, sizeof err);
  if (m == nullptr) {
    if (err[0] == '\0') __builtin_trap();  // a failure must say why
    return 0;
  }
  err[0] = '\0';
  needle_session* s = needle_session_new(m, "", "", 1, err, sizeof err);
  if (s == nullptr && err[0] == '\0') __builtin_trap();
  if (s != nullptr) {
    char out[1024];
    if (needle_session_complete(s, "hi", 1, out, sizeof out) < -1) __builtin_trap();
    needle_session_free(s);
  }
  needle_model_free(m);
  return 0;
}
