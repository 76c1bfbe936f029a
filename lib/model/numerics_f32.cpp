// The f32 numeric path (numerics.h): upstream semantics (MODEL.md). Activations are rotated by
// the normalized Hadamard transform and multiplied with the codebook levels in f32; the KV cache
// holds f32; each position attends over its own window (sinks + the last W positions).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>

#include "base/pages.h"
#include "kernels/cq_matmul.h"
#include "kernels/ops.h"
#include "model/numerics.h"

namespace needle::model {

namespace {

size_t MaxInPad(const Weights& w) {
  size_t m = std::max({w.embedding.in_pad, w.phi_pre.in_pad, w.phi_post.in_pad, w.phi_res.in_pad});
  for (const auto& l : w.layers)
    m = std::max({m, l.q_proj.in_pad, l.k_proj.in_pad, l.v_proj.in_pad, l.gate_proj.in_pad,
                  l.out_proj.in_pad});
  for (const auto& e : w.engram)
    m = std::max({m, e.tables.m.in_pad, e.key_proj.in_pad, e.value_proj.in_pad});
  return m;
}

class F32Numerics final : public ForwardNumerics {
 public:
  explicit F32Numerics(const NumericsContext& ctx) : ctx_(ctx) {
    const format::Geometry& g = *ctx.geometry;
    const size_t kv = size_t{g.num_layers} * ctx.capacity * g.kv_dim();
    // Uninitialized: a slot is read only after its position wrote it, and pages never written
    // (the branch slots of a decoder that does not branch) stay out of the resident set.
    k_cache_.reset(new float[kv]);
    v_cache_.reset(new float[kv]);
    x_hat_.resize(ctx.max_batch * MaxInPad(*ctx.weights));
    scores_.resize(size_t{g.num_heads} * ctx.capacity);
  }

  NumericPath path() const override { return NumericPath::kF32; }

  void Project(const float* x, size_t n, size_t ldx, std::span<const ProjectJob> jobs) override {
    const kernels::CqMatrix& m0 = *jobs[0].m;
    for (const ProjectJob& j : jobs)
      if (j.m->cols != m0.cols || j.m->group != m0.group) {  // different transform: one at a time
        for (const ProjectJob& one : jobs) Project(x, n, ldx, {&one, 1});
        return;
      }
    kernels::CqTransformActivations(x, n, m0.cols, ldx, m0.group, m0.in_pad, x_hat_.data());
    const float* x_hat = x_hat_.data();
    const kernels::CqGemmFn gemm = ctx_.kernels->cq_gemm;
    size_t rows = 0;
    for (const ProjectJob& j : jobs) rows += j.row_end - j.row_begin;
    RunRowChunks(ctx_, jobs, rows * n * m0.in_pad, [&](const ProjectJob& j, size_t b, size_t e) {
      gemm(*j.m, x_hat, n, b, e, j.y + (b - j.row_begin), j.ldy);
    });
  }

  void MhcLogits(size_t li, const float* nx, size_t n, float* coef, size_t ldc) override {
    const Weights& w = *ctx_.weights;
    const size_t nl = ctx_.geometry->lanes;
    const ProjectJob phi[] = {{&w.phi_pre, li * nl, (li + 1) * nl, coef, ldc},
                              {&w.phi_post, li * nl, (li + 1) * nl, coef + nl, ldc},
                              {&w.phi_res, li * nl * nl, (li + 1) * nl * nl, coef + 2 * nl, ldc}};
    Project(nx, n, nl * ctx_.geometry->d_model, phi);
  }

  void EngramRingValue(float* /*vraw*/, size_t /*d*/) override {}  // f32 ring: unchanged

  // Tokens in order: each writes its K/V, then attends over [sinks] + [p - W + 1, p] (a ring
  // slot is only reused once the position it held is out of every later token's window).
  void Attention(size_t layer, const KvRing& ring, uint32_t pos0, size_t n, const float* q_all,
                 const float* k_all, const float* v_all, float* o_all,
                 const BranchKv* branches) override {
    const format::Geometry& g = *ctx_.geometry;
    const size_t hd = g.head_dim, KV = g.num_kv_heads, kvd = g.kv_dim();
    const size_t ad = g.attn_dim(), group = g.num_heads / KV;
    float* kc = &k_cache_[layer * ctx_.capacity * kvd];
    float* vc = &v_cache_[layer * ctx_.capacity * kvd];
    const float inv_sqrt_hd = 1.f / std::sqrt(static_cast<float>(hd));
    const uint32_t W = ring.window;
    // One kv head (and its query heads) per work item: it owns its slice of every cache slot.
    auto kv_head = [&](size_t kvh) {
      for (size_t t = 0; t < n; ++t) {
        // A branch pass: every token at pos0, positions from the branch point in its own slots.
        auto slot_of = [&](uint32_t pos) {
          return branches ? branches->Slot(ring, t, pos) : ring.Slot(pos);
        };
        const uint32_t p = branches ? pos0 : pos0 + static_cast<uint32_t>(t);
        const size_t slot = slot_of(p);
        std::memcpy(kc + slot * kvd + kvh * hd, &k_all[t * kvd + kvh * hd], hd * 4);
        std::memcpy(vc + slot * kvd + kvh * hd, &v_all[t * kvd + kvh * hd], hd * 4);
        // Visible positions: [0, sink_end) and [win_begin, p].
        uint32_t sink_end = 0, win_begin = 0;
        if (W != 0) {
          sink_end = std::min(ring.sinks, p + 1);
          win_begin = std::max(sink_end, p + 1 >= W ? p + 1 - W : 0u);
        }
        const size_t count = sink_end + (p + 1 - win_begin);
        for (size_t h = kvh * group; h < (kvh + 1) * group; ++h) {
          const float* q = &q_all[t * ad + h * hd];
          float* sc = &scores_[h * ctx_.capacity];
          size_t i = 0;
          for (uint32_t pp = 0; pp < sink_end; ++pp, ++i)
            sc[i] = kernels::Dot(q, kc + slot_of(pp) * kvd + kvh * hd, hd) * inv_sqrt_hd;
          for (uint32_t pp = win_begin; pp <= p; ++pp, ++i)
            sc[i] = kernels::Dot(q, kc + slot_of(pp) * kvd + kvh * hd, hd) * inv_sqrt_hd;
          kernels::Softmax(sc, count);
          float* o = &o_all[t * ad + h * hd];
          std::fill(o, o + hd, 0.f);
          i = 0;
          for (uint32_t pp = 0; pp < sink_end; ++pp, ++i)
            kernels::Axpy(sc[i], vc + slot_of(pp) * kvd + kvh * hd, o, hd);
          for (uint32_t pp = win_begin; pp <= p; ++pp, ++i)
            kernels::Axpy(sc[i], vc + slot_of(pp) * kvd + kvh * hd, o, hd);
        }
      }
    };
    const size_t work = n * std::min<size_t>(pos0 + n, ctx_.capacity) * g.num_heads * hd;
    if (ctx_.threads > 1 && KV > 1 && work >= (size_t{1} << 18)) {
      ctx_.pool->Run(KV, kv_head);
    } else {
      for (size_t h = 0; h < KV; ++h) kv_head(h);
    }
  }

  void SaveKv(size_t used, KvState* s) const override {
    const size_t kvd = ctx_.geometry->kv_dim(), L = ctx_.geometry->num_layers;
    s->k.resize(L * used * kvd);
    s->v.resize(L * used * kvd);
    s->kq.clear();
    s->vq.clear();
    s->k_scale.clear();
    s->v_scale.clear();
    if (used == 0) return;  // empty vectors: no element to take the address of (UBSan)
    for (size_t l = 0; l < L; ++l) {
      std::memcpy(&s->k[l * used * kvd], &k_cache_[l * ctx_.capacity * kvd], used * kvd * 4);
      std::memcpy(&s->v[l * used * kvd], &v_cache_[l * ctx_.capacity * kvd], used * kvd * 4);
    }
  }

  bool RestoreKv(size_t used, const KvState& s) override {
    const size_t kvd = ctx_.geometry->kv_dim(), L = ctx_.geometry->num_layers;
    if (used > ctx_.capacity || s.k.size() != L * used * kvd || s.v.size() != s.k.size())
      return false;
    if (used == 0) return true;  // nothing saved (see SaveKv)
    for (size_t l = 0; l < L; ++l) {
      std::memcpy(&k_cache_[l * ctx_.capacity * kvd], &s.k[l * used * kvd], used * kvd * 4);
      std::memcpy(&v_cache_[l * ctx_.capacity * kvd], &s.v[l * used * kvd], used * kvd * 4);
    }
    return true;
  }

  void SaveSlots(std::span<const uint32_t> slots, KvState* s) const override {
    const size_t kvd = ctx_.geometry->kv_dim(), L = ctx_.geometry->num_layers, n = slots.size();
    s->k.resize(L * n * kvd);
    s->v.resize(L * n * kvd);
    for (size_t l = 0; l < L; ++l)
      for (size_t i = 0; i < n; ++i) {
        const size_t from = (l * ctx_.capacity + slots[i]) * kvd, to = (l * n + i) * kvd;
        std::memcpy(&s->k[to], &k_cache_[from], kvd * 4);
        std::memcpy(&s->v[to], &v_cache_[from], kvd * 4);
      }
  }

  void RestoreSlots(std::span<const uint32_t> slots, const KvState& s) override {
    const size_t kvd = ctx_.geometry->kv_dim(), L = ctx_.geometry->num_layers, n = slots.size();
    for (size_t l = 0; l < L; ++l)
      for (size_t i = 0; i < n; ++i) {
        const size_t to = (l * ctx_.capacity + slots[i]) * kvd, from = (l * n + i) * kvd;
        std::memcpy(&k_cache_[to], &s.k[from], kvd * 4);
        std::memcpy(&v_cache_[to], &s.v[from], kvd * 4);
      }
  }

  void ReserveSlots(size_t capacity, size_t keep) override {
    const size_t old = ctx_.capacity;
    if (capacity <= old) return;
    const size_t L = ctx_.geometry->num_layers, kvd = ctx_.geometry->kv_dim();
    for (auto* cache : {&k_cache_, &v_cache_}) {
      std::unique_ptr<float[]> bigger(new float[L * capacity * kvd]);  // not zeroed (constructor)
      for (size_t l = 0; l < L; ++l)
        std::memcpy(&bigger[l * capacity * kvd], &(*cache)[l * old * kvd], keep * kvd * 4);
      *cache = std::move(bigger);
    }
    scores_.resize(scores_.size() / old * capacity);
    ctx_.capacity = capacity;
  }

  void ReleaseSlots(size_t first, size_t count) override {
    const size_t kvd = ctx_.geometry->kv_dim(), L = ctx_.geometry->num_layers;
    if (count == 0) return;
    for (size_t l = 0; l < L; ++l) {
      ReleasePages(&k_cache_[(l * ctx_.capacity + first) * kvd], count * kvd * 4);
      ReleasePages(&v_cache_[(l * ctx_.capacity + first) * kvd], count * kvd * 4);
    }
  }

  // Each token writes its K/V and attends in turn (per-position windows), and the f32 products
  // compute each token's chains alone: a call of n tokens is n steps.
  bool BlockMatchesSteps() const override { return true; }
  size_t KvBytesPerSlot() const override { return 2 * ctx_.geometry->kv_dim() * sizeof(float); }

  void ReleaseBlockScratch() override { ReleaseTail(x_hat_, x_hat_.size() / ctx_.max_batch); }

 private:
  NumericsContext ctx_;
  std::unique_ptr<float[]> k_cache_, v_cache_;  // [layers, capacity, kv_dim]
  std::vector<float> x_hat_;                    // [max_batch, max in_pad] transformed activations
  std::vector<float> scores_;                   // [num_heads, capacity]
};

}  // namespace

std::unique_ptr<ForwardNumerics> MakeF32Numerics(const NumericsContext& ctx) {
  return std::make_unique<F32Numerics>(ctx);
}

}  // namespace needle::model
