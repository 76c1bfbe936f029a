// Fast Walsh-Hadamard transform: scalar reference and the dispatcher over ISA versions.
#include "kernels/fwht.h"

#include <cmath>

#include "kernels/cpu_features.h"
#if defined(NEEDLE_ARM)
#include "kernels/arm/kernels_arm.h"
#endif
#if defined(NEEDLE_WASM)
#include "kernels/wasm/kernels_wasm.h"
#endif

namespace needle::kernels {

float FwhtScale(size_t n) { return 1.0f / static_cast<float>(std::sqrt(static_cast<double>(n))); }

void FwhtUnnormalizedReference(float* x, size_t n) {
  // Sylvester order: stage h pairs element i with i + h inside each block of 2h.
  for (size_t h = 1; h < n; h *= 2) {
    for (size_t block = 0; block < n; block += 2 * h) {
      for (size_t i = block; i < block + h; ++i) {
        const float a = x[i], b = x[i + h];
        x[i] = a + b;
        x[i + h] = a - b;
      }
    }
  }
}

void FwhtReference(float* x, size_t n) {
  FwhtUnnormalizedReference(x, n);
  const float scale = FwhtScale(n);
  for (size_t i = 0; i < n; ++i) x[i] *= scale;
}

void FwhtUnnormalized(float* x, size_t n) {
#if defined(NEEDLE_X86)
  if (n >= 8 && ActiveIsa() >= Isa::kAvx2) {
    FwhtUnnormalizedAvx2(x, n);
    return;
  }
#endif
#if defined(NEEDLE_ARM)
  if (n >= 8 && ActiveIsa() >= Isa::kNeon) {
    FwhtUnnormalizedNeon(x, n);
    return;
  }
#endif
#if defined(NEEDLE_WASM)
  if (n >= 8 && ActiveIsa() == Isa::kSimd128) {
    FwhtUnnormalizedSimd128(x, n);
    return;
  }
#endif
  FwhtUnnormalizedReference(x, n);
}

void Fwht(float* x, size_t n) {
#if defined(NEEDLE_X86)
  if (n >= 8 && ActiveIsa() >= Isa::kAvx2) {
    FwhtAvx2(x, n);
    return;
  }
#endif
#if defined(NEEDLE_ARM)
  if (n >= 8 && ActiveIsa() >= Isa::kNeon) {
    FwhtNeon(x, n);
    return;
  }
#endif
#if defined(NEEDLE_WASM)
  if (n >= 8 && ActiveIsa() == Isa::kSimd128) {
    FwhtSimd128(x, n);
    return;
  }
#endif
  FwhtReference(x, n);
}

}  // namespace needle::kernels
