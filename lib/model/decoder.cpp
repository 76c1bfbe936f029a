// The Needle 2 forward pass (MODEL.md) on CQ codes: the model walk, written once for both numeric
// paths (model/numerics.h). Element-wise operations follow the official engine's order
// (NUMERICS.md §4), which is one valid f32 order for the upstream reference too and the only one
// for the official path. Built with -ffp-contract=off.
#include "model/decoder.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "base/error.h"
#include "base/pages.h"
#include "kernels/fwht.h"
#include "kernels/ops.h"

namespace needle::model {

namespace {

constexpr float kEps = 1e-6f;
constexpr uint32_t kOfficialChunk = 32;  // the engine's prefill call size
constexpr int kSinkhornRounds = 20;
constexpr uint32_t kHashSeed = 0x9E3779B9u;
constexpr uint32_t kHashPrime = 0x01000193u;

}  // namespace

Decoder::Decoder(const Model& model, const DecoderConfig& config)
    : w_(&model.weights()), geometry_(model.geometry()), config_(config) {
  const format::Geometry& g = geometry_;
  kernels_ = config.kernels ? config.kernels : &kernels::ActiveKernels();
  if (config_.max_batch == 0) config_.max_batch = 1;
  if (config_.threads < 1) config_.threads = 1;
  if (config_.path == NumericPath::kOfficial) config_.max_batch = kOfficialChunk;
  pool_ = std::make_unique<kernels::ChunkPool>(config_.threads);
  if (config_.kv_window == 0) {
    capacity_ = config_.max_positions ? config_.max_positions : g.max_seq_len;
    config_.sink_len = config_.max_sink_len = 0;
  } else {
    config_.max_sink_len = std::max(config_.max_sink_len, config_.sink_len);
    capacity_ = size_t{config_.max_sink_len} + config_.kv_window;
  }
  sink_len_ = config_.sink_len;
  max_sink_len_ = config_.max_sink_len;
  conv_ring_ =
      size_t{g.engram_conv_taps > 0 ? g.engram_conv_taps - 1 : 0} * g.engram_conv_dilation + 1;
  token_ring_ = 1;
  for (uint32_t o : g.engram_orders) token_ring_ = std::max<size_t>(token_ring_, o);
  embed_scale_ = std::sqrt(static_cast<float>(g.d_model));

  const size_t B = config_.max_batch, d = g.d_model, n = g.lanes;
  const size_t sites = g.engram_sites.size();
  NumericsContext nctx;
  nctx.weights = w_;
  nctx.file = &model.file();
  nctx.derived = &model.derived();
  nctx.geometry = &geometry_;
  nctx.kernels = kernels_;
  nctx.pool = pool_.get();
  nctx.threads = config_.threads;
  nctx.max_batch = B;
  // The branches' slots follow the ring's in every layer (BeginBranches grows them).
  branches_.width = config_.branch_width;
  branches_.tokens = config_.branch_width ? config_.branch_tokens : 0;
  nctx.capacity = capacity_ + branches_.width * branches_.tokens;
  numerics_ =
      config_.path == NumericPath::kOfficial ? MakeOfficialNumerics(nctx) : MakeF32Numerics(nctx);
  conv_.assign(sites * conv_ring_ * d, 0.f);
  tokens_.assign(token_ring_, 0);

  rope_freqs_.resize(g.head_dim / 2);
  kernels::RopeFrequencies(g.head_dim, g.rope_theta, rope_freqs_.data());
  rope_cs_.resize(B * g.head_dim);
  size_t max_in_pad = w_->embedding.in_pad;
  for (const auto& e : w_->engram) {
    max_in_pad = std::max(max_in_pad, e.tables.m.in_pad);
    table_row_.resize(std::max(table_row_.size(), e.tables.row_bytes()));
  }
  lanes_.resize(B * n * d);
  lanes_next_.resize(B * n * d);
  nx_.resize(B * n * d);
  coef_.resize(B * (2 * n + n * n));
  for (auto* v : {&u_, &bx_, &h_, &x_, &a_, &y_}) v->resize(B * d);
  for (auto* v : {&q_, &gate_, &o_}) v->resize(B * g.attn_dim());
  k_.resize(B * g.kv_dim());
  v_.resize(B * g.kv_dim());
  z_.resize(B * g.hada_n);
  silu_.resize(B * g.hada_n);
  eng_e_.resize(B * g.engram_dim());
  eng_kk_.resize(sites * B * d);
  eng_v_.resize(sites * B * d);
  eng_vraw_.resize(B * d);
  row_scratch_.resize(max_in_pad);
  cell_.resize(B * d);
  sink_p_.resize(B * n * n);
  sink_scratch_.resize(B * (n * n + 2 * n));
  if (config_.pool_heads) {
    inv_sqrt_d_ = 1.f / std::sqrt(static_cast<float>(d));
    std::vector<const float*> rows;  // every head's probes, in order
    for (const HeadWeights& h : w_->heads) {
      for (size_t k = 0; k < h.num_probes; ++k) rows.push_back(h.probes.data() + k * d);
      num_probes_ += h.num_probes;
    }
    // Blocks of kProbeBlock probes, element-major inside a block (zeros past the last probe).
    const size_t blocks = (num_probes_ + kProbeBlock - 1) / kProbeBlock;
    probes_.assign(blocks * d * kProbeBlock, 0.f);
    for (size_t k = 0; k < num_probes_; ++k)
      for (size_t i = 0; i < d; ++i)
        probes_[((k / kProbeBlock) * d + i) * kProbeBlock + k % kProbeBlock] = rows[k][i];
    pool_acc_.resize(num_probes_ * d);
    pool_stats_.resize(num_probes_ * 2);
  }
  Reset();
}

void Decoder::PoolCellsInto(float* stats, float* acc_all, const int32_t* ids, const float* cells,
                            size_t n, size_t ld, size_t id_stride) {
  // The engine's pooling callback (fn 289): score = (1 / sqrtf(d)) * seq-sum(cell_i * probe_i);
  // a new maximum rescales acc and sum by expf(max - score) (0 while max is the initial -1e30);
  // then w = expf(score - max), sum = sum + w, acc = w * cell + acc. musl expf.
  const size_t d = geometry_.d_model;
  if (config_.cell_log)
    for (size_t t = 0; t < n; ++t)
      config_.cell_log->insert(config_.cell_log->end(), cells + t * ld, cells + t * ld + d);
  // The probes' dot chains are independent: a block of kProbeBlock probes runs as one vector of
  // chains (the block's probes element-major), each lane still summing in element order.
  alignas(64) float dots[kProbeBlock];
  for (size_t t = 0; t < n; ++t) {
    if (ids[t * id_stride] == 0) continue;
    const float* cell = cells + t * ld;
    for (size_t k = 0; k < num_probes_; ++k) {
      static_assert(kProbeBlock == 16, "kernels::Dots16 runs 16 chains");
      if (k % kProbeBlock == 0)
        kernels::Dots16(cell, &probes_[(k / kProbeBlock) * d * kProbeBlock], d, dots);
      float& max = stats[2 * k];
      float& sum = stats[2 * k + 1];
      float* acc = &acc_all[k * d];
      const float score = inv_sqrt_d_ * dots[k % kProbeBlock];
      if (score > max) {
        const float scale = max <= -1e30f ? 0.f : kernels::libm::Expf(max - score);
        kernels::Scale(scale, acc, d);
        sum = scale * sum;
        max = score;
      }
      const float wgt = kernels::libm::Expf(score - max);
      sum = sum + wgt;
      kernels::Axpy(wgt, cell, acc, d);  // acc + wgt * cell: the same sum as wgt * cell + acc
    }
  }
}

void Decoder::HeadOutput(size_t head, std::span<float> out) const {
  if (!config_.pool_heads) Fail<InvalidInput>("probe heads: the decoder was built without pooling");
  if (head >= w_->heads.size())
    Fail<InvalidInput>("probe head {} does not exist (the model has {})", head, w_->heads.size());
  if (position_ == 0) Fail<InvalidInput>("probe heads: no tokens have been fed");
  const HeadWeights& h = w_->heads[head];
  if (out.size() != h.out_dim)
    Fail<InvalidInput>("probe head {}: output has {} values, expected {}", head, out.size(),
                       h.out_dim);
  const size_t d = geometry_.d_model;
  size_t first = 0;
  for (size_t i = 0; i < head; ++i) first += w_->heads[i].num_probes;
  // The engine's order (fn 184 + fn 253): pooled[k] = (sum > 0 ? 1 / sum : 0) * acc[k];
  // out = bias, then out = proj[o][j] * pooled[j] + out over the flattened P*d values.
  const size_t pd = size_t{h.num_probes} * d;
  std::vector<float> row(pd);  // one row of proj at a time, widened from the file
  for (size_t o = 0; o < h.out_dim; ++o) {
    float v = h.bias.empty() ? 0.f : h.bias[o];
    h.proj.Read(o * pd, pd, row.data());
    for (size_t k = 0; k < h.num_probes; ++k) {
      const float s = pool_stats_[2 * (first + k) + 1];
      const float inv = s > 0.f ? 1.f / s : 0.f;
      const float* acc = &pool_acc_[(first + k) * d];
      for (size_t i = 0; i < d; ++i) v = row[k * d + i] * (inv * acc[i]) + v;
    }
    out[o] = v;
  }
  if (h.kind == format::HeadKind::kContrastive) {
    double ss = 0;
    for (float v : out) ss += double{v} * v;
    const float inv = ss > 0 ? static_cast<float>(1.0 / std::sqrt(ss)) : 0.f;
    for (float& v : out) v *= inv;
  }
}

void Decoder::Reset() {
  position_ = 0;
  branches_.active = false;  // an exploration an exception left open
  pool_valid_ = true;
  pool_pos_ = 0;
  pool_hist_len_ = 0;
  for (size_t k = 0; k < num_probes_; ++k) {
    pool_stats_[2 * k] = -1e30f;
    pool_stats_[2 * k + 1] = 0.f;
  }
  std::fill(pool_acc_.begin(), pool_acc_.end(), 0.f);
  std::fill(conv_.begin(), conv_.end(), 0.f);
  std::fill(tokens_.begin(), tokens_.end(), 0);
}

void Decoder::SetSinkLen(uint32_t n) {
  if (config_.kv_window == 0) return;  // no window: every position is visible anyway
  if (n > max_sink_len_)
    Fail<InvalidInput>("sink length {} exceeds the decoder's maximum {}", n, max_sink_len_);
  if (position_ > std::min(sink_len_, n))
    Fail<InvalidInput>(
        "sink length can only change while every fed position is a sink "
        "(position {}, sinks {} -> {})",
        position_, sink_len_, n);
  sink_len_ = n;
}

void Decoder::SaveRings(Snapshot* s) const {
  s->engram_ring = conv_;
  s->token_ring = tokens_;
  s->pool_stats = pool_stats_;
  s->pool_acc = pool_acc_;
}

void Decoder::LoadRings(const Snapshot& s) {
  conv_ = s.engram_ring;
  tokens_ = s.token_ring;
  pool_stats_ = s.pool_stats;
  pool_acc_ = s.pool_acc;
}

size_t Decoder::SlotsUsed() const { return std::min<size_t>(position_, capacity_); }

void Decoder::Save(Snapshot* s) const {
  s->path = config_.path;
  s->position = position_;
  s->sink_len = sink_len_;
  s->kv_window = config_.kv_window;
  s->capacity = capacity_;
  numerics_->SaveKv(SlotsUsed(), &s->kv);
  SaveRings(s);
}

void Decoder::Restore(const Snapshot& s) {
  const size_t used = std::min<size_t>(s.position, capacity_);
  if (s.path != config_.path)
    Fail<InvalidInput>("snapshot was made with {} numerics, the decoder uses {}",
                       NumericPathName(s.path), NumericPathName(config_.path));
  if (s.kv_window != config_.kv_window || s.capacity != capacity_ ||
      s.engram_ring.size() != conv_.size() || s.token_ring.size() != tokens_.size() ||
      s.pool_acc.size() != pool_acc_.size())
    Fail<InvalidInput>("snapshot does not belong to a decoder of this model and configuration");
  if (s.sink_len > max_sink_len_ && config_.kv_window != 0)
    Fail<InvalidInput>("snapshot sink length {} exceeds the decoder's maximum {}", s.sink_len,
                       max_sink_len_);
  if (!numerics_->RestoreKv(used, s.kv))
    Fail<InvalidInput>("snapshot KV cache does not match this decoder");
  position_ = s.position;
  sink_len_ = s.sink_len;
  branches_.active = false;  // an exploration an exception left open
  LoadRings(s);
  pool_valid_ = true;
  pool_pos_ = s.position;
  pool_hist_len_ = 0;
}

void Decoder::RewindPoolCalls(uint32_t position) {
  // fn 78: look for a forward call that started at the target position, newest first; found:
  // the cache goes back to it and the history keeps only the calls before it; an older start
  // (or none) on the way: invalid.
  if (pool_valid_ && position < pool_pos_) {
    pool_valid_ = false;
    for (size_t e = pool_hist_len_; e-- > 0;) {
      if (pool_hist_[e] == position) {
        pool_valid_ = true;
        pool_pos_ = position;
        pool_hist_len_ = e;
        break;
      }
      if (position > pool_hist_[e]) break;
    }
  }
}

void Decoder::Rewind(const Snapshot& s) {
  const bool valid = pool_valid_;
  const uint32_t pos = pool_pos_;
  const size_t len = pool_hist_len_;
  Restore(s);
  pool_valid_ = valid;
  pool_pos_ = pos;
  pool_hist_len_ = len;
  RewindPoolCalls(s.position);
}

void Decoder::CheckFeed(std::span<const int32_t> ids) const {
  const uint32_t V = geometry_.vocab;
  for (int32_t id : ids)
    if (id < 0 || static_cast<uint32_t>(id) >= V)
      Fail<InvalidInput>("token id {} is outside the vocabulary (size {})", id, V);
  if (config_.kv_window == 0 && position_ + ids.size() > capacity_)
    Fail<InvalidInput>("{} positions exceed the KV cache capacity {} (no window)",
                       position_ + ids.size(), capacity_);
}

void Decoder::StepEach(std::span<const int32_t> ids, std::span<float> all_logits) {
  const uint32_t V = geometry_.vocab;
  CheckFeed(ids);
  if (all_logits.size() != ids.size() * V)
    Fail<InvalidInput>("all-logits buffer has {} values, expected {}", all_logits.size(),
                       ids.size() * V);
  // With a window, writing position p >= sinks + W evicts p - W, which every earlier position of
  // the same pass would still see as a step of its own: a pass may only run up to sinks + W.
  // Passes of at most 8 tokens: a value's tokens are few, and the pass keeps every cell of its
  // tokens for the pooling (8 x 28 x 512 floats at the official geometry).
  constexpr uint64_t kMaxPass = 8;
  const bool blocks = numerics_->BlockMatchesSteps();
  const uint64_t wrap = config_.kv_window ? uint64_t{sink_len_} + config_.kv_window : UINT64_MAX;
  bool multi = false;
  for (size_t t0 = 0; t0 < ids.size();) {
    size_t n = 1;
    if (blocks && position_ + uint64_t{1} < wrap)
      n = static_cast<size_t>(std::min<uint64_t>(
          {ids.size() - t0, uint64_t{config_.max_batch}, kMaxPass, wrap - position_}));
    RunBlock(ids.data() + t0, n, all_logits.data() + t0 * V, 0, /*token_calls=*/true);
    multi = multi || n > 1;
    t0 += n;
  }
  if (multi) ReleaseBlockScratch();
}

void Decoder::BeginBranches(size_t count, size_t depth) {
  Branches& br = branches_;
  if (br.active) Fail<InvalidInput>("branches: an exploration is already under way");
  if (count == 0 || depth == 0)
    Fail<InvalidInput>("branches: {} branches of {} positions requested", count, depth);
  const size_t d = geometry_.d_model, sites = geometry_.engram_sites.size();
  if (count > br.width || depth > br.tokens || !br.conv) {
    // First use, or more / longer branches than the slots past the ring hold: grow them (the
    // ring's contents stay) and the branches' state buffers.
    const size_t W = std::max(br.width, count), T = std::max(br.tokens, depth);
    numerics_->ReserveSlots(capacity_ + W * T, capacity_);
    br.width = W;
    br.tokens = T;
    br.depth.assign(W, 0);
    br.ids.assign(W * T, 0);
    // Uninitialized: only the positions a branch feeds are written (and read).
    br.conv.reset(new float[std::max<size_t>(W * T * sites * d, 1)]);
    br.pool_stats.resize(W * pool_stats_.size());
    br.pool_acc.resize(W * pool_acc_.size());
    br.own.resize(std::max(size_t{config_.max_batch} * T, 2 * T));
  }
  br.limit = depth;
  br.base = position_;
  br.count = count;
  br.active = true;
  for (size_t b = 0; b < count; ++b) {
    br.depth[b] = 0;
    std::copy(pool_stats_.begin(), pool_stats_.end(),
              br.pool_stats.begin() + static_cast<std::ptrdiff_t>(b * pool_stats_.size()));
    std::copy(pool_acc_.begin(), pool_acc_.end(),
              br.pool_acc.begin() + static_cast<std::ptrdiff_t>(b * pool_acc_.size()));
  }
}

void Decoder::StepBranches(std::span<const uint32_t> branches, std::span<const int32_t> ids,
                           std::span<float> logits) {
  const uint32_t V = geometry_.vocab;
  Branches& br = branches_;
  if (!br.active) Fail<InvalidInput>("branches: StepBranches outside BeginBranches/EndBranches");
  if (branches.size() != ids.size() || logits.size() != ids.size() * V)
    Fail<InvalidInput>("branches: {} branches, {} ids and {} logits (vocab {})", branches.size(),
                       ids.size(), logits.size(), V);
  if (ids.empty()) return;
  for (int32_t id : ids)
    if (id < 0 || static_cast<uint32_t>(id) >= V)
      Fail<InvalidInput>("token id {} is outside the vocabulary (size {})", id, V);
  const uint32_t depth = branches[0] < br.count ? br.depth[branches[0]] : 0;
  for (size_t i = 0; i < branches.size(); ++i) {
    const uint32_t b = branches[i];
    if (b >= br.count || br.depth[b] != depth ||
        std::find(branches.begin(), branches.begin() + static_cast<std::ptrdiff_t>(i), b) !=
            branches.begin() + static_cast<std::ptrdiff_t>(i))
      Fail<InvalidInput>("branches: branch {} is not one of {} distinct branches at depth {}", b,
                         br.count, depth);
  }
  if (depth >= br.limit)
    Fail<InvalidInput>("branches: a branch holds at most {} positions", br.limit);
  if (config_.kv_window == 0 && br.base + depth + 1 > capacity_)
    Fail<InvalidInput>("{} positions exceed the KV cache capacity {} (no window)",
                       br.base + depth + 1, capacity_);
  const size_t T = br.tokens;
  for (size_t i = 0; i < branches.size(); ++i) br.ids[branches[i] * T + depth] = ids[i];
  // The branches' tokens in one call where the path computes a token the same in a call of
  // several as alone (ForwardNumerics::BlockMatchesSteps), else one call each.
  const size_t B = numerics_->BlockMatchesSteps() ? config_.max_batch : 1;
  for (size_t i0 = 0; i0 < branches.size(); i0 += B) {
    const size_t n = std::min(B, branches.size() - i0);
    RunBlock(ids.data() + i0, n, logits.data() + i0 * V, 0, false, branches.data() + i0);
  }
  for (uint32_t b : branches) ++br.depth[b];
}

void Decoder::EndBranches(int adopt) {
  Branches& br = branches_;
  if (!br.active) Fail<InvalidInput>("branches: EndBranches without BeginBranches");
  if (adopt >= static_cast<int>(br.count))
    Fail<InvalidInput>("branches: branch {} does not exist ({} began)", adopt, br.count);
  br.active = false;
  // The engine's calls: per branch a rewind to the branch point, then one call per token.
  for (size_t b = 0; b < br.count; ++b) {
    RewindPoolCalls(br.base);
    if (num_probes_ > 0)
      for (uint32_t k = 0; k < br.depth[b]; ++k) NotePoolCall(br.base + k, 1);
  }
  RewindPoolCalls(br.base);
  if (adopt >= 0) {
    // As if fed again: the branch's K/V into the ring slots of its positions, its engram and
    // token rings and pooling, position after its last token; the bookkeeping of one call per
    // token. In position order, so that later positions win where ring slots repeat.
    const size_t b = static_cast<size_t>(adopt), W = br.width;
    const size_t T = br.tokens, d = geometry_.d_model;
    const size_t sites = geometry_.engram_sites.size();
    const uint32_t count = br.depth[b];
    const KvRing ring = Ring();
    std::vector<uint32_t>& from = br.own;  // scratch: [count] branch slots, then [count] ring slots
    for (uint32_t k = 0; k < count; ++k) {
      from[k] = static_cast<uint32_t>(capacity_ + k * W + b);
      from[count + k] = static_cast<uint32_t>(ring.Slot(br.base + k));
    }
    numerics_->SaveSlots({from.data(), count}, &br.moved);
    numerics_->RestoreSlots({from.data() + count, count}, br.moved);
    for (uint32_t k = 0; k < count; ++k) {
      const uint32_t p = br.base + k;
      for (size_t s = 0; s < sites; ++s)
        std::memcpy(&conv_[(s * conv_ring_ + p % conv_ring_) * d],
                    &br.conv[((b * T + k) * sites + s) * d], d * 4);
      tokens_[p % token_ring_] = br.ids[b * T + k];
      if (num_probes_ > 0) NotePoolCall(p, 1);
    }
    std::copy_n(br.pool_stats.begin() + static_cast<std::ptrdiff_t>(b * pool_stats_.size()),
                pool_stats_.size(), pool_stats_.begin());
    std::copy_n(br.pool_acc.begin() + static_cast<std::ptrdiff_t>(b * pool_acc_.size()),
                pool_acc_.size(), pool_acc_.begin());
    position_ = br.base + count;
  }
  // The branches' memory leaves the resident set until the next exploration.
  uint32_t deepest = 0;
  for (size_t b = 0; b < br.count; ++b) deepest = std::max(deepest, br.depth[b]);
  numerics_->ReleaseSlots(capacity_, size_t{deepest} * br.width);
  ReleaseBlockScratch();
}

void Decoder::Prefill(std::span<const int32_t> ids, std::span<float> last_logits,
                      std::span<float> all_logits) {
  const uint32_t V = geometry_.vocab;
  CheckFeed(ids);
  if (!last_logits.empty() && last_logits.size() != V)
    Fail<InvalidInput>("logits buffer has {} values, vocab is {}", last_logits.size(), V);
  if (!all_logits.empty() && all_logits.size() != ids.size() * V)
    Fail<InvalidInput>("all-logits buffer has {} values, expected {}", all_logits.size(),
                       ids.size() * V);
  const size_t B = config_.max_batch;
  for (size_t t0 = 0; t0 < ids.size(); t0 += B) {
    const size_t n = std::min(B, ids.size() - t0);
    const bool last_block = t0 + n == ids.size();
    if (!all_logits.empty()) {
      RunBlock(ids.data() + t0, n, all_logits.data() + t0 * V, 0);
    } else if (last_block && !last_logits.empty()) {
      RunBlock(ids.data() + t0, n, last_logits.data(), n - 1);
    } else {
      RunBlock(ids.data() + t0, n, nullptr, n);
    }
  }
  if (!all_logits.empty() && !last_logits.empty() && !ids.empty())
    std::memcpy(last_logits.data(), all_logits.data() + (ids.size() - 1) * V, V * 4);
  if (ids.size() > 1) ReleaseBlockScratch();
}

void Decoder::ReleaseBlockScratch() {
  // Single-token steps (decoding) touch only the first token's share of every [B, ...] buffer;
  // a block's other shares (~2.3 MB at the official geometry) leave the resident set until the
  // next block, so they do not add to the peak while the KV ring fills (issue 8's memory).
  const size_t B = config_.max_batch;
  for (ScratchVector<float>* v : BlockBuffersOf(*this)) ReleaseTail(*v, v->size() / B);
  // [sites, B, d]: each site's first token stays.
  const size_t sites = geometry_.engram_sites.size();
  for (auto* v : {&eng_kk_, &eng_v_})
    for (size_t s = 0; s < sites; ++s) {
      const size_t share = v->size() / sites, token = share / B;
      ReleasePages(v->data() + s * share + token, (share - token) * sizeof(float));
    }
  numerics_->ReleaseBlockScratch();
}

Decoder::ScratchUse Decoder::BlockScratchUse() const {
  ScratchUse use;
  auto add = [&use](const ScratchVector<float>& v) {
    use.bytes += v.size() * sizeof(float);
    use.resident += ResidentBytes(v.data(), v.size() * sizeof(float));
  };
  for (const ScratchVector<float>* v : BlockBuffersOf(*this)) add(*v);
  add(eng_kk_);
  add(eng_v_);
  return use;
}

void Decoder::Project(const kernels::CqMatrix& m, const float* x, size_t n, size_t ldx,
                      size_t row_begin, size_t row_end, float* y, size_t ldy) {
  const ProjectJob job{&m, row_begin, row_end, y, ldy};
  numerics_->Project(x, n, ldx, {&job, 1});
}

void Decoder::Engram(size_t site, const int32_t* ids, size_t n, const uint32_t* branch_of) {
  const format::Geometry& g = geometry_;
  const EngramWeights& ew = w_->engram[site];
  const size_t d = g.d_model, sd = g.engram_sub_dim, S = g.engram_slots;
  const size_t eh = g.engram_heads_per_order(), edim = g.engram_dim();
  // e[t] = concatenated table rows picked by the hashed n-grams ending at each position.
  const size_t T = branches_.tokens, sites = g.engram_sites.size();
  const uint32_t base = branches_.base;
  // The token at position q of block token t: the block's, a branch's own, or the ring's.
  auto token_at = [&](size_t t, uint32_t q) {
    if (branch_of)
      return q >= base ? branches_.ids[branch_of[t] * T + (q - base)] : tokens_[q % token_ring_];
    return q >= position_ ? ids[q - position_] : tokens_[q % token_ring_];
  };
  for (size_t t = 0; t < n; ++t) {
    const uint32_t p = TokenPosition(t, branch_of);
    float* e = &eng_e_[t * edim];
    for (size_t oi = 0; oi < g.engram_orders.size(); ++oi) {
      const uint32_t order = g.engram_orders[oi];
      for (size_t hh = 0; hh < eh; ++hh) {
        const size_t k = oi * eh + hh;
        float* row = e + k * sd;
        if (p + 1 < order) {  // not enough history
          std::fill(row, row + sd, 0.f);
          continue;
        }
        uint32_t acc = kHashSeed * static_cast<uint32_t>(k + 1);
        for (uint32_t j = 0; j < order; ++j) {
          const auto tok = static_cast<uint32_t>(token_at(t, p - j));
          acc = (acc ^ tok) * kHashPrime;
        }
        acc ^= acc >> 15;
        const size_t slot = acc % S;
        kernels::CqDecodeRow(ew.tables.Row(k * S + slot, table_row_), 0, row, row_scratch_.data());
      }
    }
  }
  float* kk = &eng_kk_[site * config_.max_batch * d];
  const ProjectJob kv[] = {{&ew.key_proj, 0, d, kk, d},
                           {&ew.value_proj, 0, d, eng_vraw_.data(), d}};
  numerics_->Project(eng_e_.data(), n, edim, kv);
  // Causal depthwise conv over vraw with dilation c: v_p = sum_j taps[j] * vraw_{p - j*c}.
  float* ring = &conv_[site * conv_ring_ * d];
  float* v = &eng_v_[site * config_.max_batch * d];
  const size_t c = g.engram_conv_dilation;
  // Where the ring value of position q for block token t lives (a branch's own from its base).
  auto ring_at = [&](size_t t, size_t q) {
    if (branch_of && q >= base)
      return &branches_.conv[((branch_of[t] * T + (q - base)) * sites + site) * d];
    return ring + (q % conv_ring_) * d;
  };
  for (size_t t = 0; t < n; ++t) {
    const size_t p = TokenPosition(t, branch_of);
    float* stored = ring_at(t, p);
    std::memcpy(stored, &eng_vraw_[t * d], d * 4);
    numerics_->EngramRingValue(stored, d);
    float* vt = v + t * d;
    std::fill(vt, vt + d, 0.f);
    for (size_t j = 0; j < g.engram_conv_taps && j * c <= p; ++j) {
      const float* src = ring_at(t, p - j * c);
      const float* tap = &ew.taps[j * d];
      for (size_t i = 0; i < d; ++i) vt[i] = tap[i] * src[i] + vt[i];
    }
  }
}

// fn(t) for every token of a block, by the block's token parts (model::ForTokenParts): per-token
// work is independent (each token's operations run in the same order on whichever thread), so
// results do not depend on the thread count.
template <class Fn>
void Decoder::ForTokens(size_t n, const Fn& fn) {
  ForTokenParts(config_.threads > 1 ? pool_.get() : nullptr, n, [&](size_t t0, size_t t1) {
    for (size_t t = t0; t < t1; ++t) fn(t);
  });
}

// fn(t0, t1) over blocks of at most 16 tokens within each token part (the interleaved norms).
template <class Fn>
void Decoder::ForTokenBlocks(size_t n, const Fn& fn) {
  constexpr size_t kBlock = 16;
  ForTokenParts(config_.threads > 1 ? pool_.get() : nullptr, n, [&](size_t t0, size_t t1) {
    for (size_t b = t0; b < t1; b += kBlock) fn(b, std::min(t1, b + kBlock));
  });
}

void Decoder::NotePoolCall(uint32_t start, size_t n) {
  // A call that continues where the cache stands records its start (the oldest of kPoolHistory
  // dropped) and moves it on; a gap invalidates.
  if (pool_valid_ && start == pool_pos_) {
    if (pool_hist_len_ == kPoolHistory) {
      std::copy(pool_hist_.begin() + 1, pool_hist_.end(), pool_hist_.begin());
      --pool_hist_len_;
    }
    pool_hist_[pool_hist_len_++] = start;
    pool_pos_ = start + static_cast<uint32_t>(n);
  } else if (pool_valid_ && pool_pos_ < start + n) {
    pool_valid_ = false;
  }
}

void Decoder::RunBlock(const int32_t* ids, size_t n, float* logits, size_t logits_from,
                       bool token_calls, const uint32_t* branch_of) {
  const format::Geometry& g = geometry_;
  const Weights& w = *w_;
  const size_t d = g.d_model, nl = g.lanes, nd = nl * d, hd = g.head_dim;
  const size_t ad = g.attn_dim(), kvd = g.kv_dim(), hn = g.hada_n;
  const size_t ncoef = 2 * nl + nl * nl;
  const float c_hada = 1.0f / std::sqrt(static_cast<float>(hn));

  // x0 = sqrtf(d) * E[tok]; every lane starts as x0.
  const kernels::CqMatrix& embedding = numerics_->View(w.embedding);
  for (size_t t = 0; t < n; ++t) {
    float* x0 = &lanes_[t * nd];
    kernels::CqDecodeRow(embedding, static_cast<size_t>(ids[t]), x0, row_scratch_.data());
    for (size_t i = 0; i < d; ++i) x0[i] = embed_scale_ * x0[i];
    for (size_t l = 1; l < nl; ++l) std::memcpy(x0 + l * d, x0, d * 4);
  }
  // Pooling is an online softmax over the cells in the order they come: a call pools cell 0 of
  // its tokens, then cell 1 of them, and so on; calls of one token each pool token after token.
  // For those (token_calls) the block's cells are kept and pooled token-major at the end.
  const size_t cells_per_token = size_t{g.num_layers} + 1;
  const bool defer_pool = num_probes_ > 0 && token_calls && n > 1;
  if (defer_pool && step_cells_.size() < n * cells_per_token * d)
    step_cells_.resize(n * cells_per_token * d);
  auto pool = [&](size_t cell, const float* cells, size_t ld) {
    if (branch_of) {  // each token into its branch's state
      const size_t ns = pool_stats_.size(), na = pool_acc_.size();
      for (size_t t = 0; t < n; ++t)
        PoolCellsInto(&branches_.pool_stats[branch_of[t] * ns],
                      &branches_.pool_acc[branch_of[t] * na], ids + t, cells + t * ld, 1, ld);
      return;
    }
    if (!defer_pool) return PoolCells(ids, cells, n, ld);
    for (size_t t = 0; t < n; ++t)
      std::memcpy(&step_cells_[(t * cells_per_token + cell) * d], cells + t * ld, d * 4);
  };
  if (num_probes_ > 0) {
    if (branch_of) {
      // A branch pass's calls are recorded at EndBranches, as the engine makes them.
    } else if (token_calls) {
      for (size_t t = 0; t < n; ++t) NotePoolCall(position_ + static_cast<uint32_t>(t), 1);
    } else {
      NotePoolCall(position_, n);
    }
    pool(0, lanes_.data(), nd);  // cell 0: the scaled embedding
  }
  // RoPE angles depend only on the position: once per token for every head of every layer.
  for (size_t t = 0; t < n; ++t)
    kernels::RopeAngles(hd, rope_freqs_.data(), static_cast<float>(TokenPosition(t, branch_of)),
                        &rope_cs_[t * hd]);
  for (size_t s = 0; s < w.engram.size(); ++s) Engram(s, ids, n, branch_of);
  // A branch pass: each token's own slots of the positions from the branch point (BranchKv).
  BranchKv branch_kv;
  if (branch_of) {
    const uint32_t depth = branches_.depth[branch_of[0]];
    branch_kv = {branches_.base, branches_.own.data(), size_t{depth} + 1};
    for (size_t t = 0; t < n; ++t)
      for (uint32_t k = 0; k <= depth; ++k)
        branches_.own[t * (depth + 1) + k] =
            static_cast<uint32_t>(capacity_ + k * branches_.width + branch_of[t]);
  }

  for (size_t li = 0; li < g.num_layers; ++li) {
    const LayerWeights& lw = w.layers[li];
    const size_t lstar = li % nl;
    // mHC logits from nx = rms_unit(flatten(X)).
    ForTokenBlocks(n, [&](size_t t0, size_t t1) {
      kernels::RmsUnitRows(&lanes_[t0 * nd], nd, t1 - t0, nd, kEps, &nx_[t0 * nd], nd);
    });
    numerics_->MhcLogits(li, nx_.data(), n, coef_.data(), ncoef);
    // Lane mixing's P = Sinkhorn(A), A_ab = (a_res * logit_ab) + b_res_ab: needed only at the
    // layer's end. A block of at most kSideTokens tokens (a decode step) posts it as the pool's
    // side task, which a second thread runs beside this layer's attention and MLP; larger blocks
    // split it among the threads below. Per matrix the engine's order (NUMERICS.md §4.3.10;
    // kernels/vmath.h), a block's matrices together.
    const size_t nn = nl * nl;
    const float ares = w.a_res[li];
    auto sinkhorn = [&](size_t t0, size_t t1) {
      for (size_t t = t0; t < t1; ++t) {
        const float* c = &coef_[t * ncoef];
        for (size_t a2 = 0; a2 < nn; ++a2)
          sink_p_[t * nn + a2] = (ares * c[2 * nl + a2]) + w.b_res[li * nn + a2];
      }
      kernels_->sinkhorn(&sink_p_[t0 * nn], nl, t1 - t0, kSinkhornRounds,
                         &sink_scratch_[t0 * (nn + 2 * nl)]);
    };
    constexpr size_t kSideTokens = 16;
    const bool side_sinkhorn = config_.threads > 1 && n <= kSideTokens;
    const auto sinkhorn_all = [&] { sinkhorn(0, n); };
    // Joined below; should anything on the way throw, the guard joins before the task's captures
    // go out of scope.
    struct SideJoin {
      kernels::ChunkPool* pool;
      ~SideJoin() {
        if (pool) pool->Join();
      }
    } side_join{side_sinkhorn ? pool_.get() : nullptr};
    if (side_sinkhorn) pool_->Post(sinkhorn_all);

    const int site = g.engram_site_of_layer(static_cast<uint32_t>(li));
    ForTokens(n, [&](size_t t) {
      const float* c = &coef_[t * ncoef];
      const float* X = &lanes_[t * nd];
      // u = seq-sum over lanes of h_pre_j * X_j, h_pre_j = σ((±4) + ((a_pre * logit_j) + b_pre_j)).
      float* u = &u_[t * d];
      float hpre[64];
      for (size_t j = 0; j < nl; ++j)
        hpre[j] = kernels::Sigmoid((j == lstar ? 4.0f : -4.0f) +
                                   ((w.a_pre[li] * c[j]) + w.b_pre[li * nl + j]));
      kernels::LaneBlend(hpre, X, nl, d, u);
      float* bx = &bx_[t * d];
      if (site >= 0) {
        // α = 1 / (expf(-dot / sqrtf(d)) + 1), dot = seq-sum(rms_unit(u)_i * rms_unit(kk)_i).
        const float* kk = &eng_kk_[(site * config_.max_batch + t) * d];
        const float* v = &eng_v_[(site * config_.max_batch + t) * d];
        const float ru = kernels::InvRms(u, d, kEps), rk = kernels::InvRms(kk, d, kEps);
        float dot = 0.f;
        for (size_t i = 0; i < d; ++i) dot = dot + (ru * u[i]) * (rk * kk[i]);
        const float alpha =
            1.0f / (kernels::libm::Expf(-dot / std::sqrt(static_cast<float>(d))) + 1.0f);
        kernels::AddScaled(alpha, v, u, d, bx);
      } else {
        std::memcpy(bx, u, d * 4);
      }
    });
    ForTokenBlocks(n, [&](size_t t0, size_t t1) {
      kernels::ZcNormRowsStrided(&bx_[t0 * d], d, lw.norm_in.data(), t1 - t0, d, kEps, &h_[t0 * d],
                                 d);
    });

    // Attention: q, k, v, gate from the same input; per-head norms and RoPE; the path's KV.
    const ProjectJob qkvg[] = {{&lw.q_proj, 0, ad, q_.data(), ad},
                               {&lw.k_proj, 0, kvd, k_.data(), kvd},
                               {&lw.v_proj, 0, kvd, v_.data(), kvd},
                               {&lw.gate_proj, 0, ad, gate_.data(), ad}};
    numerics_->Project(h_.data(), n, d, qkvg);
    ForTokens(n, [&](size_t t) {
      const float* cs = &rope_cs_[t * hd];
      kernels::ZcNormRows(&q_[t * ad], lw.q_norm.data(), g.num_heads, hd, kEps, &q_[t * ad]);
      kernels::ZcNormRows(&k_[t * kvd], lw.k_norm.data(), g.num_kv_heads, hd, kEps, &k_[t * kvd]);
      for (size_t h = 0; h < g.num_heads; ++h) kernels::RopeRotate(&q_[t * ad + h * hd], hd, cs);
      for (size_t h = 0; h < g.num_kv_heads; ++h)
        kernels::RopeRotate(&k_[t * kvd + h * hd], hd, cs);
    });
    numerics_->Attention(li, Ring(), TokenPosition(0, branch_of), n, q_.data(), k_.data(),
                         v_.data(), o_.data(), branch_of ? &branch_kv : nullptr);
    // o = o * (1 / (expf(-g) + 1)), the exponentials as one array call per block of tokens.
    ForTokenBlocks(n, [&](size_t t0, size_t t1) {
      float* gt = &gate_[t0 * ad];
      const size_t count = (t1 - t0) * ad;
      kernels::Negate(gt, count, gt);
      kernels_->expf_array(gt, gt, count);
      kernels::GateMul(&o_[t0 * ad], gt, count);
    });
    Project(lw.out_proj, o_.data(), n, ad, 0, d, a_.data(), d);

    const float attn_gate = kernels::Sigmoid(lw.attn_gate);
    const float apost = w.a_post[li];
    // x = sg * ZCN(a, post_norm) + bx; z = ZCN(x, pre_hada) (the norms' sums interleaved across
    // the block's tokens).
    ForTokenBlocks(n, [&](size_t t0, size_t t1) {
      kernels::ZcNormRowsStrided(&a_[t0 * d], d, lw.post_norm.data(), t1 - t0, d, kEps, &a_[t0 * d],
                                 d);
      for (size_t t = t0; t < t1; ++t) {
        const float* a = &a_[t * d];
        const float* bx = &bx_[t * d];
        float* x = &x_[t * d];
        kernels::AddScaled(attn_gate, a, bx, d, x);
      }
      kernels::ZcNormRowsStrided(&x_[t0 * d], d, lw.pre_hada.data(), t1 - t0, d, kEps, &z_[t0 * hn],
                                 hn);
    });
    ForTokens(n, [&](size_t t) {
      const float* x = &x_[t * d];
      // Hadamard MLP: z = [ZCN(x) * d1, 0...]; WHT; t = (c_H * z) * d2; z = t / (expf(-t) + 1);
      // WHT; mlp = (c_H * z) * d3 (cropped to d).
      float* z = &z_[t * hn];
      kernels::MulInto(z, lw.d1.data(), d);
      std::fill(z + d, z + hn, 0.f);
      kernels::FwhtUnnormalized(z, hn);
      float* e = &silu_[t * hn];
      kernels::ScaleMulNeg(z, c_hada, lw.d2.data(), hn, e);
      kernels_->expf_array(e, e, hn);
      kernels::DivOnePlus(z, e, hn);
      kernels::FwhtUnnormalized(z, hn);
      // y = (x + mlp) - u.
      float* y = &y_[t * d];
      const float* u = &u_[t * d];
      kernels::MlpOut(x, z, c_hada, lw.d3.data(), u, d, y);
    });

    // Lane mixing: X'_a = seq-sum over b of P_ab * X_b, starting from y * h_post_a.
    if (side_sinkhorn) {
      pool_->Join();
      side_join.pool = nullptr;
    } else {
      ForTokenBlocks(n, sinkhorn);
    }
    ForTokens(n, [&](size_t t) {
      const float* c = &coef_[t * ncoef];
      const float* P = &sink_p_[t * nn];
      const float* y = &y_[t * d];
      const float* X = &lanes_[t * nd];
      float* Xn = &lanes_next_[t * nd];
      float hpost[64];
      for (size_t r = 0; r < nl; ++r) {
        // h_post = s + s, s = σ((r == l* ? -0.0 : -4.0) + ((a_post * logit_r) + b_post_r)).
        const float sp = kernels::Sigmoid((r == lstar ? -0.0f : -4.0f) +
                                          ((apost * c[nl + r]) + w.b_post[li * nl + r]));
        hpost[r] = sp + sp;
      }
      kernels::LaneMix(y, hpost, P, X, nl, d, Xn);
    });
    std::swap(lanes_, lanes_next_);
    if (num_probes_ > 0) {  // cell i+1: the lane mean after layer i
      for (size_t t = 0; t < n; ++t) kernels::LaneMean(&lanes_[t * nd], nl, d, &cell_[t * d]);
      pool(li + 1, cell_.data(), d);
    }
  }

  // Output: lane mean (seq-sum / n), final ZCN, tied embedding.
  if (logits && logits_from < n) {
    const size_t m = n - logits_from;
    for (size_t t = 0; t < m; ++t) {
      float* xf = &x_[t * d];
      kernels::LaneMean(&lanes_[(logits_from + t) * nd], nl, d, xf);
      kernels::ZcNorm(xf, w.final_norm.data(), d, kEps, xf);
    }
    Project(w.embedding, x_.data(), m, d, 0, g.vocab, logits, g.vocab);
  }
  if (defer_pool)
    for (size_t t = 0; t < n; ++t)
      PoolCells(ids + t, &step_cells_[t * cells_per_token * d], cells_per_token, d, 0);
  if (branch_of) return;  // the branches' tokens are theirs (StepBranches)
  // Token history for the next block's n-grams.
  for (size_t t = 0; t < n; ++t) tokens_[(position_ + t) % token_ring_] = ids[t];
  position_ += static_cast<uint32_t>(n);
}

}  // namespace needle::model
