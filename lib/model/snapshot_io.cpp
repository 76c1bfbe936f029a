// Snapshot files (snapshot_io.h).
#include "model/snapshot_io.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>

#include "format/atomic_file.h"

namespace needle::model {

namespace {

constexpr char kMagic[8] = {'N', 'D', 'L', 'S', 'N', 'A', 'P', '1'};

class Writer {
 public:
  void Bytes(const void* p, size_t n) {
    const auto* b = static_cast<const uint8_t*>(p);
    out.insert(out.end(), b, b + n);
  }
  template <class T>
  void Pod(T v) {
    Bytes(&v, sizeof v);
  }
  template <class T>
  void Vec(const std::vector<T>& v) {
    Pod<uint64_t>(v.size());
    Bytes(v.data(), v.size() * sizeof(T));
  }
  std::vector<uint8_t> out;
};

// Reads a file front to back with pread, bounds-checked against its size.
class FileReader {
 public:
  explicit FileReader(const std::string& path) : fd_(::open(path.c_str(), O_RDONLY | O_CLOEXEC)) {
    struct stat st {};
    if (fd_ >= 0 && ::fstat(fd_, &st) == 0 && st.st_size > 0)
      size_ = static_cast<uint64_t>(st.st_size);
  }
  FileReader(const FileReader&) = delete;
  FileReader& operator=(const FileReader&) = delete;
  ~FileReader() {
    if (fd_ >= 0) ::close(fd_);
  }
  bool ok() const { return size_ > 0; }
  bool Bytes(void* p, size_t n) {
    if (n > size_ - pos_) return false;
    auto* out = static_cast<uint8_t*>(p);
    for (size_t done = 0; done < n;) {
      const ssize_t got = ::pread(fd_, out + done, n - done, static_cast<off_t>(pos_ + done));
      if (got < 0 && errno == EINTR) continue;
      if (got <= 0) return false;
      done += static_cast<size_t>(got);
    }
    pos_ += n;
    return true;
  }
  template <class T>
  bool Pod(T* v) {
    return Bytes(v, sizeof *v);
  }
  template <class T>
  bool Vec(std::vector<T>* v) {
    uint64_t n = 0;
    if (!Pod(&n) || n > (size_ - pos_) / sizeof(T)) return false;
    v->resize(n);
    return Bytes(v->data(), n * sizeof(T));
  }
  bool AtEnd() const { return pos_ == size_; }

 private:
  int fd_;
  uint64_t size_ = 0, pos_ = 0;
};

}  // namespace

void WriteSnapshotFile(const std::string& path, const std::string& key, const Snapshot& s,
                       const std::vector<float>& logits) {
  Writer w;
  w.Bytes(kMagic, sizeof kMagic);
  w.Pod<uint32_t>(static_cast<uint32_t>(key.size()));
  w.Bytes(key.data(), key.size());
  w.Pod<uint32_t>(s.path == NumericPath::kOfficial ? 0 : 1);
  w.Pod<uint32_t>(s.position);
  w.Pod<uint32_t>(s.sink_len);
  w.Pod<uint32_t>(s.kv_window);
  w.Pod<uint64_t>(s.capacity);
  w.Vec(s.kv.k);
  w.Vec(s.kv.v);
  w.Vec(s.kv.kq);
  w.Vec(s.kv.vq);
  w.Vec(s.kv.k_scale);
  w.Vec(s.kv.v_scale);
  w.Vec(s.engram_ring);
  w.Vec(s.token_ring);
  w.Vec(s.pool_stats);
  w.Vec(s.pool_acc);
  w.Vec(logits);
  format::WriteFileAtomic(path, w.out);
}

bool ReadSnapshotFile(const std::string& path, const std::string& key, Snapshot* s,
                      std::vector<float>* logits) {
  // Each vector is read from the file straight into its destination (no whole-file buffer: at
  // the official geometry the file is 1.6 MB, and every extra copy is ~390 fresh pages).
  FileReader r(path);
  if (!r.ok()) return false;
  char magic[8];
  uint32_t key_len = 0, path_code = 0;
  if (!r.Bytes(magic, sizeof magic) || std::memcmp(magic, kMagic, sizeof magic) != 0) return false;
  if (!r.Pod(&key_len) || key_len != key.size()) return false;
  std::string stored(key_len, '\0');
  if (!r.Bytes(stored.data(), key_len) || stored != key) return false;
  uint64_t capacity = 0;
  if (!r.Pod(&path_code) || path_code > 1 || !r.Pod(&s->position) || !r.Pod(&s->sink_len) ||
      !r.Pod(&s->kv_window) || !r.Pod(&capacity))
    return false;
  s->path = path_code == 0 ? NumericPath::kOfficial : NumericPath::kF32;
  s->capacity = capacity;
  return r.Vec(&s->kv.k) && r.Vec(&s->kv.v) && r.Vec(&s->kv.kq) && r.Vec(&s->kv.vq) &&
         r.Vec(&s->kv.k_scale) && r.Vec(&s->kv.v_scale) && r.Vec(&s->engram_ring) &&
         r.Vec(&s->token_ring) && r.Vec(&s->pool_stats) && r.Vec(&s->pool_acc) && r.Vec(logits) &&
         r.AtEnd();
}

}  // namespace needle::model
