// Kernel and decode self-checks on a model's own tensors (selfcheck.h).
#include "model/selfcheck.h"

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "kernels/dispatch.h"
#include "model/weights.h"

namespace needle::model {

namespace {

constexpr size_t kSampleRows = 37;  // per region (start, middle, end): an awkward count

// Rows to check: up to kSampleRows at the start, middle and end of the matrix.
std::vector<std::pair<size_t, size_t>> SampleRanges(size_t rows) {
  if (rows <= 3 * kSampleRows) return {{0, rows}};
  const size_t mid = rows / 2 - kSampleRows / 2;
  return {{0, kSampleRows}, {mid, mid + kSampleRows}, {rows - kSampleRows, rows}};
}

// Deterministic activations in [-1, 1) (xorshift32).
void FillActivations(std::vector<float>* x, uint32_t seed) {
  uint32_t s = seed * 2654435761u + 1;
  for (float& v : *x) {
    s ^= s << 13;
    s ^= s >> 17;
    s ^= s << 5;
    v = static_cast<float>(s >> 8) / static_cast<float>(1 << 24) * 2.f - 1.f;
  }
}

}  // namespace

std::vector<KernelCheck> CheckKernels(const format::CactFile& file) {
  std::vector<KernelCheck> out;
  const std::vector<std::string> isas = kernels::AvailableIsas();
  for (const auto& t : file.tensors()) {
    if (t.dtype != format::DType::kCQ) continue;
    const kernels::CqMatrix m = CqMatrixOf(file, t);
    for (const std::string& isa : isas) {
      if (isa == "scalar") continue;
      const kernels::KernelTable& fast = kernels::KernelsFor(isa);
      KernelCheck c{t.name, isa, 0, 0.0, false};
      double max_diff = 0, max_ref = 0;
      for (size_t n : {size_t{1}, size_t{5}}) {
        std::vector<float> x(n * m.cols), x_hat(n * m.in_pad);
        FillActivations(&x, t.index + static_cast<uint32_t>(n));
        kernels::CqTransformActivations(x.data(), n, m.cols, m.cols, m.group, m.in_pad,
                                        x_hat.data());
        for (const auto& [b, e] : SampleRanges(m.rows)) {
          std::vector<float> ref(n * (e - b)), got(n * (e - b));
          kernels::CqGemmReference(m, x_hat.data(), n, b, e, ref.data(), e - b);
          fast.cq_gemm(m, x_hat.data(), n, b, e, got.data(), e - b);
          for (size_t i = 0; i < ref.size(); ++i) {
            max_diff = std::max(max_diff, static_cast<double>(std::fabs(ref[i] - got[i])));
            max_ref = std::max(max_ref, static_cast<double>(std::fabs(ref[i])));
          }
          c.rows_checked += n * (e - b);
        }
      }
      c.max_rel_diff = max_ref > 0 ? max_diff / max_ref : max_diff;
      c.pass = c.max_rel_diff <= kKernelRelTolerance;
      out.push_back(c);
    }
  }
  return out;
}

std::vector<DecodeCheck> CheckDecodedProducts(const format::CactFile& file) {
  std::vector<DecodeCheck> out;
  for (const auto& t : file.tensors()) {
    if (t.dtype != format::DType::kCQ) continue;
    const kernels::CqMatrix m = CqMatrixOf(file, t);
    DecodeCheck c{t.name, 0, 0.0, false};
    std::vector<float> x(m.cols), x_hat(m.in_pad), row(m.cols), scratch(m.in_pad);
    FillActivations(&x, t.index + 101);
    kernels::CqTransformActivations(x.data(), 1, m.cols, m.cols, m.group, m.in_pad, x_hat.data());
    double max_diff = 0, max_ref = 0;
    for (const auto& [b, e] : SampleRanges(m.rows)) {
      std::vector<float> y(e - b);
      kernels::CqGemmReference(m, x_hat.data(), 1, b, e, y.data(), e - b);
      for (size_t r = b; r < e; ++r) {
        kernels::CqDecodeRow(m, r, row.data(), scratch.data());
        double dense = 0;
        for (size_t i = 0; i < m.cols; ++i) dense += double{row[i]} * x[i];
        max_diff = std::max(max_diff, std::fabs(dense - y[r - b]));
        max_ref = std::max(max_ref, std::fabs(dense));
        ++c.rows_checked;
      }
    }
    c.max_rel_diff = max_ref > 0 ? max_diff / max_ref : max_diff;
    c.pass = c.max_rel_diff <= kDecodeRelTolerance;
    out.push_back(c);
  }
  return out;
}

}  // namespace needle::model
