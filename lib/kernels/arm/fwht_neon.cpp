// AArch64 NEON fast Walsh-Hadamard transform (kernels/fwht.h): the reference's butterflies in the
// same order, four lanes at a time (stages h = 1, 2 inside a vector, then across vectors), so the
// results are bit-identical to FwhtReference / FwhtUnnormalizedReference.
#include "kernels/arm/kernels_arm.h"
#include "kernels/arm/neon_common.h"
#include "kernels/fwht.h"

namespace needle::kernels {
namespace {

// All stages; with `normalize`, the scaling folded into the last one (same products).
void Transform(float* x, size_t n, bool normalize) {
  const float scale = FwhtScale(n);
  for (size_t i = 0; i < n; i += 4) vst1q_f32(x + i, InVectorStages(vld1q_f32(x + i)));
  for (size_t h = 4; h < n; h *= 2) {
    const bool last = normalize && 2 * h == n;
    for (size_t block = 0; block < n; block += 2 * h) {
      for (size_t i = block; i < block + h; i += 4) {
        const float32x4_t a = vld1q_f32(x + i), b = vld1q_f32(x + i + h);
        float32x4_t sum = vaddq_f32(a, b), diff = vsubq_f32(a, b);
        if (last) {
          sum = vmulq_n_f32(sum, scale);
          diff = vmulq_n_f32(diff, scale);
        }
        vst1q_f32(x + i, sum);
        vst1q_f32(x + i + h, diff);
      }
    }
  }
}

}  // namespace

void FwhtNeon(float* x, size_t n) { Transform(x, n, true); }
void FwhtUnnormalizedNeon(float* x, size_t n) { Transform(x, n, false); }

}  // namespace needle::kernels
