// Bit-exact ports of the musl libm single-precision routines linked into the official engine's
// WASM binary (NUMERICS.md §9): expf, logf, powf (ARM optimized-routines algorithms) and sinf,
// cosf (FreeBSD-derived kernels with the medium-range pi/2 reduction). Written from the
// algorithms; the table constants were extracted from the engine's wasm data section by
// scripts/official/extract_libm_constants.py. tests/libm_test.cpp compares every function with
// the engine's own results (tests/data/libm/vectors.bin).
//
// Bit-exact code: built with -ffp-contract=off; every double operation below is in the engine's
// order (a+b and a*b commute exactly, but no reassociation and no fused multiply-add is allowed).
// Doubles must be evaluated in double (FLT_EVAL_METHOD 0: SSE2 on x86-64, AArch64).
#include "kernels/libm.h"

#include <bit>
#include <cfloat>
#include <cstdint>
#include <limits>

#include "kernels/vmath.h"

static_assert(FLT_EVAL_METHOD == 0, "the libm ports need strict float/double evaluation");

namespace needle::kernels::libm {
namespace {

uint32_t FloatBits(float x) { return std::bit_cast<uint32_t>(x); }
float FloatFromBits(uint32_t u) { return std::bit_cast<float>(u); }
uint64_t DoubleBits(double x) { return std::bit_cast<uint64_t>(x); }
double DoubleFromBits(uint64_t u) { return std::bit_cast<double>(u); }

constexpr float kInf = std::numeric_limits<float>::infinity();
// Invalid operations (logf(-1), sinf(inf), powf(-2, 0.5)) return this one quiet NaN on every
// platform (a computed 0/0 has a platform-dependent sign bit); NaN inputs propagate as x + x.
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

// ---- exp2 table shared by expf and powf: 2^(i/32) as double bits, minus i << 47, so adding
// ki << 47 for ki = 32*e + i yields 2^(e + i/32). Wasm memory 8432.
// The expf/logf tables and coefficients are shared with the SIMD array versions: one copy, in
// kernels/vmath.h (vmath_internal).
using vmath_internal::kExp2Table;
using vmath_internal::kExpInvLn2N;
using vmath_internal::kExpPoly;
using vmath_internal::kExpShift;
using vmath_internal::kLogInvC;
using vmath_internal::kLogLn2;
using vmath_internal::kLogLogC;
using vmath_internal::kLogOff;
using vmath_internal::kLogPoly;
constexpr int kExp2TableBits = 5;
// exp2 (powf): round-to-k/32 shifter 0x1.8p52/32 and 2^r ~ C0 r^3 + C1 r^2 + C2 r + 1.
constexpr double kExp2ShiftScaled = 0x1.8p+47;  // memory 8688
constexpr double kExp2Poly[3] = {0x1.c6af84b912394p-5, 0x1.ebfce50fac4f3p-3,
                                 0x1.62e42ff0c52d6p-1};  // 8696
// Both logs split x = 2^k * z with z in [0x1.66p-1, 0x1.66p0): subtracting kLogOff from the
// bits puts the subinterval index in bits 19..22 and k in the top 9 bits.

// ---- powf's log2: same subintervals, {1/c, log2 c}, and log1p(r)/ln2 ~ A0 r^5 + ... + A4 r.
constexpr double kPowLog2Table[16][2] = {
    {0x1.661ec79f8f3bep+0, -0x1.efec65b963019p-2}, {0x1.571ed4aaf883dp+0, -0x1.b0b6832d4fca4p-2},
    {0x1.49539f0f010b0p+0, -0x1.7418b0a1fb77bp-2}, {0x1.3c995b0b80385p+0, -0x1.39de91a6dcf7bp-2},
    {0x1.30d190c8864a5p+0, -0x1.01d9bf3f2b631p-2}, {0x1.25e227b0b8ea0p+0, -0x1.97c1d1b3b7af0p-3},
    {0x1.1bb4a4a1a343fp+0, -0x1.2f9e393af3c9fp-3}, {0x1.12358f08ae5bap+0, -0x1.960cbbf788d5cp-4},
    {0x1.0953f419900a7p+0, -0x1.a6f9db6475fcep-5}, {0x1.0p+0, 0x0.0p+0},
    {0x1.e608cfd9a47acp-1, 0x1.338ca9f24f53dp-4},  {0x1.ca4b31f026aa0p-1, 0x1.476a9543891bap-3},
    {0x1.b2036576afce6p-1, 0x1.e840b4ac4e4d2p-3},  {0x1.9c2d163a1aa2dp-1, 0x1.40645f0c6651cp-2},
    {0x1.886e6037841edp-1, 0x1.88e9c2c1b9ff8p-2},  {0x1.767dcf5534862p-1, 0x1.ce0a44eb17bccp-2},
};  // 13288
constexpr double kPowLog2Poly[5] = {0x1.27616c9496e0bp-2, -0x1.71969a075c67ap-2,
                                    0x1.ec70a6ca7baddp-2, -0x1.7154748bef6c8p-1,
                                    0x1.71547652ab82bp+0};  // 13544

// ---- sin/cos kernels on |x| <~ pi/4 (f64.const immediates in the engine's code).
constexpr double kSin1 = -0x1.5555554cbac77p-3, kSin2 = 0x1.11110896efbb2p-7;
constexpr double kSin3 = -0x1.a00f9e2cae774p-13, kSin4 = 0x1.6cd878c3b46a7p-19;
constexpr double kCos0 = -0x1.ffffffd0c5e81p-2, kCos1 = 0x1.55553e1053a42p-5;
constexpr double kCos2 = -0x1.6c087e80f1e27p-10, kCos3 = 0x1.99342e0ee5069p-16;
// k * pi/2 rounded to double, k = 1..4.
constexpr double kPio2x1 = 0x1.921fb54442d18p+0, kPio2x2 = 0x1.921fb54442d18p+1;
constexpr double kPio2x3 = 0x1.2d97c7f3321d2p+2, kPio2x4 = 0x1.921fb54442d18p+2;
// Medium-range reduction: n = rint(x * 2/pi) by the 0x1.8p52 shifter; pi/2 = kPio2Hi (33 bits)
// + kPio2Lo; kPio4 is pi/4 rounded to float.
constexpr double kInvPio2 = 0x1.45f306dc9c883p-1, kToInt = 0x1.8p52;
constexpr double kPio2Hi = 0x1.921fb5p+0, kPio2Lo = 0x1.110b4611a6263p-26;
constexpr double kPio4 = 0x1.921fb6p-1;
// The first 256 bits of 2/pi (0.a2f9836e...), for the large-argument fallback.
constexpr uint32_t kTwoOverPiBits[8] = {0xa2f9836e, 0x4e441529, 0xfc2757d1, 0xf534ddc0,
                                        0xdb629599, 0x3c439041, 0xfe5163ab, 0xdebbc561};

float SinKernel(double x) {
  const double z = x * x;
  const double w = z * z;
  const double r = kSin3 + z * kSin4;
  const double s = z * x;
  return static_cast<float>((x + s * (kSin1 + z * kSin2)) + s * w * r);
}

float CosKernel(double x) {
  const double z = x * x;
  const double w = z * z;
  const double r = kCos2 + z * kCos3;
  return static_cast<float>(((1.0 + z * kCos0) + w * kCos1) + (w * z) * r);
}

// 32 bits of 2/pi starting at bit `pos` (0 = the first bit after the binary point), pos <= 224.
uint32_t TwoOverPiWord(int pos) {
  const int word = pos / 32, shift = pos % 32;
  if (shift == 0) return kTwoOverPiBits[word];
  return (kTwoOverPiBits[word] << shift) | (kTwoOverPiBits[word + 1] >> (32 - shift));
}

// NOT the engine's algorithm. musl reduces |x| >= 2^28*pi/2 with __rem_pio2_large; the model
// never produces such angles (RoPE positions stay far below), so this deterministic stand-in
// computes x - n*pi/2 from exact integer arithmetic on 128 bits of 2/pi, rounds it once to double
// (in quarter turns) and multiplies by pi/2 (about 1.5 double ulps from the exact y). The kernels
// then round to float, so a difference from the engine needs a near-tie; none was seen in about
// 800,000 random large arguments compared with the engine (not an exhaustive proof).
// |x| >= 2^28 finite. Returns n (only n mod 4 matters); *y = x - n*pi/2 in about [-pi/4, pi/4].
int ReducePio2Large(float x, double* y) {
  const uint32_t ix = FloatBits(x) & 0x7fffffff;
  const int k = static_cast<int>(ix >> 23) - 150;  // |x| = m * 2^k, 5 <= k <= 104
  const uint64_t m = (ix & 0x7fffff) | 0x800000;   // 24-bit integer significand
  // x*2/pi mod 4 = m * (bits k-1 .. k+126 of 2/pi, 1-based) * 2^-126 mod 4, up to < 2^-102:
  // bits before k-1 contribute multiples of 4. Limbs of the 128-bit product mod 2^128, low first.
  uint32_t limb[4];
  uint64_t carry = 0;
  for (int j = 3; j >= 0; --j) {
    const uint64_t t = m * TwoOverPiWord(k - 2 + 32 * j) + carry;
    limb[3 - j] = static_cast<uint32_t>(t);
    carry = t >> 32;
  }
  const uint64_t hi = (static_cast<uint64_t>(limb[3]) << 32) | limb[2];
  uint64_t lo = (static_cast<uint64_t>(limb[1]) << 32) | limb[0];
  // Quarter turns q = hi:lo / 2^126 in [0, 4); n = nearest integer (4 wraps to 0 mod 4).
  const uint64_t n = (hi + (uint64_t{1} << 61)) >> 62;
  uint64_t frac_hi = hi - (n << 62);  // two's complement, signed fraction in [-2^61, 2^61)
  const bool negative = (frac_hi >> 63) != 0;
  if (negative) {  // negate the 128-bit value
    frac_hi = ~frac_hi + (lo == 0 ? 1 : 0);
    lo = ~lo + 1;
  }
  double quarter = 0.0;
  if (frac_hi != 0 || lo != 0) {
    const int shift = frac_hi != 0 ? std::countl_zero(frac_hi) : 64 + std::countl_zero(lo);
    uint64_t top, rest;
    if (shift < 64) {
      top = shift == 0 ? frac_hi : (frac_hi << shift) | (lo >> (64 - shift));
      rest = lo << shift;
    } else {
      top = lo << (shift - 64);
      rest = 0;
    }
    // One rounding: the sticky bit stands for the bits below the 64 kept ones.
    const double significand = static_cast<double>(top | (rest != 0 ? 1 : 0));
    // value = top * 2^(64 - 126 - shift), a normal double since shift < 128.
    quarter = significand * DoubleFromBits(static_cast<uint64_t>(1023 - 62 - shift) << 52);
  }
  double reduced = quarter * kPio2x1;
  if (negative) reduced = -reduced;
  int quadrant = static_cast<int>(n & 3);
  if ((FloatBits(x) >> 31) != 0) {
    reduced = -reduced;
    quadrant = -quadrant;
  }
  *y = reduced;
  return quadrant;
}

// x - n*pi/2 for |x| > 9pi/4 finite: the engine's medium-range path below 2^28*pi/2.
int ReducePio2(float x, double* y) {
  if ((FloatBits(x) & 0x7fffffff) >= 0x4dc90fdb) return ReducePio2Large(x, y);
  const double xd = x;
  double fn = xd * kInvPio2 + kToInt - kToInt;
  int n = static_cast<int>(fn);
  *y = xd - fn * kPio2Hi - fn * kPio2Lo;
  // Matters only under directed rounding, but it is the engine's code path.
  if (*y < -kPio4) {
    --n;
    fn = fn - 1.0;
    *y = xd - fn * kPio2Hi - fn * kPio2Lo;
  } else if (*y > kPio4) {
    ++n;
    fn = fn + 1.0;
    *y = xd - fn * kPio2Hi - fn * kPio2Lo;
  }
  return n;
}

// log2(x) for the bits of a positive normal x (or a subnormal pre-scaled to a negative exponent).
double Log2Inline(uint32_t ix) {
  const uint32_t tmp = ix - kLogOff;
  const int i = static_cast<int>((tmp >> 19) % 16);
  const uint32_t top = tmp & 0xff800000;
  const uint32_t iz = ix - top;
  const int k = static_cast<int32_t>(top) >> 23;  // arithmetic shift
  const double invc = kPowLog2Table[i][0], logc = kPowLog2Table[i][1];
  const double z = FloatFromBits(iz);
  const double r = z * invc - 1.0;
  const double y0 = logc + static_cast<double>(k);
  const double r2 = r * r;
  const double y = kPowLog2Poly[0] * r + kPowLog2Poly[1];
  const double p = kPowLog2Poly[2] * r + kPowLog2Poly[3];
  const double r4 = r2 * r2;
  double q = kPowLog2Poly[4] * r + y0;
  q = p * r2 + q;
  return y * r4 + q;
}

// 2^xd as float, |xd| < 150, with sign_bias (0 or 1 << 16) flipping the result's sign bit.
float Exp2Inline(double xd, uint64_t sign_bias) {
  double kd = xd + kExp2ShiftScaled;
  const uint64_t ki = DoubleBits(kd);
  kd -= kExp2ShiftScaled;  // k/32
  const double r = xd - kd;
  uint64_t t = kExp2Table[ki % 32];
  t += (ki + sign_bias) << (52 - kExp2TableBits);
  const double s = DoubleFromBits(t);
  const double p = kExp2Poly[0] * r + kExp2Poly[1];
  const double r2 = r * r;
  double y = kExp2Poly[2] * r + 1.0;
  y = p * r2 + y;
  y = y * s;
  return static_cast<float>(y);
}

// For finite nonzero y bits: 0 if not an integer, 1 if odd, 2 if even.
int IntegerKind(uint32_t iy) {
  const int e = static_cast<int>((iy >> 23) & 0xff);
  if (e < 0x7f) return 0;
  if (e > 0x7f + 23) return 2;
  if ((iy & ((1u << (0x7f + 23 - e)) - 1)) != 0) return 0;
  if ((iy & (1u << (0x7f + 23 - e))) != 0) return 1;
  return 2;
}

// True for +-0, +-inf and NaN.
bool IsZeroInfNan(uint32_t i) { return 2 * i - 1 >= 2u * 0x7f800000 - 1; }

}  // namespace

float Expf(float x) {
  const uint32_t abs_top12 = (FloatBits(x) >> 20) & 0x7ff;
  if (abs_top12 >= 0x42b) {  // |x| >= 88, inf or NaN
    if (FloatBits(x) == 0xff800000) return 0.0f;
    if (abs_top12 >= 0x7f8) return x + x;
    if (x > 0x1.62e42ep6f) return kInf;   // above ln(2^128)
    if (x < -0x1.9fe368p6f) return 0.0f;  // below ln(2^-150)
  }
  const double xd = x;
  const double z = kExpInvLn2N * xd;
  double kd = z + kExpShift;
  const uint64_t ki = DoubleBits(kd);
  kd -= kExpShift;
  const double r = z - kd;  // x*32/ln2 = k + r, |r| <= 1/2
  uint64_t t = kExp2Table[ki % 32];
  t += ki << (52 - kExp2TableBits);
  const double s = DoubleFromBits(t);  // 2^(k/32)
  const double p = kExpPoly[0] * r + kExpPoly[1];
  const double r2 = r * r;
  double y = kExpPoly[2] * r + 1.0;
  y = p * r2 + y;
  y = y * s;
  return static_cast<float>(y);
}

float Logf(float x) {
  uint32_t ix = FloatBits(x);
  if (ix == 0x3f800000) return 0.0f;
  if (ix - 0x00800000u >= 0x7f800000u - 0x00800000u) {  // subnormal, zero, negative, inf, NaN
    if (ix * 2 == 0) return -kInf;
    if (ix == 0x7f800000) return x;
    if (ix * 2 > 0xff000000u) return x + x;  // NaN
    if ((ix & 0x80000000) != 0) return kNaN;
    ix = FloatBits(x * 0x1p23f);  // subnormal: normalize, exponent becomes negative
    ix -= 23u << 23;
  }
  const uint32_t tmp = ix - kLogOff;
  const int i = static_cast<int>((tmp >> 19) % 16);
  const int k = static_cast<int32_t>(tmp) >> 23;  // arithmetic shift
  const uint32_t iz = ix - (tmp & 0xff800000);
  const double invc = kLogInvC[i], logc = kLogLogC[i];
  const double z = FloatFromBits(iz);
  const double r = z * invc - 1.0;  // log(x) = k ln2 + log(c) + log1p(r)
  const double y0 = logc + static_cast<double>(k) * kLogLn2;
  const double r2 = r * r;
  double y = kLogPoly[1] * r + kLogPoly[2];
  y = kLogPoly[0] * r2 + y;
  y = y * r2 + (y0 + r);
  return static_cast<float>(y);
}

float Sinf(float x) {
  const uint32_t ix = FloatBits(x) & 0x7fffffff;
  const bool negative = (FloatBits(x) >> 31) != 0;
  const double xd = x;
  if (ix <= 0x3f490fda) {           // |x| <~ pi/4
    if (ix < 0x39800000) return x;  // |x| < 2^-12
    return SinKernel(xd);
  }
  if (ix <= 0x407b53d1) {    // |x| <~ 5pi/4
    if (ix <= 0x4016cbe3) {  // |x| <~ 3pi/4
      return negative ? -CosKernel(xd + kPio2x1) : CosKernel(xd - kPio2x1);
    }
    return SinKernel(negative ? -(xd + kPio2x2) : -(xd - kPio2x2));
  }
  if (ix <= 0x40e231d5) {    // |x| <~ 9pi/4
    if (ix <= 0x40afeddf) {  // |x| <~ 7pi/4
      return negative ? CosKernel(xd + kPio2x3) : -CosKernel(xd - kPio2x3);
    }
    return SinKernel(negative ? xd + kPio2x4 : xd - kPio2x4);
  }
  if (ix > 0x7f800000) return x + x;
  if (ix == 0x7f800000) return kNaN;
  double y;
  switch (ReducePio2(x, &y) & 3) {
    case 0:
      return SinKernel(y);
    case 1:
      return CosKernel(y);
    case 2:
      return SinKernel(-y);
    default:
      return -CosKernel(y);
  }
}

float Cosf(float x) {
  const uint32_t ix = FloatBits(x) & 0x7fffffff;
  const bool negative = (FloatBits(x) >> 31) != 0;
  const double xd = x;
  if (ix <= 0x3f490fda) {              // |x| <~ pi/4
    if (ix < 0x39800000) return 1.0f;  // |x| < 2^-12
    return CosKernel(xd);
  }
  if (ix <= 0x407b53d1) {   // |x| <~ 5pi/4
    if (ix > 0x4016cbe3) {  // |x| >~ 3pi/4
      return -CosKernel(negative ? xd + kPio2x2 : xd - kPio2x2);
    }
    return negative ? SinKernel(xd + kPio2x1) : SinKernel(kPio2x1 - xd);
  }
  if (ix <= 0x40e231d5) {   // |x| <~ 9pi/4
    if (ix > 0x40afeddf) {  // |x| >~ 7pi/4
      return CosKernel(negative ? xd + kPio2x4 : xd - kPio2x4);
    }
    return negative ? SinKernel(-xd - kPio2x3) : SinKernel(xd - kPio2x3);
  }
  if (ix > 0x7f800000) return x + x;
  if (ix == 0x7f800000) return kNaN;
  double y;
  switch (ReducePio2(x, &y) & 3) {
    case 0:
      return CosKernel(y);
    case 1:
      return SinKernel(-y);
    case 2:
      return -CosKernel(y);
    default:
      return SinKernel(y);
  }
}

float Powf(float x, float y) {
  uint64_t sign_bias = 0;
  uint32_t ix = FloatBits(x);
  const uint32_t iy = FloatBits(y);
  if (ix - 0x00800000u >= 0x7f800000u - 0x00800000u || IsZeroInfNan(iy)) {
    // x is subnormal, zero, negative, inf or NaN, or y is zero, inf or NaN.
    if (IsZeroInfNan(iy)) {
      // x^0 = 1 and 1^y = 1 even for NaN (signaling NaNs are not special-cased in this build).
      if (2 * iy == 0 || ix == 0x3f800000) return 1.0f;
      if (2 * ix > 2u * 0x7f800000 || 2 * iy > 2u * 0x7f800000) return x + y;
      if (2 * ix == 2 * 0x3f800000) return 1.0f;  // (-1)^+-inf
      // |x| < 1 with y = +inf, or |x| > 1 with y = -inf.
      if ((2 * ix < 2 * 0x3f800000) == ((iy & 0x80000000) == 0)) return 0.0f;
      return y * y;
    }
    if (IsZeroInfNan(ix)) {
      float x2 = x * x;
      if ((ix & 0x80000000) != 0 && IntegerKind(iy) == 1) x2 = -x2;
      return (iy & 0x80000000) != 0 ? 1.0f / x2 : x2;
    }
    // x and y are finite and nonzero.
    if ((ix & 0x80000000) != 0) {  // x < 0: defined for integer y only
      const int kind = IntegerKind(iy);
      if (kind == 0) return kNaN;
      if (kind == 1) sign_bias = uint64_t{1} << (kExp2TableBits + 11);
      ix &= 0x7fffffff;
    }
    if (ix < 0x00800000) {  // subnormal: normalize, exponent becomes negative
      ix = FloatBits(x * 0x1p23f);
      ix &= 0x7fffffff;
      ix -= 23u << 23;
    }
  }
  const double logx = Log2Inline(ix);
  const double ylogx = static_cast<double>(y) * logx;                       // y is exact in double
  if (((DoubleBits(ylogx) >> 47) & 0xffff) >= (DoubleBits(126.0) >> 47)) {  // |y log2 x| >= 126
    const float sign = sign_bias != 0 ? -1.0f : 1.0f;
    if (ylogx > 0x1.fffffffd1d571p+6) return sign * kInf;  // overflow
    if (ylogx <= -150.0) return sign * 0.0f;               // underflow
  }
  return Exp2Inline(ylogx, sign_bias);
}

}  // namespace needle::kernels::libm
