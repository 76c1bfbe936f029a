// The seam between the forward pass and its arithmetic (STYLE.md 13). The decoder walks the model
// once (decoder.cpp); what differs between the two numeric paths lives behind this interface:
//   - f32 (numerics_f32.cpp): upstream semantics (MODEL.md), f32 activations and KV cache, each
//     position attending over its own window;
//   - official (numerics_official.cpp): the official engine's integer arithmetic bit for bit
//     (NUMERICS.md): int8 activations and codebooks, exact int32 group dots, int8 φ rows, an int8
//     K/V ring with the chunk-level window, an int8 engram ring.
// Both use the same element-wise operation orders and the musl libm ports (kernels/ops.h), so the
// walk itself is shared. Calls happen once per layer per block, never per element.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "format/cact.h"
#include "kernels/dispatch.h"
#include "kernels/parallel.h"
#include "model/weights.h"

namespace needle::model {

// How activations and the KV cache are represented.
//   kOfficial: the official engine's integer arithmetic (NUMERICS.md), bit for bit. The default.
//   kF32:      upstream f32 semantics (MODEL.md), the reference the f32 goldens hold.
enum class NumericPath { kOfficial, kF32 };

const char* NumericPathName(NumericPath path);  // "official", "f32"
// Parses "official" / "f32"; throws UsageError naming the value otherwise.
NumericPath ParseNumericPath(const std::string& name);

// One product of a batch sharing the same input: rows [row_begin, row_end) of m into y (row
// stride ldy per token).
struct ProjectJob {
  const kernels::CqMatrix* m;
  size_t row_begin, row_end;
  float* y;
  size_t ldy;
};

// The KV ring: sinks [0, sinks) keep their slots; later positions share `window` slots.
struct KvRing {
  uint32_t window = 0;  // 0: no window, every earlier position visible (slot = position)
  uint32_t sinks = 0;
  size_t capacity = 0;  // slots per layer
  size_t Slot(uint32_t pos) const {
    return (window == 0 || pos < sinks) ? pos : sinks + (pos - sinks) % window;
  }
  // Positions a token at p attends to when it is alone in its call (a decode step): every
  // position up to p without a window; else the sinks and the last `window` positions.
  size_t StepVisibleCount(uint32_t p) const {
    if (window == 0) return size_t{p} + 1;
    const uint32_t sink_end = std::min(sinks, p + 1);
    const uint32_t window_begin = std::max(sinks, p + 1 > window ? p + 1 - window : 0u);
    return sink_end + (p + 1 > window_begin ? p + 1 - window_begin : 0u);
  }
};

// A branch pass (Decoder::StepBranches): the n tokens of one call are the next tokens of n
// branches grown from position `base`, all at the same position, each attending as a call of its
// own would (its own window, no other token of the pass). Positions before `base` are the
// ring's; positions from `base` on are the token's branch's own, in slots past the ring: token
// t's slot of position base + k is own[t * stride + k] (the last, k = pos - base, is where it
// writes its K/V).
struct BranchKv {
  uint32_t base = 0;
  const uint32_t* own = nullptr;
  size_t stride = 0;
  size_t Slot(const KvRing& ring, size_t t, uint32_t pos) const {
    return pos < base ? ring.Slot(pos) : own[t * stride + (pos - base)];
  }
};

// Data derived from the model file alone (the official path's int8 φ rows and tiled matrices,
// the sessions' tokenizer), built once per model by the first user that asks and shared by every
// later one, across threads. Owned by the Model; entries live as long as it (or their holders).
class DerivedData {
 public:
  // The entry under `key`, built by `build` (returning T) when absent. Concurrent first calls
  // build once: the others wait for it.
  template <class T>
  std::shared_ptr<const T> Get(const std::string& key, const std::function<T()>& build) {
    const std::lock_guard<std::mutex> lock(mutex_);
    for (const auto& [k, v] : entries_)
      if (k == key) return std::static_pointer_cast<const T>(v);
    auto made = std::make_shared<const T>(build());
    entries_.emplace_back(key, made);
    return made;
  }

  size_t size() {
    const std::lock_guard<std::mutex> lock(mutex_);
    return entries_.size();
  }

 private:
  std::mutex mutex_;
  std::vector<std::pair<std::string, std::shared_ptr<const void>>> entries_;
};

// Everything a numeric path may use; owned by the decoder, stable for its lifetime.
struct NumericsContext {
  const Weights* weights = nullptr;
  const format::CactFile* file = nullptr;  // the weights' file (evicts pages read only once)
  DerivedData* derived = nullptr;  // the model's shared derived data (nullptr: build privately)
  const format::Geometry* geometry = nullptr;
  const kernels::KernelTable* kernels = nullptr;
  kernels::ChunkPool* pool = nullptr;
  int threads = 1;
  size_t max_batch = 32;
  size_t capacity = 0;  // KV slots per layer: the ring's, then the branches' (BranchKv)
};

// KV state as saved in a snapshot (only the fields of the decoder's path are used).
struct KvState {
  std::vector<float> k, v;              // f32: [layers, used, kv_dim]
  std::vector<int8_t> kq, vq;           // official: [layers, used, kv_dim]
  std::vector<float> k_scale, v_scale;  // official: [layers, used, kv_dim / 64]
};

class ForwardNumerics {
 public:
  virtual ~ForwardNumerics() = default;
  virtual NumericPath path() const = 0;

  // y_j[t] = product of matrix j with x[t] (x [n, cols], row stride ldx) for every job; all jobs'
  // matrices have the same cols.
  virtual void Project(const float* x, size_t n, size_t ldx, std::span<const ProjectJob> jobs) = 0;

  // The matrix as this path holds it (a copy in another layout, whose file pages it may have
  // dropped), for row lookups of a matrix it also projects (the tied embedding).
  virtual const kernels::CqMatrix& View(const kernels::CqMatrix& m) const { return m; }

  // mHC projections of layer `layer` from nx = rms_unit(lanes) [n, lanes*d]: per token t,
  // coef[t*ldc ..] = pre (lanes), post (lanes), res (lanes*lanes) dot products.
  virtual void MhcLogits(size_t layer, const float* nx, size_t n, float* coef, size_t ldc) = 0;

  // The engram value ring's representation: vraw (d values) is replaced in place by what the
  // ring gives back (official: int8 per 32 elements, dequantized).
  virtual void EngramRingValue(float* vraw, size_t d) = 0;

  // Writes the K/V of n tokens at positions pos0.. into the ring (k after norm and RoPE, v raw;
  // [n, kv_dim] each), then computes the attention output o [n, attn_dim] of queries q
  // [n, attn_dim] (after norm and RoPE). The n tokens are one forward call (a prefill chunk or a
  // decode step); with `branches`, n branches' tokens all at position pos0 (BranchKv).
  virtual void Attention(size_t layer, const KvRing& ring, uint32_t pos0, size_t n, const float* q,
                         const float* k, const float* v, float* o, const BranchKv* branches) = 0;

  // Whether a token of a multi-token call gets the same bits as in a call of its own, as long as
  // the call evicts no key one of its earlier tokens sees (Decoder::StepEach): each token's
  // products, norms and attention chains are then the same operations in the same order.
  virtual bool BlockMatchesSteps() const = 0;

  // Copies the K/V of the first `used` slots of every layer into / out of a snapshot.
  virtual void SaveKv(size_t used, KvState* state) const = 0;
  // Returns false if the state does not fit this path and capacity.
  virtual bool RestoreKv(size_t used, const KvState& state) = 0;

  // Copies the K/V of the given slots of every layer into `state` ([layers, slots.size(), ...])
  // / back from it: a branch winner's slots into the ring's (Decoder::EndBranches).
  virtual void SaveSlots(std::span<const uint32_t> slots, KvState* state) const = 0;
  virtual void RestoreSlots(std::span<const uint32_t> slots, const KvState& state) = 0;

  // Grows every layer to `capacity` slots (no-op if it has as many), keeping the contents of its
  // first `keep` slots (the ring's): the branches' slots past the ring (Decoder::BeginBranches).
  virtual void ReserveSlots(size_t capacity, size_t keep) = 0;

  // Slots [first, first + count) of every layer leave the resident set (their pages wholly
  // inside; the contents are dead: the branches' slots after an exploration).
  virtual void ReleaseSlots(size_t first, size_t count) = 0;

  // Bytes of KV cache per slot of one layer (for reports).
  virtual size_t KvBytesPerSlot() const = 0;

  // The block scratch past the first token's share leaves the resident set (its contents are
  // dead between forward calls; Decoder::Prefill after a multi-token block).
  virtual void ReleaseBlockScratch() {}
};

std::unique_ptr<ForwardNumerics> MakeF32Numerics(const NumericsContext& ctx);
std::unique_ptr<ForwardNumerics> MakeOfficialNumerics(const NumericsContext& ctx);

// Where part k of a block of n tokens split among `parts` threads begins (part `parts` ends at
// n): contiguous ranges, on 16-token boundaries (the int8 gemm's lane tile) once every part gets
// 16 tokens or more. Every region of a forward call splits the same way (ForTokenParts), so a
// token's data stays with the thread, and in the core's cache, that wrote it.
inline size_t TokenPartBegin(size_t n, size_t parts, size_t k) {
  constexpr size_t kTile = 16;
  if (k >= parts) return n;
  size_t b = k * n / parts;
  if (n >= kTile * parts) b = std::min(n, (b + kTile / 2) / kTile * kTile);
  return b;
}

// fn(t0, t1) over the token parts of a block of n tokens, part k on thread k of the pool
// (kernels::ChunkPool::RunPinned); on the calling thread alone for fewer than kMinTokens tokens or
// without a pool. Callers pass per-token work only (each token's operations in the same order
// whichever thread runs them), so the bits do not depend on the split.
template <class Fn>
void ForTokenParts(kernels::ChunkPool* pool, size_t n, const Fn& fn) {
  constexpr size_t kMinTokens = 4;
  const size_t parts = pool ? static_cast<size_t>(pool->threads()) : 1;
  if (parts <= 1 || n < kMinTokens) {
    fn(size_t{0}, n);
    return;
  }
  pool->RunPinned([&](size_t k) {
    const size_t t0 = TokenPartBegin(n, parts, k), t1 = TokenPartBegin(n, parts, k + 1);
    if (t0 < t1) fn(t0, t1);
  });
}

// The rows of a batch of jobs (at most kMaxJobs) cut into about `target` chunks of whole 16-row
// tiles of the jobs' rows joined end to end, so that a chunk may hold the end of one job and the
// start of the next (a decode step's q, k, v and gate rows, 512 + 256 + 256 + 512, split in two
// halves of 768 rather than four chunks of unequal work).
struct RowChunks {
  static constexpr size_t kTileRows = 16;
  static constexpr size_t kMaxJobs = 8;
  size_t tiles_per_chunk = 0;
  size_t first_tile[kMaxJobs + 1] = {0};  // job k's tiles start here in the joined tiles
  size_t count = 0;

  RowChunks(std::span<const ProjectJob> jobs, size_t target) {
    for (size_t k = 0; k < jobs.size(); ++k) {
      const size_t r = jobs[k].row_end - jobs[k].row_begin;
      first_tile[k + 1] = first_tile[k] + (r + kTileRows - 1) / kTileRows;
    }
    const size_t tiles = first_tile[jobs.size()];
    tiles_per_chunk = std::max<size_t>(
        1, (tiles + std::max<size_t>(target, 1) - 1) / std::max<size_t>(target, 1));
    count = (tiles + tiles_per_chunk - 1) / tiles_per_chunk;
  }
  // fn(k, row_begin, row_end) for each job k with rows in chunk c, in job order.
  template <class Fn>
  void ForChunk(std::span<const ProjectJob> jobs, size_t c, const Fn& fn) const {
    const size_t t0 = c * tiles_per_chunk, t1 = t0 + tiles_per_chunk;
    for (size_t k = 0; k < jobs.size(); ++k) {
      const size_t lo = std::max(t0, first_tile[k]), hi = std::min(t1, first_tile[k + 1]);
      if (lo >= hi) continue;
      const size_t b = jobs[k].row_begin + (lo - first_tile[k]) * kTileRows;
      fn(k, b, std::min(jobs[k].row_end, jobs[k].row_begin + (hi - first_tile[k]) * kTileRows));
    }
  }
};

// Runs fn(job, row_begin, row_end) over chunks of whole 16-row tiles of every job: on the calling
// thread when `work` (multiply-adds) is small, else on the context's pool. Each output row is
// computed by exactly one call in a fixed order, so results do not depend on the thread count.
template <class Fn>
void RunRowChunks(const NumericsContext& ctx, std::span<const ProjectJob> jobs, size_t work,
                  const Fn& fn) {
  // One chunk per thread: a decode step's regions last a few µs, and each more chunk costs a
  // claim and a re-staging of the activations (paired runs, 2 threads, `-p 100 -n 300`: one
  // chunk per thread decodes 8-10% faster than four, on AVX-512 and AVX2). A worker that has not
  // started yet still leaves its chunk to the caller.
  constexpr size_t kChunksPerThread = 1;
  constexpr size_t kParallelMinWork = size_t{1} << 18;
  size_t rows = 0;
  for (const ProjectJob& j : jobs) rows += j.row_end - j.row_begin;
  if (ctx.threads <= 1 || jobs.size() > RowChunks::kMaxJobs || work < kParallelMinWork ||
      rows < 2 * RowChunks::kTileRows) {
    for (const ProjectJob& j : jobs) fn(j, j.row_begin, j.row_end);
    return;
  }
  const RowChunks chunks(jobs, static_cast<size_t>(ctx.threads) * kChunksPerThread);
  ctx.pool->Run(chunks.count, [&](size_t c) {
    chunks.ForChunk(jobs, c, [&](size_t k, size_t b, size_t e) { fn(jobs[k], b, e); });
  });
}

}  // namespace needle::model
