// The .cact reader on arbitrary bytes: CactFile::FromBytes validates header, codebooks, directory,
// blob placement and the tokenizer blob; then every accessor is exercised on what it accepted.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "format/cact.h"
#include "fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace needle::format;
  needle::fuzz::ExpectErrors([&] {
    const CactFile f = CactFile::FromBytes(std::vector<uint8_t>(data, data + size), "<fuzz>");
    volatile uint64_t sink = f.header().vocab + f.codebooks().size() + f.heads().size();
    for (uint32_t bits : {2u, 3u, 4u}) sink = sink + f.codebook(bits).size();
    for (const TensorInfo& t : f.tensors()) {
      const auto bytes = f.data(t);
      sink = sink + t.elements() + t.cols() + t.shape_str().size();
      if (!bytes.empty()) sink = sink + bytes.front() + bytes.back();
      if (f.find(t.name) != &t) __builtin_trap();
      if (t.dtype == DType::kCQ) {
        const CqView v = f.cq(t);
        if (v.rows > 0 && v.groups_per_row > 0) {
          sink = sink + v.row_codes(v.rows - 1)[0] + v.norm_bits(v.rows - 1, v.groups_per_row - 1);
        }
      } else if ((t.dtype == DType::kF16 || t.dtype == DType::kF32) && t.elements() <= 4096) {
        sink = sink + f.floats(t).size();
      }
    }
    sink = sink + f.tokenizer().pieces.size() + f.tokenizer_blob().size();
  });
  return 0;
}
