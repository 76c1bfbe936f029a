// Checks `needle verify` runs on a model's own tensors without goldens: every compiled kernel
// against the scalar reference, and the compressed product against decoded rows.
#pragma once

#include <string>
#include <vector>

#include "format/cact.h"

namespace needle::model {

// Named error limits (relative to the largest |reference output| of the tensor's sampled rows).
inline constexpr double kKernelRelTolerance = 1e-5;  // ISA kernel vs scalar reference
inline constexpr double kDecodeRelTolerance = 1e-5;  // code-domain product vs decoded row dot

struct KernelCheck {
  std::string tensor;
  std::string isa;          // the ISA compared with the scalar reference
  size_t rows_checked = 0;  // sampled rows x tokens
  double max_rel_diff = 0;  // max |isa - ref| / max |ref|
  bool pass = false;
};

// FWHT: the ISA version at every size the model uses, which must be bit-identical (entries named
// "fwht[n]"). Then for every CQ tensor: rows sampled from the start, middle and end; activations
// from a fixed pseudo-random stream; 1 and 5 tokens. One entry per (tensor, ISA other than scalar),
// plus "<tensor> int8" for the official path's integer product, which must be bit-identical.
std::vector<KernelCheck> CheckKernels(const format::CactFile& file);

struct DecodeCheck {
  std::string tensor;
  size_t rows_checked = 0;
  double max_rel_diff = 0;  // max |reference kernel - dot(decoded row, x)| / max |dot|
  bool pass = false;
};

// For every CQ tensor: the code-domain product (scalar reference) against a dense dot with rows
// decoded one by one (CqDecodeRow), on sampled rows.
std::vector<DecodeCheck> CheckDecodedProducts(const format::CactFile& file);

struct RoundTripCheck {
  std::string tensor;
  size_t rows_checked = 0;
  double decode_max_rel_diff = 0;  // quant::DequantizeRow vs kernels::CqDecodeRow
  double code_match = 0;           // fraction of codes unchanged by re-quantizing decoded rows
  // Re-quantized group norm vs stored norm * ||levels[codes]|| (what a decoded group's norm is).
  double norm_max_rel_diff = 0;
  bool pass = false;
};

// Limits of the round trip. Re-quantizing a decoded row is not idempotent (FORMAT.md): a group's
// norm becomes norm * ||levels[codes]||, and a few codes may move to a neighbour.
inline constexpr double kRoundTripDecodeRelTolerance = 1e-5;
inline constexpr double kRoundTripMinCodeMatch = 0.95;
inline constexpr double kRoundTripNormRelTolerance = 1e-3;  // f16 rounding (2^-11) plus slack

// For every CQ tensor, on sampled rows: the codec's decoder against the kernels' row decoder,
// then decoded rows re-quantized with lib/quant and compared with the stored codes.
std::vector<RoundTripCheck> CheckCqRoundTrip(const format::CactFile& file);

}  // namespace needle::model
