// x86 versions of the integer CQ kernels (cq_int8.h) and the activation layout they share.
// Bit-exact: every function here gives the same bits as its scalar reference in cq_int8.cpp.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/cq_int8.h"

namespace needle::kernels {

// Position inside a 128-group of the quantized activation of column k (0 <= k < 128) in the
// layout every x86 table uses (chosen so that unpacking the weight codes needs only shifts, masks
// and one byte-table lookup, like the official engine):
//   2-bit (and ternary crumbs): byte b of the group's 32 code bytes holds columns 4b..4b+3, so the
//     crumb j of every byte is one vector:                       p = (k & 3) * 32 + k / 4
//   4-bit: the low / high nibbles of the 64 code bytes:          p = (k & 1) * 64 + k / 2
//   3-bit: every 3 bytes hold 8 codes (chunk d = k / 8, i = k % 8); each chunk is split into
//     its first and second four codes:                           p = (i / 4) * 64 + 4 d + i % 4
inline size_t I8LayoutPositionX86(uint32_t code_bits, size_t k) {
  switch (code_bits) {
    case 2:
      return (k & 3) * 32 + k / 4;
    case 3:
      return (k % 8 / 4) * 64 + 4 * (k / 8) + k % 4;
    default:
      return (k & 1) * 64 + k / 2;
  }
}

#if defined(NEEDLE_X86)
// AVX2 (+FMA, F16C): integer dots with vpmaddubsw / vpmaddwd.
void CqQuantizeI8Avx2(const float* x, size_t n, size_t cols, size_t ldx, size_t in_pad,
                      uint32_t code_bits, int8_t* q, float* scales);
void CqGemmI8Avx2(const CqMatrix& m, const I8Codebook& cb, const I8Acts& acts, size_t row_begin,
                  size_t row_end, float* y, size_t ldy);
int32_t DotI8Avx2(const int8_t* a, const int8_t* b, size_t n);
void DotI8RowsAvx2(const int8_t* a, size_t lda, size_t rows, const int8_t* x, size_t ldx, size_t nx,
                   size_t n, int32_t* out, size_t ldo);
uint64_t MacPeakAvx2(uint64_t rounds);

// AVX-512 F/BW/VL/DQ: the same layout as AVX2 (one quantizer serves both AVX-512 gemms).
void CqQuantizeI8Avx512(const float* x, size_t n, size_t cols, size_t ldx, size_t in_pad,
                        uint32_t code_bits, int8_t* q, float* scales);
void CqGemmI8Avx512(const CqMatrix& m, const I8Codebook& cb, const I8Acts& acts, size_t row_begin,
                    size_t row_end, float* y, size_t ldy);
int32_t DotI8Avx512(const int8_t* a, const int8_t* b, size_t n);
uint64_t MacPeakAvx512(uint64_t rounds);

// AVX-512 + VNNI (vpdpbusd / vpdpwssd); requires CpuFeatures::avx512vnni.
void CqGemmI8Avx512Vnni(const CqMatrix& m, const I8Codebook& cb, const I8Acts& acts,
                        size_t row_begin, size_t row_end, float* y, size_t ldy);
int32_t DotI8Avx512Vnni(const int8_t* a, const int8_t* b, size_t n);
uint64_t MacPeakAvx512Vnni(uint64_t rounds);
void DotI8RowsAvx512Vnni(const int8_t* a, size_t lda, size_t rows, const int8_t* x, size_t ldx,
                         size_t nx, size_t n, int32_t* out, size_t ldo);

// AVX-512 + VNNI + VBMI (vpermb code lookup); requires CpuFeatures::avx512vnni and avx512vbmi.
void CqGemmI8Avx512Vbmi(const CqMatrix& m, const I8Codebook& cb, const I8Acts& acts,
                        size_t row_begin, size_t row_end, float* y, size_t ldy);
#endif

}  // namespace needle::kernels
