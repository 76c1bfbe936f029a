// The Needle 2 forward pass on CQ codes (MODEL.md) with incremental decoding: a KV cache that is a
// ring of sinks + W positions, batched prefill, one token per step, and prefix snapshots. The
// arithmetic is one of two numeric paths (model/numerics.h), chosen once per decoder: the
// official engine's integer path (default) or the upstream f32 reference.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "base/pages.h"
#include "format/cact.h"
#include "kernels/dispatch.h"
#include "kernels/parallel.h"
#include "model/numerics.h"
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
  // Built on first use by the decoders, then shared (thread-safe; the weights stay immutable).
  DerivedData& derived() const { return *derived_; }

 private:
  const format::CactFile* file_;
  Weights weights_;
  std::shared_ptr<DerivedData> derived_ = std::make_shared<DerivedData>();
};

struct DecoderConfig {
  NumericPath path = NumericPath::kOfficial;
  // Sliding window W in positions: position p sees p' when p - p' < W or p' < sink_len.
  // 0 = every earlier position is visible (then max_positions bounds the conversation).
  uint32_t kv_window = 0;
  uint32_t sink_len = 0;       // pinned prefix length (only meaningful with a window)
  uint32_t max_sink_len = 0;   // largest sink_len SetSinkLen() may set (0 = sink_len)
  uint32_t max_positions = 0;  // capacity when kv_window == 0 (0 = the header's max_seq_len)
  // Tokens per forward call: Prefill splits its ids into calls of this many, counted from its
  // first id (scratch is sized for this). The official path always uses the engine's 32: with a
  // window, which keys a prefill position sees depends on it (NUMERICS.md §6).
  uint32_t max_batch = 32;
  int threads = 1;  // threads across output rows (kernels::ChunkPool); results do not depend on it
  const kernels::KernelTable* kernels = nullptr;  // nullptr = kernels::ActiveKernels()
  // Pool every cell (MODEL.md "Probe heads") into the file's probe heads as tokens are fed, so
  // HeadOutput() can be read at any time. Off: the heads cost nothing.
  bool pool_heads = false;
  // Testing / debugging only: when set, every cell is appended here ([cells, d], allocates).
  std::vector<float>* cell_log = nullptr;
  // Branch exploration (BeginBranches): slots for branch_width branches of branch_tokens
  // positions each past the ring from the start (touched only by a branch that runs); a larger
  // exploration grows them.
  uint32_t branch_width = 0;
  uint32_t branch_tokens = 0;
};

// State after a prefix: enough to resume decoding exactly where it was.
struct Snapshot {
  NumericPath path = NumericPath::kOfficial;
  uint32_t position = 0;
  uint32_t sink_len = 0;
  uint32_t kv_window = 0;
  size_t capacity = 0;                      // KV slots of the decoder it came from
  KvState kv;                               // the first min(position, capacity) slots
  std::vector<float> engram_ring;           // [sites, ring, d] values as the conv reads them
  std::vector<int32_t> token_ring;          // last max-order tokens
  std::vector<float> pool_stats, pool_acc;  // probe-head pooling state (if pooling)
};

// One conversation's decoding state plus all scratch memory. Not thread-safe; one per thread.
// After construction Prefill/Step allocate
// nothing on the heap (StepEach grows one buffer for its passes' cells on first use).
class Decoder {
 public:
  Decoder(const Model& model, const DecoderConfig& config);

  const DecoderConfig& config() const { return config_; }
  uint32_t position() const { return position_; }
  uint32_t vocab() const { return geometry_.vocab; }
  // Forgets everything (position 0; an open branch exploration too).
  void Reset();
  uint32_t sink_len() const { return sink_len_; }
  // Changes the pinned prefix length, e.g. after Reset() when the prefix changes. Allowed while
  // every position fed so far is a sink under both the old and the new value (position() <=
  // min(old, new)); n must not exceed max_sink_len. Throws InvalidInput otherwise.
  void SetSinkLen(uint32_t n);

  // Feeds `ids` at positions position(), position()+1, ... If `last_logits` is non-empty (vocab
  // values) it receives the logits after the last id; if `all_logits` is non-empty
  // ([ids.size(), vocab]) it receives the logits after every id. Throws InvalidInput for an id
  // outside the vocabulary or when a window-less cache is full.
  void Prefill(std::span<const int32_t> ids, std::span<float> last_logits,
               std::span<float> all_logits = {});
  // One token: Prefill of a single id.
  void Step(int32_t id, std::span<float> logits) { Prefill({&id, 1}, logits); }
  // Step for each id in turn, the logits after every id in `all_logits` ([ids.size(), vocab]):
  // the same bits, state and forward-call bookkeeping as that many Step calls (a teacher-forced
  // value whose tokens are known in advance), computed in multi-token passes of up to 8
  // tokens where a pass gives those bits: the path computes a token the same in a block as alone
  // (ForwardNumerics::BlockMatchesSteps) and no position of the pass overwrites the slot of a key
  // that an earlier position of it sees (until the ring wraps). Elsewhere one token per pass.
  void StepEach(std::span<const int32_t> ids, std::span<float> all_logits);

  // The output of probe head `head` (index into Weights::heads) pooled over every cell fed so far
  // (requires config.pool_heads): contrastive -> L2-normalized embedding (out_dim values),
  // confidence -> one raw logit. Throws InvalidInput without pooling or without cells.
  void HeadOutput(size_t head, std::span<float> out) const;

  // Branch exploration from the current position (the branch point): `count` branches of up to
  // `depth` positions each, fed their own tokens in passes of one token per branch
  // (StepBranches), while the decoder's own state (position, K/V ring, engram and token rings,
  // pooling) stays as it is. Each branch token gets the bits a Step of its own would give after
  // Rewind to the branch point and that branch's earlier tokens: the candidates of a value are
  // explored side by side with the weights read once per pass instead of once per candidate,
  // and nothing is saved or restored. Allocates when the branches' buffers are first used or
  // must grow (more or longer branches than before or than the config's).
  void BeginBranches(size_t count, size_t depth);
  // Feeds ids[i] to branch branches[i] (all at the same depth: positions fed since the branch
  // point, below BeginBranches' depth; distinct branches) and writes its logits to
  // logits[i * vocab ..]. Throws InvalidInput on a bad id, branch or depth.
  void StepBranches(std::span<const uint32_t> branches, std::span<const int32_t> ids,
                    std::span<float> logits);
  // Positions branch b has been fed.
  uint32_t BranchDepth(size_t b) const { return branches_.depth.at(b); }
  // Ends the exploration. The engine explores the branches one after the other (a rewind to the
  // branch point, then one call per token): that forward-call bookkeeping is recorded, in branch
  // order, then a rewind to the branch point. With adopt >= 0, branch `adopt`'s positions then
  // become the decoder's, as feeding them again one token per call would leave them.
  void EndBranches(int adopt);

  void Save(Snapshot* snapshot) const;
  // Throws InvalidInput if the snapshot comes from a decoder with another path, window or
  // capacity. The engine's pooled-feature cache counts as valid again (its prefix restore, fn
  // 225: the call history is cleared).
  void Restore(const Snapshot& snapshot);
  // Restore as the engine's rewind inside a turn (before each branch or enum candidate; the
  // branch explorations record it without restoring anything, EndBranches): it rewinds its cache
  // from its history of forward-call starts (fn 78, the last kPoolHistory calls); when the
  // snapshot's position is not among them the cache is invalid from then on (PoolCacheValid).
  void Rewind(const Snapshot& snapshot);
  // Whether the official engine's cached probe features would still be valid (no rewind beyond
  // its history since the last Reset/Restore): otherwise it re-forwards the whole context to
  // score the head (ENGINE-PROTOCOL.md section 2, fn 184).
  bool PoolCacheValid() const { return pool_valid_; }
  void InvalidatePoolCache() { pool_valid_ = false; }
  static constexpr size_t kPoolHistory = 16;
  NumericPath path() const { return config_.path; }
  // The block scratch ([max_batch, ...] buffers of this decoder): its size and how much of it is
  // resident. After a multi-token Prefill only the first token's share stays resident.
  struct ScratchUse {
    size_t bytes = 0, resident = 0;
  };
  ScratchUse BlockScratchUse() const;
  // Bytes of KV cache per position (all layers).
  size_t KvBytesPerPosition() const { return numerics_->KvBytesPerSlot() * geometry_.num_layers; }
  // KV cache bytes a decode step at `position` reads (every layer's K/V of the positions it
  // attends to, with this decoder's window and sinks).
  uint64_t StepKvReadBytes(uint32_t position) const {
    return uint64_t{KvBytesPerPosition()} * Ring().StepVisibleCount(position);
  }

 private:
  // Runs n <= max_batch tokens at positions position_.. and advances position_: one forward call,
  // or with `token_calls` n calls of one token each for the engine's call bookkeeping (StepEach).
  // With `branch_of` (a branch pass, StepBranches): token t is the next token of branch
  // branch_of[t], every token at the branches' position; the decoder's own state is untouched.
  void RunBlock(const int32_t* ids, size_t n, float* logits, size_t logits_from,
                bool token_calls = false, const uint32_t* branch_of = nullptr);
  // The rewind bookkeeping of the probe cache (Rewind, fn 78) to `position`.
  void RewindPoolCalls(uint32_t position);
  // The engine's probe-cache bookkeeping for a forward call of n tokens at `start` (fn 67).
  void NotePoolCall(uint32_t start, size_t n);
  // Validates ids against the vocabulary and the window-less capacity.
  void CheckFeed(std::span<const int32_t> ids) const;
  void Engram(size_t site, const int32_t* ids, size_t n, const uint32_t* branch_of);
  // Position of token t of a block (a branch pass: the branches' next position).
  uint32_t TokenPosition(size_t t, const uint32_t* branch_of) const {
    return branch_of ? branches_.base + branches_.depth[branch_of[0]]
                     : position_ + static_cast<uint32_t>(t);
  }
  void ReleaseBlockScratch();
  // The [B, ...] scratch buffers (eng_kk_ and eng_v_, [sites, B, d], apart).
  template <class Self>
  static auto BlockBuffersOf(Self& self) {
    return std::array{&self.rope_cs_, &self.lanes_,  &self.lanes_next_,  &self.nx_,
                      &self.coef_,    &self.u_,      &self.bx_,          &self.h_,
                      &self.x_,       &self.a_,      &self.y_,           &self.q_,
                      &self.gate_,    &self.o_,      &self.k_,           &self.v_,
                      &self.z_,       &self.silu_,   &self.eng_e_,       &self.eng_vraw_,
                      &self.cell_,    &self.sink_p_, &self.sink_scratch_};
  }
  template <class Fn>
  void ForTokens(size_t n, const Fn& fn);
  // fn(t0, t1) for blocks of at most 16 tokens (row-interleaved norms), across the threads.
  template <class Fn>
  void ForTokenBlocks(size_t n, const Fn& fn);
  void Project(const kernels::CqMatrix& m, const float* x, size_t n, size_t ldx, size_t row_begin,
               size_t row_end, float* y, size_t ldy);
  KvRing Ring() const { return {config_.kv_window, sink_len_, capacity_}; }
  // Adds n cells (each d values, row stride ld) to every probe's online softmax, in order; cell t
  // belongs to token ids[t * id_stride] (0: all to ids[0]); cells of token id 0 are skipped (the
  // engine's mask).
  void PoolCells(const int32_t* ids, const float* cells, size_t n, size_t ld,
                 size_t id_stride = 1) {
    PoolCellsInto(pool_stats_.data(), pool_acc_.data(), ids, cells, n, ld, id_stride);
  }
  // The same into another pooling state (stats [num_probes, 2], acc [num_probes, d]).
  void PoolCellsInto(float* stats, float* acc, const int32_t* ids, const float* cells, size_t n,
                     size_t ld, size_t id_stride = 1);
  size_t SlotsUsed() const;
  // The engram and token rings and the pooling state into / from a Snapshot (the state besides
  // the KV slots and the position).
  void SaveRings(Snapshot* s) const;
  void LoadRings(const Snapshot& s);

  const Weights* w_;
  format::Geometry geometry_;
  DecoderConfig config_;
  const kernels::KernelTable* kernels_;
  std::unique_ptr<kernels::ChunkPool> pool_;   // threads - 1 workers, owned by this decoder
  std::unique_ptr<ForwardNumerics> numerics_;  // the arithmetic (and the KV cache)
  uint32_t position_ = 0;
  uint32_t sink_len_ = 0;  // current pinned prefix (<= max sinks the capacity was sized for)
  uint32_t max_sink_len_ = 0;
  size_t capacity_ = 0;    // KV slots per layer
  size_t conv_ring_ = 0;   // engram vraw ring length in positions
  size_t token_ring_ = 0;  // token history length
  float embed_scale_ = 0.f;

  // State (besides the KV cache, which the numeric path owns).
  std::vector<float> conv_;  // [sites, conv_ring, d] engram value history (as the conv reads it)
  std::vector<int32_t> tokens_;  // [token_ring] ids by position modulo token_ring
  // Probe pooling, one online softmax per (head, probe): stats = {running max, sum of weights},
  // acc = sum of weight * cell, all relative to the running max.
  size_t num_probes_ = 0;          // over all heads
  std::vector<float> pool_stats_;  // [num_probes, 2]
  std::vector<float> pool_acc_;    // [num_probes, d]
  // All heads' probes in blocks of kProbeBlock, element-major in a block: [blocks, d, 16].
  static constexpr size_t kProbeBlock = 16;
  std::vector<float> probes_;
  float inv_sqrt_d_ = 0.f;  // score = inv_sqrt_d * dot(cell, probe)
  // The engine's cache bookkeeping (fn 67 / fn 78): valid flag, next position it expects, and
  // the start positions of the last forward calls (oldest first).
  bool pool_valid_ = true;
  uint32_t pool_pos_ = 0;
  std::array<uint32_t, kPoolHistory> pool_hist_{};
  size_t pool_hist_len_ = 0;
  // Branch exploration (BeginBranches .. EndBranches). Branch b's position base + k has K/V slot
  // capacity_ + k * width + b (a pass's tokens side by side).
  struct Branches {
    size_t width = 0, tokens = 0;  // the slots past the ring: width branches of tokens positions
    size_t limit = 0;              // positions per branch of this exploration (<= tokens)
    uint32_t base = 0;
    size_t count = 0;
    bool active = false;
    std::vector<uint32_t> depth;              // [width] positions fed
    std::vector<int32_t> ids;                 // [width, tokens] their ids
    std::unique_ptr<float[]> conv;            // [width, tokens, sites, d] engram ring values
    std::vector<float> pool_stats, pool_acc;  // [width, ...] each branch's pooling state
    std::vector<uint32_t> own;                // [max_batch, tokens] a pass's BranchKv slots
    KvState moved;                            // the adopted branch's K/V on their way
  } branches_;
  ScratchVector<float> cell_;      // [B, d] lane means
  std::vector<float> step_cells_;  // [B, layers + 1, d] a StepEach pass's cells (grown on use)

  // Scratch, sized for max_batch tokens (B), never zeroed (written before it is read).
  std::vector<float> rope_freqs_;                 // [head_dim / 2]
  ScratchVector<float> rope_cs_;                  // [max_batch, head_dim] cos, sin of the block
  ScratchVector<float> lanes_, lanes_next_, nx_;  // [B, lanes * d]
  ScratchVector<float> coef_;                     // [B, lanes + lanes + lanes*lanes] mHC logits
  ScratchVector<float> u_, bx_, h_, x_, a_, y_;   // [B, d]
  ScratchVector<float> q_, gate_, o_;             // [B, attn_dim]
  ScratchVector<float> k_, v_;                    // [B, kv_dim]
  ScratchVector<float> z_, silu_;                 // [B, hada_n]
  ScratchVector<float> eng_e_;                    // [B, engram_dim]
  ScratchVector<float> eng_kk_, eng_v_;           // [sites, B, d]
  ScratchVector<float> eng_vraw_;                 // [B, d]
  ScratchVector<float> sink_p_;                   // [B, lanes * lanes] Sinkhorn matrices
  ScratchVector<float> sink_scratch_;             // [B, lanes * lanes + 2 * lanes]
  std::vector<float> row_scratch_;                // [max in_pad] for row decoding
  std::vector<uint8_t> table_row_;                // one engram table row read from the file
};

}  // namespace needle::model
