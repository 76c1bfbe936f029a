// AtomicFile: temp file + fsync + rename.
#include "format/atomic_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <vector>

#include "base/error.h"

namespace needle::format {

namespace {
std::atomic<int> g_counter{0};
}

AtomicFile::AtomicFile(std::string path, bool overwrite) : path_(std::move(path)) {
  struct stat st {};
  if (!overwrite && ::stat(path_.c_str(), &st) == 0)
    Fail<IoError>("{}: already exists (use --force to overwrite)", path_);
  temp_ = path_ + ".tmp." + std::to_string(::getpid()) + "." + std::to_string(g_counter++);
  fd_ = ::open(temp_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd_ < 0) Fail<IoError>("{}: cannot create: {}", temp_, std::strerror(errno));
}

AtomicFile::~AtomicFile() {
  if (fd_ >= 0) ::close(fd_);
  if (!committed_) ::unlink(temp_.c_str());
}

void AtomicFile::Write(std::span<const uint8_t> bytes) {
  const uint8_t* p = bytes.data();
  size_t left = bytes.size();
  while (left > 0) {
    const ssize_t n = ::write(fd_, p, left);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) Fail<IoError>("{}: write failed: {}", temp_, std::strerror(errno));
    p += n;
    left -= static_cast<size_t>(n);
  }
  written_ += bytes.size();
}

void AtomicFile::WriteZeros(uint64_t n) {
  static const std::vector<uint8_t> zeros(4096, 0);
  while (n > 0) {
    const uint64_t k = n < zeros.size() ? n : zeros.size();
    Write(std::span<const uint8_t>(zeros.data(), k));
    n -= k;
  }
}

void AtomicFile::Commit() {
  if (::fsync(fd_) != 0) Fail<IoError>("{}: fsync failed: {}", temp_, std::strerror(errno));
  if (::close(fd_) != 0) {
    fd_ = -1;
    Fail<IoError>("{}: close failed: {}", temp_, std::strerror(errno));
  }
  fd_ = -1;
  if (::rename(temp_.c_str(), path_.c_str()) != 0)
    Fail<IoError>("{}: cannot rename {} into place: {}", path_, temp_, std::strerror(errno));
  committed_ = true;
}

void WriteFileAtomic(const std::string& path, std::span<const uint8_t> bytes, bool overwrite) {
  AtomicFile f(path, overwrite);
  f.Write(bytes);
  f.Commit();
}

TempDir::TempDir(const std::string& prefix) {
  std::string pattern = (std::filesystem::temp_directory_path() / (prefix + "-XXXXXX")).string();
  if (::mkdtemp(pattern.data()) == nullptr)
    Fail<IoError>("cannot create a temporary folder {}: {}", pattern, std::strerror(errno));
  path_ = pattern;
}

TempDir::~TempDir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

}  // namespace needle::format
