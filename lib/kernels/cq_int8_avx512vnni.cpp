// AVX-512 + VNNI integer CQ gemm and int8 dot: cq_int8_avx512_impl.h compiled with -mavx512vnni
// (vpdpbusd on offset weights, vpdpwssd). Activations come from CqQuantizeI8Avx512 (same layout).
// Bit-exact with the scalar reference; built with -ffp-contract=off. Only called when the CPU has
// AVX512_VNNI (checked by the dispatcher).
#include "kernels/cq_int8.h"
#include "kernels/cq_int8_avx512_impl.h"  // first: includes <immintrin.h> (see there)
#include "kernels/cq_int8_x86.h"

#if !defined(__AVX512VNNI__)
#error "cq_int8_avx512vnni.cpp must be compiled with -mavx512vnni (CMakeLists.txt)"
#endif

namespace needle::kernels {

void CqGemmI8Avx512Vnni(const CqMatrix& m, const I8Codebook& cb, const I8Acts& acts,
                        size_t row_begin, size_t row_end, float* y, size_t ldy) {
  GemmI8(m, cb, acts, row_begin, row_end, y, ldy);
}

int32_t DotI8Avx512Vnni(const int8_t* a, const int8_t* b, size_t n) { return DotI8(a, b, n); }

void DotI8RowsAvx512Vnni(const int8_t* a, size_t lda, size_t rows, const int8_t* x, size_t ldx,
                         size_t nx, size_t n, int32_t* out, size_t ldo) {
  DotI8Rows(a, lda, rows, x, ldx, nx, n, out, ldo);
}

uint64_t MacPeakAvx512Vnni(uint64_t rounds) { return MacPeak(rounds); }

}  // namespace needle::kernels
