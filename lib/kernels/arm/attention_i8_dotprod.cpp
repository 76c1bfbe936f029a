// dotprod int8 attention (attention_i8.h): the driver of attention_i8_arm_impl.h with SDOT dots
// (-march=armv8.2-a+dotprod; called only when the CPU reports HWCAP_ASIMDDP). Bit-exact with the
// scalar reference; built with -ffp-contract=off.
#include "kernels/arm/attention_i8_arm_impl.h"

#if !defined(__ARM_FEATURE_DOTPROD)
#error "attention_i8_dotprod.cpp needs -march=armv8.2-a+dotprod (CMakeLists.txt sets it)"
#endif

namespace needle::kernels {

void AttendI8Dotprod(const I8Queries& q, const I8KvView& kv, const uint32_t* slots, size_t count,
                     AttendExpfFn expf_array, float* scores, float* o) {
  AttendArm(q, kv, slots, count, expf_array, scores, o);
}

}  // namespace needle::kernels
