// The Needle 2 forward pass on CQ codes (MODEL.md) with incremental decoding: a KV cache that is a
// ring of sinks + W positions, batched prefill, one token per step, and prefix snapshots.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "format/cact.h"
#include "kernels/dispatch.h"
#include "model/weights.h"

namespace needle::model {

// A loaded model: geometry plus weight views. The CactFile must outlive it. Immutable and
// shareable between decoders (and threads).
class Model {
 public:
  explicit Model(const format::CactFile& file) : file_(&file), weights_(LoadWeights(file)) {}
  const format::CactFile& file() const { return *file_; }
  const format::Geometry& geometry() const { return file_->geometry(); }
  const Weights& weights() const { return weights_; }

 private:
  const format::CactFile* file_;
  Weights weights_;
};

struct DecoderConfig {
  // Sliding window W in positions: position p sees p' when p - p' < W or p' < sink_len.
  // 0 = every earlier position is visible (then max_positions bounds the conversation).
  uint32_t kv_window = 0;
  uint32_t sink_len = 0;       // pinned prefix length (only meaningful with a window)
  uint32_t max_positions = 0;  // capacity when kv_window == 0 (0 = the header's max_seq_len)
  uint32_t max_batch = 32;     // tokens per prefill pass (scratch is sized for this)
  int threads = 1;             // OpenMP threads across output rows; results do not depend on it
  const kernels::KernelTable* kernels = nullptr;  // nullptr = kernels::ActiveKernels()
};

// State after a prefix: enough to resume decoding exactly where it was.
struct Snapshot {
  uint32_t position = 0;
  std::vector<float> k, v;          // [layers, slots_used, kv_dim]
  std::vector<float> engram_ring;   // [sites, ring, d]
  std::vector<int32_t> token_ring;  // last max-order tokens
};

// One conversation's decoding state plus all scratch memory. Not thread-safe; one per thread.
// After construction (and one warm-up call, for OpenMP's thread pool) Prefill/Step allocate
// nothing on the heap.
class Decoder {
 public:
  Decoder(const Model& model, const DecoderConfig& config);

  const DecoderConfig& config() const { return config_; }
  uint32_t position() const { return position_; }
  uint32_t vocab() const { return geometry_.vocab; }
  // Forgets everything (position 0).
  void Reset();

  // Feeds `ids` at positions position(), position()+1, ... If `last_logits` is non-empty (vocab
  // values) it receives the logits after the last id; if `all_logits` is non-empty
  // ([ids.size(), vocab]) it receives the logits after every id. Throws InvalidInput for an id
  // outside the vocabulary or when a window-less cache is full.
  void Prefill(std::span<const int32_t> ids, std::span<float> last_logits,
               std::span<float> all_logits = {});
  // One token: Prefill of a single id.
  void Step(int32_t id, std::span<float> logits) { Prefill({&id, 1}, logits); }

  void Save(Snapshot* snapshot) const;
  void Restore(const Snapshot& snapshot);

 private:
  // Runs n <= max_batch tokens at positions position_.. and advances position_.
  void RunBlock(const int32_t* ids, size_t n, float* logits, size_t logits_from);
  void Engram(size_t site, const int32_t* ids, size_t n);
  void Attention(size_t layer, size_t n);
  // y[t][r - row_begin] = dot(row r of m, x[t]) for t < n (x row stride ldx).
  void Project(const kernels::CqMatrix& m, const float* x, size_t n, size_t ldx, size_t row_begin,
               size_t row_end, float* y, size_t ldy);
  size_t Slot(uint32_t pos) const;
  size_t SlotsUsed() const;

  const Model* model_;
  const Weights* w_;
  format::Geometry geometry_;
  DecoderConfig config_;
  const kernels::KernelTable* kernels_;
  uint32_t position_ = 0;
  size_t capacity_ = 0;     // KV slots per layer
  size_t conv_ring_ = 0;    // engram vraw ring length in positions
  size_t token_ring_ = 0;   // token history length
  float embed_scale_ = 0.f;

  // State.
  std::vector<float> k_cache_, v_cache_;  // [layers, capacity, kv_dim]
  std::vector<float> conv_;               // [sites, conv_ring, d] engram vraw history
  std::vector<int32_t> tokens_;           // [token_ring] ids by position modulo token_ring

  // Scratch, sized for max_batch tokens (B).
  std::vector<float> rope_freqs_;  // [head_dim / 2]
  std::vector<float> x_hat_;       // [B, max in_pad] transformed activations
  std::vector<float> lanes_, lanes_next_, nx_;  // [B, lanes * d]
  std::vector<float> coef_;        // [B, lanes + lanes + lanes*lanes] mHC projections
  std::vector<float> u_, bx_, h_, x_, a_, y_;  // [B, d]
  std::vector<float> q_, gate_, o_;             // [B, attn_dim]
  std::vector<float> k_, v_;                    // [B, kv_dim]
  std::vector<float> z_;                        // [B, hada_n]
  std::vector<float> scores_;                   // [num_heads, capacity]
  std::vector<float> eng_e_;                    // [B, engram_dim]
  std::vector<float> eng_kk_, eng_v_;           // [sites, B, d]
  std::vector<float> eng_vraw_;                 // [B, d]
  std::vector<float> row_scratch_;              // [max in_pad] for row decoding
};

}  // namespace needle::model
