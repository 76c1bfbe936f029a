// AVX-512 + VNNI + VBMI integer CQ gemm: cq_int8_avx512_impl.h compiled with -mavx512vnni and
// -mavx512vbmi (vpermb looks codes up without masking them). Activations come from
// CqQuantizeI8Avx512 (same layout). Bit-exact with the scalar reference; built with
// -ffp-contract=off. Only called when the CPU has AVX512_VNNI and AVX512_VBMI (the dispatcher).
#include "kernels/cq_int8.h"
#include "kernels/cq_int8_avx512_impl.h"  // first: includes <immintrin.h> (see there)
#include "kernels/cq_int8_x86.h"

#if !defined(__AVX512VNNI__) || !defined(__AVX512VBMI__)
#error "cq_int8_avx512vbmi.cpp must be compiled with -mavx512vnni -mavx512vbmi (CMakeLists.txt)"
#endif

namespace needle::kernels {

void CqGemmI8Avx512Vbmi(const CqMatrix& m, const I8Codebook& cb, const I8Acts& acts,
                        size_t row_begin, size_t row_end, float* y, size_t ldy) {
  GemmI8(m, cb, acts, row_begin, row_end, y, ldy);
}

}  // namespace needle::kernels
