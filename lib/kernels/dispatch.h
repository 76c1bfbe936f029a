// The kernel dispatch table: one function pointer per kernel, chosen once at start-up from the
// CPU's features (or forced by name for tests and benchmarks). Plain data: no virtual calls.
#pragma once

#include <string>
#include <vector>

#include "kernels/attention_i8.h"
#include "kernels/cq_int8.h"
#include "kernels/cq_matmul.h"
#include "kernels/vmath.h"

namespace needle::kernels {

struct KernelTable {
  const char* isa = "scalar";  // "scalar", "avx2", "avx512", "neon", "dotprod", "simd128"
  CqGemmFn cq_gemm = nullptr;  // f32 path (upstream numerics)
  // Official (integer) numerics: quantize_i8's layout is only valid for this table's gemm_i8.
  CqQuantizeI8Fn cq_quantize_i8 = nullptr;
  CqGemmI8Fn cq_gemm_i8 = nullptr;
  DotI8Fn dot_i8 = nullptr;
  // Bit-exact with libm::Expf / libm::Logf / QuantizeI8 on every ISA (kernels/vmath.h).
  ExpfArrayFn expf_array = nullptr;
  LogfArrayFn logf_array = nullptr;
  QuantizeI8Fn quantize_i8 = nullptr;
  AttendI8Fn attend_i8 = nullptr;     // official attention over the int8 K/V ring
  SinkhornFn sinkhorn = nullptr;      // the mHC's Sinkhorn (bit-exact with SinkhornReference)
  DotI8RowsFn dot_i8_rows = nullptr;  // int8 rows against one vector (the mHC's φ products)
  MacPeakFn mac_peak = nullptr;       // machine limit: the int8 product's peak (needle bench)
  // The 16-row tile layout cq_gemm_i8 reads (CqMatrix::tiles of that layout) for 2-bit matrices;
  // the official path then builds them once per model. kNone: it reads codes and norms only.
  CqTileLayout cq_i8_tiles = CqTileLayout::kNone;
  // Whether one token's attention (a decode step) may split its kv heads among threads. False
  // where that measured slower than one thread doing all heads: the AVX-512 table without VNNI,
  // measured 6.6% slower on 2026-12-06 when a half's 4 heads ran their softmax one head at a
  // time (since then in xmm lanes: faster with VNNI; no CPU without it here to measure again).
  bool attend_split_heads = true;
  // Attention of several tokens of one call at once (a prefill block; kernels/attention_i8.h),
  // where a table has a kernel that shares work across them; null: attend_i8 per token.
  AttendI8BlockFn attend_i8_block = nullptr;
};

// The scalar reference table (always available).
const KernelTable& ReferenceKernels();
// Names of the tables this build contains, whatever this CPU runs, fastest last.
std::vector<std::string> CompiledIsas();
// Names of the tables this build contains that this CPU can run, fastest last.
std::vector<std::string> AvailableIsas();
// The table for `isa` ("scalar", "avx2", "avx512", "neon", "dotprod", "simd128"); throws UsageError
// if unknown or unsupported here.
const KernelTable& KernelsFor(const std::string& isa);
// The active table: follows kernels::ActiveIsa() (the best ISA unless limited by SelectIsa).
const KernelTable& ActiveKernels();
// Limits the active ISA (e.g. from an --isa option; also limits the FWHT). Call before decoding.
void SelectIsa(const std::string& isa);

}  // namespace needle::kernels
