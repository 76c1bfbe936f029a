// AArch64 NEON fast Walsh-Hadamard transform (kernels/fwht.h): the reference's butterflies in the
// same order, four lanes at a time (kernels/lane_algorithms.h on F32x4Neon), so the results are
// bit-identical to FwhtReference / FwhtUnnormalizedReference.
#include "kernels/arm/kernels_arm.h"
#include "kernels/arm/neon_common.h"
#include "kernels/fwht.h"
#include "kernels/lane_algorithms.h"

namespace needle::kernels {

void FwhtNeon(float* x, size_t n) { FwhtLanes<F32x4Neon>(x, n, true); }
void FwhtUnnormalizedNeon(float* x, size_t n) { FwhtLanes<F32x4Neon>(x, n, false); }

}  // namespace needle::kernels
