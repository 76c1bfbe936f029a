// AArch64 dotprod integer CQ kernels (cq_int8.h): the driver of cq_int8_arm_impl.h with SDOT dots
// (compiled with -march=armv8.2-a+dotprod; called only when the CPU reports HWCAP_ASIMDDP). The
// activations come from CqQuantizeI8Neon (same layout). Bit-exact with the scalar reference.
#include "kernels/arm/cq_int8_arm_impl.h"

#if !defined(__ARM_FEATURE_DOTPROD)
#error "cq_int8_dotprod.cpp needs -march=armv8.2-a+dotprod (CMakeLists.txt sets it)"
#endif

namespace needle::kernels {

void CqGemmI8Dotprod(const CqMatrix& m, const I8Codebook& cb, const I8Acts& acts, size_t row_begin,
                     size_t row_end, float* y, size_t ldy) {
  GemmActs(m, cb, acts, row_begin, row_end, y, ldy);
}

int32_t DotI8Dotprod(const int8_t* a, const int8_t* b, size_t n) { return DotAny(a, b, n); }

uint64_t MacPeakDotprod(uint64_t rounds) { return MacPeak(rounds); }

}  // namespace needle::kernels
