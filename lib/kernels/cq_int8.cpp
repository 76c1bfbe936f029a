// Scalar reference of the integer CQ products (cq_int8.h): the bits every ISA version must give.
// Bit-exact code: built with -ffp-contract=off; the order of float operations is the contract.
#include "kernels/cq_int8.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "base/fp16.h"

namespace needle::kernels {

namespace {

// Unnormalized Walsh-Hadamard transform of 128 values, stages h = 1, 2, ..., 64.
void WhtUnnormalized128(float* v) {
  for (size_t h = 1; h < kI8Group; h *= 2)
    for (size_t b = 0; b < kI8Group; b += 2 * h)
      for (size_t i = b; i < b + h; ++i) {
        const float a = v[i], c = v[i + h];
        v[i] = a + c;
        v[i + h] = a - c;
      }
}

// The low byte of (int32_t)roundf(x) (half away from zero), without a libm call: x - trunc(x) is
// exact. NaN, +-inf and |x| >= 2^31 take x86's "integer indefinite" INT32_MIN, whose low byte is
// 0 (the SIMD quantizers of kernels/vmath.h give the same).
int8_t RoundToI8(float x) {
  if (!(std::fabs(x) < 0x1p31f)) return 0;
  int32_t t = static_cast<int32_t>(x);
  const float fraction = x - static_cast<float>(t);
  if (fraction >= 0.5f) ++t;
  if (fraction <= -0.5f) --t;
  return static_cast<int8_t>(t);
}

// The int8 weights of a row's group g (cb.q of its raw codes). A group of 128 codes starts on a
// byte boundary at any width; 2 and 4 bits are read a byte at a time.
void UnpackGroupI8(const uint8_t* row_codes, size_t g, uint32_t bits, const I8Codebook& cb,
                   int8_t* w) {
  const uint8_t* p = row_codes + g * kI8Group * bits / 8;
  if (bits == 2) {
    for (size_t k = 0; k < kI8Group / 4; ++k)
      for (uint32_t j = 0; j < 4; ++j) w[4 * k + j] = cb.q[(p[k] >> (2 * j)) & 3u];
  } else if (bits == 4) {
    for (size_t k = 0; k < kI8Group / 2; ++k) {
      w[2 * k] = cb.q[p[k] & 15u];
      w[2 * k + 1] = cb.q[p[k] >> 4];
    }
  } else {
    for (size_t k = 0; k < kI8Group; ++k) w[k] = cb.q[CqCodeAt(p, k, bits)];
  }
}

}  // namespace

float QuantizeI8(const float* v, size_t n, int8_t* q) {
  float amax = 0.f;
  for (size_t i = 0; i < n; ++i) amax = std::max(amax, std::fabs(v[i]));
  const float s = amax > 0.f ? amax / 127.0f : 1.0f;
  const float inv = 1.0f / s;
  for (size_t i = 0; i < n; ++i) q[i] = RoundToI8(v[i] * inv);
  return s;
}

I8Codebook MakeI8Codebook(const float* levels, size_t count) {
  I8Codebook cb;
  float amax = 0.f;
  for (size_t k = 0; k < count; ++k) amax = std::max(amax, std::fabs(levels[k]));
  cb.scale = amax > 0.f ? amax / 127.0f : 1.0f;
  for (size_t k = 0; k < count; ++k) cb.q[k] = RoundToI8(levels[k] / cb.scale);
  return cb;
}

void CqQuantizeI8Reference(const float* x, size_t n, size_t cols, size_t ldx, size_t in_pad,
                           uint32_t /*code_bits*/, int8_t* q, float* scales) {
  const float c128 = 1.0f / std::sqrt(static_cast<float>(kI8Group));
  const size_t groups = in_pad / kI8Group;
  float v[kI8Group];
  for (size_t t = 0; t < n; ++t) {
    const float* xt = x + t * ldx;
    for (size_t g = 0; g < groups; ++g) {
      const size_t base = g * kI8Group;
      const size_t len = base < cols ? std::min(kI8Group, cols - base) : 0;
      std::memcpy(v, xt + base, len * sizeof(float));
      std::fill(v + len, v + kI8Group, 0.f);
      WhtUnnormalized128(v);
      for (float& z : v) z = c128 * z;
      scales[t * groups + g] = QuantizeI8(v, kI8Group, q + t * in_pad + base);
    }
  }
}

void CqGemmI8Reference(const CqMatrix& m, const I8Codebook& cb, const I8Acts& acts,
                       size_t row_begin, size_t row_end, float* y, size_t ldy) {
  const size_t groups = m.groups_per_row;
  int8_t w[kI8Group];
  for (size_t r = row_begin; r < row_end; ++r) {
    const uint8_t* codes = m.codes + r * m.row_bytes;
    const uint8_t* norms = m.norms + r * groups * 2;
    // Each token's sum runs over the groups in order, kept in its output between groups; a
    // group's weights are unpacked once for all tokens.
    for (size_t t = 0; t < acts.n; ++t) y[t * ldy + (r - row_begin)] = 0.f;
    for (size_t g = 0; g < groups; ++g) {
      UnpackGroupI8(codes, g, m.code_bits, cb, w);
      const float norm = F16ToF32(LoadLE<uint16_t>(norms + 2 * g));
      for (size_t t = 0; t < acts.n; ++t) {
        const int32_t dot = DotI8Reference(w, acts.q + t * acts.in_pad + g * kI8Group, kI8Group);
        const float sx = acts.scales[t * groups + g];
        float& acc = y[t * ldy + (r - row_begin)];
        acc = norm * (cb.scale * (sx * static_cast<float>(dot))) + acc;
      }
    }
  }
}

size_t CqTileBytes(const CqMatrix& m, CqTileLayout layout) {
  if (m.group != kI8Group || m.rows == 0 || m.rows % kCqTileRows != 0) return 0;
  const bool tiled = layout == CqTileLayout::kRowDwords
                         ? m.code_bits == 2 || m.code_bits == 4
                         : layout == CqTileLayout::kByteColumns && m.code_bits == 2;
  if (!tiled) return 0;
  return m.rows / kCqTileRows * m.groups_per_row * CqTileBlockBytes(layout, m.code_bits);
}

void MakeCqTiles(const CqMatrix& m, CqTileLayout layout, uint8_t* out) {
  const size_t groups = m.groups_per_row;
  const size_t code_bytes = m.code_bits * kI8Group / 8;  // one row's codes of one group
  const size_t block_bytes = CqTileBlockBytes(layout, m.code_bits);
  const bool dwords = layout == CqTileLayout::kRowDwords;
  for (size_t t = 0; t < m.rows / kCqTileRows; ++t)
    for (size_t g = 0; g < groups; ++g) {
      uint8_t* block = out + (t * groups + g) * block_bytes;
      for (size_t p = 0; p < kCqTileRows; ++p) {
        const size_t r = t * kCqTileRows + p;
        const uint8_t* codes = m.codes + r * m.row_bytes + g * code_bytes;
        if (dwords) {  // code dword d of row p -> dword p of vector d (a model's worth: ~1 ms)
          for (size_t d = 0; d < code_bytes / 4; ++d)
            std::memcpy(block + d * 64 + 4 * p, codes + 4 * d, 4);
        } else {  // code byte k of row p -> byte p of vector k
          for (size_t k = 0; k < code_bytes; ++k) block[k * kCqTileRows + p] = codes[k];
        }
        const uint8_t* norm = m.norms + (r * groups + g) * 2;  // f16, little-endian
        uint8_t* norms = block + code_bytes * kCqTileRows;
        if (dwords) {
          std::memcpy(norms + 2 * p, norm, 2);
        } else {
          const float f = F16ToF32(LoadLE<uint16_t>(norm));
          std::memcpy(norms + p * sizeof(float), &f, sizeof(float));
        }
      }
    }
}

const char* CqTileLayoutName(CqTileLayout layout) {
  switch (layout) {
    case CqTileLayout::kByteColumns:
      return "byte-columns";
    case CqTileLayout::kRowDwords:
      return "row-dwords";
    default:
      return "none";
  }
}

int32_t DotI8Reference(const int8_t* a, const int8_t* b, size_t n) {
  int32_t s = 0;
  for (size_t i = 0; i < n; ++i) s += int32_t{a[i]} * int32_t{b[i]};
  return s;
}

uint64_t MacPeakReference(uint64_t rounds) {
  constexpr size_t kChains = 16;
  uint32_t acc[kChains] = {};  // unsigned: wraps without undefined behaviour
  int32_t a = 3;
  for (uint64_t r = 0; r < rounds; ++r)
    for (size_t j = 0; j < kChains; ++j) {
      __asm__ volatile("" : "+r"(a));  // opaque: no chain's product can be reused
      acc[j] +=
          static_cast<uint32_t>(int32_t{static_cast<int8_t>(a)} * static_cast<int32_t>(j + 1));
    }
  uint32_t sum = 0;
  for (uint32_t v : acc) sum ^= v;
  __asm__ volatile("" : : "r"(sum));  // the chains must not be optimized away
  return rounds * kChains;
}

void DotI8RowsReference(const int8_t* a, size_t lda, size_t rows, const int8_t* x, size_t ldx,
                        size_t nx, size_t n, int32_t* out, size_t ldo) {
  DotI8RowsVia<&DotI8Reference>(a, lda, rows, x, ldx, nx, n, out, ldo);
}

}  // namespace needle::kernels
