// AVX-512 F/BW/VL/DQ int8 attention (attention_i8.h): the x86 driver of attention_i8_x86_impl.h
// with 64-byte block dots (masked negation, vpmaddubsw / vpmaddwd) and 16-float vectors.
// Bit-exact with the scalar reference; built with -ffp-contract=off.
#include "kernels/attention_i8_x86_impl.h"  // first: includes <immintrin.h> (see there)

namespace needle::kernels {

void AttendI8Avx512(const I8Queries& q, const I8KvView& kv, const uint32_t* slots, size_t count,
                    AttendExpfFn expf_array, float* scores, float* o) {
  AttendX86<Avx512Policy>(q, kv, slots, count, expf_array, scores, o);
}

}  // namespace needle::kernels
