// The safetensors reader on arbitrary bytes (format/safetensors.h: header length, JSON header,
// dtypes, shapes, offsets), then every accepted tensor's data span is read end to end.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "format/safetensors.h"
#include "fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace needle::format;
  needle::fuzz::ExpectErrors([&] {
    const SafetensorsFile f =
        SafetensorsFile::FromBytes(std::vector<uint8_t>(data, data + size), "<fuzz>");
    volatile uint64_t sink = f.metadata().size();
    for (const StTensor& t : f.tensors()) {
      const auto bytes = f.data(t);
      if (bytes.size() != t.elements() * StDTypeSize(t.dtype)) __builtin_trap();
      if (f.find(t.name) == nullptr) __builtin_trap();
      if (!bytes.empty()) sink = sink + bytes.front() + bytes.back();
      sink = sink + t.shape_str().size() + std::string(StDTypeName(t.dtype)).size();
    }
  });
  return 0;
}
