// Canonical tensor order and geometry validation.
#include "format/layout.h"

#include <fmt/format.h>

#include <cmath>

#include "base/error.h"
#include "format/cact.h"

namespace needle::format {

const char* DTypeName(DType d) {
  switch (d) {
    case DType::kF16:
      return "FP16";
    case DType::kF32:
      return "FP32";
    case DType::kCQ:
      return "CQ";
    case DType::kRaw:
      return "RAW";
  }
  return "?";
}

const char* HeadName(HeadKind k) {
  return k == HeadKind::kContrastive ? "contrastive_head" : "confidence_head";
}

int Geometry::engram_site_of_layer(uint32_t layer) const {
  for (size_t s = 0; s < engram_sites.size(); ++s)
    if (engram_sites[s] == layer) return static_cast<int>(s);
  return -1;
}

namespace {
bool IsPow2(uint64_t x) { return x != 0 && (x & (x - 1)) == 0; }
constexpr uint32_t kMaxDim = 1u << 24;  // sanity bound on any single size (keeps products in u64)
}  // namespace

Geometry Geometry::FromHeader(const Header& h, const std::string& label) {
  auto check_range = [&](const char* field, uint32_t v, uint32_t lo, uint32_t hi) {
    if (v < lo || v > hi)
      Fail<FormatError>("{}: header field {} = {} is out of range [{}, {}]", label, field, v, lo,
                        hi);
  };
  Geometry g;
  check_range("vocab", h.vocab, 1, kMaxDim);
  check_range("d_model", h.d_model, 1, 65536);
  check_range("num_heads", h.num_heads, 1, 4096);
  check_range("num_kv_heads", h.num_kv_heads, 1, h.num_heads);
  check_range("num_layers", h.num_layers, 1, 4096);
  check_range("head_dim", h.head_dim, 2, 65536);
  check_range("mhc_lanes", h.mhc_lanes, 1, 64);
  check_range("num_engram_orders", h.num_engram_orders, 0, 4);
  check_range("num_engram_sites", h.num_engram_sites, 0, 4);
  // Fields that size the K/V cache, the RoPE table and loops: bounded before anything is
  // allocated (README "Limits").
  check_range("max_seq_len", h.max_seq_len, 1, kMaxSeqLen);
  check_range("kv_window", h.kv_window, 0, h.max_seq_len);
  if (h.kv_bits != kKvBits)
    Fail<FormatError>("{}: header field kv_bits = {} is not supported (K/V codes are {}-bit)",
                      label, h.kv_bits, kKvBits);
  if (!std::isfinite(h.rope_theta) || h.rope_theta < 1.f)
    Fail<FormatError>("{}: header field rope_theta = {} must be finite and >= 1", label,
                      h.rope_theta);
  // Entries past the used count of a 4-entry header array must be 0.
  auto check_unused = [&](const char* field, const auto& values, uint32_t used) {
    for (uint32_t i = used; i < 4; ++i)
      if (values[i] != 0)
        Fail<FormatError>("{}: header field {}[{}] = {} is unused (num_{} {}) and must be 0", label,
                          field, i, values[i], field, used);
  };
  check_unused("engram_orders", h.engram_orders, h.num_engram_orders);
  check_unused("engram_sites", h.engram_sites, h.num_engram_sites);
  check_range("engram_conv_taps", h.engram_conv_taps, 0, 64);
  check_range("engram_conv_dilation", h.engram_conv_dilation, 0, 64);
  for (uint32_t i = 0; i < h.num_engram_orders; ++i)
    if (h.engram_orders[i] < 1 || h.engram_orders[i] > 64)
      Fail<FormatError>("{}: engram_orders[{}] = {} is out of range [1, 64]", label, i,
                        h.engram_orders[i]);
  // K/V cache elements (keys and values, every layer) at max_seq_len positions.
  const uint64_t kv_elements =
      uint64_t{h.max_seq_len} * h.num_layers * h.num_kv_heads * h.head_dim * 2;
  if (kv_elements > kMaxKvElements)
    Fail<FormatError>(
        "{}: header geometry needs a K/V cache of {} values (max_seq_len {} x num_layers {} x "
        "num_kv_heads {} x head_dim {} x 2), more than the limit {}",
        label, kv_elements, h.max_seq_len, h.num_layers, h.num_kv_heads, h.head_dim,
        kMaxKvElements);
  if (h.num_heads % h.num_kv_heads != 0)
    Fail<FormatError>("{}: num_heads {} is not a multiple of num_kv_heads {}", label, h.num_heads,
                      h.num_kv_heads);
  if (h.head_dim % 2 != 0)
    Fail<FormatError>("{}: head_dim {} must be even (RoPE rotates half-split pairs)", label,
                      h.head_dim);
  if (!IsPow2(h.hada_n) || h.hada_n < h.d_model || h.hada_n >= 2ull * h.d_model)
    Fail<FormatError>("{}: hada_n {} must be the smallest power of two >= d_model {}", label,
                      h.hada_n, h.d_model);
  if (h.num_engram_sites > 0) {
    check_range("num_engram_orders", h.num_engram_orders, 1, 4);
    check_range("engram_slots", h.engram_slots, 1, kMaxDim);
    check_range("engram_sub_dim", h.engram_sub_dim, 1, 65536);
    check_range("engram_conv_taps", h.engram_conv_taps, 1, 64);
    check_range("engram_conv_dilation", h.engram_conv_dilation, 1, 64);
    check_range("num_engram_tables", h.num_engram_tables, h.num_engram_orders, 256);
    if (h.num_engram_tables % h.num_engram_orders != 0)
      Fail<FormatError>("{}: num_engram_tables {} is not a multiple of num_engram_orders {}", label,
                        h.num_engram_tables, h.num_engram_orders);
    for (uint32_t i = 0; i < h.num_engram_sites; ++i) {
      if (h.engram_sites[i] >= h.num_layers)
        Fail<FormatError>("{}: engram_sites[{}] = {} is not a layer (num_layers {})", label, i,
                          h.engram_sites[i], h.num_layers);
      for (uint32_t j = 0; j < i; ++j)
        if (h.engram_sites[j] == h.engram_sites[i])
          Fail<FormatError>("{}: engram site layer {} appears twice", label, h.engram_sites[i]);
    }
  }
  g.vocab = h.vocab;
  g.d_model = h.d_model;
  g.num_heads = h.num_heads;
  g.num_kv_heads = h.num_kv_heads;
  g.num_layers = h.num_layers;
  g.head_dim = h.head_dim;
  g.max_seq_len = h.max_seq_len;
  g.hada_n = h.hada_n;
  g.lanes = h.mhc_lanes;
  g.engram_slots = h.engram_slots;
  g.engram_sub_dim = h.engram_sub_dim;
  g.num_engram_tables = h.num_engram_tables;
  g.engram_conv_taps = h.engram_conv_taps;
  g.engram_conv_dilation = h.engram_conv_dilation;
  g.engram_orders.assign(h.engram_orders, h.engram_orders + h.num_engram_orders);
  g.engram_sites.assign(h.engram_sites, h.engram_sites + h.num_engram_sites);
  g.kv_window = h.kv_window;
  g.kv_bits = h.kv_bits;
  g.rope_theta = h.rope_theta;
  return g;
}

void Geometry::ToHeader(Header* h) const {
  h->kv_window = kv_window;
  h->kv_bits = kv_bits;
  h->vocab = vocab;
  h->d_model = d_model;
  h->num_heads = num_heads;
  h->num_kv_heads = num_kv_heads;
  h->num_layers = num_layers;
  h->head_dim = head_dim;
  h->max_seq_len = max_seq_len;
  h->hada_n = hada_n;
  h->mhc_lanes = lanes;
  h->engram_slots = engram_slots;
  h->engram_sub_dim = engram_sub_dim;
  h->num_engram_tables = num_engram_tables;
  h->engram_conv_taps = engram_conv_taps;
  h->engram_conv_dilation = engram_conv_dilation;
  h->num_engram_orders = static_cast<uint32_t>(engram_orders.size());
  for (int i = 0; i < 4; ++i)
    h->engram_orders[i] = i < (int)engram_orders.size() ? engram_orders[i] : 0;
  h->num_engram_sites = static_cast<uint32_t>(engram_sites.size());
  for (int i = 0; i < 4; ++i)
    h->engram_sites[i] = i < (int)engram_sites.size() ? engram_sites[i] : 0;
  h->rope_theta = rope_theta;
}

static const char* const kLayerNames[14] = {
    "norm_in",  "q_proj",    "k_proj",    "v_proj",   "q_norm", "k_norm", "gate_proj",
    "out_proj", "post_norm", "attn_gate", "pre_hada", "d1",     "d2",     "d3"};

const char* LayerTensorName(uint32_t i) { return i < 14 ? kLayerNames[i] : "?"; }
uint64_t TensorsPerLayer() { return 14; }

std::string LayerPrefix(uint32_t layer) { return fmt::format("layer{:02d}", layer); }

uint64_t CoreTensorCount(const Geometry& g) {
  return 1 + 14ull * g.num_layers + 6 + 3 + 4ull * g.engram_sites.size() + 1;
}

std::vector<Slot> CoreLayout(const Geometry& g) {
  std::vector<Slot> out;
  out.reserve(CoreTensorCount(g));
  auto mat = [&](std::string name, uint64_t r, uint64_t c) {
    out.push_back({std::move(name), SlotKind::kMatrix, 2, {r, c, 0, 0}});
  };
  auto vec = [&](std::string name, std::initializer_list<uint64_t> dims) {
    Slot s{std::move(name), SlotKind::kVector, static_cast<uint32_t>(dims.size()), {0, 0, 0, 0}};
    int i = 0;
    for (uint64_t d : dims) s.shape[i++] = d;
    out.push_back(std::move(s));
  };
  const uint64_t d = g.d_model, L = g.num_layers, n = g.lanes;
  mat("embedding", g.vocab, d);
  for (uint32_t i = 0; i < g.num_layers; ++i) {
    const std::string p = LayerPrefix(i) + ".";
    vec(p + "norm_in", {d});
    mat(p + "q_proj", g.attn_dim(), d);
    mat(p + "k_proj", g.kv_dim(), d);
    mat(p + "v_proj", g.kv_dim(), d);
    vec(p + "q_norm", {g.head_dim});
    vec(p + "k_norm", {g.head_dim});
    mat(p + "gate_proj", g.attn_dim(), d);
    mat(p + "out_proj", d, g.attn_dim());
    vec(p + "post_norm", {d});
    vec(p + "attn_gate", {1});
    vec(p + "pre_hada", {d});
    vec(p + "d1", {g.hada_n});
    vec(p + "d2", {g.hada_n});
    vec(p + "d3", {g.hada_n});
  }
  vec("mhc_a_pre", {L});
  vec("mhc_a_post", {L});
  vec("mhc_a_res", {L});
  vec("mhc_b_pre", {L, n});
  vec("mhc_b_post", {L, n});
  vec("mhc_b_res", {L, n, n});
  mat("mhc_phi_pre", L * n, n * d);
  mat("mhc_phi_post", L * n, n * d);
  mat("mhc_phi_res", L * n * n, n * d);
  for (size_t s = 0; s < g.engram_sites.size(); ++s) {
    const std::string p = fmt::format("engram{}.", s);
    mat(p + "tables", uint64_t{g.num_engram_tables} * g.engram_slots, g.engram_sub_dim);
    mat(p + "key_proj", d, g.engram_dim());
    mat(p + "value_proj", d, g.engram_dim());
    vec(p + "taps", {g.engram_conv_taps, d});
  }
  vec("final_norm", {d});
  return out;
}

}  // namespace needle::format
