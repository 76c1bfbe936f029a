// AVX-512 + VNNI int8 attention (attention_i8.h): attention_i8_x86_impl.h compiled with
// -mavx512vnni (vpdpbusd on keys offset by +128). Bit-exact with the scalar reference; built with
// -ffp-contract=off. Only called when the CPU has AVX512_VNNI (checked by the dispatcher).
#include "kernels/attention_i8_x86_impl.h"  // first: includes <immintrin.h> (see there)

#if !defined(__AVX512VNNI__)
#error "attention_i8_avx512vnni.cpp must be compiled with -mavx512vnni (CMakeLists.txt)"
#endif

namespace needle::kernels {

void AttendI8Avx512Vnni(const I8Queries& q, const I8KvView& kv, const uint32_t* slots, size_t count,
                        AttendExpfFn expf_array, float* scores, float* o) {
  AttendX86<Avx512Policy>(q, kv, slots, count, expf_array, scores, o);
}

}  // namespace needle::kernels
