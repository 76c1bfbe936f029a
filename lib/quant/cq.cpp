// CQ codec: bit packing, quantize and dequantize, rounding exactly as the upstream exporter
// (numpy f32 with a reference-BLAS matmul) so blobs and reconstructions match it bit for bit.
#include "quant/cq.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstring>

#include "base/error.h"
#include "base/fp16.h"
#include "quant/codebooks.h"

namespace needle::quant {
namespace {

constexpr uint8_t kTritToCrumb[3] = {3, 0, 1};
constexpr uint8_t kCrumbToTrit[4] = {1, 2, 3, 0};  // crumb 2 is unused: decodes out of range
constexpr uint32_t kMaxStackGroup = 1024;          // DequantizeRow's allocation-free limit
// Matrices smaller than this stay on one thread (unused where OpenMP is absent, e.g. wasm).
[[maybe_unused]] constexpr uint64_t kParallelElements = 1 << 16;

constexpr bool Parity(uint32_t v) { return (std::popcount(v) & 1) != 0; }

// 4-lane vectors (GCC/Clang vector extensions: SSE on x86, NEON on ARM, no ISA flags needed).
typedef float F4 __attribute__((vector_size(16)));
typedef uint32_t U4 __attribute__((vector_size(16)));
constexpr uint32_t kSignBit = 0x80000000u;
constexpr uint32_t kBlock = 32;  // outputs per accumulator block in RotateGroupExact

// kLaneSigns[k % 32][lane] = sign bit of (-1)^parity(k & lane), lane < 32.
struct LaneSigns {
  alignas(16) uint32_t bits[kBlock][kBlock];
};
constexpr LaneSigns MakeLaneSigns() {
  LaneSigns t{};
  for (uint32_t k = 0; k < kBlock; ++k) {
    for (uint32_t lane = 0; lane < kBlock; ++lane)
      t.bits[k][lane] = Parity(k & lane) ? kSignBit : 0u;
  }
  return t;
}
constexpr LaneSigns kLaneSigns = MakeLaneSigns();

size_t LevelCount(uint32_t record_bits) {
  return record_bits == kTernaryBits ? 3 : size_t{1} << record_bits;
}

void CheckLevels(std::span<const float> levels, const CqParams& p) {
  if (levels.size() != LevelCount(p.record_bits)) {
    Fail<InvalidInput>("CQ: {} levels given for record bits {} (need {})", levels.size(),
                       p.record_bits, LevelCount(p.record_bits));
  }
}

// Rotated-domain values of one group (levels[code] * norm) into `v`. False if a code has no
// level (ternary crumb 2); its value is then 0.
bool GroupValues(const uint8_t* codes, uint32_t group, std::span<const float> levels, float norm,
                 float* v) {
  bool ok = true;
  for (uint32_t k = 0; k < group; ++k) {
    if (codes[k] < levels.size()) {
      v[k] = levels[codes[k]] * norm;
    } else {
      v[k] = 0.0f;
      ok = false;
    }
  }
  return ok;
}

// Code k of a packed row (trit index for ternary). A code spans at most two bytes (bits <= 4);
// the second byte is read only when the code crosses into it, so this never reads past the row.
inline uint8_t CodeAt(const uint8_t* packed, uint64_t k, uint32_t record_bits) {
  const bool ternary = record_bits == kTernaryBits;
  const uint32_t bits = ternary ? 2 : record_bits;
  const uint64_t bit = k * bits;
  uint32_t word = packed[bit / 8];
  if (bit % 8 + bits > 8) word |= static_cast<uint32_t>(packed[bit / 8 + 1]) << 8;
  const uint32_t code = (word >> (bit % 8)) & ((1u << bits) - 1);
  return ternary ? kCrumbToTrit[code] : static_cast<uint8_t>(code);
}

// Throws FormatError naming the first code of `row` that has no level.
[[noreturn]] void ThrowBadCode(std::span<const uint8_t> blob, const CqParams& p, uint64_t row) {
  const size_t count = LevelCount(p.record_bits);
  for (uint64_t k = 0; k < p.in_pad(); ++k) {
    const uint8_t code = CodeAt(blob.data() + row * p.row_bytes(), k, p.record_bits);
    if (code >= count) {
      Fail<FormatError>("CQ: row {} element {}: code {} has no level (of {}; ternary crumb 2)", row,
                        k, code, count);
    }
  }
  Fail<FormatError>("CQ: row {}: code without a level", row);
}

float NormOf(std::span<const uint8_t> blob, const CqParams& p, uint64_t row, uint64_t group_index) {
  const uint64_t at = p.code_bytes() + (row * p.groups_per_row() + group_index) * 2;
  return F16ToF32(LoadLE<uint16_t>(blob.data() + at));
}

}  // namespace

void CheckParams(const CqParams& p) {
  if (!std::has_single_bit(p.group))
    Fail<InvalidInput>("CQ: group {} is not a power of two", p.group);
  if (p.record_bits < 2 || p.record_bits > kTernaryBits) {
    Fail<InvalidInput>("CQ: record bits {} not in 2, 3, 4, 5 (ternary)", p.record_bits);
  }
  if (p.in_pad() * p.code_bits() % 8 != 0) {
    Fail<InvalidInput>("CQ: padded width {} at {} bits is not a whole number of bytes", p.in_pad(),
                       p.code_bits());
  }
}

float HadamardScale(uint32_t group) {
  return 1.0f / static_cast<float>(std::sqrt(static_cast<double>(group)));
}

void RotateGroupExact(const float* x, uint32_t group, float* out) {
  // H[k][j] = ±h, so each product x[k] * H[k][j] is ±(x[k] * h) exactly; out[j] is then the
  // in-order f32 sum over k of ±y[k], y[k] = x[k] * h, starting from +0.
  const float h = HadamardScale(group);
  if (group < kBlock) {
    std::fill(out, out + group, 0.0f);
    for (uint32_t k = 0; k < group; ++k) {
      const float v = x[k] * h;
      for (uint32_t j = 0; j < group; ++j) out[j] += Parity(k & j) ? -v : v;
    }
    return;
  }
  // Blocks of 32 outputs in 8 vector accumulators (one add chain per output, order kept). For
  // j = base + lane: sign = parity(k & lane) ^ parity(k & base), since base is a multiple of 32.
  for (uint32_t base = 0; base < group; base += kBlock) {
    F4 acc[kBlock / 4] = {};
    for (uint32_t k = 0; k < group; ++k) {
      const uint32_t flip = Parity(k & base) ? kSignBit : 0u;
      const U4 v = U4{} + (std::bit_cast<uint32_t>(x[k] * h) ^ flip);
      const uint32_t* signs = kLaneSigns.bits[k % kBlock];
      for (uint32_t r = 0; r < kBlock / 4; ++r) {
        U4 sign;
        std::memcpy(&sign, signs + 4 * r, sizeof(sign));
        acc[r] += std::bit_cast<F4>(v ^ sign);
      }
    }
    std::memcpy(out + base, acc, sizeof(acc));
  }
}

std::vector<float> Levels(std::span<const float> file_codebooks, uint32_t record_bits,
                          uint32_t group) {
  if (!std::has_single_bit(group)) Fail<InvalidInput>("CQ: group {} is not a power of two", group);
  if (record_bits == kTernaryBits) {
    const float c = static_cast<float>(kTernaryLevel / std::sqrt(static_cast<double>(group)));
    return {-c, 0.0f, c};
  }
  if (file_codebooks.size() != 28) {
    Fail<InvalidInput>("CQ: {} codebook values (need 28: cb2 | cb3 | cb4)", file_codebooks.size());
  }
  switch (record_bits) {
    case 2:
      return {file_codebooks.begin(), file_codebooks.begin() + 4};
    case 3:
      return {file_codebooks.begin() + 4, file_codebooks.begin() + 12};
    case 4:
      return {file_codebooks.begin() + 12, file_codebooks.end()};
    default:
      Fail<InvalidInput>("CQ: record bits {} not in 2, 3, 4, 5 (ternary)", record_bits);
  }
}

uint8_t NearestLevel(std::span<const float> levels, float u) {
  // numpy searchsorted (side left) clipped to [1, n-1], then the closer of the two neighbours.
  const size_t n = levels.size();
  size_t pos =
      static_cast<size_t>(std::lower_bound(levels.begin(), levels.end(), u) - levels.begin());
  pos = std::clamp<size_t>(pos, 1, n - 1);
  const float left = levels[pos - 1], right = levels[pos];
  return static_cast<uint8_t>(std::fabs(u - left) <= std::fabs(u - right) ? pos - 1 : pos);
}

void PackRow(std::span<const uint8_t> codes, uint32_t record_bits, std::span<uint8_t> out) {
  const bool ternary = record_bits == kTernaryBits;
  const uint32_t bits = ternary ? 2 : record_bits;
  const uint32_t mask = (1u << bits) - 1;
  std::fill(out.begin(), out.end(), uint8_t{0});
  const size_t n = std::min(codes.size(), out.size() * 8 / bits);
  for (size_t k = 0; k < n; ++k) {
    const uint32_t code = (ternary ? kTritToCrumb[codes[k] % 3] : codes[k]) & mask;
    const size_t bit = k * bits;
    const uint32_t shifted = code << (bit % 8);
    out[bit / 8] |= static_cast<uint8_t>(shifted);
    if ((shifted >> 8) != 0) out[bit / 8 + 1] |= static_cast<uint8_t>(shifted >> 8);
  }
}

void UnpackRow(std::span<const uint8_t> packed, uint32_t record_bits, std::span<uint8_t> codes) {
  const uint32_t bits = record_bits == kTernaryBits ? 2 : record_bits;
  const size_t n = std::min(codes.size(), packed.size() * 8 / bits);
  for (size_t k = 0; k < n; ++k) codes[k] = CodeAt(packed.data(), k, record_bits);
}

std::vector<uint8_t> Quantize(std::span<const float> weights, const CqParams& p,
                              std::span<const float> levels) {
  CheckParams(p);
  CheckLevels(levels, p);
  if (weights.size() != p.rows * p.cols) {
    Fail<InvalidInput>("CQ quantize: {} weights for a [{}, {}] matrix", weights.size(), p.rows,
                       p.cols);
  }
  for (uint64_t i = 0; i < weights.size(); ++i) {
    if (!std::isfinite(weights[i])) {
      Fail<InvalidInput>("CQ quantize: weight [{}, {}] is not finite ({})", i / p.cols, i % p.cols,
                         weights[i]);
    }
  }
  const uint32_t g = p.group;
  const uint64_t in_pad = p.in_pad(), groups = p.groups_per_row(), row_bytes = p.row_bytes();
  std::vector<uint8_t> blob(p.blob_bytes());
  const float floor = 1e-12f;  // upstream: rot / max(norm, 1e-12), in f32
  // Rows are independent; each is computed identically whatever the thread count.
#pragma omp parallel if (p.rows * in_pad >= kParallelElements)
  {
    std::vector<float> padded(in_pad, 0.0f), rot(g), squares(g);
    std::vector<uint8_t> codes(in_pad);
#pragma omp for schedule(static)
    for (uint64_t r = 0; r < p.rows; ++r) {
      const float* src = weights.data() + r * p.cols;
      std::copy(src, src + p.cols, padded.begin());  // the tail stays zero
      for (uint64_t gi = 0; gi < groups; ++gi) {
        RotateGroupExact(padded.data() + gi * g, g, rot.data());
        for (uint32_t j = 0; j < g; ++j) squares[j] = rot[j] * rot[j];
        const float norm = std::sqrt(0.0f + NumpyPairwiseSum(squares.data(), g));
        const float denom = std::max(norm, floor);
        for (uint32_t j = 0; j < g; ++j) codes[gi * g + j] = NearestLevel(levels, rot[j] / denom);
        const uint16_t half = F32ToF16(norm);
        uint8_t* norm_at = blob.data() + p.code_bytes() + (r * groups + gi) * 2;
        norm_at[0] = static_cast<uint8_t>(half & 0xff);
        norm_at[1] = static_cast<uint8_t>(half >> 8);
      }
      PackRow(codes, p.record_bits, std::span<uint8_t>(blob.data() + r * row_bytes, row_bytes));
    }
  }
  return blob;
}

std::vector<float> Dequantize(std::span<const uint8_t> blob, const CqParams& p,
                              std::span<const float> levels) {
  CheckParams(p);
  CheckLevels(levels, p);
  if (blob.size() != p.blob_bytes()) {
    Fail<InvalidInput>("CQ dequantize: blob of {} bytes for [{}, {}] g{} b{} (need {})",
                       blob.size(), p.rows, p.cols, p.group, p.record_bits, p.blob_bytes());
  }
  const uint32_t g = p.group;
  const uint64_t in_pad = p.in_pad(), row_bytes = p.row_bytes();
  std::vector<float> out(p.rows * p.cols);
  uint64_t bad_row = p.rows;  // first row with a code that has no level (reported after)
#pragma omp parallel if (p.rows * in_pad >= kParallelElements)
  {
    std::vector<uint8_t> codes(in_pad);
    std::vector<float> values(g), row(in_pad);
#pragma omp for schedule(static)
    for (uint64_t r = 0; r < p.rows; ++r) {
      UnpackRow(blob.subspan(r * row_bytes, row_bytes), p.record_bits, codes);
      for (uint64_t gi = 0; gi < p.groups_per_row(); ++gi) {
        if (!GroupValues(codes.data() + gi * g, g, levels, NormOf(blob, p, r, gi), values.data())) {
#pragma omp critical(needle_cq_bad_row)
          bad_row = std::min(bad_row, r);
        }
        RotateGroupExact(values.data(), g, row.data() + gi * g);
      }
      std::copy(row.begin(), row.begin() + p.cols, out.begin() + r * p.cols);
    }
  }
  if (bad_row < p.rows) ThrowBadCode(blob, p, bad_row);
  return out;
}

void DequantizeRow(std::span<const uint8_t> blob, const CqParams& p, std::span<const float> levels,
                   uint64_t row, std::span<float> out) {
  CheckParams(p);
  CheckLevels(levels, p);
  if (blob.size() < p.blob_bytes() || row >= p.rows || out.size() < p.cols) {
    Fail<InvalidInput>("CQ dequantize row {}: blob {} bytes (need {}), rows {}, out {} (need {})",
                       row, blob.size(), p.blob_bytes(), p.rows, out.size(), p.cols);
  }
  const uint32_t g = p.group;
  std::array<uint8_t, kMaxStackGroup> codes_stack;
  std::array<float, kMaxStackGroup> values_stack, rot_stack;
  std::vector<uint8_t> codes_heap;
  std::vector<float> values_heap, rot_heap;
  uint8_t* codes = codes_stack.data();
  float* values = values_stack.data();
  float* rot = rot_stack.data();
  if (g > kMaxStackGroup) {
    codes_heap.resize(g);
    values_heap.resize(g);
    rot_heap.resize(g);
    codes = codes_heap.data();
    values = values_heap.data();
    rot = rot_heap.data();
  }
  const uint8_t* packed_row = blob.data() + row * p.row_bytes();
  for (uint64_t gi = 0; gi < p.groups_per_row(); ++gi) {
    const uint64_t first = gi * g;
    if (first >= p.cols) break;
    for (uint32_t k = 0; k < g; ++k) codes[k] = CodeAt(packed_row, first + k, p.record_bits);
    if (!GroupValues(codes, g, levels, NormOf(blob, p, row, gi), values)) {
      ThrowBadCode(blob, p, row);
    }
    RotateGroupExact(values, g, rot);
    const uint64_t n = std::min<uint64_t>(g, p.cols - first);
    std::copy(rot, rot + n, out.begin() + first);
  }
}

}  // namespace needle::quant
