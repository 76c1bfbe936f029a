// Scalar reference of the CQ products (cq_matmul.h): the order every other version is tested
// against.
#include "kernels/cq_matmul.h"

#include <algorithm>
#include <cstring>

#include "base/fp16.h"
#include "kernels/cq_int8.h"
#include "kernels/fwht.h"
#include "kernels/ops.h"

namespace needle::kernels {

void CqTransformActivations(const float* x, size_t n, size_t cols, size_t ldx, size_t group,
                            size_t in_pad, float* x_hat) {
  for (size_t t = 0; t < n; ++t) {
    float* dst = x_hat + t * in_pad;
    std::memcpy(dst, x + t * ldx, cols * sizeof(float));
    std::fill(dst + cols, dst + in_pad, 0.f);
    for (size_t g = 0; g < in_pad; g += group) Fwht(dst + g, group);
  }
}

void CqDecodeRow(const CqMatrix& m, size_t r, float* out, float* scratch) {
  const uint8_t* codes = m.codes + r * m.row_bytes;
  const uint8_t* norms = m.norms + r * m.groups_per_row * 2;
  const size_t levels = size_t{1} << m.code_bits;
  // A matrix with tiles (cq_int8.h) is read from them: a path that keeps a copy in tiles may have
  // dropped the file's pages of its codes (the official path's LM head). The same bytes.
  const bool tiled = m.tiles != nullptr && m.tile_layout != CqTileLayout::kNone;
  const size_t group_bytes = m.group * m.code_bits / 8, p = r % kCqTileRows;
  for (size_t g = 0; g < m.groups_per_row; ++g) {
    float norm = 0.f;
    uint8_t gathered[4 * kI8Group / 8];
    const uint8_t* c = codes + g * group_bytes;  // 2- and 4-bit: the group's code bytes
    if (tiled) {
      const uint8_t* block = m.tiles + (r / kCqTileRows * m.groups_per_row + g) *
                                           CqTileBlockBytes(m.tile_layout, m.code_bits);
      const uint8_t* tile_norms = block + kCqTileRows * group_bytes;
      if (m.tile_layout == CqTileLayout::kRowDwords) {
        for (size_t d = 0; d < group_bytes / 4; ++d)
          std::memcpy(gathered + 4 * d, block + 64 * d + 4 * p, 4);
        norm = F16ToF32(LoadLE<uint16_t>(tile_norms + 2 * p));
      } else {
        for (size_t k = 0; k < group_bytes; ++k) gathered[k] = block[k * kCqTileRows + p];
        std::memcpy(&norm, tile_norms + 4 * p, sizeof(float));
      }
      c = gathered;
    } else {
      norm = F16ToF32(LoadLE<uint16_t>(norms + 2 * g));
    }
    // levels[code] * norm, the same product per weight, taken from the group's own table.
    float scaled[16];
    for (size_t k = 0; k < levels; ++k) scaled[k] = m.levels[k] * norm;
    float* w = scratch + g * m.group;
    // 2- and 4-bit groups start on a byte (group >= 8): whole code bytes; 3-bit codes straddle
    // bytes (CqCodeAt; never tiled).
    if (m.code_bits == 2 && m.group % 4 == 0) {
      for (size_t j = 0; j < m.group / 4; ++j) {
        const uint32_t b = c[j];
        w[4 * j] = scaled[b & 3u];
        w[4 * j + 1] = scaled[(b >> 2) & 3u];
        w[4 * j + 2] = scaled[(b >> 4) & 3u];
        w[4 * j + 3] = scaled[b >> 6];
      }
    } else if (m.code_bits == 4 && m.group % 2 == 0) {
      for (size_t j = 0; j < m.group / 2; ++j) {
        const uint32_t b = c[j];
        w[2 * j] = scaled[b & 15u];
        w[2 * j + 1] = scaled[b >> 4];
      }
    } else {
      for (size_t i = 0; i < m.group; ++i)
        w[i] = scaled[CqCodeAt(codes, g * m.group + i, m.code_bits)];
    }
    Fwht(w, m.group);
  }
  std::memcpy(out, scratch, m.cols * sizeof(float));
}

void CqGemmReference(const CqMatrix& m, const float* x_hat, size_t n, size_t row_begin,
                     size_t row_end, float* y, size_t ldy) {
  // Tokens are processed in tiles so a group's decoded weights are reused across the tile.
  constexpr size_t kTile = 8;
  float w[256];
  for (size_t r = row_begin; r < row_end; ++r) {
    const uint8_t* codes = m.codes + r * m.row_bytes;
    const uint8_t* norms = m.norms + r * m.groups_per_row * 2;
    for (size_t t0 = 0; t0 < n; t0 += kTile) {
      const size_t nt = std::min(kTile, n - t0);
      float acc[kTile] = {};
      for (size_t g = 0; g < m.groups_per_row; ++g) {
        const float norm = F16ToF32(LoadLE<uint16_t>(norms + 2 * g));
        float sum[kTile] = {};
        for (size_t i0 = 0; i0 < m.group; i0 += 256) {
          const size_t len = std::min<size_t>(256, m.group - i0);
          const size_t base = g * m.group + i0;
          for (size_t i = 0; i < len; ++i) w[i] = m.levels[CqCodeAt(codes, base + i, m.code_bits)];
          for (size_t t = 0; t < nt; ++t) {
            const float* xt = x_hat + (t0 + t) * m.in_pad + base;
            float s = sum[t];
            for (size_t i = 0; i < len; ++i) s += w[i] * xt[i];
            sum[t] = s;
          }
        }
        for (size_t t = 0; t < nt; ++t) acc[t] += norm * sum[t];
      }
      for (size_t t = 0; t < nt; ++t) y[(t0 + t) * ldy + (r - row_begin)] = acc[t];
    }
  }
}

}  // namespace needle::kernels
