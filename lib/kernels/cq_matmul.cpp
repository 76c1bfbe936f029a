// Scalar reference of the CQ products (cq_matmul.h): the order every other version is tested
// against.
#include "kernels/cq_matmul.h"

#include <algorithm>
#include <cstring>

#include "base/fp16.h"
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
  for (size_t g = 0; g < m.groups_per_row; ++g) {
    // levels[code] * norm, the same product per weight, taken from the group's own table.
    const float norm = F16ToF32(LoadLE<uint16_t>(norms + 2 * g));
    float scaled[16];
    for (size_t k = 0; k < levels; ++k) scaled[k] = m.levels[k] * norm;
    float* w = scratch + g * m.group;
    // 2- and 4-bit groups start on a byte (group >= 8): whole code bytes; 3-bit codes straddle
    // bytes (CqCodeAt).
    if (m.code_bits == 2 && m.group % 4 == 0) {
      const uint8_t* c = codes + g * m.group / 4;
      for (size_t j = 0; j < m.group / 4; ++j) {
        const uint32_t b = c[j];
        w[4 * j] = scaled[b & 3u];
        w[4 * j + 1] = scaled[(b >> 2) & 3u];
        w[4 * j + 2] = scaled[(b >> 4) & 3u];
        w[4 * j + 3] = scaled[b >> 6];
      }
    } else if (m.code_bits == 4 && m.group % 2 == 0) {
      const uint8_t* c = codes + g * m.group / 2;
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
