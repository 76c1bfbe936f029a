// MappedFile: mmap with read() fallback.
#include "format/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
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

std::vector<uint8_t> ReadAll(int fd, const std::string& path, uint64_t size) {
  std::vector<uint8_t> out(size);
  uint64_t done = 0;
  while (done < size) {
    const ssize_t n = ::read(fd, out.data() + done, size - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) Fail<IoError>("{}: read failed: {}", path, std::strerror(errno));
    if (n == 0) break;
    done += static_cast<uint64_t>(n);
  }
  out.resize(done);
  return out;
}
}  // namespace

MappedFile::MappedFile(const std::string& path, LoadMode mode) : label_(path) {
  Fd f{::open(path.c_str(), O_RDONLY | O_CLOEXEC)};
  if (f.fd < 0) Fail<IoError>("{}: cannot open: {}", path, std::strerror(errno));
  struct stat st {};
  if (::fstat(f.fd, &st) != 0) Fail<IoError>("{}: cannot stat: {}", path, std::strerror(errno));
  if (S_ISDIR(st.st_mode)) Fail<IoError>("{}: is a directory, expected a file", path);
  const uint64_t size = static_cast<uint64_t>(st.st_size);
  if (mode != LoadMode::kRead && size > 0 && S_ISREG(st.st_mode)) {
    void* p = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, f.fd, 0);
    if (p != MAP_FAILED) {
      data_ = static_cast<const uint8_t*>(p);
      size_ = size;
      mapped_ = true;
      if (mode == LoadMode::kMmapPrefault) {
        // Best effort: an older kernel (EINVAL) just faults pages in on first touch.
        constexpr int kPopulateRead = 22;  // MADV_POPULATE_READ, Linux 5.14
        (void)::madvise(p, size, kPopulateRead);
      }
      return;
    }
  }
  owned_ = ReadAll(f.fd, path, size);
  data_ = owned_.data();
  size_ = owned_.size();
}

MappedFile::MappedFile(std::vector<uint8_t> bytes, std::string label)
    : label_(std::move(label)), owned_(std::move(bytes)) {
  data_ = owned_.data();
  size_ = owned_.size();
}

MappedFile::~MappedFile() {
  if (mapped_) ::munmap(const_cast<uint8_t*>(data_), size_);
}

std::vector<uint8_t> ReadFileBytes(const std::string& path) {
  Fd f{::open(path.c_str(), O_RDONLY | O_CLOEXEC)};
  if (f.fd < 0) Fail<IoError>("{}: cannot open: {}", path, std::strerror(errno));
  struct stat st {};
  if (::fstat(f.fd, &st) != 0) Fail<IoError>("{}: cannot stat: {}", path, std::strerror(errno));
  if (S_ISDIR(st.st_mode)) Fail<IoError>("{}: is a directory, expected a file", path);
  return ReadAll(f.fd, path, static_cast<uint64_t>(st.st_size));
}

}  // namespace needle::format
