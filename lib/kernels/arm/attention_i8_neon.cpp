// Baseline NEON int8 attention (attention_i8.h): the driver of attention_i8_arm_impl.h with SMULL /
// SMLAL / SADALP dots. Bit-exact with the scalar reference; built with -ffp-contract=off.
#include "kernels/arm/attention_i8_arm_impl.h"

namespace needle::kernels {

void AttendI8Neon(const I8Queries& q, const I8KvView& kv, const uint32_t* slots, size_t count,
                  AttendExpfFn expf_array, float* scores, float* o) {
  AttendArm(q, kv, slots, count, expf_array, scores, o);
}

}  // namespace needle::kernels
