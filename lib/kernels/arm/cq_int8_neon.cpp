// Baseline AArch64 NEON integer CQ kernels (cq_int8.h): the driver of cq_int8_arm_impl.h with
// SMULL / SMLAL / SADALP dots. Bit-exact with the scalar reference; built with -ffp-contract=off.
#include "kernels/arm/cq_int8_arm_impl.h"

namespace needle::kernels {

void CqQuantizeI8Neon(const float* x, size_t n, size_t cols, size_t ldx, size_t in_pad,
                      uint32_t code_bits, int8_t* q, float* scales) {
  QuantizeActs(x, n, cols, ldx, in_pad, code_bits, q, scales);
}

void CqGemmI8Neon(const CqMatrix& m, const I8Codebook& cb, const I8Acts& acts, size_t row_begin,
                  size_t row_end, float* y, size_t ldy) {
  GemmActs(m, cb, acts, row_begin, row_end, y, ldy);
}

int32_t DotI8Neon(const int8_t* a, const int8_t* b, size_t n) { return DotAny(a, b, n); }

uint64_t MacPeakNeon(uint64_t rounds) { return MacPeak(rounds); }

}  // namespace needle::kernels
