// AArch64 versions of the kernel table's functions (kernels/dispatch.h) and the int8 activation
// layout both ARM tables share. Two families: `neon` (baseline Advanced SIMD, every AArch64 CPU)
// and `dotprod` (plus SDOT, ARMv8.2 dotprod: Cortex-A76 / Raspberry Pi 5 and later), the second
// compiled with -march=armv8.2-a+dotprod in its own files (*_dotprod.cpp) and only called after
// the dispatcher saw HWCAP_ASIMDDP. Bit-exact: every function gives its scalar reference's bits
// (tests/kernels_i8_test.cpp, attention_i8_test.cpp, vmath_test.cpp, quant_test.cpp).
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/attention_i8.h"
#include "kernels/cq_int8.h"

namespace needle::kernels {

// Position inside a 128-group of the quantized activation of column k (0 <= k < 128) in the ARM
// layout (chosen so that a group's weight codes become int8 vectors with one mask or shift and
// one 16-byte table lookup, TBL, per 16 weights):
//   2-bit (and ternary crumbs): each 16 code bytes b hold columns 4b..4b+3; the crumb j of those
//     bytes is one vector:                                   p = 64 (k / 64) + 16 (k % 4) + k / 4 %
//     16
//   4-bit: the low / high nibbles of each 16 code bytes:      p = 32 (k / 32) + 16 (k % 2) + k / 2
//   % 16 3-bit: column order                                      p = k
inline size_t I8LayoutPositionArm(uint32_t code_bits, size_t k) {
  switch (code_bits) {
    case 2:
      return 64 * (k / 64) + 16 * (k % 4) + k / 4 % 16;
    case 4:
      return 32 * (k / 32) + 16 * (k % 2) + k / 2 % 16;
    default:
      return k;
  }
}

#if defined(NEEDLE_ARM)
// Baseline NEON: integer dots with SMULL / SMLAL / SADALP. The quantizer serves both tables.
void CqQuantizeI8Neon(const float* x, size_t n, size_t cols, size_t ldx, size_t in_pad,
                      uint32_t code_bits, int8_t* q, float* scales);
void CqGemmI8Neon(const CqMatrix& m, const I8Codebook& cb, const I8Acts& acts, size_t row_begin,
                  size_t row_end, float* y, size_t ldy);
int32_t DotI8Neon(const int8_t* a, const int8_t* b, size_t n);
uint64_t MacPeakNeon(uint64_t rounds);
void ExpfArrayNeon(const float* x, float* y, size_t n);
void LogfArrayNeon(const float* x, float* y, size_t n);
float QuantizeI8Neon(const float* v, size_t n, int8_t* q);
// vmath.h's Sinkhorn: n = 4 in four vectors (lines in lanes, a transpose between phases); other n
// over the arrays above.
void SinkhornNeon(float* P, size_t n, size_t count, int rounds, float* scratch);
void AttendI8Neon(const I8Queries& q, const I8KvView& kv, const uint32_t* slots, size_t count,
                  AttendExpfFn expf_array, float* scores, float* o);

// dotprod (SDOT): requires CpuFeatures::dotprod.
void CqGemmI8Dotprod(const CqMatrix& m, const I8Codebook& cb, const I8Acts& acts, size_t row_begin,
                     size_t row_end, float* y, size_t ldy);
int32_t DotI8Dotprod(const int8_t* a, const int8_t* b, size_t n);
uint64_t MacPeakDotprod(uint64_t rounds);
void AttendI8Dotprod(const I8Queries& q, const I8KvView& kv, const uint32_t* slots, size_t count,
                     AttendExpfFn expf_array, float* scores, float* o);

// FWHT (kernels/fwht.h) on 4-float vectors; n a power of two >= 8.
void FwhtNeon(float* x, size_t n);
void FwhtUnnormalizedNeon(float* x, size_t n);
#endif

}  // namespace needle::kernels
