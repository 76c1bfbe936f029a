// AVX2 versions of the array kernels of kernels/vmath.h: expf / logf on 8 floats per step (two
// vectors of 4 doubles running libm.cpp's double operations in its order; no FMA, built with
// -ffp-contract=off) and the int8 quantizer (the reference's f32 product and exact rounding per
// element). Bit-exact with the scalar references. Only called after the dispatcher's CPU check.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/vmath.h"
#include "kernels/x86_lanes.h"  // first: includes <immintrin.h> (see there)

namespace needle::kernels {

namespace {

namespace c = vmath_internal;

constexpr size_t kLanes = 8;

// libm::Expf's main path on 4 lanes (|x| < 2^-150 .. 2^128 range checks are done by the caller).
inline __m128 ExpCore(__m128 x) {
  const __m256d shift = _mm256_set1_pd(c::kExpShift);
  const __m256d xd = _mm256_cvtps_pd(x);
  const __m256d z = _mm256_mul_pd(_mm256_set1_pd(c::kExpInvLn2N), xd);
  __m256d kd = _mm256_add_pd(z, shift);
  const __m256i ki = _mm256_castpd_si256(kd);
  kd = _mm256_sub_pd(kd, shift);
  const __m256d r = _mm256_sub_pd(z, kd);  // x*32/ln2 = k + r
  // The masked gather forms: GCC 12's plain ones start from an "undefined" vector that
  // -Wmaybe-uninitialized reports.
  __m256i t = _mm256_mask_i64gather_epi64(
      _mm256_setzero_si256(), reinterpret_cast<const long long*>(c::kExp2Table),
      _mm256_and_si256(ki, _mm256_set1_epi64x(31)), _mm256_set1_epi64x(-1), 8);
  t = _mm256_add_epi64(t, _mm256_slli_epi64(ki, 47));
  const __m256d s = _mm256_castsi256_pd(t);  // 2^(k/32)
  const __m256d p = _mm256_add_pd(_mm256_mul_pd(_mm256_set1_pd(c::kExpPoly[0]), r),
                                  _mm256_set1_pd(c::kExpPoly[1]));
  const __m256d r2 = _mm256_mul_pd(r, r);
  __m256d y = _mm256_add_pd(_mm256_mul_pd(_mm256_set1_pd(c::kExpPoly[2]), r), _mm256_set1_pd(1.0));
  y = _mm256_add_pd(_mm256_mul_pd(p, r2), y);
  y = _mm256_mul_pd(y, s);
  return _mm256_cvtpd_ps(y);
}

inline __m256 Expf8(__m256 x) {
  __m256 y =
      _mm256_set_m128(ExpCore(_mm256_extractf128_ps(x, 1)), ExpCore(_mm256_castps256_ps128(x)));
  // |x| >= 88, inf or NaN: the scalar's range checks (rare; the main path's value stands for
  // 88 <= |x| inside the limits).
  const __m256i abs_bits = _mm256_and_si256(_mm256_castps_si256(x), _mm256_set1_epi32(0x7fffffff));
  const __m256i big = _mm256_cmpgt_epi32(abs_bits, _mm256_set1_epi32(0x42afffff));
  if (!_mm256_testz_si256(big, big)) {
    const __m256 over = _mm256_cmp_ps(x, _mm256_set1_ps(c::kExpOverflow), _CMP_GT_OQ);
    const __m256 under = _mm256_cmp_ps(x, _mm256_set1_ps(c::kExpUnderflow), _CMP_LT_OQ);
    const __m256 nan = _mm256_cmp_ps(x, x, _CMP_UNORD_Q);
    y = _mm256_blendv_ps(y, _mm256_set1_ps(INFINITY), over);
    y = _mm256_andnot_ps(under, y);
    y = _mm256_blendv_ps(y, _mm256_add_ps(x, x), nan);
  }
  return y;
}

// libm::Logf's main path on 4 lanes of bits ix (positive normal, or subnormal pre-scaled).
inline __m128 LogCore(__m128i ix) {
  const __m128i tmp = _mm_sub_epi32(ix, _mm_set1_epi32(static_cast<int>(c::kLogOff)));
  const __m128i i = _mm_and_si128(_mm_srli_epi32(tmp, 19), _mm_set1_epi32(15));
  const __m128i k = _mm_srai_epi32(tmp, 23);
  const __m128i iz =
      _mm_sub_epi32(ix, _mm_and_si128(tmp, _mm_set1_epi32(static_cast<int>(0xff800000u))));
  const __m256d all = _mm256_castsi256_pd(_mm256_set1_epi64x(-1));
  const __m256d invc = _mm256_mask_i32gather_pd(_mm256_setzero_pd(), c::kLogInvC, i, all, 8);
  const __m256d logc = _mm256_mask_i32gather_pd(_mm256_setzero_pd(), c::kLogLogC, i, all, 8);
  const __m256d z = _mm256_cvtps_pd(_mm_castsi128_ps(iz));
  const __m256d r = _mm256_sub_pd(_mm256_mul_pd(z, invc), _mm256_set1_pd(1.0));
  const __m256d y0 =
      _mm256_add_pd(logc, _mm256_mul_pd(_mm256_cvtepi32_pd(k), _mm256_set1_pd(c::kLogLn2)));
  const __m256d r2 = _mm256_mul_pd(r, r);
  __m256d y = _mm256_add_pd(_mm256_mul_pd(_mm256_set1_pd(c::kLogPoly[1]), r),
                            _mm256_set1_pd(c::kLogPoly[2]));
  y = _mm256_add_pd(_mm256_mul_pd(_mm256_set1_pd(c::kLogPoly[0]), r2), y);
  y = _mm256_add_pd(_mm256_mul_pd(y, r2), _mm256_add_pd(y0, r));
  return _mm256_cvtpd_ps(y);
}

inline __m256 Logf8(__m256 x) {
  __m256i ix = _mm256_castps_si256(x);
  // Subnormal, zero, negative, inf or NaN: ix - 0x00800000 >= 0x7f000000 (unsigned).
  const __m256i d = _mm256_sub_epi32(ix, _mm256_set1_epi32(0x00800000));
  const __m256i special = _mm256_cmpeq_epi32(_mm256_max_epu32(d, _mm256_set1_epi32(0x7f000000)), d);
  const bool any = !_mm256_testz_si256(special, special);
  if (any) {  // subnormal: normalize (exact), the exponent becomes negative
    const __m256i scaled =
        _mm256_sub_epi32(_mm256_castps_si256(_mm256_mul_ps(x, _mm256_set1_ps(0x1p23f))),
                         _mm256_set1_epi32(23 << 23));
    const __m256i subnormal = _mm256_cmpgt_epi32(_mm256_set1_epi32(0x00800000), ix);  // incl. 0
    ix = _mm256_blendv_epi8(ix, scaled, subnormal);
  }
  __m256 y = _mm256_set_m128(LogCore(_mm256_extracti128_si256(ix, 1)),
                             LogCore(_mm256_castsi256_si128(ix)));
  if (any) {  // the scalar's special results, later blends taking precedence as its tests do
    const __m256i bits = _mm256_castps_si256(x);
    const __m256 negative = _mm256_castsi256_ps(_mm256_cmpgt_epi32(_mm256_setzero_si256(), bits));
    const __m256 nan = _mm256_cmp_ps(x, x, _CMP_UNORD_Q);
    const __m256 zero = _mm256_cmp_ps(x, _mm256_setzero_ps(), _CMP_EQ_OQ);
    const __m256 inf = _mm256_cmp_ps(x, _mm256_set1_ps(INFINITY), _CMP_EQ_OQ);
    y = _mm256_blendv_ps(y, _mm256_castsi256_ps(_mm256_set1_epi32(0x7fc00000)), negative);
    y = _mm256_blendv_ps(y, _mm256_add_ps(x, x), nan);
    y = _mm256_blendv_ps(y, _mm256_set1_ps(-INFINITY), zero);
    y = _mm256_blendv_ps(y, x, inf);
  }
  return y;
}

// y = f(x) over n floats, 8 at a time; the tail goes through a zero-padded buffer.
template <__m256 (*kF)(__m256)>
inline void Apply(const float* x, float* y, size_t n) {
  size_t i = 0;
  for (; i + 2 * kLanes <= n; i += 2 * kLanes) {
    const __m256 a = _mm256_loadu_ps(x + i), b = _mm256_loadu_ps(x + i + kLanes);
    _mm256_storeu_ps(y + i, kF(a));
    _mm256_storeu_ps(y + i + kLanes, kF(b));
  }
  for (; i + kLanes <= n; i += kLanes) _mm256_storeu_ps(y + i, kF(_mm256_loadu_ps(x + i)));
  if (i < n) {
    alignas(32) float buf[kLanes] = {};
    std::memcpy(buf, x + i, (n - i) * sizeof(float));
    _mm256_store_ps(buf, kF(_mm256_load_ps(buf)));
    std::memcpy(y + i, buf, (n - i) * sizeof(float));
  }
}

// The reference's int8 of v * inv, in int32 lanes.
inline __m256i QuantizeLanes(__m256 v, __m256 inv) {
  return F32x8::RoundToI8(_mm256_mul_ps(v, inv));
}

// A matrix as two vectors, rows 0-1 and rows 2-3 (lane 4 r' + c). Row lines: element k of each
// row in the row's four lanes (vpermilps, imm k * 0x55), per vector. Column lines: row k in both
// 128-bit lanes (vperm2f128), so that a column's elements meet lane-wise.
inline void RowElements(__m256 v, __m256* e) {
  e[0] = _mm256_permute_ps(v, 0x00);
  e[1] = _mm256_permute_ps(v, 0x55);
  e[2] = _mm256_permute_ps(v, 0xAA);
  e[3] = _mm256_permute_ps(v, 0xFF);
}

inline void ColumnElements(const __m256* v, __m256* e) {
  for (size_t h = 0; h < 2; ++h) {
    e[2 * h] = _mm256_permute2f128_ps(v[h], v[h], 0x00);
    e[2 * h + 1] = _mm256_permute2f128_ps(v[h], v[h], 0x11);
  }
}

// m (the running max from -1e30, vmaxps(x, m) = the reference's `if (m < x) m = x`) and the sum
// of the exponentials in element order, from a line's four broadcast elements.
inline __m256 LineMax(const __m256* el) {
  __m256 m = _mm256_set1_ps(-1e30f);
  for (size_t k = 0; k < 4; ++k) m = _mm256_max_ps(el[k], m);
  return m;
}

inline __m256 LineSum(const __m256* el) {
  return _mm256_add_ps(_mm256_add_ps(_mm256_add_ps(el[0], el[1]), el[2]), el[3]);
}

// Sinkhorn of K matrices at once, their chains interleaved.
template <size_t K>
void Sinkhorn4(float* P, int rounds) {
  __m256 v[K][2];
  for (size_t c = 0; c < K; ++c)
    for (size_t h = 0; h < 2; ++h) v[c][h] = _mm256_loadu_ps(P + 16 * c + 8 * h);
  __m256 el[4];
  for (int round = 0; round < rounds; ++round) {
    for (size_t c = 0; c < K; ++c) {  // rows
      for (size_t h = 0; h < 2; ++h) {
        RowElements(v[c][h], el);
        const __m256 m = LineMax(el);
        RowElements(Expf8(_mm256_sub_ps(v[c][h], m)), el);
        v[c][h] = _mm256_sub_ps(v[c][h], _mm256_add_ps(m, Logf8(LineSum(el))));
      }
    }
    for (size_t c = 0; c < K; ++c) {  // columns
      ColumnElements(v[c], el);
      const __m256 m = LineMax(el);
      const __m256 e[2] = {Expf8(_mm256_sub_ps(v[c][0], m)), Expf8(_mm256_sub_ps(v[c][1], m))};
      ColumnElements(e, el);
      const __m256 lse = _mm256_add_ps(m, Logf8(LineSum(el)));
      for (size_t h = 0; h < 2; ++h) v[c][h] = _mm256_sub_ps(v[c][h], lse);
    }
  }
  for (size_t c = 0; c < K; ++c)
    for (size_t h = 0; h < 2; ++h) _mm256_storeu_ps(P + 16 * c + 8 * h, Expf8(v[c][h]));
}

// 8 x 8 transpose of rows r[0..7] in place.
inline void Transpose8(__m256* r) {
  __m256 t[8], u[8];
  for (size_t i = 0; i < 4; ++i) {
    t[2 * i] = _mm256_unpacklo_ps(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm256_unpackhi_ps(r[2 * i], r[2 * i + 1]);
  }
  for (size_t i = 0; i < 2; ++i) {
    u[4 * i] = _mm256_shuffle_ps(t[4 * i], t[4 * i + 2], 0x44);
    u[4 * i + 1] = _mm256_shuffle_ps(t[4 * i], t[4 * i + 2], 0xEE);
    u[4 * i + 2] = _mm256_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0x44);
    u[4 * i + 3] = _mm256_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0xEE);
  }
  for (size_t i = 0; i < 4; ++i) {
    r[i] = _mm256_permute2f128_ps(u[i], u[i + 4], 0x20);
    r[i + 4] = _mm256_permute2f128_ps(u[i], u[i + 4], 0x31);
  }
}

// Sinkhorn of 8 matrices with a matrix per lane (a prefill block's): x[4 r + c] holds element
// (r, c) of all eight, so every line's elements are whole vectors and each Expf8 / Logf8 serves
// eight lines, none of them repeated. Per lane the operations of Sinkhorn4: max from -1e30 in
// element order, exp(v - m), the sum in element order, v - (m + log(sum)); rows, then columns.
void Sinkhorn4x8(float* P, int rounds) {
  __m256 x[16];
  for (size_t j = 0; j < 8; ++j)
    for (size_t h = 0; h < 2; ++h) x[8 * h + j] = _mm256_loadu_ps(P + 16 * j + 8 * h);
  Transpose8(x);  // x[e] = element e of the eight matrices, e < 8
  Transpose8(x + 8);
  auto line = [&x](size_t first, size_t stride) {
    __m256 m = _mm256_set1_ps(-1e30f);
    for (size_t k = 0; k < 4; ++k) m = _mm256_max_ps(x[first + k * stride], m);
    __m256 e[4];
    for (size_t k = 0; k < 4; ++k) e[k] = Expf8(_mm256_sub_ps(x[first + k * stride], m));
    const __m256 lse = _mm256_add_ps(m, Logf8(LineSum(e)));
    for (size_t k = 0; k < 4; ++k)
      x[first + k * stride] = _mm256_sub_ps(x[first + k * stride], lse);
  };
  for (int round = 0; round < rounds; ++round) {
    for (size_t r = 0; r < 4; ++r) line(4 * r, 1);  // rows
    for (size_t c = 0; c < 4; ++c) line(c, 4);      // columns
  }
  for (__m256& v : x) v = Expf8(v);
  Transpose8(x);
  Transpose8(x + 8);
  for (size_t j = 0; j < 8; ++j)
    for (size_t h = 0; h < 2; ++h) _mm256_storeu_ps(P + 16 * j + 8 * h, x[8 * h + j]);
}

}  // namespace

void SinkhornAvx2(float* P, size_t n, size_t count, int rounds, float* scratch) {
  if (n != 4) return SinkhornArrays(&ExpfArrayAvx2, &LogfArrayAvx2, P, n, count, rounds, scratch);
  size_t c = 0;
  for (; c + 8 <= count; c += 8) Sinkhorn4x8(P + 16 * c, rounds);
  for (; c + 2 <= count; c += 2) Sinkhorn4<2>(P + 16 * c, rounds);
  if (c < count) Sinkhorn4<1>(P + 16 * c, rounds);
}

void ExpfArrayAvx2(const float* x, float* y, size_t n) { Apply<Expf8>(x, y, n); }

void LogfArrayAvx2(const float* x, float* y, size_t n) { Apply<Logf8>(x, y, n); }

float QuantizeI8Avx2(const float* v, size_t n, int8_t* q) {
  const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
  // max(|v|, amax) keeps amax when v is NaN, like the reference's std::max(amax, |v|).
  __m256 amax8 = _mm256_setzero_ps();
  size_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    amax8 = _mm256_max_ps(_mm256_and_ps(_mm256_loadu_ps(v + i), abs_mask), amax8);
  __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(amax8), _mm256_extractf128_ps(amax8, 1));
  m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
  m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
  float amax = _mm_cvtss_f32(m4);
  for (; i < n; ++i) amax = std::max(amax, std::fabs(v[i]));
  const float s = amax > 0.f ? amax / 127.0f : 1.0f;
  const __m256 inv = _mm256_set1_ps(1.0f / s);
  i = 0;
  for (; i + 4 * kLanes <= n; i += 4 * kLanes) {
    __m256i w[4];
    for (size_t j = 0; j < 4; ++j) w[j] = QuantizeLanes(_mm256_loadu_ps(v + i + kLanes * j), inv);
    const __m256i packed =
        _mm256_packs_epi16(_mm256_packs_epi32(w[0], w[1]), _mm256_packs_epi32(w[2], w[3]));
    _mm256_storeu_si256(
        reinterpret_cast<__m256i*>(q + i),
        _mm256_permutevar8x32_epi32(packed, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7)));
  }
  for (; i < n; i += kLanes) {
    const size_t len = std::min(kLanes, n - i);
    alignas(32) float buf[kLanes] = {};
    std::memcpy(buf, v + i, len * sizeof(float));
    const __m256i w = QuantizeLanes(_mm256_load_ps(buf), inv);
    const __m128i w16 = _mm_packs_epi32(_mm256_castsi256_si128(w), _mm256_extracti128_si256(w, 1));
    const __m128i w8 = _mm_packs_epi16(w16, w16);
    int8_t bytes[16];
    _mm_storeu_si128(reinterpret_cast<__m128i*>(bytes), w8);
    std::memcpy(q + i, bytes, len);
  }
  return s;
}

}  // namespace needle::kernels
