// Kernel and decode self-checks on a model's own tensors (selfcheck.h).
#include "model/selfcheck.h"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>

#include "base/fp16.h"
#include "kernels/arm/kernels_arm.h"
#include "kernels/cpu_features.h"
#include "kernels/cq_int8.h"
#include "kernels/dispatch.h"
#include "kernels/fwht.h"
#include "model/weights.h"
#include "quant/cq.h"

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

namespace {

// The official path's integer product (quantizer + int8 GEMM of one ISA table) against the scalar
// reference: the outputs must be bit-identical (entry "<tensor> int8", max_rel_diff 0).
KernelCheck CheckIntegerKernel(const kernels::CqMatrix& m, const format::TensorInfo& t,
                               const kernels::KernelTable& fast) {
  const kernels::KernelTable& ref = kernels::ReferenceKernels();
  const kernels::I8Codebook cb = kernels::MakeI8Codebook(m.levels, size_t{1} << m.code_bits);
  KernelCheck c{t.name + " int8", fast.isa, 0, 0.0, true};
  double max_diff = 0, max_ref = 0;
  for (size_t n : {size_t{1}, size_t{5}}) {
    std::vector<float> x(n * m.cols);
    FillActivations(&x, t.index + 7 + static_cast<uint32_t>(n));
    const size_t groups = m.in_pad / kernels::kI8Group;
    std::vector<int8_t> q_ref(n * m.in_pad), q_fast(n * m.in_pad);
    std::vector<float> s_ref(n * groups), s_fast(n * groups);
    ref.cq_quantize_i8(x.data(), n, m.cols, m.cols, m.in_pad, m.code_bits, q_ref.data(),
                       s_ref.data());
    fast.cq_quantize_i8(x.data(), n, m.cols, m.cols, m.in_pad, m.code_bits, q_fast.data(),
                        s_fast.data());
    const kernels::I8Acts a_ref{q_ref.data(), s_ref.data(), n, m.in_pad};
    const kernels::I8Acts a_fast{q_fast.data(), s_fast.data(), n, m.in_pad};
    for (const auto& [b, e] : SampleRanges(m.rows)) {
      std::vector<float> want(n * (e - b)), got(n * (e - b));
      ref.cq_gemm_i8(m, cb, a_ref, b, e, want.data(), e - b);
      fast.cq_gemm_i8(m, cb, a_fast, b, e, got.data(), e - b);
      for (size_t i = 0; i < want.size(); ++i) {
        max_diff = std::max(max_diff, static_cast<double>(std::fabs(want[i] - got[i])));
        max_ref = std::max(max_ref, static_cast<double>(std::fabs(want[i])));
        if (std::bit_cast<uint32_t>(want[i]) != std::bit_cast<uint32_t>(got[i])) c.pass = false;
      }
      c.rows_checked += n * (e - b);
    }
  }
  c.max_rel_diff = max_ref > 0 ? max_diff / max_ref : max_diff;
  return c;
}

}  // namespace

std::vector<KernelCheck> CheckKernels(const format::CactFile& file) {
  std::vector<KernelCheck> out;
  const std::vector<std::string> isas = kernels::AvailableIsas();
  // FWHT at every size this model uses (CQ groups, hada_n): the ISA version must be bit-identical.
  void (*fwht_isa)(float*, size_t) = nullptr;
  const char* fwht_isa_name = "";
#if defined(NEEDLE_X86)
  if (kernels::BestIsa() >= kernels::Isa::kAvx2) {
    fwht_isa = &kernels::FwhtAvx2;
    fwht_isa_name = "avx2";
  }
#elif defined(NEEDLE_ARM)
  if (kernels::IsaSupported(kernels::Isa::kNeon)) {
    fwht_isa = &kernels::FwhtNeon;
    fwht_isa_name = "neon";
  }
#endif
  if (fwht_isa != nullptr) {
    std::vector<size_t> sizes{file.geometry().hada_n};
    for (const auto& t : file.tensors())
      if (t.dtype == format::DType::kCQ) sizes.push_back(t.group);
    std::sort(sizes.begin(), sizes.end());
    sizes.erase(std::unique(sizes.begin(), sizes.end()), sizes.end());
    for (size_t n : sizes) {
      if (n < 8) continue;
      std::vector<float> a(n), b;
      FillActivations(&a, static_cast<uint32_t>(n));
      b = a;
      kernels::FwhtReference(a.data(), n);
      fwht_isa(b.data(), n);
      double max_diff = 0, max_ref = 0;
      for (size_t i = 0; i < n; ++i) {
        max_diff = std::max(max_diff, static_cast<double>(std::fabs(a[i] - b[i])));
        max_ref = std::max(max_ref, static_cast<double>(std::fabs(a[i])));
      }
      KernelCheck c{fmt::format("fwht[{}]", n), fwht_isa_name, n, 0.0, false};
      c.max_rel_diff = max_ref > 0 ? max_diff / max_ref : max_diff;
      c.pass = max_diff == 0;  // same butterflies in the same order
      out.push_back(c);
    }
  }
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
      if (m.group == kernels::kI8Group) out.push_back(CheckIntegerKernel(m, t, fast));
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

std::vector<RoundTripCheck> CheckCqRoundTrip(const format::CactFile& file) {
  std::vector<RoundTripCheck> out;
  for (const auto& t : file.tensors()) {
    if (t.dtype != format::DType::kCQ) continue;
    const kernels::CqMatrix m = CqMatrixOf(file, t);
    const std::span<const uint8_t> blob = file.data(t);
    quant::CqParams p;
    p.rows = m.rows;
    p.cols = m.cols;
    p.group = t.group;
    p.record_bits = t.bits;
    const std::vector<float> levels = quant::Levels(file.codebooks(), t.bits, t.group);
    // Sampled rows, decoded by both decoders.
    std::vector<size_t> rows;
    for (const auto& [b, e] : SampleRanges(m.rows))
      for (size_t r = b; r < e; ++r) rows.push_back(r);
    std::vector<float> decoded(rows.size() * m.cols), codec(m.cols), scratch(m.in_pad);
    double max_diff = 0, max_abs = 0;
    for (size_t i = 0; i < rows.size(); ++i) {
      float* row = &decoded[i * m.cols];
      kernels::CqDecodeRow(m, rows[i], row, scratch.data());
      quant::DequantizeRow(blob, p, levels, rows[i], codec);
      for (size_t k = 0; k < m.cols; ++k) {
        max_diff = std::max(max_diff, static_cast<double>(std::fabs(row[k] - codec[k])));
        max_abs = std::max(max_abs, static_cast<double>(std::fabs(codec[k])));
      }
    }
    // Re-quantize the decoded rows as one small matrix and compare codes and values.
    quant::CqParams sp = p;
    sp.rows = rows.size();
    const std::vector<uint8_t> requant = quant::Quantize(decoded, sp, levels);
    std::vector<uint8_t> a(m.in_pad), b(m.in_pad);
    size_t same = 0, total = 0;
    double norm_diff = 0;
    const uint8_t* new_norms = requant.data() + sp.code_bytes();
    for (size_t i = 0; i < rows.size(); ++i) {
      quant::UnpackRow({m.codes + rows[i] * m.row_bytes, m.row_bytes}, t.bits, a);
      quant::UnpackRow({requant.data() + i * sp.row_bytes(), static_cast<size_t>(sp.row_bytes())},
                       t.bits, b);
      for (size_t k = 0; k < m.in_pad; ++k) same += a[k] == b[k];
      total += m.in_pad;
      for (size_t g = 0; g < m.groups_per_row; ++g) {
        double ss = 0;
        for (size_t k = g * m.group; k < (g + 1) * m.group; ++k)
          ss += double{levels[a[k]]} * levels[a[k]];
        const double expect =
            F16ToF32(LoadLE<uint16_t>(m.norms + 2 * (rows[i] * m.groups_per_row + g))) *
            std::sqrt(ss);
        const double got = F16ToF32(LoadLE<uint16_t>(new_norms + 2 * (i * m.groups_per_row + g)));
        if (expect > 0) norm_diff = std::max(norm_diff, std::fabs(got - expect) / expect);
      }
    }
    RoundTripCheck c;
    c.tensor = t.name;
    c.rows_checked = rows.size();
    c.decode_max_rel_diff = max_abs > 0 ? max_diff / max_abs : max_diff;
    c.code_match = total ? static_cast<double>(same) / static_cast<double>(total) : 1.0;
    c.norm_max_rel_diff = norm_diff;
    c.pass = c.decode_max_rel_diff <= kRoundTripDecodeRelTolerance &&
             c.code_match >= kRoundTripMinCodeMatch &&
             c.norm_max_rel_diff <= kRoundTripNormRelTolerance;
    out.push_back(c);
  }
  return out;
}

}  // namespace needle::model
