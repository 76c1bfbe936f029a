// Accounting: per-class totals and bits-per-parameter figures.
#include "format/accounting.h"

#include <array>

namespace needle::format {

std::string StorageClass(const TensorInfo& t) {
  switch (t.dtype) {
    case DType::kF16:
      return "FP16";
    case DType::kF32:
      return "FP32";
    case DType::kRaw:
      return "RAW";
    case DType::kCQ:
      return t.bits == kTernaryBits ? "ternary" : "CQ" + std::to_string(t.bits);
  }
  return "?";
}

Accounting Account(const CactFile& file) {
  static const std::array<const char*, 7> kOrder = {"CQ2",  "CQ3",  "CQ4", "ternary",
                                                    "FP16", "FP32", "RAW"};
  std::array<ClassTotals, 7> all;
  for (size_t i = 0; i < kOrder.size(); ++i) all[i].name = kOrder[i];
  Accounting a;
  uint64_t code_bits = 0;
  for (const TensorInfo& t : file.tensors()) {
    const std::string cls = StorageClass(t);
    size_t k = 0;
    while (k < kOrder.size() && cls != kOrder[k]) ++k;
    ClassTotals& c = all[k];
    c.tensors++;
    c.blob_bytes += t.nbytes;
    if (t.dtype == DType::kRaw) continue;
    c.elements += t.elements();
    a.numeric_params += t.elements();
    a.payload_bytes += t.nbytes;
    if (t.dtype == DType::kCQ) {
      const CqView v = file.cq(t);
      c.norm_bytes += v.rows * v.groups_per_row * 2;
      a.cq_elements += t.elements();
      code_bits += t.elements() * CodeBits(t.bits);
    }
  }
  for (auto& c : all) {
    a.norm_bytes += c.norm_bytes;
    if (c.tensors > 0) a.classes.push_back(c);
  }
  a.weighted_code_width = a.cq_elements ? double(code_bits) / double(a.cq_elements) : 0.0;
  a.file_bytes = file.bytes().size();
  if (a.numeric_params > 0) {
    a.payload_bits_per_param = 8.0 * double(a.payload_bytes) / double(a.numeric_params);
    a.file_bits_per_param = 8.0 * double(a.file_bytes) / double(a.numeric_params);
  }
  return a;
}

}  // namespace needle::format
