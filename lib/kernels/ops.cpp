// Scalar implementations of the small vector operations in ops.h.
#include "kernels/ops.h"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace needle::kernels {

// Vector clones of the element-wise chains: GCC emits one copy per target and an ifunc resolver
// picks the best at load time. No reassociation is involved (each element is computed on its
// own), and the library's -ffp-contract=off keeps multiplies and adds apart in every clone. GCC
// only: Clang 14 (the sanitizer and fuzz builds) emits a single function compiled for the first
// target (AVX-512) with no resolver, an illegal instruction on CPUs without AVX-512.
#if defined(NEEDLE_X86) && defined(__GNUC__) && !defined(__clang__) && \
    !defined(__SANITIZE_ADDRESS__) && !defined(__EMSCRIPTEN__)
#define NEEDLE_VECTOR_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define NEEDLE_VECTOR_CLONES
#endif

float Dot(const float* a, const float* b, size_t n) {
  // Eight interleaved partial sums (element i goes to sum i % 8), then combined pairwise: a fixed
  // order the compiler can vectorize on any ISA without changing the result.
  float p[8] = {};
  size_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (size_t j = 0; j < 8; ++j) p[j] += a[i + j] * b[i + j];
  for (size_t j = 0; i < n; ++i, ++j) p[j] += a[i] * b[i];
  return ((p[0] + p[4]) + (p[1] + p[5])) + ((p[2] + p[6]) + (p[3] + p[7]));
}

float SumSquares(const float* x, size_t n) {
  float ss = 0.f;
  for (size_t i = 0; i < n; ++i) ss = ss + x[i] * x[i];
  return ss;
}

float InvRms(const float* x, size_t n, float eps) {
  return 1.0f / std::sqrt(SumSquares(x, n) / static_cast<float>(n) + eps);
}

void RmsUnit(const float* x, size_t n, float eps, float* out) {
  const float r = InvRms(x, n, eps);
  for (size_t i = 0; i < n; ++i) out[i] = r * x[i];
}

void ZcNorm(const float* x, const float* scale, size_t n, float eps, float* out) {
  const float r = InvRms(x, n, eps);
  for (size_t i = 0; i < n; ++i) out[i] = r * (x[i] * (scale[i] + 1.0f));
}

namespace {

// ss[r] = sequential sum of squares of row r, for M rows at once (a fixed count, so the M chains
// live in registers and overlap).
template <size_t M>
void SumSquaresRows(const float* x, size_t ldx, size_t n, float* out) {
  float ss[M] = {};
  for (size_t i = 0; i < n; ++i)
    for (size_t r = 0; r < M; ++r) ss[r] = ss[r] + x[r * ldx + i] * x[r * ldx + i];
  for (size_t r = 0; r < M; ++r) out[r] = ss[r];
}

// The sums of 8 rows: 8 chains as the lanes of two 4-float vectors (GCC / Clang vector
// extensions), fed 4 x 4 blocks turned so that each vector holds one element of 4 rows; each lane
// still adds its row's squares in element order. (16 rows at once measured 2.6x slower with rows
// 8 KiB apart, the lanes' stride: 16 lines in one L1 set of 8 ways.)
NEEDLE_VECTOR_CLONES void SumSquares8Rows(const float* x, size_t ldx, size_t n, float* out) {
  using F4 = float __attribute__((vector_size(16)));
  F4 acc[2] = {};
  size_t i = 0;
  for (; i + 4 <= n; i += 4) {
    for (size_t q = 0; q < 2; ++q) {
      F4 r[4];
      for (size_t k = 0; k < 4; ++k) std::memcpy(&r[k], x + (4 * q + k) * ldx + i, sizeof(F4));
      // The 4 x 4 transpose: col[e] = element i + e of rows 4q .. 4q + 3.
      const F4 lo01 = __builtin_shufflevector(r[0], r[1], 0, 4, 1, 5);
      const F4 lo23 = __builtin_shufflevector(r[2], r[3], 0, 4, 1, 5);
      const F4 hi01 = __builtin_shufflevector(r[0], r[1], 2, 6, 3, 7);
      const F4 hi23 = __builtin_shufflevector(r[2], r[3], 2, 6, 3, 7);
      const F4 col[4] = {__builtin_shufflevector(lo01, lo23, 0, 1, 4, 5),
                         __builtin_shufflevector(lo01, lo23, 2, 3, 6, 7),
                         __builtin_shufflevector(hi01, hi23, 0, 1, 4, 5),
                         __builtin_shufflevector(hi01, hi23, 2, 3, 6, 7)};
      for (const F4& c : col) acc[q] = acc[q] + c * c;
    }
  }
  for (; i < n; ++i)
    for (size_t q = 0; q < 2; ++q) {
      const F4 col = {x[(4 * q) * ldx + i], x[(4 * q + 1) * ldx + i], x[(4 * q + 2) * ldx + i],
                      x[(4 * q + 3) * ldx + i]};
      acc[q] = acc[q] + col * col;
    }
  std::memcpy(out, acc, sizeof acc);
}

}  // namespace

void InvRmsRows(const float* x, size_t ldx, size_t rows, size_t n, float eps, float* inv) {
  size_t r0 = 0;
  float ss[8];
  auto finish = [&](size_t m) {
    for (size_t r = 0; r < m; ++r)
      inv[r0 + r] = 1.0f / std::sqrt(ss[r] / static_cast<float>(n) + eps);
    r0 += m;
  };
  while (rows - r0 >= 8) {
    SumSquares8Rows(x + r0 * ldx, ldx, n, ss);
    finish(8);
  }
  if (rows - r0 >= 4) {
    SumSquaresRows<4>(x + r0 * ldx, ldx, n, ss);
    finish(4);
  }
  if (rows - r0 >= 2) {
    SumSquaresRows<2>(x + r0 * ldx, ldx, n, ss);
    finish(2);
  }
  if (rows - r0 == 1) {
    ss[0] = SumSquares(x + r0 * ldx, n);
    finish(1);
  }
}

namespace {

// RmsUnitRows (kScale false: inv * x_i) and ZcNormRowsStrided (inv * (x_i * (scale_i + 1.0f))).
template <bool kScale>
void NormRows(const float* x, size_t ldx, const float* scale, size_t rows, size_t n, float eps,
              float* out, size_t ldo) {
  constexpr size_t kBlock = 16;
  float inv[kBlock];
  for (size_t r0 = 0; r0 < rows; r0 += kBlock) {
    const size_t m = std::min(kBlock, rows - r0);
    InvRmsRows(x + r0 * ldx, ldx, m, n, eps, inv);
    for (size_t r = 0; r < m; ++r) {
      const float* xi = x + (r0 + r) * ldx;
      float* o = out + (r0 + r) * ldo;
      for (size_t i = 0; i < n; ++i) {
        if constexpr (kScale)
          o[i] = inv[r] * (xi[i] * (scale[i] + 1.0f));
        else
          o[i] = inv[r] * xi[i];
      }
    }
  }
}

}  // namespace

void RmsUnitRows(const float* x, size_t ldx, size_t rows, size_t n, float eps, float* out,
                 size_t ldo) {
  NormRows<false>(x, ldx, nullptr, rows, n, eps, out, ldo);
}

void ZcNormRowsStrided(const float* x, size_t ldx, const float* scale, size_t rows, size_t n,
                       float eps, float* out, size_t ldo) {
  NormRows<true>(x, ldx, scale, rows, n, eps, out, ldo);
}

void ZcNormRows(const float* x, const float* scale, size_t rows, size_t n, float eps, float* out) {
  ZcNormRowsStrided(x, n, scale, rows, n, eps, out, n);
}

void Softmax(float* x, size_t n) {
  if (n == 0) return;
  const float m = *std::max_element(x, x + n);
  float s = 0.f;
  for (size_t i = 0; i < n; ++i) {
    x[i] = libm::Expf(x[i] - m);
    s = s + x[i];
  }
  const float inv = 1.0f / s;
  for (size_t i = 0; i < n; ++i) x[i] = x[i] * inv;
}

float LogSumExp(const float* x, size_t n, size_t stride) {
  float m = -1e30f;
  for (size_t i = 0; i < n; ++i)
    if (m < x[i * stride]) m = x[i * stride];
  float s = 0.f;
  for (size_t i = 0; i < n; ++i) s = s + libm::Expf(x[i * stride] - m);
  return m + libm::Logf(s);
}

void RopeFrequencies(size_t head_dim, float theta, float* freqs) {
  const float hd = static_cast<float>(head_dim);
  for (size_t j = 0; j < head_dim / 2; ++j) {
    const float fj = static_cast<float>(j);
    freqs[j] = 1.0f / libm::Powf(theta, (fj + fj) / hd);
  }
}

void RopeHalfSplit(float* h, size_t head_dim, const float* freqs, float pos) {
  const size_t half = head_dim / 2;
  for (size_t j = 0; j < half; ++j) {
    const float a = pos * freqs[j];
    const float c = libm::Cosf(a), s = libm::Sinf(a);
    const float x1 = h[j], x2 = h[j + half];
    h[j] = x1 * c - x2 * s;
    h[j + half] = x2 * c + x1 * s;
  }
}

void RopeAngles(size_t head_dim, const float* freqs, float pos, float* cos_sin) {
  const size_t half = head_dim / 2;
  for (size_t j = 0; j < half; ++j) {
    const float a = pos * freqs[j];
    cos_sin[j] = libm::Cosf(a);
    cos_sin[half + j] = libm::Sinf(a);
  }
}

void RopeRotate(float* h, size_t head_dim, const float* cos_sin) {
  const size_t half = head_dim / 2;
  for (size_t j = 0; j < half; ++j) {
    const float c = cos_sin[j], s = cos_sin[half + j];
    const float x1 = h[j], x2 = h[j + half];
    h[j] = x1 * c - x2 * s;
    h[j + half] = x2 * c + x1 * s;
  }
}

NEEDLE_VECTOR_CLONES void LaneMean(const float* X, size_t lanes, size_t d, float* out) {
  // Lane-major sums, vectorized across i: each element still adds its lanes in order from 0.
  for (size_t i = 0; i < d; ++i) out[i] = 0.f;
  for (size_t l = 0; l < lanes; ++l)
    for (size_t i = 0; i < d; ++i) out[i] = out[i] + X[l * d + i];
  const float n = static_cast<float>(lanes);
  for (size_t i = 0; i < d; ++i) out[i] = out[i] / n;
}

NEEDLE_VECTOR_CLONES void LaneBlend(const float* h, const float* X, size_t lanes, size_t d,
                                    float* u) {
  for (size_t i = 0; i < d; ++i) u[i] = 0.f;
  for (size_t j = 0; j < lanes; ++j) {
    const float hj = h[j];
    const float* Xj = X + j * d;
    for (size_t i = 0; i < d; ++i) u[i] = hj * Xj[i] + u[i];
  }
}

NEEDLE_VECTOR_CLONES void LaneMix(const float* y, const float* hpost, const float* P,
                                  const float* X, size_t lanes, size_t d, float* out) {
  for (size_t r = 0; r < lanes; ++r) {
    float* dst = out + r * d;
    const float hp = hpost[r];
    for (size_t i = 0; i < d; ++i) dst[i] = y[i] * hp;
    for (size_t b = 0; b < lanes; ++b) {
      const float pw = P[r * lanes + b];
      const float* Xb = X + b * d;
      for (size_t i = 0; i < d; ++i) dst[i] = pw * Xb[i] + dst[i];
    }
  }
}

NEEDLE_VECTOR_CLONES void MulInto(float* z, const float* s, size_t n) {
  for (size_t i = 0; i < n; ++i) z[i] = z[i] * s[i];
}

NEEDLE_VECTOR_CLONES void ScaleMulNeg(float* z, float c, const float* s, size_t n, float* neg) {
  for (size_t i = 0; i < n; ++i) {
    z[i] = (c * z[i]) * s[i];
    neg[i] = -z[i];
  }
}

NEEDLE_VECTOR_CLONES void DivOnePlus(float* z, const float* e, size_t n) {
  for (size_t i = 0; i < n; ++i) z[i] = z[i] / (e[i] + 1.0f);
}

NEEDLE_VECTOR_CLONES void MlpOut(const float* x, const float* z, float c, const float* s,
                                 const float* u, size_t n, float* y) {
  for (size_t i = 0; i < n; ++i) y[i] = (x[i] + (c * z[i]) * s[i]) - u[i];
}

NEEDLE_VECTOR_CLONES void Negate(const float* x, size_t n, float* y) {
  for (size_t i = 0; i < n; ++i) y[i] = -x[i];
}

NEEDLE_VECTOR_CLONES void GateMul(float* o, const float* e, size_t n) {
  for (size_t i = 0; i < n; ++i) o[i] = o[i] * (1.0f / (e[i] + 1.0f));
}

NEEDLE_VECTOR_CLONES void AddScaled(float a, const float* x, const float* y, size_t n, float* out) {
  for (size_t i = 0; i < n; ++i) out[i] = a * x[i] + y[i];
}

NEEDLE_VECTOR_CLONES void Axpy(float a, const float* x, float* y, size_t n) {
  for (size_t i = 0; i < n; ++i) y[i] += a * x[i];
}

NEEDLE_VECTOR_CLONES size_t ArgMax(const float* x, size_t n) {
  // Pass 1: the largest value (a max reduction the compiler vectorizes; order-free for non-NaN
  // values) and whether any NaN is there. Pass 2: its first index, which is what
  // std::max_element's `largest < it` scan returns (equal values, +0 and -0 included, keep the
  // first). With a NaN the scan's result depends on where it stands: run the scan itself.
  float m = x[0];
  bool nan = false;
  for (size_t i = 0; i < n; ++i) {
    m = x[i] > m ? x[i] : m;
    nan = nan || x[i] != x[i];
  }
  if (nan) return static_cast<size_t>(std::max_element(x, x + n) - x);
  for (size_t i = 0; i < n; ++i)
    if (x[i] == m) return i;
  return 0;
}

NEEDLE_VECTOR_CLONES void Scale(float a, float* x, size_t n) {
  for (size_t i = 0; i < n; ++i) x[i] = a * x[i];
}

NEEDLE_VECTOR_CLONES void Dots16(const float* x, const float* p, size_t n, float* dots) {
  // The 16 chains are independent: a lane each of four 4-float vectors (GCC / Clang vector
  // extensions: one register each on SSE, AVX, NEON and WebAssembly SIMD), never summed across i
  // out of order. (Wider vector types made GCC 12 spill the accumulators to the stack on every
  // step wherever they were wider than the clone's registers.)
  using F4 = float __attribute__((vector_size(16)));
  F4 acc[4] = {};
  for (size_t i = 0; i < n; ++i) {
    for (size_t j = 0; j < 4; ++j) {
      F4 pj;
      std::memcpy(&pj, p + 16 * i + 4 * j, sizeof pj);
      acc[j] = x[i] * pj + acc[j];
    }
  }
  std::memcpy(dots, acc, sizeof acc);
}

}  // namespace needle::kernels
