// Crash-safe output: write to a temporary sibling, then fsync and rename over the target.
// An interrupted or failed write never leaves a half-written file at the target path.
#pragma once

#include <cstdint>
#include <filesystem>
#include <span>
#include <string>

namespace needle::format {

class AtomicFile {
 public:
  // Creates "<path>.tmp.<pid>.<n>" next to `path`. If !overwrite and `path` exists: IoError.
  explicit AtomicFile(std::string path, bool overwrite = true);
  ~AtomicFile();  // removes the temporary unless Commit() succeeded
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;

  void Write(std::span<const uint8_t> bytes);
  void WriteZeros(uint64_t n);
  uint64_t size() const { return written_; }
  void Commit();  // fsync, close, rename to the target

  const std::string& temp_path() const { return temp_; }

 private:
  std::string path_, temp_;
  int fd_ = -1;
  uint64_t written_ = 0;
  bool committed_ = false;
};

// Writes `bytes` to `path` atomically.
void WriteFileAtomic(const std::string& path, std::span<const uint8_t> bytes,
                     bool overwrite = true);

// A fresh private folder under the system's temporary directory ("<prefix>-XXXXXX"), removed with
// its contents when this goes out of scope. IoError if it cannot be created.
class TempDir {
 public:
  explicit TempDir(const std::string& prefix);
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

}  // namespace needle::format
