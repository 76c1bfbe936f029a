// AVX2 fast Walsh-Hadamard transform: the reference's butterflies in the same order, eight lanes
// at a time (kernels/lane_algorithms.h on F32x8), so results are bit-identical to FwhtReference.
// Compiled with -mavx2 -mfma -mf16c and -ffp-contract=off.
#include "kernels/fwht.h"
#include "kernels/lane_algorithms.h"
#include "kernels/x86_lanes.h"  // first: includes <immintrin.h> (see there)

namespace needle::kernels {

void FwhtAvx2(float* x, size_t n) { FwhtLanes<F32x8>(x, n, true); }
void FwhtUnnormalizedAvx2(float* x, size_t n) { FwhtLanes<F32x8>(x, n, false); }

}  // namespace needle::kernels
