// Attention over an int8 K/V ring (the official engine's arithmetic, NUMERICS.md §4.3 step 7), one
// token and all its query heads per call. Bit-exact: every ISA version gives the scalar
// reference's bits (tests/attention_i8_test.cpp); built with -ffp-contract=off. Per query head h
// (kv head g = h / (heads / kv_heads)), keys i in visiting order, slot p_i = slots[i]:
//   score  acc = 0; for 64-block b: acc = (float)I_b * k_scale[p_i, g, b] + acc   (I_b: int32 dot)
//          s_i = acc * qse[h]
//   max    m = -1e30f; if (m < s_i) m = s_i                                 (exact: order-free)
//   exp    e_i = expf_array(s_i - m)                                        (musl expf bits)
//   sum    sum = 0; sum = sum + e_i in visiting order; invs = 1.0f / sum
//   V      o_j = 0; for i: c = (e_i * invs) * v_scale[p_i, g, b(j)]; o_j = c * (float)v[p_i, g, j]
//   + o_j
// The integer order inside I_b is free (exact); every float chain above is sequential in i. The
// SIMD versions run across heads (scores stored key-major, [count, heads], a lane per head) for
// the softmax and across j for V, so each lane / element keeps its own sequential chain.
#pragma once

#include <cstddef>
#include <cstdint>

namespace needle::kernels {

// The K/V quantization block: one f32 scale per 64 codes.
inline constexpr size_t kAttendBlock = 64;
// The SIMD versions hold one key's heads * head_dim / 64 int32 block dots on the stack; larger
// shapes run the scalar reference.
inline constexpr size_t kAttendMaxRow = 512;
// The softmax's running-max start (the engine's).
inline constexpr float kAttendNegInit = -1e30f;

// An int8 K/V ring: kv_dim = kv_heads * head_dim codes per slot (or `row`), head_dim a multiple
// of 64.
// Codes lie in [-127, 127] (the engine's quantizer never yields -128; the SIMD dots rely on it).
struct I8KvView {
  const int8_t* k = nullptr;       // [slots, kv_dim] keys
  const int8_t* v = nullptr;       // [slots, kv_dim] values
  const float* k_scale = nullptr;  // [slots, kv_dim / 64]
  const float* v_scale = nullptr;  // [slots, kv_dim / 64]
  size_t kv_heads = 0, head_dim = 0;
  // Codes per slot in k / v (0 = kv_heads * head_dim; scales per slot: row / 64). A view of some
  // of a ring's kv heads (k, v and the scales pointing at its first head) keeps the ring's row:
  // the heads are independent, so splitting them among threads gives the same bits.
  size_t row = 0;
  size_t Row() const { return row ? row : kv_heads * head_dim; }
};

// One token's query heads: q [heads, head_dim] int8 codes in [-127, 127], qse [heads] (the query
// scale times 1/sqrtf(head_dim)); heads a multiple of kv.kv_heads.
struct I8Queries {
  const int8_t* q = nullptr;
  const float* qse = nullptr;
  size_t heads = 0;
};

// y[i] = libm::Expf(x[i]) for i < n, in place allowed (kernels/vmath.h's ExpfArrayFn).
using AttendExpfFn = void (*)(const float* x, float* y, size_t n);

// o [heads, head_dim] = attention of `q` over the `count` slots `slots` (visiting order, each
// < the ring's slot count; the same list for every head). `scores` is caller scratch of
// count * heads floats (key-major; holds the softmax weights e_i * invs on return). No
// allocation; thread-safe for distinct o / scores.
using AttendI8Fn = void (*)(const I8Queries& q, const I8KvView& kv, const uint32_t* slots,
                            size_t count, AttendExpfFn expf_array, float* scores, float* o);

// Scalar reference (any heads, head_dim a multiple of 64).
void AttendI8Reference(const I8Queries& q, const I8KvView& kv, const uint32_t* slots, size_t count,
                       AttendExpfFn expf_array, float* scores, float* o);

// y[i] = libm::Expf(x[i]): the scalar exponentials (a plain loop).
void AttendExpfScalar(const float* x, float* y, size_t n);

// Several tokens of one call at once (a prefill block): token t's `heads` query heads are
// q + t * heads * head_dim (scales qse + t * heads), its keys the first counts[t] entries of the
// slot list, which must be each token's visiting order (in one prefill call every token's list is
// a prefix of the longest: the same sinks and chunk-level window, up to its own position).
struct I8QueryBlock {
  const int8_t* q = nullptr;
  const float* qse = nullptr;
  size_t heads = 0;
  size_t tokens = 0;
  const size_t* counts = nullptr;
};

// Bytes of scratch an AttendI8BlockFn needs for `q` over keys of this shape (64-byte aligned
// inside; the caller's buffer needs no alignment).
size_t AttendI8BlockScratchBytes(const I8QueryBlock& q, const I8KvView& kv);

// o [tokens, heads * head_dim]: every token's attention, each output bit that of
// AttendI8Reference for that token alone (the same float chains, per token and head in key
// order). Scores of a token's keys are exact integer dots whatever their order, so a block may
// share its work across tokens: the int8 score products as one matrix product per kv head (the
// query rows of all tokens against each key), each key's values converted once for all.
using AttendI8BlockFn = void (*)(const I8QueryBlock& q, const I8KvView& kv, const uint32_t* slots,
                                 AttendExpfFn expf_array, void* scratch, float* o);

// Reference: AttendI8Reference per token.
void AttendI8BlockReference(const I8QueryBlock& q, const I8KvView& kv, const uint32_t* slots,
                            AttendExpfFn expf_array, void* scratch, float* o);

#if defined(NEEDLE_X86)
// AVX2: integer dots with vpsignb / vpmaddubsw / vpmaddwd. Falls back to the reference when
// heads * head_dim / 64 > kAttendMaxRow.
void AttendI8Avx2(const I8Queries& q, const I8KvView& kv, const uint32_t* slots, size_t count,
                  AttendExpfFn expf_array, float* scores, float* o);
// AVX-512 F/BW/VL/DQ: dots with masked negation / vpmaddubsw / vpmaddwd on 64-byte blocks.
void AttendI8Avx512(const I8Queries& q, const I8KvView& kv, const uint32_t* slots, size_t count,
                    AttendExpfFn expf_array, float* scores, float* o);
// AVX-512 + VNNI (vpdpbusd with keys offset by +128); requires CpuFeatures::avx512vnni.
void AttendI8Avx512Vnni(const I8Queries& q, const I8KvView& kv, const uint32_t* slots, size_t count,
                        AttendExpfFn expf_array, float* scores, float* o);
// The block kernel on AVX-512 VNNI: per kv head, the query rows (token, head) of all tokens as
// vector lanes: vpdpbusd of each key's broadcast dwords (+128) against the rows' transposed
// codes, softmax chains a lane per row (masked past a row's count), the value rows converted
// once and multiplied by each row's weights. Requires CpuFeatures::avx512vnni.
void AttendI8BlockAvx512Vnni(const I8QueryBlock& q, const I8KvView& kv, const uint32_t* slots,
                             AttendExpfFn expf_array, void* scratch, float* o);
#endif

}  // namespace needle::kernels
