// The tokenizer blob parser on arbitrary bytes (format/tokenizer_blob.h), then the tokenizer built
// from what it accepted (text/tokenizer.h: its own semantic checks, encode and decode).
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "format/tokenizer_blob.h"
#include "fuzz_util.h"
#include "text/tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace needle;
  fuzz::ExpectErrors([&] {
    const format::TokenizerBlob blob =
        format::ParseTokenizerBlob(std::span<const uint8_t>(data, size), "<fuzz>");
    // Round trip: what the parser accepts, the serializer writes back to the same records.
    const std::vector<uint8_t> again = format::SerializeTokenizerBlob(blob);
    if (again.size() > size || !std::equal(again.begin(), again.end(), data)) __builtin_trap();
    const text::Tokenizer tok(blob, "<fuzz>");
    for (const char* s : {"Set a timer for 5 minutes.", "  a\tb\n<|im_end|>\xff\xc3", ""}) {
      const std::vector<int32_t> ids = tok.Encode(s, true);
      for (int32_t id : ids)
        if (!tok.valid_id(id)) __builtin_trap();
      (void)tok.Decode(ids);
      (void)tok.Encode(s, false);
    }
    for (int32_t id = 0; id < tok.vocab_size(); ++id) (void)tok.TokenBytes(id);
  });
  return 0;
}
