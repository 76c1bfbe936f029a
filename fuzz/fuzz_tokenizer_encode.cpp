// Encoding arbitrary text with a fixed, valid tokenizer (the one of tests/data/models/tiny.cact):
// every id is in range, decode never fails on encoder output, and decode of arbitrary ids only
// throws the library's typed errors.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string_view>
#include <vector>

#include "format/cact.h"
#include "fuzz_util.h"
#include "text/tokenizer.h"

namespace {
const needle::text::Tokenizer& Tiny() {
  static const needle::text::Tokenizer* tok = [] {
    const auto file = needle::format::CactFile::Open(needle::fuzz::DataPath("models/tiny.cact"));
    return new needle::text::Tokenizer(needle::text::Tokenizer::FromCact(file));
  }();
  return *tok;
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace needle;
  const text::Tokenizer& tok = Tiny();
  const std::string_view textv(reinterpret_cast<const char*>(data), size);
  for (bool dummy : {true, false}) {
    const std::vector<int32_t> ids = tok.Encode(textv, dummy);
    if (size > 0 && ids.empty()) __builtin_trap();
    for (int32_t id : ids)
      if (!tok.valid_id(id)) __builtin_trap();
    (void)tok.Decode(ids);  // must not throw: encoder output is always decodable
  }
  // The same bytes read as little-endian i32 ids: out-of-range ids are InvalidInput.
  std::vector<int32_t> raw(size / 4);
  if (!raw.empty()) std::memcpy(raw.data(), data, raw.size() * 4);
  fuzz::ExpectErrors([&] { (void)tok.Decode(raw); });
  return 0;
}
