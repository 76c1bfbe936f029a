// MappedFile: mmap with read() fallback.
#include "format/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>

#include "base/error.h"

namespace needle::format {

namespace {
struct Fd {
  int fd;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

// Largest file ReadFileBytes reads (JSON files and pipes; e.g. /dev/zero stops here).
constexpr uint64_t kMaxSmallFileBytes = uint64_t{64} << 20;

// Reads to EOF whatever the file's type (the size fstat reports is only a first guess: a pipe
// reports 0). Throws IoError past `limit` bytes.
std::vector<uint8_t> ReadAll(int fd, const std::string& path, uint64_t size_hint, uint64_t limit) {
  std::vector<uint8_t> out(std::min(size_hint, limit) + 1);
  uint64_t done = 0;
  for (;;) {
    if (done == out.size()) {
      if (out.size() > limit)
        Fail<IoError>("{}: input is larger than the limit of {} bytes", path, limit);
      out.resize(std::min<uint64_t>(std::max<uint64_t>(2 * out.size(), 65536), limit + 1));
    }
    const ssize_t n = ::read(fd, out.data() + done, out.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) Fail<IoError>("{}: read failed: {}", path, std::strerror(errno));
    if (n == 0) break;
    done += static_cast<uint64_t>(n);
  }
  out.resize(done);
  return out;
}

const char* FileKind(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO (pipe)";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a regular file";
}
}  // namespace

MappedFile::MappedFile(const std::string& path, LoadMode mode) : label_(path) {
  // A model must be a regular file: checked before open(), which blocks forever on a FIFO
  // without a writer (and a device has no end).
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0)
    Fail<IoError>("{}: cannot open: {}", path, std::strerror(errno));
  if (!S_ISREG(st.st_mode))
    Fail<IoError>("{}: is {}, expected a regular file", path, FileKind(st.st_mode));
  Fd f{::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK)};
  if (f.fd < 0) Fail<IoError>("{}: cannot open: {}", path, std::strerror(errno));
  if (::fstat(f.fd, &st) != 0) Fail<IoError>("{}: cannot stat: {}", path, std::strerror(errno));
  if (!S_ISREG(st.st_mode))
    Fail<IoError>("{}: is {}, expected a regular file", path, FileKind(st.st_mode));
  const uint64_t size = static_cast<uint64_t>(st.st_size);
  if (size > SIZE_MAX)  // 32-bit builds (wasm32): the file cannot be held at all
    Fail<IoError>("{}: {} bytes do not fit this build's address space", path, size);
  if (mode != LoadMode::kRead && size > 0 && S_ISREG(st.st_mode)) {
    void* p = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, f.fd, 0);
    if (p != MAP_FAILED) {
      data_ = static_cast<const uint8_t*>(p);
      size_ = size;
      mapped_ = true;
      fd_ = f.fd;  // kept for ReadAt
      f.fd = -1;
      return;
    }
  }
  owned_ = ReadAll(f.fd, path, size, std::max<uint64_t>(size, kMaxSmallFileBytes));
  data_ = owned_.data();
  size_ = owned_.size();
}

MappedFile::MappedFile(std::vector<uint8_t> bytes, std::string label)
    : label_(std::move(label)), owned_(std::move(bytes)) {
  data_ = owned_.data();
  size_ = owned_.size();
}

void MappedFile::Evict(size_t offset, size_t length) const {
#if defined(__EMSCRIPTEN__)
  (void)offset, (void)length;  // its "mapping" is a heap copy
#else
  if (!mapped_ || offset >= size_) return;
  length = std::min(length, size_ - offset);
  // The mapping starts on a page boundary, so whole pages are whole multiples of the page size
  // from data_ (a neighbour's bytes on a shared page stay).
  const auto page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  const size_t first = (offset + page - 1) / page * page;
  const size_t last = (offset + length) / page * page;
  if (last > first)  // best effort
    (void)::madvise(const_cast<uint8_t*>(data_) + first, last - first, MADV_DONTNEED);
#endif
}

void MappedFile::ReadAt(size_t offset, std::span<uint8_t> out) const {
  if (offset > size_ || out.size() > size_ - offset)
    Fail<IoError>("{}: read of {} bytes at offset {} is past the end ({} bytes)", label_,
                  out.size(), offset, size_);
  if (fd_ < 0) {
    if (!out.empty()) std::memcpy(out.data(), data_ + offset, out.size());
    return;
  }
  size_t done = 0;
  while (done < out.size()) {
    const ssize_t n =
        ::pread(fd_, out.data() + done, out.size() - done, static_cast<off_t>(offset + done));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0)
      Fail<IoError>("{}: read of {} bytes at offset {} failed: {}", label_, out.size(), offset,
                    std::strerror(errno));
    if (n == 0)
      Fail<IoError>("{}: read of {} bytes at offset {} ended early (the file shrank?)", label_,
                    out.size(), offset);
    done += static_cast<size_t>(n);
  }
}

MappedFile::~MappedFile() {
  if (mapped_) ::munmap(const_cast<uint8_t*>(data_), size_);
  if (fd_ >= 0) ::close(fd_);
}

std::vector<uint8_t> ReadFileBytes(const std::string& path) {
  Fd f{::open(path.c_str(), O_RDONLY | O_CLOEXEC)};
  if (f.fd < 0) Fail<IoError>("{}: cannot open: {}", path, std::strerror(errno));
  struct stat st {};
  if (::fstat(f.fd, &st) != 0) Fail<IoError>("{}: cannot stat: {}", path, std::strerror(errno));
  if (S_ISDIR(st.st_mode)) Fail<IoError>("{}: is a directory, expected a file", path);
  if (S_ISBLK(st.st_mode)) Fail<IoError>("{}: is a block device, expected a file", path);
  // Regular files, pipes (`--tools <(...)`) and character devices are read to EOF.
  return ReadAll(f.fd, path, S_ISREG(st.st_mode) ? static_cast<uint64_t>(st.st_size) : 0,
                 kMaxSmallFileBytes);
}

}  // namespace needle::format
