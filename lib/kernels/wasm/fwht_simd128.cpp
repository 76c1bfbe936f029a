// WebAssembly SIMD128 fast Walsh-Hadamard transform (kernels/fwht.h): the reference's butterflies
// in the same order, four lanes at a time (kernels/lane_algorithms.h on simd128::F32x4), so the
// results are bit-identical to FwhtReference / FwhtUnnormalizedReference.
#include <wasm_simd128.h>

#include "kernels/fwht.h"
#include "kernels/lane_algorithms.h"
#include "kernels/wasm/kernels_wasm.h"
#include "kernels/wasm/simd128_common.h"

namespace needle::kernels {

void FwhtSimd128(float* x, size_t n) { FwhtLanes<simd128::F32x4>(x, n, true); }
void FwhtUnnormalizedSimd128(float* x, size_t n) { FwhtLanes<simd128::F32x4>(x, n, false); }

}  // namespace needle::kernels
