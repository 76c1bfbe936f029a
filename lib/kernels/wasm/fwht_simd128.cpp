// WebAssembly SIMD128 fast Walsh-Hadamard transform (kernels/fwht.h): the reference's butterflies
// in the same order, four lanes at a time (stages h = 1, 2 inside a vector, then across vectors),
// so the results are bit-identical to FwhtReference / FwhtUnnormalizedReference.
#include <wasm_simd128.h>

#include "kernels/fwht.h"
#include "kernels/wasm/kernels_wasm.h"
#include "kernels/wasm/simd128_common.h"

namespace needle::kernels {
namespace {

using simd128::InVectorStages;
using simd128::Load;
using simd128::Store;

// All stages; with `normalize`, the scaling folded into the last one (same products).
void Transform(float* x, size_t n, bool normalize) {
  const v128_t scale = wasm_f32x4_splat(FwhtScale(n));
  for (size_t i = 0; i < n; i += 4) Store(x + i, InVectorStages(Load(x + i)));
  for (size_t h = 4; h < n; h *= 2) {
    const bool last = normalize && 2 * h == n;
    for (size_t block = 0; block < n; block += 2 * h) {
      for (size_t i = block; i < block + h; i += 4) {
        const v128_t a = Load(x + i), b = Load(x + i + h);
        v128_t sum = wasm_f32x4_add(a, b), diff = wasm_f32x4_sub(a, b);
        if (last) {
          sum = wasm_f32x4_mul(sum, scale);
          diff = wasm_f32x4_mul(diff, scale);
        }
        Store(x + i, sum);
        Store(x + i + h, diff);
      }
    }
  }
}

}  // namespace

void FwhtSimd128(float* x, size_t n) { Transform(x, n, true); }
void FwhtUnnormalizedSimd128(float* x, size_t n) { Transform(x, n, false); }

}  // namespace needle::kernels
