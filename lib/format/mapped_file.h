// Read-only file bytes: a private mmap, or a heap copy when mapping is unavailable or not wanted.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace needle::format {

enum class LoadMode { kMmap, kRead };

class MappedFile {
 public:
  // Throws IoError naming the path and the OS error. kMmap falls back to kRead if mmap fails.
  MappedFile(const std::string& path, LoadMode mode);
  MappedFile(std::vector<uint8_t> bytes, std::string label);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  std::span<const uint8_t> bytes() const { return {data_, size_}; }
  const std::string& label() const { return label_; }
  bool is_mapped() const { return mapped_; }

 private:
  std::string label_;
  const uint8_t* data_ = nullptr;
  uint64_t size_ = 0;
  bool mapped_ = false;
  std::vector<uint8_t> owned_;
};

// Reads a whole file into memory (small files: JSON, safetensors headers). Throws IoError.
std::vector<uint8_t> ReadFileBytes(const std::string& path);

}  // namespace needle::format
