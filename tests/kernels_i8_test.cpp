// Integer CQ kernels (cq_int8.h): every compiled table (and both AVX-512 gemms, with and without
// VNNI, where the CPU has them) against the scalar reference, bit for bit (memcmp), on awkward
// sizes, adversarial activations and the official-geometry fixture's tensors.
#include <algorithm>
#include <catch2/catch.hpp>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "base/fp16.h"
#include "format/cact.h"
#include "kernels/arm/kernels_arm.h"
#include "kernels/cpu_features.h"
#include "kernels/cq_int8.h"
#include "kernels/cq_int8_x86.h"
#include "kernels/dispatch.h"
#include "kernels/wasm/kernels_wasm.h"
#include "model/weights.h"
#include "test_util.h"

namespace {

using needle::testing::SameBits;

namespace k = needle::kernels;
using k::kI8Group;

// One implementation under test: a table's functions, or an AVX-512 gemm variant by name.
struct Variant {
  std::string name;
  k::CqQuantizeI8Fn quantize;
  k::CqGemmI8Fn gemm;
  k::DotI8Fn dot;
  // Position of column k of a group in the table's q layout (cq_int8_x86.h, arm/kernels_arm.h).
  size_t (*position)(uint32_t bits, size_t k);
};

size_t ColumnOrder(uint32_t /*bits*/, size_t k) { return k; }

size_t (*LayoutOf(const std::string& isa))(uint32_t, size_t) {
  if (isa == "neon" || isa == "dotprod") return &k::I8LayoutPositionArm;
  if (isa == "simd128") return &k::I8LayoutPositionWasm;
  if (isa == "scalar") return &ColumnOrder;
  return &k::I8LayoutPositionX86;
}

std::vector<Variant> Variants() {
  std::vector<Variant> out;
  for (const std::string& isa : k::AvailableIsas()) {
    const k::KernelTable& t = k::KernelsFor(isa);
    out.push_back({isa, t.cq_quantize_i8, t.cq_gemm_i8, t.dot_i8, LayoutOf(isa)});
  }
#if defined(NEEDLE_X86)
  if (k::BestIsa() >= k::Isa::kAvx512) {
    out.push_back({"avx512-bw", &k::CqQuantizeI8Avx512, &k::CqGemmI8Avx512, &k::DotI8Avx512,
                   &k::I8LayoutPositionX86});
    if (k::GetCpuFeatures().avx512vnni)
      out.push_back({"avx512-vnni", &k::CqQuantizeI8Avx512, &k::CqGemmI8Avx512Vnni,
                     &k::DotI8Avx512Vnni, &k::I8LayoutPositionX86});
    if (k::GetCpuFeatures().avx512vnni && k::GetCpuFeatures().avx512vbmi)
      out.push_back({"avx512-vbmi", &k::CqQuantizeI8Avx512, &k::CqGemmI8Avx512Vbmi,
                     &k::DotI8Avx512Vnni, &k::I8LayoutPositionX86});
  }
#endif
#if defined(NEEDLE_ARM)
  // Both ARM dot flavours whenever the CPU has SDOT (the table uses only the dotprod one).
  if (k::GetCpuFeatures().dotprod)
    out.push_back({"neon-quantizer+dotprod-gemm", &k::CqQuantizeI8Neon, &k::CqGemmI8Dotprod,
                   &k::DotI8Dotprod, &k::I8LayoutPositionArm});
#endif
  return out;
}

// On an x86 CPU with AVX2 (every AArch64 CPU: NEON) the fast tables must be there: a test that only
// compares the reference with itself would pass vacuously.
void RequireFastVariants(const std::vector<Variant>& variants) {
#if defined(NEEDLE_X86)
  if (k::GetCpuFeatures().avx2 && k::GetCpuFeatures().fma && k::GetCpuFeatures().f16c)
    REQUIRE(variants.size() >= 2);
#endif
#if defined(NEEDLE_ARM)
  REQUIRE(variants.size() >= 2);
  REQUIRE(variants[1].name == "neon");
  if (k::GetCpuFeatures().dotprod) REQUIRE(variants.size() >= 3);
#endif
#if defined(NEEDLE_WASM)
  REQUIRE(variants.size() == 2);
  REQUIRE(variants[1].name == "simd128");
#endif
  REQUIRE(variants.front().name == "scalar");
}

size_t Position(const Variant& v, uint32_t bits, size_t k) { return v.position(bits, k); }

// A random CQ matrix (group 128) with its storage and int8 codebook.
struct TestMatrix {
  k::CqMatrix m;
  k::I8Codebook cb;
  std::vector<uint8_t> codes, norms;
};

TestMatrix MakeMatrix(size_t rows, size_t cols, uint32_t bits, bool ternary, std::mt19937* rng) {
  TestMatrix t;
  k::CqMatrix& m = t.m;
  m.rows = rows;
  m.cols = cols;
  m.group = kI8Group;
  m.in_pad = (cols + kI8Group - 1) / kI8Group * kI8Group;
  m.groups_per_row = m.in_pad / kI8Group;
  m.code_bits = bits;
  m.row_bytes = m.in_pad * bits / 8;
  std::uniform_real_distribution<float> level(-0.3f, 0.3f), norm(0.05f, 4.f);
  if (ternary) {
    m.ternary = true;
    m.levels[0] = 0.f;
    m.levels[1] = 0.2f;
    m.levels[2] = 0.f;
    m.levels[3] = -0.2f;
  } else {
    for (uint32_t i = 0; i < (1u << bits); ++i) m.levels[i] = level(*rng);
  }
  t.cb = k::MakeI8Codebook(m.levels, size_t{1} << bits);
  t.codes.assign(rows * m.row_bytes, 0);
  for (size_t r = 0; r < rows; ++r)
    for (size_t i = 0; i < m.in_pad; ++i) {
      const uint32_t c = (*rng)() & ((1u << bits) - 1);
      const size_t bit = i * bits;
      uint8_t* row = t.codes.data() + r * m.row_bytes;
      row[bit / 8] |= static_cast<uint8_t>(c << (bit % 8));
      if (bit % 8 + bits > 8) row[bit / 8 + 1] |= static_cast<uint8_t>(c >> (8 - bit % 8));
    }
  t.norms.resize(rows * m.groups_per_row * 2);
  for (size_t i = 0; i < rows * m.groups_per_row; ++i) {
    float v = norm(*rng);
    if ((*rng)() % 7 == 0) v = -v;
    const uint16_t h = needle::F32ToF16(v);
    t.norms[2 * i] = static_cast<uint8_t>(h & 0xff);
    t.norms[2 * i + 1] = static_cast<uint8_t>(h >> 8);
  }
  m.codes = t.codes.data();
  m.norms = t.norms.data();
  return t;
}

// Unnormalized WHT of 128 values in the reference's order (double: exact for the small integers
// it is used on here).
void Wht128(double* v) {
  for (size_t h = 1; h < kI8Group; h *= 2)
    for (size_t b = 0; b < kI8Group; b += 2 * h)
      for (size_t i = b; i < b + h; ++i) {
        const double a = v[i], c = v[i + h];
        v[i] = a + c;
        v[i + h] = a - c;
      }
}

// Activations [n, ldx] with groups of every kind: gaussian, all zero, huge (1e30), tiny (1e-30),
// one spike, constant, and "halves": x = WHT(u) / 128 for integers u with max |u| = 254, so the
// quantizer sees z ~ c * u and z / s ~ u / 2 -- many values at or next to k + 0.5.
std::vector<float> MakeActivations(size_t n, size_t cols, size_t ldx, std::mt19937* rng) {
  std::vector<float> x(n * ldx, std::numeric_limits<float>::quiet_NaN());  // NaN: outside cols
  std::normal_distribution<float> gauss(0.f, 1.f);
  for (size_t t = 0; t < n; ++t)
    for (size_t base = 0; base < cols; base += kI8Group) {
      const size_t len = std::min(kI8Group, cols - base);
      float* g = x.data() + t * ldx + base;
      const uint32_t kind = (*rng)() % 8;
      double u[kI8Group] = {};
      switch (kind) {
        case 0:
          std::fill(g, g + len, 0.f);
          break;
        case 1:
        case 2:
          for (size_t i = 0; i < len; ++i) g[i] = gauss(*rng) * (kind == 1 ? 1e30f : 1e-30f);
          break;
        case 3:
          std::fill(g, g + len, 0.f);
          g[(*rng)() % len] = gauss(*rng);
          break;
        case 4:
          std::fill(g, g + len, 0.37f);
          break;
        case 5:
          for (double& v : u) v = static_cast<double>(static_cast<int>((*rng)() % 509) - 254);
          u[(*rng)() % kI8Group] = ((*rng)() & 1) ? 254 : -254;
          Wht128(u);
          for (size_t i = 0; i < len; ++i) g[i] = static_cast<float>(u[i] / 128.0);
          break;
        default:
          for (size_t i = 0; i < len; ++i) g[i] = gauss(*rng) * 3.f;
          break;
      }
    }
  return x;
}

// Quantizes with `v` and with the reference; checks scales bitwise and codes element by element
// (undoing v's layout). Returns the quantized activations of `v`.
struct Quantized {
  std::vector<int8_t> q;
  std::vector<float> scales;
};

Quantized Quantize(k::CqQuantizeI8Fn fn, const std::vector<float>& x, size_t n, size_t cols,
                   size_t ldx, size_t in_pad, uint32_t bits) {
  Quantized out{std::vector<int8_t>(n * in_pad, 99), std::vector<float>(n * in_pad / kI8Group, -1)};
  fn(x.data(), n, cols, ldx, in_pad, bits, out.q.data(), out.scales.data());
  return out;
}

void CheckQuantizer(const Variant& v, const std::vector<float>& x, size_t n, size_t cols,
                    size_t ldx, size_t in_pad, uint32_t bits) {
  const Quantized ref = Quantize(&k::CqQuantizeI8Reference, x, n, cols, ldx, in_pad, bits);
  const Quantized got = Quantize(v.quantize, x, n, cols, ldx, in_pad, bits);
  INFO(v.name << " bits " << bits << " cols " << cols << " tokens " << n);
  CHECK(std::memcmp(ref.scales.data(), got.scales.data(), ref.scales.size() * sizeof(float)) == 0);
  size_t mismatches = 0;
  for (size_t t = 0; t < n; ++t)
    for (size_t base = 0; base < in_pad; base += kI8Group)
      for (size_t i = 0; i < kI8Group; ++i)
        mismatches +=
            ref.q[t * in_pad + base + i] != got.q[t * in_pad + base + Position(v, bits, i)];
  CHECK(mismatches == 0);
}

// y of rows [b, e) for n tokens, written with row stride (e - b) + 3 into a buffer whose other
// entries hold a sentinel (so stray writes show up in the comparison too).
std::vector<float> RunGemm(const Variant& v, const TestMatrix& t, const std::vector<float>& x,
                           size_t n, size_t ldx, size_t b, size_t e) {
  const k::CqMatrix& m = t.m;
  const Quantized a = Quantize(v.quantize, x, n, m.cols, ldx, m.in_pad, m.code_bits);
  const k::I8Acts acts{a.q.data(), a.scales.data(), n, m.in_pad};
  const size_t ldy = (e - b) + 3;
  std::vector<float> y(n * ldy, -7.25f);
  v.gemm(m, t.cb, acts, b, e, y.data(), ldy);
  return y;
}

constexpr size_t kTokenCounts[] = {1, 2, 3, 7, 8, 13, 16, 17, 25, 27, 32, 33};

}  // namespace

TEST_CASE("int8 quantizer: every table gives the reference's scales and codes bit for bit",
          "[kernels][i8]") {
  const auto variants = Variants();
  RequireFastVariants(variants);
  std::mt19937 rng(5);
  size_t cases = 0;
  for (const Variant& v : variants)
    for (uint32_t bits : {2u, 3u, 4u})
      for (size_t cols : {size_t{1}, size_t{5}, size_t{100}, size_t{127}, size_t{128}, size_t{129},
                          size_t{300}, size_t{513}, size_t{1000}}) {
        const size_t n = 1 + rng() % 9, ldx = cols + rng() % 3;
        const size_t in_pad = (cols + kI8Group - 1) / kI8Group * kI8Group + (cols == 300 ? 128 : 0);
        const auto x = MakeActivations(n, cols, ldx, &rng);
        CheckQuantizer(v, x, n, cols, ldx, in_pad, bits);
        ++cases;
      }
  CHECK(cases == variants.size() * 27);
}

TEST_CASE("int8 quantizer rounds exact halves away from zero, as roundf", "[kernels][i8]") {
  // Groups x = WHT(u) / 128 with integer u, max |u| = 254: the reference's z / s lands on k + 0.5
  // exactly for some elements; count them so the test is known to exercise the tie case.
  std::mt19937 rng(17);
  const float c128 = 1.0f / std::sqrt(128.0f);
  const size_t groups = 64;
  std::vector<float> x(groups * kI8Group);
  size_t ties = 0;
  for (size_t g = 0; g < groups; ++g) {
    double u[kI8Group];
    for (double& v : u) v = static_cast<double>(static_cast<int>(rng() % 509) - 254);
    u[rng() % kI8Group] = (g & 1) ? 254 : -254;
    Wht128(u);
    for (size_t i = 0; i < kI8Group; ++i) x[g * kI8Group + i] = static_cast<float>(u[i] / 128.0);
    double z[kI8Group];
    for (size_t i = 0; i < kI8Group; ++i) z[i] = x[g * kI8Group + i];
    Wht128(z);  // exact: integers
    float amax = 0.f;
    for (double v : z) amax = std::max(amax, std::fabs(c128 * static_cast<float>(v)));
    const float inv = 1.0f / (amax / 127.0f);
    for (double v : z) {
      const float s = c128 * static_cast<float>(v) * inv;
      ties += std::fabs(s - std::trunc(s)) == 0.5f;
    }
  }
  INFO("elements exactly at k + 0.5: " << ties);
  REQUIRE(ties > 0);
  for (const Variant& v : Variants())
    for (uint32_t bits : {2u, 3u, 4u}) CheckQuantizer(v, x, 1, x.size(), x.size(), x.size(), bits);
}

TEST_CASE("int8 quantizer: non-finite activations give the reference's scales and codes",
          "[kernels][i8]") {
  // Infinities whose transform mixes inf and NaN lanes (inf - inf), finite values whose sums
  // overflow, a lone NaN: the reference's max skips NaN (std::max), every table must too.
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<std::vector<std::pair<size_t, float>>> groups = {
      {{0, inf}, {1, inf}},
      {{0, inf}, {77, -inf}},
      {{3, nan}},
      {{5, inf}, {6, nan}},
      {{127, -inf}, {126, inf}, {64, inf}}};
  std::vector<float> big(kI8Group);
  for (size_t i = 0; i < kI8Group; ++i) big[i] = (i % 3 == 0 ? -3e38f : 3e38f);
  std::vector<float> x;
  for (const auto& g : groups) {
    std::vector<float> group(kI8Group);
    for (size_t i = 0; i < kI8Group; ++i) group[i] = 0.25f * static_cast<float>(i % 7) - 0.5f;
    for (const auto& [i, v] : g) group[i] = v;
    x.insert(x.end(), group.begin(), group.end());
  }
  x.insert(x.end(), big.begin(), big.end());
  // The test must reach a group whose transform has both NaN and non-NaN lanes.
  const Quantized ref = Quantize(&k::CqQuantizeI8Reference, x, 1, x.size(), x.size(), x.size(), 2);
  size_t infinite_scales = 0;
  for (float s : ref.scales) infinite_scales += std::isinf(s);
  REQUIRE(infinite_scales >= 3);
  for (const Variant& v : Variants())
    for (uint32_t bits : {2u, 3u, 4u}) CheckQuantizer(v, x, 1, x.size(), x.size(), x.size(), bits);
}

TEST_CASE("integer CQ gemm: every table matches the reference bit for bit on awkward sizes",
          "[kernels][i8]") {
  const auto variants = Variants();
  RequireFastVariants(variants);
  std::mt19937 rng(23);
  const size_t rows_list[] = {1, 2, 3, 5, 7, 8, 15, 16, 17, 31, 33, 63, 65};
  const size_t cols_list[] = {1, 77, 130, 300, 384, 512, 555, 1000};  // 1 to 8 groups
  size_t cases = 0, nonzero = 0, outputs = 0;
  struct Code {
    uint32_t bits;
    bool ternary;
  };
  for (const Code code : {Code{2, false}, Code{2, true}, Code{3, false}, Code{4, false}})
    for (size_t ri = 0; ri < std::size(rows_list); ++ri) {
      const size_t rows = rows_list[ri], cols = cols_list[(ri + code.bits) % std::size(cols_list)];
      const TestMatrix t = MakeMatrix(rows, cols, code.bits, code.ternary, &rng);
      for (size_t ni = 0; ni < std::size(kTokenCounts); ++ni) {
        if ((ri + ni) % 3 != 0 && rows > 8) continue;  // every n still meets several row counts
        const size_t n = kTokenCounts[ni], ldx = cols + (ni & 1);
        const auto x = MakeActivations(n, cols, ldx, &rng);
        // Full range, then a sub-range (row offsets), then a single row.
        const size_t b = rows > 2 ? 1 : 0, e = rows > 3 ? rows - 1 : rows;
        for (const auto& [rb, re] :
             {std::pair{size_t{0}, rows}, std::pair{b, e}, std::pair{rows / 2, rows / 2 + 1}}) {
          const auto ref = RunGemm(variants.front(), t, x, n, ldx, rb, re);
          for (float f : ref) nonzero += f != 0.f && f != -7.25f;
          outputs += ref.size();
          for (size_t vi = 1; vi < variants.size(); ++vi) {
            INFO(variants[vi].name << " bits " << code.bits << (code.ternary ? " ternary" : "")
                                   << " rows " << rows << " [" << rb << ", " << re << ") cols "
                                   << cols << " tokens " << n);
            CHECK(SameBits(ref, RunGemm(variants[vi], t, x, n, ldx, rb, re)));
            ++cases;
          }
        }
      }
    }
  CHECK(cases > 0);
  CHECK(nonzero > outputs / 2);  // the outputs compared are not trivially zero
}

TEST_CASE("integer CQ gemm: rows of more than 64 groups and one-ulp sensitivity", "[kernels][i8]") {
  const auto variants = Variants();
  RequireFastVariants(variants);
  std::mt19937 rng(29);
  for (uint32_t bits : {2u, 3u, 4u}) {
    const size_t cols = 70 * kI8Group + 45;  // 71 groups: two staging blocks
    TestMatrix t = MakeMatrix(19, cols, bits, false, &rng);
    for (size_t n : {size_t{1}, size_t{9}, size_t{18}}) {
      const auto x = MakeActivations(n, cols, cols, &rng);
      const auto ref = RunGemm(variants.front(), t, x, n, cols, 2, 19);
      for (size_t vi = 1; vi < variants.size(); ++vi) {
        INFO(variants[vi].name << " bits " << bits << " tokens " << n);
        CHECK(SameBits(ref, RunGemm(variants[vi], t, x, n, cols, 2, 19)));
      }
    }
    // The comparison sees one-ulp changes of row 3's f16 norms (the tests above can fail).
    const auto x = MakeActivations(1, cols, cols, &rng);
    const auto before = RunGemm(variants.back(), t, x, 1, cols, 0, 19);
    for (size_t g = 0; g < t.m.groups_per_row; ++g) t.norms[2 * (3 * t.m.groups_per_row + g)] ^= 1;
    const auto after = RunGemm(variants.back(), t, x, 1, cols, 0, 19);
    CHECK_FALSE(SameBits(before, after));
    CHECK(SameBits(std::vector<float>(before.begin(), before.begin() + 3),
                   std::vector<float>(after.begin(), after.begin() + 3)));  // rows 0..2 kept
  }
}

// The tile layout a variant's gemm reads (its table's; the x86 sub-variants: VNNI reads row
// dwords).
k::CqTileLayout TileLayoutOf(const std::string& variant) {
  if (variant == "avx512-vnni" || variant == "avx512-vbmi") return k::CqTileLayout::kRowDwords;
  for (const std::string& isa : k::AvailableIsas())
    if (variant == isa) return k::KernelsFor(isa).cq_i8_tiles;
  return k::CqTileLayout::kNone;  // avx512-bw, the ARM sub-variant: codes only
}

// Where cq_int8.h puts code byte k of tile row p in a block of `layout`.
size_t TileByteAt(k::CqTileLayout layout, size_t k, size_t p) {
  return layout == k::CqTileLayout::kRowDwords ? k / 4 * 64 + 4 * p + k % 4 : 16 * k + p;
}

// The tiled kinds (cq_int8.h, CqTileBytes): 2-bit in either layout, 4-bit in row dwords.
constexpr std::pair<k::CqTileLayout, uint32_t> kTiledKinds[] = {{k::CqTileLayout::kByteColumns, 2},
                                                                {k::CqTileLayout::kRowDwords, 2},
                                                                {k::CqTileLayout::kRowDwords, 4}};

TEST_CASE("16-row tiles hold each code byte and norm where cq_int8.h says", "[kernels][i8]") {
  std::mt19937 rng(41);
  for (const auto& [layout, bits] : kTiledKinds) {
    INFO(k::CqTileLayoutName(layout) << " " << bits << "-bit");
    const TestMatrix t = MakeMatrix(32, 300, bits, false, &rng);
    const bool f16 = layout == k::CqTileLayout::kRowDwords;  // norms as the file's f16, else f32
    const size_t code_bytes = 16 * bits;                     // a row's per group
    const size_t block_bytes = 16 * code_bytes + (f16 ? 32 : 64);
    REQUIRE(block_bytes == k::CqTileBlockBytes(layout, bits));  // 544, 576, 1056
    const size_t bytes = k::CqTileBytes(t.m, layout);
    REQUIRE(bytes == 2 * t.m.groups_per_row * block_bytes);  // 2 tiles x 3 groups
    std::vector<uint8_t> tiles(bytes, 0xa5);
    k::MakeCqTiles(t.m, layout, tiles.data());
    size_t wrong = 0;
    for (size_t r = 0; r < t.m.rows; ++r)
      for (size_t g = 0; g < t.m.groups_per_row; ++g) {
        const uint8_t* block = tiles.data() + (r / 16 * t.m.groups_per_row + g) * block_bytes;
        for (size_t byte = 0; byte < code_bytes; ++byte)
          wrong += block[TileByteAt(layout, byte, r % 16)] !=
                   t.codes[r * t.m.row_bytes + code_bytes * g + byte];
        const size_t at = 2 * (r * t.m.groups_per_row + g);
        const auto half = static_cast<uint16_t>(t.norms[at] | t.norms[at + 1] << 8);
        uint32_t stored = 0, want = half;  // the f16 bits, or the f32 bits
        if (f16) {
          std::memcpy(&stored, block + 16 * code_bytes + 2 * (r % 16), 2);
        } else {
          std::memcpy(&stored, block + 16 * code_bytes + 4 * (r % 16), 4);
          const float norm = needle::F16ToF32(half);
          std::memcpy(&want, &norm, 4);
        }
        wrong += stored != want;
      }
    CHECK(wrong == 0);
  }
  // Tiled: matrices of whole tiles, 2-bit in either layout, 4-bit in row dwords.
  for (const k::CqTileLayout layout :
       {k::CqTileLayout::kByteColumns, k::CqTileLayout::kRowDwords}) {
    CHECK(k::CqTileBytes(MakeMatrix(17, 300, 2, false, &rng).m, layout) == 0);
    CHECK(k::CqTileBytes(MakeMatrix(17, 300, 4, false, &rng).m, layout) == 0);
    CHECK(k::CqTileBytes(MakeMatrix(32, 300, 3, false, &rng).m, layout) == 0);
  }
  CHECK(k::CqTileBytes(MakeMatrix(32, 300, 4, false, &rng).m, k::CqTileLayout::kByteColumns) == 0);
  CHECK(k::CqTileBytes(MakeMatrix(32, 300, 2, false, &rng).m, k::CqTileLayout::kNone) == 0);
}

TEST_CASE("CqDecodeRow reads a tiled matrix's rows from its tiles", "[kernels][i8]") {
  std::mt19937 rng(47);
  for (const auto& [layout, bits] : kTiledKinds) {
    INFO(k::CqTileLayoutName(layout) << " " << bits << "-bit");
    const TestMatrix t = MakeMatrix(48, 300, bits, false, &rng);
    std::vector<uint8_t> tiles(k::CqTileBytes(t.m, layout));
    REQUIRE(!tiles.empty());
    k::MakeCqTiles(t.m, layout, tiles.data());
    // The twin's codes and norms are other bytes: only its tiles give the rows.
    std::vector<uint8_t> junk_codes(t.codes.size(), 0x5a), junk_norms(t.norms.size(), 0x3c);
    k::CqMatrix twin = t.m;
    twin.codes = junk_codes.data();
    twin.norms = junk_norms.data();
    twin.tiles = tiles.data();
    twin.tile_layout = layout;
    std::vector<float> scratch(t.m.in_pad), want(t.m.cols), got(t.m.cols);
    size_t differ = 0;
    for (size_t r = 0; r < t.m.rows; ++r) {
      k::CqDecodeRow(t.m, r, want.data(), scratch.data());
      k::CqDecodeRow(twin, r, got.data(), scratch.data());
      differ += !SameBits(want, got);
    }
    CHECK(differ == 0);
    twin.tiles = nullptr;  // the junk decodes to other values: the comparison can fail
    k::CqDecodeRow(t.m, 5, want.data(), scratch.data());
    k::CqDecodeRow(twin, 5, got.data(), scratch.data());
    CHECK_FALSE(SameBits(want, got));
  }
}

TEST_CASE("integer CQ gemm: matrices with 16-row tiles give the reference's bits",
          "[kernels][i8]") {
  const auto variants = Variants();
  RequireFastVariants(variants);
  std::mt19937 rng(43);
  size_t cases = 0, tiled_tables = 0;
  // 2-bit (plain and ternary) in both layouts; 4-bit in row dwords (the LM head).
  struct Kind {
    uint32_t bits;
    bool ternary;
    k::CqTileLayout layout;
  };
  for (const Kind& kind :
       {Kind{2, false, k::CqTileLayout::kByteColumns}, Kind{2, false, k::CqTileLayout::kRowDwords},
        Kind{2, true, k::CqTileLayout::kByteColumns}, Kind{2, true, k::CqTileLayout::kRowDwords},
        Kind{4, false, k::CqTileLayout::kRowDwords}})
    for (const auto& [rows, cols] :
         {std::pair<size_t, size_t>{16, 128}, {48, 300}, {64, 512}, {32, 17 * 128 + 5}}) {
      const bool ternary = kind.ternary;
      const k::CqTileLayout layout = kind.layout;
      TestMatrix t = MakeMatrix(rows, cols, kind.bits, ternary, &rng);
      std::vector<uint8_t> tiles(k::CqTileBytes(t.m, layout));
      REQUIRE(!tiles.empty());
      k::MakeCqTiles(t.m, layout, tiles.data());
      TestMatrix tiled = t;
      tiled.m.codes = tiled.codes.data();
      tiled.m.norms = tiled.norms.data();
      tiled.m.tiles = tiles.data();
      tiled.m.tile_layout = layout;
      // One token (the gemv), a few (one at a time), whole 16-token lane tiles and a partial one.
      for (const size_t n : {size_t{1}, size_t{3}, size_t{16}, size_t{27}}) {
        const auto x = MakeActivations(n, cols, cols, &rng);
        for (const auto& [rb, re] :
             {std::pair{size_t{0}, rows}, std::pair{size_t{1}, rows - 1},
              std::pair{size_t{5}, rows / 2 + 3}, std::pair{rows - 16, rows}}) {
          const auto ref = RunGemm(variants.front(), t, x, n, cols, rb, re);
          for (size_t vi = 1; vi < variants.size(); ++vi) {
            INFO(variants[vi].name << " " << kind.bits << "-bit" << (ternary ? " ternary" : "")
                                   << " rows " << rows << " [" << rb << ", " << re << ") cols "
                                   << cols << " tokens " << n << " tiles "
                                   << k::CqTileLayoutName(layout));
            CHECK(SameBits(ref, RunGemm(variants[vi], tiled, x, n, cols, rb, re)));
            ++cases;
          }
        }
      }
      // A table that reads tiles of this layout sees a change in them (the comparison above can
      // fail), on one token and on a lane tile of tokens.
      for (const Variant& v : variants) {
        if (TileLayoutOf(v.name) != layout) continue;
        for (const size_t n : {size_t{1}, size_t{16}}) {
          INFO(v.name << " tokens " << n << " rows " << rows << " cols " << cols << " " << kind.bits
                      << "-bit" << (ternary ? " ternary" : ""));
          std::normal_distribution<float> gauss(0.f, 1.f);  // dense: every code byte counts
          std::vector<float> x(n * cols);
          for (float& value : x) value = gauss(rng);
          const auto before = RunGemm(v, tiled, x, n, cols, 0, rows);
          for (size_t g = 0; g < t.m.groups_per_row; ++g)
            tiles[g * k::CqTileBlockBytes(layout, kind.bits) + TileByteAt(layout, 7, 3)] ^=
                0x55;  // row 3, byte 7
          const auto after = RunGemm(v, tiled, x, n, cols, 0, rows);
          for (size_t g = 0; g < t.m.groups_per_row; ++g)  // restored
            tiles[g * k::CqTileBlockBytes(layout, kind.bits) + TileByteAt(layout, 7, 3)] ^= 0x55;
          size_t changed = 0, changed_elsewhere = 0;
          for (size_t i = 0; i < before.size(); ++i) {
            const bool differs = !SameBits({before[i]}, {after[i]});
            changed += differs;
            changed_elsewhere += differs && i % (rows + 3) != 3;  // RunGemm's ldy
          }
          CHECK(changed > 0);
          CHECK(changed_elsewhere == 0);
          ++cases;
          ++tiled_tables;
        }
      }
    }
  CHECK(cases > 0);
#if defined(NEEDLE_X86)
  // The avx512 table of a VNNI CPU reads row-dword tiles (with VBMI or not).
  if (k::BestIsa() >= k::Isa::kAvx512 && k::GetCpuFeatures().avx512vnni) CHECK(tiled_tables > 0);
#endif
}

TEST_CASE("int8 dot: exact on every value including -128", "[kernels][i8]") {
  const auto variants = Variants();
  RequireFastVariants(variants);
  std::mt19937 rng(31);
  for (size_t n : {size_t{0}, size_t{1}, size_t{15}, size_t{16}, size_t{17}, size_t{31}, size_t{32},
                   size_t{33}, size_t{64}, size_t{127}, size_t{128}, size_t{129}, size_t{1000},
                   size_t{4099}}) {
    std::vector<int8_t> a(n), b(n);
    for (size_t i = 0; i < n; ++i) {
      a[i] = static_cast<int8_t>(rng());
      b[i] = static_cast<int8_t>(rng());
    }
    if (n > 2) a[1] = b[1] = a[2] = b[2] = -128;  // -128 * -128 pairs: 32768 per pair
    int64_t exact = 0;
    for (size_t i = 0; i < n; ++i) exact += int64_t{a[i]} * int64_t{b[i]};
    REQUIRE(k::DotI8Reference(a.data(), b.data(), n) == exact);
    for (const Variant& v : variants) {
      INFO(v.name << " n " << n);
      CHECK(v.dot(a.data(), b.data(), n) == exact);
    }
  }
  // Every int8 value squared, twice: 2 * (2 * (1^2 + ... + 127^2) + 128^2) = 2796288.
  std::vector<int8_t> all(256 * 2);
  for (size_t i = 0; i < all.size(); ++i) all[i] = static_cast<int8_t>(i);
  for (const Variant& v : variants) CHECK(v.dot(all.data(), all.data(), all.size()) == 2796288);
}

TEST_CASE("int8 dot rows: every table equals the reference, -128 included", "[kernels][i8]") {
  std::mt19937 rng(41);
  size_t compared = 0;
  for (size_t n : {size_t{0}, size_t{1}, size_t{31}, size_t{63}, size_t{64}, size_t{65},
                   size_t{127}, size_t{128}, size_t{2048}, size_t{2049}}) {
    for (size_t rows : {size_t{1}, size_t{3}, size_t{4}, size_t{5}, size_t{7}, size_t{16},
                        size_t{17}, size_t{24}}) {
      // One to nine vectors: whole groups of four, each remainder, and a single one.
      for (size_t nx : {size_t{1}, size_t{2}, size_t{3}, size_t{4}, size_t{5}, size_t{9}}) {
        const size_t lda = n + (rows % 3);  // rows not necessarily contiguous
        const size_t ldx = n + (nx % 2);    // nor vectors
        const size_t ldo = rows + 2;        // outputs at a stride, the gaps untouched
        std::vector<int8_t> a(rows * lda + 1), x(nx * ldx + 1);
        for (auto& v : a) v = static_cast<int8_t>(rng());
        for (auto& v : x) v = static_cast<int8_t>(rng());
        if (n > 2) a[1] = x[1] = a[2] = x[2] = -128;
        std::vector<int32_t> want(nx * ldo, -7);
        for (size_t t = 0; t < nx; ++t)
          for (size_t r = 0; r < rows; ++r) {
            int64_t exact = 0;
            for (size_t i = 0; i < n; ++i)
              exact += int64_t{a[r * lda + i]} * int64_t{x[t * ldx + i]};
            want[t * ldo + r] = static_cast<int32_t>(exact);
          }
        std::vector<int32_t> ref(nx * ldo, -7);
        k::DotI8RowsReference(a.data(), lda, rows, x.data(), ldx, nx, n, ref.data(), ldo);
        REQUIRE(ref == want);
        for (const std::string& isa : k::AvailableIsas()) {
          const k::KernelTable& t = k::KernelsFor(isa);
          REQUIRE(t.dot_i8_rows != nullptr);
          std::vector<int32_t> got(nx * ldo, -7);
          t.dot_i8_rows(a.data(), lda, rows, x.data(), ldx, nx, n, got.data(), ldo);
          INFO(isa << " n " << n << " rows " << rows << " vectors " << nx);
          CHECK(got == want);
          ++compared;
        }
      }
    }
  }
  CHECK(compared > 0);
}

TEST_CASE("int8 peak probe: every table runs its chains and counts its multiply-adds",
          "[kernels][i8]") {
  // MACs per round of each table's probe (cq_int8.h's MacPeakFn): chains x MACs per chain step.
  const auto per_round = [](const std::string& isa) -> uint64_t {
    if (isa == "scalar") return 16;       // 16 int32 multiply-adds
    if (isa == "avx2") return 12 * 32;    // vpmaddubsw ymm
    if (isa == "avx512") return 16 * 64;  // vpdpbusd / vpmaddubsw zmm
    if (isa == "simd128") return 8 * 8;   // i32x4.dot_i16x8_s
    return 16 * 16;                       // neon, dotprod: SMULL pairs / SDOT
  };
  size_t probed = 0;
  for (const std::string& isa : k::AvailableIsas()) {
    INFO(isa);
    const k::KernelTable& t = k::KernelsFor(isa);
    REQUIRE(t.mac_peak != nullptr);
    CHECK(t.mac_peak(0) == 0);
    CHECK(t.mac_peak(1) == per_round(isa));
    CHECK(t.mac_peak(1000) == 1000 * per_round(isa));
    // It takes time in proportion to the rounds: the chains are not optimized away.
    const auto seconds = [&t](uint64_t rounds) {
      double best = 1e9;
      for (int i = 0; i < 5; ++i) {
        const auto t0 = std::chrono::steady_clock::now();
        t.mac_peak(rounds);
        best = std::min(
            best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
      }
      return best;
    };
    CHECK(seconds(1u << 18) > 4 * seconds(1u << 12));
    ++probed;
  }
  CHECK(probed == k::AvailableIsas().size());
}

TEST_CASE("integer CQ gemm on the official-geometry fixture's tensors, bit for bit",
          "[kernels][i8]") {
  const auto variants = Variants();
  RequireFastVariants(variants);
  const auto file =
      needle::format::CactFile::Open(needle::testing::ModelPath("official-geometry.cact"));
  std::mt19937 rng(37);
  size_t tensors = 0;
  for (const auto& info : file.tensors()) {
    if (info.dtype != needle::format::DType::kCQ) continue;
    TestMatrix t;
    t.m = needle::model::CqMatrixOf(file, info);
    if (t.m.group != kI8Group) continue;
    t.cb = k::MakeI8Codebook(t.m.levels, size_t{1} << t.m.code_bits);
    ++tensors;
    const size_t rows = t.m.rows;
    // Start, end and a middle window of the rows (the last row is where over-reads would fault).
    const size_t w = std::min<size_t>(rows, 40);
    for (size_t n : {size_t{1}, size_t{5}, size_t{32}}) {
      const auto x = MakeActivations(n, t.m.cols, t.m.cols, &rng);
      for (const auto& [b, e] : {std::pair{size_t{0}, w}, std::pair{rows - w, rows},
                                 std::pair{rows / 3, rows / 3 + w / 2 + 1}}) {
        const auto ref = RunGemm(variants.front(), t, x, n, t.m.cols, b, std::min(e, rows));
        for (size_t vi = 1; vi < variants.size(); ++vi) {
          INFO(variants[vi].name << " tensor " << info.name << " [" << b << ", " << e << ") tokens "
                                 << n);
          CHECK(SameBits(ref, RunGemm(variants[vi], t, x, n, t.m.cols, b, std::min(e, rows))));
        }
      }
    }
  }
  CHECK(tensors > 0);
}

// Hidden benchmark (run with: needle_tests "[.i8bench]"): median ns per gemm call for the decode
// (n = 1) and prefill (n = 32) shapes of the official geometry, per variant. NEEDLE_BENCH_REPS=1
// makes one call per shape; NEEDLE_BENCH_ISA=<variant>, NEEDLE_BENCH_SHAPE=<name part> and
// NEEDLE_BENCH_TOKENS=<n> keep one case (for callgrind with --toggle-collect on the gemm symbol;
// valgrind 3.19 cannot run AVX-512). Each case repeats one matrix back to back, so its data is
// warm in L2 / L3: a kernel faster here can still lose inside the model, where each matrix comes
// once per token (2026-12-07: two row-dword tiles per pass, 7% faster here, decoded 15-25%
// slower in `needle bench`); confirm every change there.
TEST_CASE("integer CQ gemm speed (hidden)", "[.i8bench]") {
  const char* reps_env = std::getenv("NEEDLE_BENCH_REPS");
  const size_t reps = reps_env ? std::strtoul(reps_env, nullptr, 10) : 201;
  const char* only = std::getenv("NEEDLE_BENCH_ISA");
  const char* shape_only = std::getenv("NEEDLE_BENCH_SHAPE");  // substring of a shape name
  const char* tokens_only = std::getenv("NEEDLE_BENCH_TOKENS");
  std::mt19937 rng(41);
  struct Shape {
    const char* name;
    size_t rows, cols;
    uint32_t bits;
  };
  for (const Shape& s :
       {Shape{"2-bit 2048x512", 2048, 512, 2}, Shape{"2-bit 512x2048", 512, 2048, 2},
        Shape{"2-bit 55296x512 (27 layers, from L3)", 27 * 2048, 512, 2},
        Shape{"4-bit 8192x512 (LM head)", 8192, 512, 4}}) {
    const TestMatrix t = MakeMatrix(s.rows, s.cols, s.bits, false, &rng);
    for (size_t n : {size_t{1}, size_t{2}, size_t{4}, size_t{6}, size_t{8}, size_t{12}, size_t{16},
                     size_t{17}, size_t{24}, size_t{32}}) {
      if (!tokens_only && n != 1 && n != 32) continue;  // the others on request
      std::vector<float> x(n * s.cols);
      std::normal_distribution<float> gauss(0.f, 1.f);
      for (float& v : x) v = gauss(rng);
      for (const Variant& v : Variants()) {
        if (only && v.name != only) continue;
        if (shape_only && std::strstr(s.name, shape_only) == nullptr) continue;
        if (tokens_only && std::strtoul(tokens_only, nullptr, 10) != n) continue;
        if (v.name == "scalar" && n == 32 && reps > 1) continue;  // minutes; n = 1 suffices
        const Quantized a = Quantize(v.quantize, x, n, s.cols, s.cols, t.m.in_pad, s.bits);
        const k::I8Acts acts{a.q.data(), a.scales.data(), n, t.m.in_pad};
        // The matrix as the model holds it for this table: with its 16-row tiles when it reads
        // them (2-bit; Weights builds them at load).
        TestMatrix tiled = t;
        tiled.m.codes = tiled.codes.data();
        tiled.m.norms = tiled.norms.data();
        const k::CqTileLayout layout = TileLayoutOf(v.name);
        std::vector<uint8_t> tiles(k::CqTileBytes(t.m, layout));
        if (!tiles.empty()) {
          k::MakeCqTiles(t.m, layout, tiles.data());
          tiled.m.tiles = tiles.data();
          tiled.m.tile_layout = layout;
        }
        std::vector<float> y(n * s.rows);
        std::vector<double> ns;
        const size_t runs = v.name == "scalar" ? std::min<size_t>(reps, 15) : reps;
        for (size_t i = 0; i < runs; ++i) {
          const auto t0 = std::chrono::steady_clock::now();
          v.gemm(tiled.m, t.cb, acts, 0, s.rows, y.data(), s.rows);
          ns.push_back(
              std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0)
                  .count());
        }
        std::nth_element(ns.begin(), ns.begin() + ns.size() / 2, ns.end());
        std::printf("%-26s n=%-3zu %-12s %-12s %12.0f ns/call  %8.3f ns/(row*token)\n", s.name, n,
                    v.name.c_str(),
                    k::CqTileLayoutName(tiles.empty() ? k::CqTileLayout::kNone : layout),
                    ns[ns.size() / 2], ns[ns.size() / 2] / static_cast<double>(n * s.rows));
      }
    }
  }
  SUCCEED();
}
