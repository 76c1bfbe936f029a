// Read-only file bytes: a private mmap, or a heap copy when mapping is unavailable or not wanted.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace needle::format {

// kMmap: pages are read on first touch; a file-backed fault maps the 64 KiB around the page (the
// kernel's fault-around), so touching every page of the 14 MB official file costs ~0.3 ms, less
// than populating the whole mapping at open with madvise(MADV_POPULATE_READ) (~0.6 ms, measured
// on Linux 6.18; that mode was dropped): and the official path copies most matrices to huge
// pages and drops the file's pages of them, so most of a populated mapping was undone at once.
// kRead: a heap copy.
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
  // Mapped: drops the whole pages inside [offset, offset + length) from the resident set
  // (madvise MADV_DONTNEED on a read-only private mapping: a later touch reads the file again).
  // A heap copy: nothing.
  void Evict(size_t offset, size_t length) const;
  // Copies bytes [offset, offset + out.size()) into `out` without touching the mapping (pread on
  // the file kept open; a heap copy: memcpy), for data read a row at a time whose pages are
  // evicted (large tables of which a token reads a few rows). Throws IoError naming the file
  // when the range is outside it or the read fails. Thread-safe.
  void ReadAt(size_t offset, std::span<uint8_t> out) const;

 private:
  std::string label_;
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
  bool mapped_ = false;
  int fd_ = -1;  // mapped: the file, open for ReadAt
  std::vector<uint8_t> owned_;
};

// Reads a whole file into memory (small files: JSON, safetensors headers). Throws IoError.
std::vector<uint8_t> ReadFileBytes(const std::string& path);

}  // namespace needle::format
