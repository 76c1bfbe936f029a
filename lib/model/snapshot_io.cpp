// Snapshot files (snapshot_io.h).
#include "model/snapshot_io.h"

#include <cstdint>
#include <cstring>
#include <fstream>
#include <span>

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

class Reader {
 public:
  explicit Reader(std::span<const uint8_t> b) : b_(b) {}
  bool Bytes(void* p, size_t n) {
    if (n > b_.size() - pos_) return false;
    if (n == 0) return true;  // p may be an empty vector's null data() (memcpy: UBSan nonnull)
    std::memcpy(p, b_.data() + pos_, n);
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
    if (!Pod(&n) || n > (b_.size() - pos_) / sizeof(T)) return false;
    v->resize(n);
    return Bytes(v->data(), n * sizeof(T));
  }
  bool AtEnd() const { return pos_ == b_.size(); }

 private:
  std::span<const uint8_t> b_;
  size_t pos_ = 0;
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
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) return false;
  const std::streamoff size = in.tellg();
  if (size <= 0) return false;
  std::vector<uint8_t> bytes(static_cast<size_t>(size));
  in.seekg(0);
  if (!in.read(reinterpret_cast<char*>(bytes.data()), size)) return false;
  Reader r(bytes);
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
