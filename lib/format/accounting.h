// Size accounting of a .cact file by storage class (FORMAT.md "Published accounting"): metadata
// only, no tensor data is read except the file size.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "format/cact.h"

namespace needle::format {

// One storage class: "CQ2", "CQ3", "CQ4", "ternary", "FP16", "FP32", "RAW".
struct ClassTotals {
  std::string name;
  uint64_t tensors = 0;
  uint64_t elements = 0;    // logical elements (unpadded); 0 for RAW
  uint64_t blob_bytes = 0;  // directory nbytes summed
  uint64_t norm_bytes = 0;  // CQ only: f16 norm bytes inside the blobs
};

struct Accounting {
  std::vector<ClassTotals> classes;  // only classes present, in the order above
  uint64_t numeric_params = 0;       // elements of every non-RAW tensor
  uint64_t cq_elements = 0;
  double weighted_code_width = 0;  // bits per CQ element (codes only; ternary counted as 2)
  uint64_t norm_bytes = 0;         // all CQ norm bytes
  uint64_t payload_bytes = 0;      // blob bytes of every non-RAW tensor
  double payload_bits_per_param = 0;
  uint64_t file_bytes = 0;
  double file_bits_per_param = 0;
};

// Storage class name of one tensor ("CQ2", ..., "RAW").
std::string StorageClass(const TensorInfo& t);

Accounting Account(const CactFile& file);

}  // namespace needle::format
