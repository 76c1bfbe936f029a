// Needle 2 weights as views into a .cact file: CQ matrices stay in the mapping (kernels compute on
// the codes); only the small FP16 vectors are widened to f32 at load.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "format/cact.h"
#include "kernels/cq_matmul.h"

namespace needle::model {

// One decoder layer (MODEL.md "Block_i").
struct LayerWeights {
  kernels::CqMatrix q_proj;                         // [attn_dim, d]
  kernels::CqMatrix k_proj;                         // [kv_dim, d]
  kernels::CqMatrix v_proj;                         // [kv_dim, d]
  kernels::CqMatrix gate_proj;                      // [attn_dim, d]
  kernels::CqMatrix out_proj;                       // [d, attn_dim]
  std::vector<float> norm_in, post_norm, pre_hada;  // [d] ZCN scales (gain is 1 + s)
  std::vector<float> q_norm, k_norm;                // [head_dim]
  std::vector<float> d1, d2, d3;                    // [hada_n]
  float attn_gate = 0.f;  // the stored scalar (the block uses its sigmoid)
};

// A CQ table of which a token reads a few rows (the engram tables: 2.2 MB at the official
// geometry, 16 rows a token). The rows are copied from the file one at a time (CactFile::ReadAt:
// pread, no page of the mapping touched), so LoadWeights evicts the table's pages.
struct CqTableRows {
  const format::CactFile* file = nullptr;
  // The table's shape and levels; codes and norms locate rows in the file, never read through.
  kernels::CqMatrix m;

  size_t row_bytes() const { return m.row_bytes + 2 * m.groups_per_row; }  // codes + f16 norms
  // Row r copied into `buf` (row_bytes() bytes) as a one-row matrix over it. Throws IoError.
  kernels::CqMatrix Row(size_t r, std::span<uint8_t> buf) const;
};

// One engram site (MODEL.md step 3).
struct EngramWeights {
  uint32_t layer = 0;
  CqTableRows tables;            // [num_tables * slots, sub_dim], row t*slots + slot
  kernels::CqMatrix key_proj;    // [d, num_tables * sub_dim]
  kernels::CqMatrix value_proj;  // [d, num_tables * sub_dim]
  std::vector<float> taps;       // [taps, d]
};

// A probe head (MODEL.md "Probe heads").
struct HeadWeights {
  format::HeadKind kind = format::HeadKind::kContrastive;
  uint32_t num_probes = 0, out_dim = 0;
  std::vector<float> probes;  // [P, d]
  format::FloatView proj;     // [out, P*d], left in the file (1 MB as f32 at the official
                              // geometry, read only when the head is asked)
  std::vector<float> bias;    // [out]
};

struct Weights {
  kernels::CqMatrix embedding;  // [vocab, d], also the tied output projection
  std::vector<LayerWeights> layers;
  std::vector<float> a_pre, a_post, a_res;  // [L]
  std::vector<float> b_pre, b_post;         // [L, lanes]
  std::vector<float> b_res;                 // [L, lanes, lanes]
  kernels::CqMatrix phi_pre;                // [L*lanes, lanes*d]
  kernels::CqMatrix phi_post;               // [L*lanes, lanes*d]
  kernels::CqMatrix phi_res;                // [L*lanes*lanes, lanes*d]
  std::vector<EngramWeights> engram;        // one per site, in header order
  std::vector<float> final_norm;            // [d]
  std::vector<HeadWeights> heads;
};

// Kernel view of a CQ tensor of `file` (throws FormatError naming the tensor if it is not CQ).
kernels::CqMatrix CqMatrixOf(const format::CactFile& file, const format::TensorInfo& t);

// Builds the views; `file` must outlive the result. Throws FormatError naming the tensor when a
// matrix is not CQ or a shape does not match the geometry.
Weights LoadWeights(const format::CactFile& file);

// Bytes of weights one decoded token reads (codes and group norms of every projection, the LM head,
// the mHC φ rows: as int8 copies when `int8_phi`, the official path, else as CQ), the floor of
// memory traffic per token; a single table row (embedding, engram) is not counted.
uint64_t WeightBytesPerToken(const Weights& w, bool int8_phi);
// Int8 multiply-adds of one decoded token's weight products, the same matrices as
// WeightBytesPerToken: rows x in_pad per CQ product (the official path's group dots run over the
// padded 128-groups), rows x cols per int8 φ row set when `int8_phi`, else rows x in_pad. The
// compute floor per token, set against kernels::MacPeakFn's measured peak.
uint64_t CqMacsPerToken(const Weights& w, bool int8_phi);

}  // namespace needle::model
