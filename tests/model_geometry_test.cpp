// The forward pass on geometries the fixtures do not cover (d_model 96, 5 query heads on 1 kv
// head, 3 lanes, other engram orders/sites, 2/3/4-bit and ternary matrices, group 32), checked
// against an independent dense f64 implementation of MODEL.md written here from the spec.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "base/fp16.h"
#include "format/cact.h"
#include "format/cact_writer.h"
#include "model/decoder.h"
#include "model/golden.h"
#include "quant/cq.h"

namespace {

using needle::format::CactFile;
using needle::format::Geometry;

constexpr uint32_t kGroup = 32;

// Bits of each matrix: every code width and ternary appear at least once.
uint32_t BitsFor(const std::string& name) {
  if (name.ends_with("q_proj")) return 3;
  if (name.ends_with("k_proj") || name == "embedding") return 4;
  if (name.ends_with("v_proj") || name.ends_with("value_proj")) return needle::quant::kTernaryBits;
  return 2;
}

Geometry OddGeometry() {
  Geometry g;
  g.vocab = 8192;  // the fixture tokenizer's vocabulary
  g.d_model = 96;
  g.num_heads = 5;
  g.num_kv_heads = 1;
  g.num_layers = 3;
  g.head_dim = 18;
  g.max_seq_len = 64;
  g.hada_n = 128;
  g.lanes = 3;
  g.engram_slots = 61;
  g.engram_sub_dim = 24;
  g.num_engram_tables = 4;  // 2 orders x 2 heads
  g.engram_conv_taps = 3;
  g.engram_conv_dilation = 2;
  g.engram_orders = {1, 3};
  g.engram_sites = {0, 2};
  g.kv_window = 0;
  g.kv_bits = 8;
  g.rope_theta = 10000.f;
  return g;
}

// Writes a random model with geometry g; the tokenizer blob is tiny.cact's.
std::vector<uint8_t> SynthesizeModel(const Geometry& g) {
  const CactFile tiny = CactFile::Open(std::string(NEEDLE_TEST_DATA) + "/models/tiny.cact");
  std::vector<float> codebooks(tiny.codebooks().begin(), tiny.codebooks().end());
  std::mt19937 rng(1234);
  std::normal_distribution<float> normal(0.f, 1.f);
  std::vector<std::vector<uint8_t>> blobs;
  std::vector<needle::format::TensorRecord> records;
  for (const auto& slot : needle::format::CoreLayout(g)) {
    needle::format::TensorRecord r;
    r.ndim = slot.ndim;
    uint64_t count = 1;
    for (uint32_t i = 0; i < slot.ndim; ++i) {
      r.shape[i] = static_cast<uint32_t>(slot.shape[i]);
      count *= slot.shape[i];
    }
    if (slot.kind == needle::format::SlotKind::kMatrix) {
      needle::quant::CqParams p;
      p.rows = slot.shape[0];
      p.cols = slot.shape[1];
      p.group = kGroup;
      p.record_bits = BitsFor(slot.name);
      const float scale = 1.f / std::sqrt(static_cast<float>(p.cols));
      std::vector<float> w(count);
      for (float& v : w) v = normal(rng) * scale;
      if (slot.name == "embedding")
        for (float& v : w) v *= 0.3f;
      const auto levels = needle::quant::Levels(codebooks, p.record_bits, p.group);
      blobs.push_back(needle::quant::Quantize(w, p, levels));
      r.dtype = needle::format::DType::kCQ;
      r.group = p.group;
      r.bits = p.record_bits;
    } else {
      // Vectors: norm scales and mHC parameters near 0, Hadamard diagonals near +-1.
      std::vector<uint8_t> b(count * 2);
      const bool diagonal =
          slot.name.ends_with(".d1") || slot.name.ends_with(".d2") || slot.name.ends_with(".d3");
      for (uint64_t i = 0; i < count; ++i) {
        float v = normal(rng) * (slot.name.ends_with("taps") ? 0.5f : 0.2f);
        if (diagonal) v = (i % 3 == 0 ? -1.f : 1.f) + 0.2f * normal(rng);
        const uint16_t h = needle::F32ToF16(v);
        b[2 * i] = static_cast<uint8_t>(h & 0xff);
        b[2 * i + 1] = static_cast<uint8_t>(h >> 8);
      }
      blobs.push_back(std::move(b));
      r.dtype = needle::format::DType::kF16;
    }
    records.push_back(r);
  }
  for (size_t i = 0; i < records.size(); ++i) records[i].data = blobs[i];
  records.push_back(needle::format::RecordOf(tiny, tiny.tokenizer_tensor()));
  needle::format::Header h{};
  g.ToHeader(&h);
  h.tag = needle::format::kTagNeedle2;
  return needle::format::SerializeCact(h, codebooks, records);
}

// ---- Dense f64 reference of MODEL.md -------------------------------------------------------

using Vec = std::vector<double>;

struct Dense {
  const CactFile& f;
  Vec Mat(const std::string& name) const {
    const auto& t = f.tensor(name);
    needle::quant::CqParams p;
    p.rows = t.rows();
    p.cols = t.cols();
    p.group = t.group;
    p.record_bits = t.bits;
    const auto levels = needle::quant::Levels(f.codebooks(), t.bits, t.group);
    const auto w = needle::quant::Dequantize(f.data(t), p, levels);
    return Vec(w.begin(), w.end());
  }
  Vec V(const std::string& name) const {
    const auto v = f.floats(f.tensor(name));
    return Vec(v.begin(), v.end());
  }
};

// y = W x for rows [r0, r0 + rows) of W [*, cols].
Vec MatVec(const Vec& W, size_t cols, size_t r0, size_t rows, const Vec& x) {
  Vec y(rows, 0.0);
  for (size_t r = 0; r < rows; ++r)
    for (size_t i = 0; i < cols; ++i) y[r] += W[(r0 + r) * cols + i] * x[i];
  return y;
}
double Sigmoid(double z) { return 1.0 / (1.0 + std::exp(-z)); }
Vec RmsUnit(const Vec& x) {
  double ss = 0;
  for (double v : x) ss += v * v;
  const double r = 1.0 / std::sqrt(ss / static_cast<double>(x.size()) + 1e-6);
  Vec y(x);
  for (double& v : y) v *= r;
  return y;
}
Vec Zcn(const Vec& x, const Vec& s) {
  Vec y = RmsUnit(x);
  for (size_t i = 0; i < y.size(); ++i) y[i] *= 1.0 + s[i];
  return y;
}
// x @ H_m (Sylvester, divided by sqrt(m)), explicit matrix.
Vec Hadamard(const Vec& x) {
  const size_t m = x.size();
  Vec y(m, 0.0);
  for (size_t j = 0; j < m; ++j)
    for (size_t i = 0; i < m; ++i) y[j] += x[i] * ((__builtin_popcountll(i & j) & 1) ? -1.0 : 1.0);
  for (double& v : y) v /= std::sqrt(static_cast<double>(m));
  return y;
}

// Logits after the last of `ids`, with window W (0 = none) and `sinks` pinned positions.
Vec DenseForward(const CactFile& f, const std::vector<int32_t>& ids, uint32_t W, uint32_t sinks) {
  const Geometry& g = f.geometry();
  const Dense D{f};
  const size_t d = g.d_model, n = g.lanes, L = g.num_layers, hd = g.head_dim;
  const size_t H = g.num_heads, KV = g.num_kv_heads, T = ids.size();
  const Vec E = D.Mat("embedding");
  const Vec a_pre = D.V("mhc_a_pre"), a_post = D.V("mhc_a_post"), a_res = D.V("mhc_a_res");
  const Vec b_pre = D.V("mhc_b_pre"), b_post = D.V("mhc_b_post"), b_res = D.V("mhc_b_res");
  const Vec phi_pre = D.Mat("mhc_phi_pre"), phi_post = D.Mat("mhc_phi_post");
  const Vec phi_res = D.Mat("mhc_phi_res");
  // Engram: kk and v per site and position (they depend on the tokens only).
  const size_t S = g.engram_slots, sd = g.engram_sub_dim, eh = g.engram_heads_per_order();
  std::vector<std::vector<Vec>> kk(g.engram_sites.size()), ev(g.engram_sites.size());
  for (size_t s = 0; s < g.engram_sites.size(); ++s) {
    const std::string p = "engram" + std::to_string(s) + ".";
    const Vec tables = D.Mat(p + "tables"), key = D.Mat(p + "key_proj");
    const Vec val = D.Mat(p + "value_proj"), taps = D.V(p + "taps");
    std::vector<Vec> vraw;
    for (size_t t = 0; t < T; ++t) {
      Vec e(g.engram_dim(), 0.0);
      for (size_t oi = 0; oi < g.engram_orders.size(); ++oi) {
        const uint32_t order = g.engram_orders[oi];
        for (size_t hh = 0; hh < eh; ++hh) {
          const size_t k = oi * eh + hh;
          if (t + 1 < order) continue;
          uint32_t acc = 0x9E3779B9u * static_cast<uint32_t>(k + 1);
          for (uint32_t j = 0; j < order; ++j)
            acc = (acc ^ static_cast<uint32_t>(ids[t - j])) * 0x01000193u;
          acc ^= acc >> 15;
          const size_t row = k * S + acc % S;
          for (size_t i = 0; i < sd; ++i) e[k * sd + i] = tables[row * sd + i];
        }
      }
      kk[s].push_back(MatVec(key, g.engram_dim(), 0, d, e));
      vraw.push_back(MatVec(val, g.engram_dim(), 0, d, e));
      Vec v(d, 0.0);
      for (size_t j = 0; j < g.engram_conv_taps; ++j) {
        if (j * g.engram_conv_dilation > t) break;
        const Vec& src = vraw[t - j * g.engram_conv_dilation];
        for (size_t i = 0; i < d; ++i) v[i] += taps[j * d + i] * src[i];
      }
      ev[s].push_back(v);
    }
  }
  std::vector<std::vector<Vec>> Kc(L), Vc(L);
  Vec logits;
  for (size_t t = 0; t < T; ++t) {
    Vec x0(d);
    for (size_t i = 0; i < d; ++i) x0[i] = E[ids[t] * d + i] * std::sqrt(static_cast<double>(d));
    std::vector<Vec> X(n, x0);
    for (size_t li = 0; li < L; ++li) {
      const std::string p = needle::format::LayerPrefix(static_cast<uint32_t>(li)) + ".";
      const size_t ls = li % n;
      Vec flat;
      for (const Vec& lane : X) flat.insert(flat.end(), lane.begin(), lane.end());
      const Vec nx = RmsUnit(flat);
      const Vec cpre = MatVec(phi_pre, n * d, li * n, n, nx);
      const Vec cpost = MatVec(phi_post, n * d, li * n, n, nx);
      const Vec cres = MatVec(phi_res, n * d, li * n * n, n * n, nx);
      Vec u(d, 0.0);
      for (size_t j = 0; j < n; ++j) {
        const double h = Sigmoid(a_pre[li] * cpre[j] + b_pre[li * n + j] + (j == ls ? 4.0 : -4.0));
        for (size_t i = 0; i < d; ++i) u[i] += h * X[j][i];
      }
      Vec x = u;
      const int site = g.engram_site_of_layer(static_cast<uint32_t>(li));
      if (site >= 0) {
        const Vec ru = RmsUnit(u), rk = RmsUnit(kk[site][t]);
        double dot = 0;
        for (size_t i = 0; i < d; ++i) dot += ru[i] * rk[i];
        const double alpha = Sigmoid(dot / std::sqrt(static_cast<double>(d)));
        for (size_t i = 0; i < d; ++i) x[i] += alpha * ev[site][t][i];
      }
      // Block.
      const Vec h = Zcn(x, D.V(p + "norm_in"));
      Vec q = MatVec(D.Mat(p + "q_proj"), d, 0, H * hd, h);
      Vec k = MatVec(D.Mat(p + "k_proj"), d, 0, KV * hd, h);
      const Vec v = MatVec(D.Mat(p + "v_proj"), d, 0, KV * hd, h);
      const Vec gate = MatVec(D.Mat(p + "gate_proj"), d, 0, H * hd, h);
      const Vec qn = D.V(p + "q_norm"), kn = D.V(p + "k_norm");
      auto norm_rope = [&](Vec& all, size_t heads, const Vec& s) {
        for (size_t hh = 0; hh < heads; ++hh) {
          Vec head(all.begin() + hh * hd, all.begin() + (hh + 1) * hd);
          head = Zcn(head, s);
          for (size_t j = 0; j < hd / 2; ++j) {
            const double fj = 1.0 / std::pow(static_cast<double>(g.rope_theta),
                                             2.0 * j / static_cast<double>(hd));
            const double a = static_cast<double>(t) * fj;
            all[hh * hd + j] = head[j] * std::cos(a) - head[j + hd / 2] * std::sin(a);
            all[hh * hd + j + hd / 2] = head[j + hd / 2] * std::cos(a) + head[j] * std::sin(a);
          }
        }
      };
      norm_rope(q, H, qn);
      norm_rope(k, KV, kn);
      Kc[li].push_back(k);
      Vc[li].push_back(v);
      Vec o(H * hd, 0.0);
      for (size_t hh = 0; hh < H; ++hh) {
        const size_t kvh = hh / (H / KV);
        std::vector<size_t> vis;
        for (size_t pp = 0; pp <= t; ++pp)
          if (W == 0 || t - pp < W || pp < sinks) vis.push_back(pp);
        Vec sc;
        double mx = -1e300;
        for (size_t pp : vis) {
          double s = 0;
          for (size_t i = 0; i < hd; ++i) s += q[hh * hd + i] * Kc[li][pp][kvh * hd + i];
          sc.push_back(s / std::sqrt(static_cast<double>(hd)));
          mx = std::max(mx, sc.back());
        }
        double tot = 0;
        for (double& s : sc) tot += (s = std::exp(s - mx));
        for (size_t a = 0; a < vis.size(); ++a)
          for (size_t i = 0; i < hd; ++i)
            o[hh * hd + i] += sc[a] / tot * Vc[li][vis[a]][kvh * hd + i];
      }
      for (size_t i = 0; i < o.size(); ++i) o[i] *= Sigmoid(gate[i]);
      Vec a = Zcn(MatVec(D.Mat(p + "out_proj"), H * hd, 0, d, o), D.V(p + "post_norm"));
      const double ag = Sigmoid(D.V(p + "attn_gate")[0]);
      for (size_t i = 0; i < d; ++i) x[i] += ag * a[i];
      Vec z = Zcn(x, D.V(p + "pre_hada"));
      z.resize(g.hada_n, 0.0);
      const Vec d1 = D.V(p + "d1"), d2 = D.V(p + "d2"), d3 = D.V(p + "d3");
      for (size_t i = 0; i < z.size(); ++i) z[i] *= d1[i];
      z = Hadamard(z);
      for (size_t i = 0; i < z.size(); ++i) {
        const double zz = d2[i] * z[i];
        z[i] = zz * Sigmoid(zz);
      }
      z = Hadamard(z);
      for (size_t i = 0; i < d; ++i) x[i] += d3[i] * z[i];
      Vec y(d);
      for (size_t i = 0; i < d; ++i) y[i] = x[i] - u[i];
      // Sinkhorn in the log domain, 20 rounds.
      Vec A(n * n);
      for (size_t i = 0; i < n * n; ++i) A[i] = a_res[li] * cres[i] + b_res[li * n * n + i];
      for (int round = 0; round < 20; ++round) {
        for (size_t r = 0; r < n; ++r) {
          double mx = -1e300, s = 0;
          for (size_t c = 0; c < n; ++c) mx = std::max(mx, A[r * n + c]);
          for (size_t c = 0; c < n; ++c) s += std::exp(A[r * n + c] - mx);
          for (size_t c = 0; c < n; ++c) A[r * n + c] -= mx + std::log(s);
        }
        for (size_t c = 0; c < n; ++c) {
          double mx = -1e300, s = 0;
          for (size_t r = 0; r < n; ++r) mx = std::max(mx, A[r * n + c]);
          for (size_t r = 0; r < n; ++r) s += std::exp(A[r * n + c] - mx);
          for (size_t r = 0; r < n; ++r) A[r * n + c] -= mx + std::log(s);
        }
      }
      std::vector<Vec> Xn(n, Vec(d, 0.0));
      for (size_t r = 0; r < n; ++r) {
        const double hp =
            2.0 * Sigmoid(a_post[li] * cpost[r] + b_post[li * n + r] + (r == ls ? 0.0 : -4.0));
        for (size_t i = 0; i < d; ++i) {
          double s = 0;
          for (size_t b = 0; b < n; ++b) s += std::exp(A[r * n + b]) * X[b][i];
          Xn[r][i] = s + hp * y[i];
        }
      }
      X = Xn;
    }
    if (t + 1 == T) {
      Vec xf(d, 0.0);
      for (size_t i = 0; i < d; ++i) {
        for (size_t l = 0; l < n; ++l) xf[i] += X[l][i];
        xf[i] /= static_cast<double>(n);
      }
      xf = Zcn(xf, D.V("final_norm"));
      logits = MatVec(E, d, 0, g.vocab, xf);
    }
  }
  return logits;
}

}  // namespace

TEST_CASE("odd geometry: forward pass equals a dense f64 reference", "[model][geometry]") {
  const CactFile file = CactFile::FromBytes(SynthesizeModel(OddGeometry()), "<odd geometry>");
  const needle::model::Model model(file);
  const uint32_t V = model.geometry().vocab;
  std::vector<int32_t> ids;
  for (int i = 0; i < 14; ++i) ids.push_back((i * 977 + 31) % 8192);
  for (const auto& [window, sinks] : {std::pair<uint32_t, uint32_t>{0, 0}, {5, 3}}) {
    const std::vector<double> expect = DenseForward(file, ids, window, sinks);
    needle::model::DecoderConfig cfg;
    cfg.path = needle::model::NumericPath::kF32;  // the dense reference is f32 semantics
    cfg.kv_window = window;
    cfg.sink_len = sinks;
    cfg.max_positions = 32;
    cfg.max_batch = 4;
    needle::model::Decoder dec(model, cfg);
    std::vector<float> got(V);
    dec.Prefill(ids, got);
    double max_diff = 0, max_ref = 0;
    for (size_t i = 0; i < V; ++i) {
      max_diff = std::max(max_diff, std::fabs(got[i] - expect[i]));
      max_ref = std::max(max_ref, std::fabs(expect[i]));
    }
    INFO("window " << window << " sinks " << sinks << ": max diff " << max_diff << ", max |logit| "
                   << max_ref);
    CHECK(max_ref > 0.1);
    CHECK(max_diff <= 1e-4 * max_ref + 1e-5);
  }
}
