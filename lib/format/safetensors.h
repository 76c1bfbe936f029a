// safetensors files: a validated reader over a mapped file and a streaming writer.
//
// Layout (https://github.com/huggingface/safetensors, little-endian):
//   [u64 header_len][header_len bytes of UTF-8 JSON][data]
// The JSON object maps each tensor name to {"dtype": "F32", "shape": [..], "data_offsets": [b, e]}
// with offsets relative to the start of the data region, plus an optional "__metadata__" object
// of string -> string. Our writer pads the JSON with spaces so the data starts at a multiple of 8
// and stores tensors back to back in the given order (stock loaders require that).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "format/atomic_file.h"
#include "format/mapped_file.h"

namespace needle::format {

enum class StDType : uint8_t {
  kBool,
  kU8,
  kI8,
  kI16,
  kU16,
  kF16,
  kBF16,
  kI32,
  kU32,
  kF32,
  kF64,
  kI64,
  kU64
};
const char* StDTypeName(StDType d);  // "F32", ...
uint32_t StDTypeSize(StDType d);     // bytes per element

struct StTensor {
  std::string name;
  StDType dtype = StDType::kF32;
  std::vector<uint64_t> shape;  // may be empty (a scalar)
  uint64_t begin = 0, end = 0;  // offsets within the data region

  uint64_t elements() const;
  std::string shape_str() const;  // "[512, 128]"
};

// A validated safetensors file; tensor data stays in the mapping.
class SafetensorsFile {
 public:
  // Throws IoError (cannot read) or FormatError naming the file and the problem: header length
  // beyond the file, bad JSON, unknown dtype, bad shape, offsets out of range or overlapping,
  // byte count not matching shape x dtype.
  static SafetensorsFile Open(const std::string& path);
  static SafetensorsFile FromBytes(std::vector<uint8_t> bytes, const std::string& label);

  const std::string& path() const { return file_->label(); }
  const std::vector<StTensor>& tensors() const { return tensors_; }  // in file (offset) order
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  const StTensor* find(std::string_view name) const;
  std::span<const uint8_t> data(const StTensor& t) const;

 private:
  explicit SafetensorsFile(std::shared_ptr<MappedFile> file) : file_(std::move(file)) {}
  void Parse();

  std::shared_ptr<MappedFile> file_;
  uint64_t data_start_ = 0;
  std::vector<StTensor> tensors_;
  std::map<std::string, std::string> metadata_;
};

// Streams a safetensors file: declare every tensor first (the header comes first in the file),
// then write their bytes in declaration order. Atomic: nothing appears at `path` before Commit().
class SafetensorsWriter {
 public:
  SafetensorsWriter(std::string path, bool overwrite);

  void Declare(std::string name, StDType dtype, std::vector<uint64_t> shape);
  void SetMetadata(std::string key, std::string value) {
    metadata_[std::move(key)] = std::move(value);
  }
  // Writes the next declared tensor's bytes (the first call writes the header).
  void Write(std::span<const uint8_t> bytes);
  void Commit();  // all declared tensors must have been written

 private:
  void WriteHeader();

  std::string path_;
  AtomicFile out_;
  std::vector<StTensor> declared_;
  std::map<std::string, std::string> metadata_;
  size_t next_ = 0;
  bool header_written_ = false;
};

}  // namespace needle::format
