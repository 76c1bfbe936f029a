// Needle 2 geometry (from the header) and the canonical, positional tensor order with our names.
//
// Order (FORMAT.md "Tensor order"): embedding; 14 records per layer; mHC scalars and phi
// projections; per engram site tables/key_proj/value_proj/taps; final_norm; optional probe heads
// (manifest, then probes/proj/bias per head); tokenizer (RAW, last).
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace needle::format {

struct Header;

// Limits on header fields that size memory or loops (README "Limits"); the official values are
// far below them. Sizes that tensors carry are also bounded by the file: every tensor's bytes
// must lie inside it.
inline constexpr uint32_t kMaxSeqLen = 65536;           // max_seq_len in [1, kMaxSeqLen]
inline constexpr uint32_t kKvBits = 8;                  // the only kv_bits value (int8 K/V)
inline constexpr uint64_t kMaxKvElements = 1ull << 28;  // max_seq_len*layers*kv_dim*2

enum class DType : uint8_t { kF16 = 1, kF32 = 2, kCQ = 3, kRaw = 4 };
const char* DTypeName(DType d);  // "FP16", "FP32", "CQ", "RAW"

enum class HeadKind : uint32_t { kContrastive = 1, kConfidence = 2 };
const char* HeadName(HeadKind k);  // "contrastive_head", "confidence_head"

// Model geometry, validated and with derived sizes. All sizes in elements.
struct Geometry {
  uint32_t vocab = 0, d_model = 0, num_heads = 0, num_kv_heads = 0, num_layers = 0;
  uint32_t head_dim = 0, max_seq_len = 0, hada_n = 0, lanes = 0;
  uint32_t engram_slots = 0, engram_sub_dim = 0, num_engram_tables = 0;
  uint32_t engram_conv_taps = 0, engram_conv_dilation = 0;
  std::vector<uint32_t> engram_orders;  // e.g. {2, 3}
  std::vector<uint32_t> engram_sites;   // zero-based layer indices, e.g. {2, 15}
  uint32_t kv_window = 0, kv_bits = 0;
  float rope_theta = 0.f;

  uint32_t attn_dim() const { return num_heads * head_dim; }
  uint32_t kv_dim() const { return num_kv_heads * head_dim; }
  uint32_t engram_heads_per_order() const {
    return engram_orders.empty() ? 0
                                 : num_engram_tables / static_cast<uint32_t>(engram_orders.size());
  }
  uint32_t engram_dim() const { return num_engram_tables * engram_sub_dim; }
  // Index of layer `layer` in engram_sites, or -1.
  int engram_site_of_layer(uint32_t layer) const;

  // Validates the header's geometry; throws FormatError("<label>: header field ...").
  static Geometry FromHeader(const Header& h, const std::string& label);
  void ToHeader(Header* h) const;  // inverse (tag, num_tensors and codebook_len left alone)
};

// How a tensor's dtype is constrained at its position.
enum class SlotKind : uint8_t {
  kMatrix,  // numeric 2-D weight: CQ in exporter files (FP16/FP32 accepted)
  kVector,  // small numeric tensor: FP16 in exporter files (FP32 accepted)
  kRaw,     // tokenizer blob
};

// Expected tensor at one position of the canonical order.
struct Slot {
  std::string name;
  SlotKind kind;
  uint32_t ndim;
  std::array<uint64_t, 4> shape;  // 0 in a dim = taken from the file (probe head sizes)
};

// Count of tensors from `embedding` through `final_norm` for this geometry.
uint64_t CoreTensorCount(const Geometry& g);
uint64_t TensorsPerLayer();  // 14

// The canonical order through final_norm (no heads, no tokenizer).
std::vector<Slot> CoreLayout(const Geometry& g);

// Name of the i-th of 14 per-layer tensors: "norm_in", "q_proj", ...
const char* LayerTensorName(uint32_t i);

std::string LayerPrefix(uint32_t layer);  // "layer03"

}  // namespace needle::format
