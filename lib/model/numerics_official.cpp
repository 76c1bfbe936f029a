// The official numeric path (numerics.h): the official engine's integer arithmetic, bit for bit
// (NUMERICS.md §3-§6). Bit-exact code: built with -ffp-contract=off; the order of every float
// operation below is part of its contract (NUMERICS.md §2).
//   - CQ products: int8 activations per 128-group after the unnormalized Hadamard transform, int8
//     codebooks, exact int32 group dots, groups accumulated in order (kernels/cq_int8.h).
//   - mHC: φ rows dequantized and re-quantized to int8 per row at construction; the input is one
//     int8 vector per token (one scale over lanes*d, no Hadamard).
//   - Engram ring: int8 per 32 values, read back dequantized.
//   - Attention: K (after RoPE) and V int8 per 64-block with an f32 scale; the query int8 per
//     head; int32 block dots summed in f32; musl expf softmax; V accumulated in f32 in visiting
//     order. A call writes all its K/V before attending, and position t of a call ending at c_end
//     sees the sinks, then max(sinks, c_end - W) .. t (the chunk-level window, NUMERICS.md §6).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <type_traits>
#include <unordered_map>
#include <utility>

#include "base/error.h"
#include "base/pages.h"
#include "kernels/attention_i8.h"
#include "kernels/cq_int8.h"
#include "model/numerics.h"

namespace needle::model {

namespace {

constexpr size_t kKvBlock = 64;           // K/V quantization block
constexpr size_t kBlockAttendTokens = 4;  // a call this long or longer attends as a block
constexpr size_t kRingBlock = 32;         // engram ring quantization block
constexpr float kTernaryC = 1.2240064f;

// An int8 copy of φ rows: q [rows, cols], one scale per row.
struct I8Rows {
  size_t rows = 0, cols = 0;
  std::vector<int8_t> q;
  std::vector<float> scale;
};

// Rows are independent: with a pool, chunks of rows run on its threads (the same bits).
I8Rows QuantizeRows(const kernels::CqMatrix& m, kernels::QuantizeI8Fn quantize,
                    kernels::ChunkPool* pool) {
  I8Rows r;
  r.rows = m.rows;
  r.cols = m.cols;
  r.q.resize(m.rows * m.cols);
  r.scale.resize(m.rows);
  const size_t chunks = pool && pool->threads() > 1 ? 4 * static_cast<size_t>(pool->threads()) : 1;
  auto run = [&](size_t c) {
    std::vector<float> row(m.cols), scratch(m.in_pad);
    for (size_t i = c * m.rows / chunks; i < (c + 1) * m.rows / chunks; ++i) {
      kernels::CqDecodeRow(m, i, row.data(), scratch.data());
      r.scale[i] = quantize(row.data(), m.cols, &r.q[i * m.cols]);
    }
  };
  if (chunks > 1)
    pool->Run(chunks, run);
  else
    run(0);
  return r;
}

// The three mHC φ matrices as int8 rows.
struct PhiRows {
  I8Rows pre, post, res;
};

// The matrices the path projects per token (the layers' and the engram's), copied once per model
// onto transparent huge pages: a token streams them all, and through the file's 4 KiB pages it
// paid a TLB miss per page. Matrices of whole tiles go as 16-row tiles (kernels/cq_int8.h: 2-bit,
// and 4-bit in the row-dword layout) when the kernel table reads a tile layout, the others as they
// are in the file (codes, then f16 norms); one buffer, and each matrix's twin (its view on the
// copy) by its address. The products read the twins only, so the file's pages of the copied bytes
// leave the resident set (a mapped file; touched again, they come back from the page cache): the
// copies replace them rather than add to them. The embedding (the LM head) gets a twin only when
// it has tiles (the 4-bit head's row-dword gemv: 7.4 -> 4.4 ns per row on an EPYC Zen 4); its
// file pages leave too, as its row lookups read the twin (View, kernels::CqDecodeRow).
struct TiledMatrices {
  HugePageBuffer bytes;
  HugePageBuffer embedding_tiles;
  std::unordered_map<const kernels::CqMatrix*, kernels::CqMatrix> twins;

  TiledMatrices(const Weights& w, kernels::CqTileLayout layout, const format::CactFile* file) {
    std::vector<const kernels::CqMatrix*> all;
    for (const LayerWeights& l : w.layers)
      for (const auto* m : {&l.q_proj, &l.k_proj, &l.v_proj, &l.gate_proj, &l.out_proj})
        all.push_back(m);
    for (const EngramWeights& e : w.engram) all.insert(all.end(), {&e.key_proj, &e.value_proj});
    constexpr size_t kAlign = 64;
    const auto align = [](size_t n) { return (n + kAlign - 1) / kAlign * kAlign; };
    const auto code_bytes = [](const kernels::CqMatrix& m) { return m.rows * m.row_bytes; };
    const auto norm_bytes = [](const kernels::CqMatrix& m) {
      return m.rows * m.groups_per_row * 2;
    };
    const auto copy_bytes = [&](const kernels::CqMatrix& m) {
      const size_t tiles = kernels::CqTileBytes(m, layout);
      return tiles ? align(tiles) : align(code_bytes(m)) + align(norm_bytes(m));
    };
    size_t total = 0;
    for (const kernels::CqMatrix* m : all) total += copy_bytes(*m);
    bytes = HugePageBuffer(total, /*zeroed=*/false);  // every byte read is written below
    size_t at = 0;
    for (const kernels::CqMatrix* m : all) {
      kernels::CqMatrix twin = *m;
      uint8_t* dst = bytes.data() + at;
      if (kernels::CqTileBytes(*m, layout) > 0) {
        kernels::MakeCqTiles(*m, layout, dst);
        twin.tiles = dst;
        twin.tile_layout = layout;
      } else {
        std::memcpy(dst, m->codes, code_bytes(*m));
        std::memcpy(dst + align(code_bytes(*m)), m->norms, norm_bytes(*m));
        twin.codes = dst;
        twin.norms = dst + align(code_bytes(*m));
      }
      twins.emplace(m, twin);
      at += copy_bytes(*m);
      if (file) {  // at once (the whole pages inside each range): the copies never add up
        file->EvictBytes(m->codes, code_bytes(*m));
        file->EvictBytes(m->norms, norm_bytes(*m));
      }
    }
    if (file) Evict(all, w.embedding, *file);  // then the edge pages the matrices share
    if (kernels::CqTileBytes(w.embedding, layout) > 0) {
      embedding_tiles = HugePageBuffer(kernels::CqTileBytes(w.embedding, layout), false);
      kernels::MakeCqTiles(w.embedding, layout, embedding_tiles.data());
      kernels::CqMatrix twin = w.embedding;
      twin.tiles = embedding_tiles.data();
      twin.tile_layout = layout;
      twins.emplace(&w.embedding, twin);
      if (file) {  // the products and the row lookups read the tiles
        file->EvictBytes(w.embedding.codes, w.embedding.rows * w.embedding.row_bytes);
        file->EvictBytes(w.embedding.norms, w.embedding.rows * w.embedding.groups_per_row * 2);
      }
    }
  }
  const kernels::CqMatrix& Of(const kernels::CqMatrix& m) const {
    const auto it = twins.find(&m);
    return it == twins.end() ? m : it->second;
  }

 private:
  // Drops the copied matrices' codes and norms from the resident set. Tensors lie next to each
  // other in the file, so the byte ranges are merged first (a gap between two is dropped too
  // unless the embedding, still read per token, has bytes in it): evicting tensor by tensor kept
  // every shared edge page.
  static void Evict(const std::vector<const kernels::CqMatrix*>& all,
                    const kernels::CqMatrix& embedding, const format::CactFile& file) {
    using Range = std::pair<const uint8_t*, const uint8_t*>;
    std::vector<Range> drop;
    const std::vector<Range> keep{
        {embedding.codes, embedding.codes + embedding.rows * embedding.row_bytes},
        {embedding.norms, embedding.norms + embedding.rows * embedding.groups_per_row * 2}};
    for (const kernels::CqMatrix* m : all) {
      drop.emplace_back(m->codes, m->codes + m->rows * m->row_bytes);
      drop.emplace_back(m->norms, m->norms + m->rows * m->groups_per_row * 2);
    }
    std::sort(drop.begin(), drop.end());
    auto kept_between = [&keep](const uint8_t* a, const uint8_t* b) {
      return std::any_of(keep.begin(), keep.end(),
                         [&](const Range& k) { return k.first < b && a < k.second; });
    };
    std::vector<Range> merged;
    for (const Range& r : drop) {
      if (!merged.empty() && !kept_between(merged.back().second, r.first))
        merged.back().second = std::max(merged.back().second, r.second);
      else
        merged.push_back(r);
    }
    for (const Range& r : merged) file.EvictBytes(r.first, static_cast<size_t>(r.second - r.first));
  }
};

// NUMERICS.md §3.1: the file codebook of the matrix's width as int8 (ternary: ±127, 0).
kernels::I8Codebook CodebookOf(const kernels::CqMatrix& m) {
  if (m.ternary) {
    kernels::I8Codebook cb;
    const float c = kTernaryC / std::sqrt(128.0f);
    cb.scale = c / 127.0f;
    cb.q[0] = 0;     // crumb 0 -> level 0
    cb.q[1] = 127;   // crumb 1 -> +c
    cb.q[2] = 0;     // unused crumb
    cb.q[3] = -127;  // crumb 3 -> -c
    return cb;
  }
  return kernels::MakeI8Codebook(m.levels, size_t{1} << m.code_bits);
}

// Hints the cache to fetch [p, p + bytes) (a no-op where the compiler has no prefetch).
void Prefetch(const int8_t* p, size_t bytes) {
  constexpr size_t kLine = 64;
  for (size_t i = 0; i < bytes; i += kLine) __builtin_prefetch(p + i, 0, 2);
}

void CheckGroup(const kernels::CqMatrix& m, const char* what) {
  if (m.group != kernels::kI8Group)
    Fail<InvalidInput>(
        "official numerics need CQ group {} (the engine hard-codes it); {} has group {} "
        "(use --numerics f32)",
        kernels::kI8Group, what, m.group);
}

class OfficialNumerics final : public ForwardNumerics {
 public:
  explicit OfficialNumerics(const NumericsContext& ctx) : ctx_(ctx) {
    const format::Geometry& g = *ctx.geometry;
    const Weights& w = *ctx.weights;
    if (g.kv_dim() % kKvBlock != 0 || g.head_dim % kKvBlock != 0)
      Fail<InvalidInput>("official numerics need head_dim a multiple of {} (head_dim {})", kKvBlock,
                         g.head_dim);
    if (g.d_model % kRingBlock != 0)
      Fail<InvalidInput>("official numerics need d_model a multiple of {} (d_model {})", kRingBlock,
                         g.d_model);
    size_t max_in_pad = 0;
    auto check = [&](const kernels::CqMatrix& m, const char* what) {
      CheckGroup(m, what);
      max_in_pad = std::max(max_in_pad, m.in_pad);
    };
    check(w.embedding, "embedding");
    check(w.phi_pre, "mhc_phi_pre");
    check(w.phi_post, "mhc_phi_post");
    check(w.phi_res, "mhc_phi_res");
    for (const LayerWeights& l : w.layers)
      for (const auto* m : {&l.q_proj, &l.k_proj, &l.v_proj, &l.gate_proj, &l.out_proj})
        check(*m, "a layer projection");
    for (const EngramWeights& e : w.engram)
      for (const auto* m : {&e.tables.m, &e.key_proj, &e.value_proj}) check(*m, "an engram tensor");
    // The same bits from every ISA's quantize_i8 (tested), so one copy serves every decoder.
    // The CQ φ tensors are not read again by this path: their pages leave the resident set.
    const std::function<PhiRows()> build = [&w, quantize = ctx.kernels->quantize_i8,
                                            pool = ctx.pool, file = ctx.file] {
      PhiRows rows{QuantizeRows(w.phi_pre, quantize, pool),
                   QuantizeRows(w.phi_post, quantize, pool),
                   QuantizeRows(w.phi_res, quantize, pool)};
      if (file)
        for (const char* name : {"mhc_phi_pre", "mhc_phi_post", "mhc_phi_res"})
          file->Evict(file->tensor(name));
      return rows;
    };
    phi_ = ctx.derived ? ctx.derived->Get<PhiRows>("official.phi_i8", build)
                       : std::make_shared<const PhiRows>(build());
    {
      const kernels::CqTileLayout layout = ctx.kernels->cq_i8_tiles;
      const std::function<TiledMatrices()> tile = [&w, layout, file = ctx.file] {
        return TiledMatrices(w, layout, file);
      };
      tiled_ = ctx.derived
                   ? ctx.derived->Get<TiledMatrices>(
                         std::string("official.weights.") + kernels::CqTileLayoutName(layout), tile)
                   : std::make_shared<const TiledMatrices>(tile());
    }

    const size_t B = ctx.max_batch, L = g.num_layers, kvd = g.kv_dim();
    act_q_.resize(B * max_in_pad);
    act_scale_.resize(B * (max_in_pad / kernels::kI8Group));
    mhc_q_.resize(B * size_t{g.lanes} * g.d_model);
    mhc_scale_.resize(B);
    // Not zeroed: a slot is always written before it is read, and untouched pages of the ring
    // cost neither time nor resident memory.
    kq_.reset(new int8_t[L * ctx.capacity * kvd]);
    vq_.reset(new int8_t[L * ctx.capacity * kvd]);
    k_scale_.reset(new float[L * ctx.capacity * (kvd / kKvBlock)]);
    v_scale_.reset(new float[L * ctx.capacity * (kvd / kKvBlock)]);
    qq_.resize(B * g.attn_dim());
    q_scale_.resize(B * g.num_heads);
    scores_.resize(std::min<size_t>(B, std::max(ctx.threads, 1)) * g.num_heads * ctx.capacity);
    visible_.resize(B * ctx.capacity);
  }

  NumericPath path() const override { return NumericPath::kOfficial; }

  const kernels::CqMatrix& View(const kernels::CqMatrix& m) const override {
    return tiled_ ? tiled_->Of(m) : m;
  }

  void Project(const float* x, size_t n, size_t ldx, std::span<const ProjectJob> jobs) override {
    const kernels::CqMatrix& m0 = *jobs[0].m;
    for (const ProjectJob& j : jobs)
      if (j.m->cols != m0.cols || j.m->code_bits != m0.code_bits) {  // one at a time
        for (const ProjectJob& one : jobs) Project(x, n, ldx, {&one, 1});
        return;
      }
    const size_t spt = m0.in_pad / kernels::kI8Group;  // scales per token
    ForTokenRanges(n, [&](size_t t0, size_t t1) {
      ctx_.kernels->cq_quantize_i8(x + t0 * ldx, t1 - t0, m0.cols, ldx, m0.in_pad, m0.code_bits,
                                   &act_q_[t0 * m0.in_pad], &act_scale_[t0 * spt]);
    });
    const kernels::I8Acts acts{act_q_.data(), act_scale_.data(), n, m0.in_pad};
    const kernels::CqGemmI8Fn gemm = ctx_.kernels->cq_gemm_i8;
    size_t rows = 0;
    for (const ProjectJob& j : jobs) rows += j.row_end - j.row_begin;
    // Codebooks per job, resolved before the parallel region.
    kernels::I8Codebook cbs[8];
    const size_t nj = std::min<size_t>(jobs.size(), 8);
    for (size_t k = 0; k < nj; ++k) cbs[k] = CodebookOf(*jobs[k].m);
    // A block with a lane tile (16 tokens) or more per thread splits by tokens, as every other
    // region of the block does (ForTokenParts): each thread reads the activations it quantized and
    // writes the outputs its next regions read, all in its own core's cache, and a 16-token tile
    // costs the same per token as a 32-token one. Each part's rows come in chunks, so a thread
    // done early takes chunks of the other's part. Smaller calls (a decode step) split by rows.
    constexpr size_t kLaneTile = 16, kChunksPerPart = 4;
    const size_t parts = ctx_.pool ? static_cast<size_t>(ctx_.pool->threads()) : 1;
    if (ctx_.threads > 1 && parts > 1 && n >= kLaneTile * parts &&
        jobs.size() <= RowChunks::kMaxJobs) {
      const RowChunks chunks(jobs, kChunksPerPart);
      ctx_.pool->RunPinned(chunks.count, [&](size_t part, size_t c) {
        const size_t t0 = TokenPartBegin(n, parts, part), t1 = TokenPartBegin(n, parts, part + 1);
        const kernels::I8Acts acts_part{&act_q_[t0 * m0.in_pad], &act_scale_[t0 * spt], t1 - t0,
                                        m0.in_pad};
        chunks.ForChunk(jobs, c, [&](size_t k, size_t b, size_t e) {
          const ProjectJob& j = jobs[k];
          gemm(tiled_ ? tiled_->Of(*j.m) : *j.m, cbs[k], acts_part, b, e,
               j.y + t0 * j.ldy + (b - j.row_begin), j.ldy);
        });
      });
      return;
    }
    RunRowChunks(ctx_, jobs, rows * n * m0.in_pad, [&](const ProjectJob& j, size_t b, size_t e) {
      const size_t k = static_cast<size_t>(&j - jobs.data());
      gemm(tiled_ ? tiled_->Of(*j.m) : *j.m, k < nj ? cbs[k] : CodebookOf(*j.m), acts, b, e,
           j.y + (b - j.row_begin), j.ldy);
    });
  }

  // logit_j = w_j * (xs * (float)Σ qφ_jk qx_k), one int8 quantization of nx per token; the φ
  // rows meet up to kTokens tokens' streams per pass (DotI8RowsFn).
  void MhcLogits(size_t li, const float* nx, size_t n, float* coef, size_t ldc) override {
    const size_t nl = ctx_.geometry->lanes, nd = nl * ctx_.geometry->d_model;
    const kernels::DotI8RowsFn dot_rows = ctx_.kernels->dot_i8_rows;
    constexpr size_t kTokens = 4, kRows = 64;
    ForTokenRanges(n, [&](size_t t0, size_t t1) {
      for (size_t t = t0; t < t1; ++t)
        mhc_scale_[t] = ctx_.kernels->quantize_i8(nx + t * nd, nd, &mhc_q_[t * nd]);
      for (size_t tq = t0; tq < t1; tq += kTokens) {
        const size_t nt = std::min(kTokens, t1 - tq);
        // The dots of up to kRows rows (count: lanes or lanes^2) for nt tokens at a time.
        auto rows = [&](const I8Rows& phi, size_t first, size_t count, size_t at) {
          int32_t I[kTokens * kRows];
          for (size_t j0 = 0; j0 < count; j0 += kRows) {
            const size_t m = std::min(kRows, count - j0);
            dot_rows(&phi.q[(first + j0) * nd], nd, m, &mhc_q_[tq * nd], nd, nt, nd, I, kRows);
            for (size_t t = 0; t < nt; ++t) {
              const float xs = mhc_scale_[tq + t];
              float* out = coef + (tq + t) * ldc + at + j0;
              for (size_t j = 0; j < m; ++j)
                out[j] = phi.scale[first + j0 + j] * (xs * static_cast<float>(I[t * kRows + j]));
            }
          }
        };
        rows(phi_->pre, li * nl, nl, 0);
        rows(phi_->post, li * nl, nl, nl);
        rows(phi_->res, li * nl * nl, nl * nl, 2 * nl);
      }
    });
    // The next layer's φ rows (n + n + n² rows of n·d bytes, 48 KiB at the official geometry)
    // are read right at its start with nothing to overlap the misses: ask for them now, so they
    // arrive in cache while this layer's attention and MLP run.
    if (li + 1 < ctx_.geometry->num_layers) {
      Prefetch(&phi_->pre.q[(li + 1) * nl * nd], nl * nd);
      Prefetch(&phi_->post.q[(li + 1) * nl * nd], nl * nd);
      Prefetch(&phi_->res.q[(li + 1) * nl * nl * nd], nl * nl * nd);
    }
  }

  // int8 per 32 values; the conv reads s * (float)q back.
  void EngramRingValue(float* vraw, size_t d) override {
    int8_t q[kRingBlock];
    for (size_t b = 0; b < d; b += kRingBlock) {
      const float s = ctx_.kernels->quantize_i8(vraw + b, kRingBlock, q);
      for (size_t i = 0; i < kRingBlock; ++i) vraw[b + i] = s * static_cast<float>(q[i]);
    }
  }

  void Attention(size_t layer, const KvRing& ring, uint32_t pos0, size_t n, const float* q_all,
                 const float* k_all, const float* v_all, float* o_all,
                 const BranchKv* branches) override {
    const format::Geometry& g = *ctx_.geometry;
    const size_t hd = g.head_dim, H = g.num_heads, KV = g.num_kv_heads, kvd = g.kv_dim();
    const size_t ad = g.attn_dim(), kvb = kvd / kKvBlock;
    const size_t cap = ctx_.capacity;
    int8_t* kq = &kq_[layer * cap * kvd];
    int8_t* vq = &vq_[layer * cap * kvd];
    float* ks = &k_scale_[layer * cap * kvb];
    float* vs = &v_scale_[layer * cap * kvb];
    // 1. The whole call's K/V into the ring, per 64-block (token ranges on the pool when no two
    // of the call's positions share a slot, as in every call no longer than the window, and in
    // a branch pass).
    // Token t's position and the slot of a position it sees.
    auto pos_of = [&](size_t t) { return branches ? pos0 : pos0 + static_cast<uint32_t>(t); };
    auto slot_of = [&](size_t t, uint32_t pos) {
      return branches ? branches->Slot(ring, t, pos) : ring.Slot(pos);
    };
    const bool distinct_slots = ring.window == 0 || n <= ring.window || branches;
    auto write_kv = [&](size_t t) {
      const size_t slot = slot_of(t, pos_of(t));
      for (size_t b = 0; b < kvb; ++b) {
        ks[slot * kvb + b] = ctx_.kernels->quantize_i8(&k_all[t * kvd + b * kKvBlock], kKvBlock,
                                                       &kq[slot * kvd + b * kKvBlock]);
        vs[slot * kvb + b] = ctx_.kernels->quantize_i8(&v_all[t * kvd + b * kKvBlock], kKvBlock,
                                                       &vq[slot * kvd + b * kKvBlock]);
      }
    };
    if (distinct_slots) {
      ForTokenRanges(n, [&](size_t t0, size_t t1) {
        for (size_t t = t0; t < t1; ++t) write_kv(t);
      });
    } else {
      for (size_t t = 0; t < n; ++t) write_kv(t);
    }
    // 2. Queries int8 per head; visible keys per token (sinks, then the chunk-level window; a
    // branch pass's tokens are calls of their own).
    const float inv_sqrt_hd = 1.0f / std::sqrt(static_cast<float>(hd));
    size_t counts[64];
    auto prepare = [&](size_t t) {
      for (size_t h = 0; h < H; ++h)
        q_scale_[t * H + h] =  // qse
            ctx_.kernels->quantize_i8(&q_all[t * ad + h * hd], hd, &qq_[t * ad + h * hd]) *
            inv_sqrt_hd;
      const uint32_t p = pos_of(t);
      const uint32_t c_end = branches ? p + 1 : pos0 + static_cast<uint32_t>(n);
      uint32_t* vis = &visible_[t * cap];
      size_t c = 0;
      if (ring.window == 0) {
        for (uint32_t pp = 0; pp <= p; ++pp) vis[c++] = static_cast<uint32_t>(slot_of(t, pp));
      } else {
        const uint32_t sink_end = std::min(ring.sinks, p + 1);
        for (uint32_t pp = 0; pp < sink_end; ++pp) vis[c++] = static_cast<uint32_t>(slot_of(t, pp));
        const uint32_t win = c_end > ring.window ? c_end - ring.window : 0u;
        for (uint32_t pp = std::max(ring.sinks, win); pp <= p; ++pp)
          vis[c++] = static_cast<uint32_t>(slot_of(t, pp));
      }
      counts[t] = c;
    };
    ForTokenRanges(n, [&](size_t t0, size_t t1) {
      for (size_t t = t0; t < t1; ++t) prepare(t);
    });
    // 3. Per token, all heads at once (kernels/attention_i8.h); tokens are independent work
    // items, each task with its own score scratch [count, H].
    const kernels::AttendI8Fn attend = ctx_.kernels->attend_i8;
    const kernels::I8KvView kv{kq, vq, ks, vs, KV, hd};
    auto token = [&](size_t t, float* scores) {
      const kernels::I8Queries q{&qq_[t * ad], &q_scale_[t * H], H};
      attend(q, kv, &visible_[t * cap], counts[t], ctx_.kernels->expf_array, scores,
             &o_all[t * ad]);
    };
    size_t work = 0;
    for (size_t t = 0; t < n; ++t) work += counts[t];
    work *= H * hd;
    const size_t parts = ctx_.pool ? static_cast<size_t>(ctx_.pool->threads()) : 1;
    const bool pooled = ctx_.threads > 1 && parts > 1 && n >= parts &&
                        parts <= scores_.size() / (H * cap) && work >= (size_t{1} << 16);
    // Contiguous token ranges with about equal numbers of visible keys (a token's cost).
    size_t bounds[65] = {0};
    const size_t nparts = pooled ? parts : 1;
    {
      size_t total = 0, seen = 0, k = 1;
      for (size_t t = 0; t < n; ++t) total += counts[t];
      for (size_t t = 0; t < n && k < nparts; ++t) {
        seen += counts[t];
        while (k < nparts && seen * nparts >= k * total) bounds[k++] = t + 1;
      }
      for (; k <= nparts; ++k) bounds[k] = n;
    }
    // The block kernel shares a call's work across its tokens (each token's visiting list a
    // prefix of the last one's: one call's sinks and window; a branch pass's lists differ).
    const kernels::AttendI8BlockFn block = ctx_.kernels->attend_i8_block;
    if (block && !branches && n >= kBlockAttendTokens) {
      size_t need = 0;
      for (size_t part = 0; part < nparts; ++part) {
        const kernels::I8QueryBlock qb{nullptr, nullptr, H, bounds[part + 1] - bounds[part],
                                       counts + bounds[part]};
        need = std::max(need, kernels::AttendI8BlockScratchBytes(qb, kv));
      }
      if (block_scratch_.size() < nparts * need) block_scratch_.resize(nparts * need);
      auto run = [&](size_t part) {
        const size_t t0 = bounds[part];
        const kernels::I8QueryBlock qb{&qq_[t0 * ad], &q_scale_[t0 * H], H, bounds[part + 1] - t0,
                                       counts + t0};
        // The longest list is the part's last token's.
        block(qb, kv, &visible_[(bounds[part + 1] - 1) * cap], ctx_.kernels->expf_array,
              &block_scratch_[part * need], &o_all[t0 * ad]);
      };
      if (pooled) {
        ctx_.pool->RunPinned(run);
      } else {
        run(0);
      }
    } else if (pooled) {
      // Range k on thread k (RunPinned), each with its own score scratch.
      ctx_.pool->RunPinned([&](size_t part) {
        for (size_t t = bounds[part]; t < bounds[part + 1]; ++t) token(t, &scores_[part * H * cap]);
      });
    } else if (ctx_.threads > 1 && KV > 1 && work >= (size_t{1} << 16) &&
               ctx_.kernels->attend_split_heads) {
      // Fewer tokens than threads (a decode step): the kv heads (with their query heads) are
      // split among the threads instead; each head's chains are unchanged, so are the bits.
      const size_t parts = std::min<size_t>(static_cast<size_t>(ctx_.threads), KV);
      const size_t group = H / KV, nb = hd / kKvBlock;
      ctx_.pool->Run(parts, [&](size_t part) {
        const size_t g0 = part * KV / parts, g1 = (part + 1) * KV / parts;
        kernels::I8KvView sub{kq + g0 * hd, vq + g0 * hd, ks + g0 * nb, vs + g0 * nb, g1 - g0, hd};
        sub.row = kvd;
        const size_t h0 = g0 * group, hn = (g1 - g0) * group;
        for (size_t t = 0; t < n; ++t) {
          const kernels::I8Queries q{&qq_[t * ad + h0 * hd], &q_scale_[t * H + h0], hn};
          attend(q, sub, &visible_[t * cap], counts[t], ctx_.kernels->expf_array,
                 &scores_[part * H * cap], &o_all[t * ad + h0 * hd]);
        }
      });
    } else {
      for (size_t t = 0; t < n; ++t) token(t, scores_.data());
    }
  }

  void SaveKv(size_t used, KvState* s) const override {
    const size_t kvd = ctx_.geometry->kv_dim(), L = ctx_.geometry->num_layers;
    const size_t kvb = kvd / kKvBlock, cap = ctx_.capacity;
    s->k.clear();
    s->v.clear();
    s->kq.resize(L * used * kvd);
    s->vq.resize(L * used * kvd);
    s->k_scale.resize(L * used * kvb);
    s->v_scale.resize(L * used * kvb);
    if (used == 0) return;  // empty vectors: no element to take the address of (UBSan)
    for (size_t l = 0; l < L; ++l) {
      std::memcpy(&s->kq[l * used * kvd], &kq_[l * cap * kvd], used * kvd);
      std::memcpy(&s->vq[l * used * kvd], &vq_[l * cap * kvd], used * kvd);
      std::memcpy(&s->k_scale[l * used * kvb], &k_scale_[l * cap * kvb], used * kvb * 4);
      std::memcpy(&s->v_scale[l * used * kvb], &v_scale_[l * cap * kvb], used * kvb * 4);
    }
  }

  bool RestoreKv(size_t used, const KvState& s) override {
    const size_t kvd = ctx_.geometry->kv_dim(), L = ctx_.geometry->num_layers;
    const size_t kvb = kvd / kKvBlock, cap = ctx_.capacity;
    if (used > cap || s.kq.size() != L * used * kvd || s.vq.size() != s.kq.size() ||
        s.k_scale.size() != L * used * kvb || s.v_scale.size() != s.k_scale.size())
      return false;
    if (used == 0) return true;  // nothing saved (see SaveKv)
    for (size_t l = 0; l < L; ++l) {
      std::memcpy(&kq_[l * cap * kvd], &s.kq[l * used * kvd], used * kvd);
      std::memcpy(&vq_[l * cap * kvd], &s.vq[l * used * kvd], used * kvd);
      std::memcpy(&k_scale_[l * cap * kvb], &s.k_scale[l * used * kvb], used * kvb * 4);
      std::memcpy(&v_scale_[l * cap * kvb], &s.v_scale[l * used * kvb], used * kvb * 4);
    }
    return true;
  }

  void SaveSlots(std::span<const uint32_t> slots, KvState* s) const override {
    const size_t kvd = ctx_.geometry->kv_dim(), L = ctx_.geometry->num_layers;
    const size_t kvb = kvd / kKvBlock, cap = ctx_.capacity, n = slots.size();
    s->kq.resize(L * n * kvd);
    s->vq.resize(L * n * kvd);
    s->k_scale.resize(L * n * kvb);
    s->v_scale.resize(L * n * kvb);
    for (size_t l = 0; l < L; ++l)
      for (size_t i = 0; i < n; ++i) {
        const size_t from = l * cap + slots[i], to = l * n + i;
        std::memcpy(&s->kq[to * kvd], &kq_[from * kvd], kvd);
        std::memcpy(&s->vq[to * kvd], &vq_[from * kvd], kvd);
        std::memcpy(&s->k_scale[to * kvb], &k_scale_[from * kvb], kvb * 4);
        std::memcpy(&s->v_scale[to * kvb], &v_scale_[from * kvb], kvb * 4);
      }
  }

  void RestoreSlots(std::span<const uint32_t> slots, const KvState& s) override {
    const size_t kvd = ctx_.geometry->kv_dim(), L = ctx_.geometry->num_layers;
    const size_t kvb = kvd / kKvBlock, cap = ctx_.capacity, n = slots.size();
    for (size_t l = 0; l < L; ++l)
      for (size_t i = 0; i < n; ++i) {
        const size_t to = l * cap + slots[i], from = l * n + i;
        std::memcpy(&kq_[to * kvd], &s.kq[from * kvd], kvd);
        std::memcpy(&vq_[to * kvd], &s.vq[from * kvd], kvd);
        std::memcpy(&k_scale_[to * kvb], &s.k_scale[from * kvb], kvb * 4);
        std::memcpy(&v_scale_[to * kvb], &s.v_scale[from * kvb], kvb * 4);
      }
  }

  void ReserveSlots(size_t capacity, size_t keep) override {
    const size_t old = ctx_.capacity;
    if (capacity <= old) return;
    const size_t L = ctx_.geometry->num_layers, kvd = ctx_.geometry->kv_dim();
    const size_t kvb = kvd / kKvBlock;
    auto grow = [&](auto& p, size_t per_slot) {
      using T = std::remove_reference_t<decltype(p[0])>;
      std::unique_ptr<T[]> bigger(new T[L * capacity * per_slot]);  // not zeroed (constructor)
      for (size_t l = 0; l < L; ++l)
        std::memcpy(&bigger[l * capacity * per_slot], &p[l * old * per_slot],
                    keep * per_slot * sizeof(T));
      p = std::move(bigger);
    };
    grow(kq_, kvd);
    grow(vq_, kvd);
    grow(k_scale_, kvb);
    grow(v_scale_, kvb);
    scores_.resize(scores_.size() / old * capacity);
    visible_.resize(visible_.size() / old * capacity);
    ctx_.capacity = capacity;
  }

  void ReleaseSlots(size_t first, size_t count) override {
    const size_t kvd = ctx_.geometry->kv_dim(), L = ctx_.geometry->num_layers;
    const size_t kvb = kvd / kKvBlock, cap = ctx_.capacity;
    if (count == 0) return;
    for (size_t l = 0; l < L; ++l) {
      ReleasePages(&kq_[(l * cap + first) * kvd], count * kvd);
      ReleasePages(&vq_[(l * cap + first) * kvd], count * kvd);
      ReleasePages(&k_scale_[(l * cap + first) * kvb], count * kvb * 4);
      ReleasePages(&v_scale_[(l * cap + first) * kvb], count * kvb * 4);
    }
  }

  // The int8 products give each token the same bits whatever the call's size (every ISA, against
  // the scalar reference); attention differs only by the chunk-level window, which StepEach avoids.
  bool BlockMatchesSteps() const override { return true; }
  size_t KvBytesPerSlot() const override {
    const size_t kvd = ctx_.geometry->kv_dim();
    return 2 * (kvd + 4 * (kvd / kKvBlock));
  }

  void ReleaseBlockScratch() override {
    const size_t B = ctx_.max_batch;  // each buffer is [B, per token]
    ReleaseTail(act_q_, act_q_.size() / B);
    ReleaseTail(mhc_q_, mhc_q_.size() / B);
    ReleaseTail(qq_, qq_.size() / B);
    ReleaseTail(visible_, visible_.size() / B);
    ReleaseTail(block_scratch_, 0);
  }

 private:
  // fn(t0, t1) over token ranges covering [0, n): on the pool when it has threads and the call
  // has tokens enough to share, else at once. Callers pass per-token work only (each token's
  // operations in the same order whichever thread runs them), so the bits do not depend on it.
  template <class Fn>
  void ForTokenRanges(size_t n, const Fn& fn) {
    ForTokenParts(ctx_.threads > 1 ? ctx_.pool : nullptr, n, fn);
  }

  NumericsContext ctx_;
  std::shared_ptr<const PhiRows> phi_;          // shared by the model's decoders (DerivedData)
  std::shared_ptr<const TiledMatrices> tiled_;  // the projected matrices' copies (DerivedData)
  // Scratch for max_batch tokens (B), never zeroed (written before it is read).
  ScratchVector<int8_t> act_q_;        // [B, max in_pad] quantized activations (kernel layout)
  ScratchVector<float> act_scale_;     // [B, max in_pad / 128]
  ScratchVector<int8_t> mhc_q_;        // [B, lanes * d]
  ScratchVector<float> mhc_scale_;     // [B]
  ScratchVector<int8_t> qq_;           // [B, attn_dim] queries int8 per head
  ScratchVector<float> q_scale_;       // [B, num_heads] query scale * 1/sqrtf(head_dim)
  ScratchVector<float> scores_;        // [tasks, capacity, num_heads] per attention task
  ScratchVector<uint32_t> visible_;    // [B, capacity] slots each token attends to, in order
  ScratchVector<char> block_scratch_;  // [parts, bytes] the block attention kernel's scratch
  // The KV ring: [layers, capacity, kv_dim] int8 and [layers, capacity, kv_dim / 64] scales.
  std::unique_ptr<int8_t[]> kq_, vq_;
  std::unique_ptr<float[]> k_scale_, v_scale_;
};

}  // namespace

std::unique_ptr<ForwardNumerics> MakeOfficialNumerics(const NumericsContext& ctx) {
  if (ctx.max_batch > 64)
    Fail<InvalidInput>("official numerics: at most 64 tokens per forward call ({} asked)",
                       ctx.max_batch);
  return std::make_unique<OfficialNumerics>(ctx);
}

const char* NumericPathName(NumericPath path) {
  return path == NumericPath::kOfficial ? "official" : "f32";
}

NumericPath ParseNumericPath(const std::string& name) {
  if (name == "official") return NumericPath::kOfficial;
  if (name == "f32") return NumericPath::kF32;
  Fail<UsageError>("--numerics {}: unknown numeric path (official, f32)", name);
}

}  // namespace needle::model
