// AVX-512 (F/DQ/BW/VL) versions of the array kernels of kernels/vmath.h: expf / logf on 16 floats
// per step (two vectors of 8 doubles running libm.cpp's double operations in its order; table
// lookups by vpermt2pd; no FMA, built with -ffp-contract=off) and the int8 quantizer (the
// reference's f32 product and exact rounding per element, masked tails). Bit-exact with the scalar
// references. Only called after the dispatcher's CPU check.
#include <cmath>
#include <type_traits>

#include "kernels/vmath.h"
#include "kernels/x86_lanes.h"

namespace needle::kernels {

namespace {

namespace c = vmath_internal;

constexpr size_t kLanes = 16;

__mmask16 TailMask(size_t len) { return static_cast<__mmask16>((1u << len) - 1); }

// libm::Expf's main path on 8 lanes (the range checks are done by the caller).
inline __m256 ExpCore(__m256 x) {
  const __m512d shift = _mm512_set1_pd(c::kExpShift);
  const __m512d xd = _mm512_cvtps_pd(x);
  const __m512d z = _mm512_mul_pd(_mm512_set1_pd(c::kExpInvLn2N), xd);
  __m512d kd = _mm512_add_pd(z, shift);
  const __m512i ki = _mm512_castpd_si512(kd);
  kd = _mm512_sub_pd(kd, shift);
  const __m512d r = _mm512_sub_pd(z, kd);  // x*32/ln2 = k + r
  // Table entry ki % 32: vpermt2pd reads index bits 0..3, bit 4 picks the half.
  const auto* table = reinterpret_cast<const double*>(c::kExp2Table);
  const __m512d lo = _mm512_permutex2var_pd(_mm512_loadu_pd(table), ki, _mm512_loadu_pd(table + 8));
  const __m512d hi =
      _mm512_permutex2var_pd(_mm512_loadu_pd(table + 16), ki, _mm512_loadu_pd(table + 24));
  const __mmask8 upper = _mm512_test_epi64_mask(ki, _mm512_set1_epi64(16));
  __m512i t = _mm512_castpd_si512(_mm512_mask_blend_pd(upper, lo, hi));
  t = _mm512_add_epi64(t, _mm512_slli_epi64(ki, 47));
  const __m512d s = _mm512_castsi512_pd(t);  // 2^(k/32)
  const __m512d p = _mm512_add_pd(_mm512_mul_pd(_mm512_set1_pd(c::kExpPoly[0]), r),
                                  _mm512_set1_pd(c::kExpPoly[1]));
  const __m512d r2 = _mm512_mul_pd(r, r);
  __m512d y = _mm512_add_pd(_mm512_mul_pd(_mm512_set1_pd(c::kExpPoly[2]), r), _mm512_set1_pd(1.0));
  y = _mm512_add_pd(_mm512_mul_pd(p, r2), y);
  y = _mm512_mul_pd(y, s);
  return _mm512_cvtpd_ps(y);
}

inline __m512 Expf16(__m512 x) {
  __m512 y = _mm512_insertf32x8(_mm512_castps256_ps512(ExpCore(_mm512_castps512_ps256(x))),
                                ExpCore(_mm512_extractf32x8_ps(x, 1)), 1);
  // The scalar's range checks (the main path's value stands for 88 <= |x| inside the limits).
  const __mmask16 over = _mm512_cmp_ps_mask(x, _mm512_set1_ps(c::kExpOverflow), _CMP_GT_OQ);
  const __mmask16 under = _mm512_cmp_ps_mask(x, _mm512_set1_ps(c::kExpUnderflow), _CMP_LT_OQ);
  const __mmask16 nan = _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q);
  y = _mm512_mask_mov_ps(y, over, _mm512_set1_ps(INFINITY));
  y = _mm512_mask_mov_ps(y, under, _mm512_setzero_ps());
  return _mm512_mask_add_ps(y, nan, x, x);
}

// libm::Logf's main path on 8 lanes of bits ix (positive normal, or subnormal pre-scaled).
inline __m256 LogCore(__m256i ix) {
  const __m256i tmp = _mm256_sub_epi32(ix, _mm256_set1_epi32(static_cast<int>(c::kLogOff)));
  const __m512i i = _mm512_cvtepu32_epi64(_mm256_srli_epi32(tmp, 19));  // bits 0..3 index
  const __m256i k = _mm256_srai_epi32(tmp, 23);
  const __m256i iz =
      _mm256_sub_epi32(ix, _mm256_and_si256(tmp, _mm256_set1_epi32(static_cast<int>(0xff800000u))));
  const __m512d invc =
      _mm512_permutex2var_pd(_mm512_loadu_pd(c::kLogInvC), i, _mm512_loadu_pd(c::kLogInvC + 8));
  const __m512d logc =
      _mm512_permutex2var_pd(_mm512_loadu_pd(c::kLogLogC), i, _mm512_loadu_pd(c::kLogLogC + 8));
  const __m512d z = _mm512_cvtps_pd(_mm256_castsi256_ps(iz));
  const __m512d r = _mm512_sub_pd(_mm512_mul_pd(z, invc), _mm512_set1_pd(1.0));
  const __m512d y0 =
      _mm512_add_pd(logc, _mm512_mul_pd(_mm512_cvtepi32_pd(k), _mm512_set1_pd(c::kLogLn2)));
  const __m512d r2 = _mm512_mul_pd(r, r);
  __m512d y = _mm512_add_pd(_mm512_mul_pd(_mm512_set1_pd(c::kLogPoly[1]), r),
                            _mm512_set1_pd(c::kLogPoly[2]));
  y = _mm512_add_pd(_mm512_mul_pd(_mm512_set1_pd(c::kLogPoly[0]), r2), y);
  y = _mm512_add_pd(_mm512_mul_pd(y, r2), _mm512_add_pd(y0, r));
  return _mm512_cvtpd_ps(y);
}

inline __m512 Logf16(__m512 x) {
  const __m512i bits = _mm512_castps_si512(x);
  // Subnormal, zero, negative, inf or NaN: ix - 0x00800000 >= 0x7f000000 (unsigned).
  const __mmask16 special = _mm512_cmpge_epu32_mask(
      _mm512_sub_epi32(bits, _mm512_set1_epi32(0x00800000)), _mm512_set1_epi32(0x7f000000));
  __m512i ix = bits;
  if (special != 0) {  // subnormal: normalize (exact), the exponent becomes negative
    const __mmask16 subnormal = _mm512_cmplt_epi32_mask(bits, _mm512_set1_epi32(0x00800000));
    ix = _mm512_mask_sub_epi32(ix, subnormal,
                               _mm512_castps_si512(_mm512_mul_ps(x, _mm512_set1_ps(0x1p23f))),
                               _mm512_set1_epi32(23 << 23));
  }
  __m512 y = _mm512_insertf32x8(_mm512_castps256_ps512(LogCore(_mm512_castsi512_si256(ix))),
                                LogCore(_mm512_extracti64x4_epi64(ix, 1)), 1);
  if (special != 0) {  // the scalar's special results, later moves taking precedence
    const __mmask16 negative = _mm512_cmplt_epi32_mask(bits, _mm512_setzero_si512());
    const __mmask16 nan = _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q);
    const __mmask16 zero = _mm512_cmp_ps_mask(x, _mm512_setzero_ps(), _CMP_EQ_OQ);
    const __mmask16 inf = _mm512_cmp_ps_mask(x, _mm512_set1_ps(INFINITY), _CMP_EQ_OQ);
    y = _mm512_mask_mov_ps(y, negative, _mm512_castsi512_ps(_mm512_set1_epi32(0x7fc00000)));
    y = _mm512_mask_add_ps(y, nan, x, x);
    y = _mm512_mask_mov_ps(y, zero, _mm512_set1_ps(-INFINITY));
    y = _mm512_mask_mov_ps(y, inf, x);
  }
  return y;
}

// y = f(x) over n floats, 16 at a time; the tail with masked loads and stores.
template <__m512 (*kF)(__m512)>
inline void Apply(const float* x, float* y, size_t n) {
  size_t i = 0;
  for (; i + 2 * kLanes <= n; i += 2 * kLanes) {
    const __m512 a = _mm512_loadu_ps(x + i), b = _mm512_loadu_ps(x + i + kLanes);
    _mm512_storeu_ps(y + i, kF(a));
    _mm512_storeu_ps(y + i + kLanes, kF(b));
  }
  for (; i + kLanes <= n; i += kLanes) _mm512_storeu_ps(y + i, kF(_mm512_loadu_ps(x + i)));
  if (i < n) {
    const __mmask16 m = TailMask(n - i);
    _mm512_mask_storeu_ps(y + i, m, kF(_mm512_maskz_loadu_ps(m, x + i)));
  }
}

// The reference's int8 of v * inv: rounded, converted to int32 (NaN, inf and |x| >= 2^31 give
// INT32_MIN), then its low byte (vpmovdb truncates).
inline __m128i QuantizeLanes(__m512 v, __m512 inv) {
  return _mm512_cvtepi32_epi8(_mm512_cvttps_epi32(F32x16::RoundHalfAway(_mm512_mul_ps(v, inv))));
}

// Element k = 0..3 of every line of v in all four lanes of that line: rows by an in-lane
// broadcast (vpermilps), columns by a 128-bit lane broadcast (vshuff32x4); imm k * 0x55 picks
// element (or lane) k four times.
template <bool kColumns>
inline void LineElements(__m512 v, __m512* e) {
  if constexpr (kColumns) {
    e[0] = _mm512_shuffle_f32x4(v, v, 0x00);
    e[1] = _mm512_shuffle_f32x4(v, v, 0x55);
    e[2] = _mm512_shuffle_f32x4(v, v, 0xAA);
    e[3] = _mm512_shuffle_f32x4(v, v, 0xFF);
  } else {
    e[0] = _mm512_permute_ps(v, 0x00);
    e[1] = _mm512_permute_ps(v, 0x55);
    e[2] = _mm512_permute_ps(v, 0xAA);
    e[3] = _mm512_permute_ps(v, 0xFF);
  }
}

// Sinkhorn of K 4 x 4 matrices at once, lane 4 r + c = element (r, c), chains interleaved.
// vmaxps(x, m) returns m unless x > m (NaN and equal zeros included): the reference's
// `if (m < x) m = x`.
template <size_t K>
void Sinkhorn4(float* P, int rounds) {
  __m512 x[K];
  for (size_t c = 0; c < K; ++c) x[c] = _mm512_loadu_ps(P + 16 * c);
  auto phase = [&x](auto columns) {
    constexpr bool kColumns = decltype(columns)::value;
    __m512 m[K], s[K];
    for (size_t c = 0; c < K; ++c) {
      __m512 el[4];
      LineElements<kColumns>(x[c], el);
      m[c] = _mm512_set1_ps(-1e30f);
      for (const __m512 v : el) m[c] = _mm512_max_ps(v, m[c]);
    }
    for (size_t c = 0; c < K; ++c) {
      __m512 el[4];
      LineElements<kColumns>(Expf16(_mm512_sub_ps(x[c], m[c])), el);
      s[c] = _mm512_add_ps(_mm512_add_ps(_mm512_add_ps(el[0], el[1]), el[2]), el[3]);
    }
    for (size_t c = 0; c < K; ++c) x[c] = _mm512_sub_ps(x[c], _mm512_add_ps(m[c], Logf16(s[c])));
  };
  for (int round = 0; round < rounds; ++round) {
    phase(std::false_type{});  // rows
    phase(std::true_type{});   // columns
  }
  for (size_t c = 0; c < K; ++c) _mm512_storeu_ps(P + 16 * c, Expf16(x[c]));
}

}  // namespace

void SinkhornAvx512(float* P, size_t n, size_t count, int rounds, float* scratch) {
  if (n != 4)
    return SinkhornArrays(&ExpfArrayAvx512, &LogfArrayAvx512, P, n, count, rounds, scratch);
  size_t c = 0;
  for (; c + 4 <= count; c += 4) Sinkhorn4<4>(P + 16 * c, rounds);
  switch (count - c) {
    case 3:
      return Sinkhorn4<3>(P + 16 * c, rounds);
    case 2:
      return Sinkhorn4<2>(P + 16 * c, rounds);
    case 1:
      return Sinkhorn4<1>(P + 16 * c, rounds);
    default:
      return;
  }
}

void ExpfArrayAvx512(const float* x, float* y, size_t n) { Apply<Expf16>(x, y, n); }

void LogfArrayAvx512(const float* x, float* y, size_t n) { Apply<Logf16>(x, y, n); }

float QuantizeI8Avx512(const float* v, size_t n, int8_t* q) {
  // max(|v|, amax) keeps amax when v is NaN, like the reference's std::max(amax, |v|); the masked
  // tail's zeros change nothing (amax >= 0).
  __m512 amax16 = _mm512_setzero_ps();
  size_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    amax16 = _mm512_max_ps(_mm512_abs_ps(_mm512_loadu_ps(v + i)), amax16);
  if (i < n)
    amax16 = _mm512_max_ps(_mm512_abs_ps(_mm512_maskz_loadu_ps(TailMask(n - i), v + i)), amax16);
  const float amax = _mm512_reduce_max_ps(amax16);
  const float s = amax > 0.f ? amax / 127.0f : 1.0f;
  const __m512 inv = _mm512_set1_ps(1.0f / s);
  for (i = 0; i + kLanes <= n; i += kLanes)
    _mm_storeu_si128(reinterpret_cast<__m128i*>(q + i), QuantizeLanes(_mm512_loadu_ps(v + i), inv));
  if (i < n) {
    const __mmask16 m = TailMask(n - i);
    _mm_mask_storeu_epi8(q + i, m, QuantizeLanes(_mm512_maskz_loadu_ps(m, v + i), inv));
  }
  return s;
}

}  // namespace needle::kernels
