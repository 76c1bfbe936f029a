// Tests of the CQ codec, the Lloyd-Max codebooks and the FWHT against the upstream fixtures
// (tests/data/cq) and independent references (std::mt19937, explicit Hadamard matrices).
#include <algorithm>
#include <bit>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "base/error.h"
#include "base/fp16.h"
#include "format/cact.h"
#include "kernels/arm/kernels_arm.h"
#include "kernels/cpu_features.h"
#include "kernels/fwht.h"
#include "kernels/wasm/kernels_wasm.h"
#include "quant/codebooks.h"
#include "quant/cq.h"
#include "test_util.h"

namespace {

using needle::testing::FloatBits;

using needle::quant::CqParams;
using needle::quant::kTernaryBits;

nlohmann::json LoadJson(const std::string& name) {
  const std::string path = std::string(NEEDLE_TEST_DATA) + "/cq/" + name;
  std::ifstream in(path);
  REQUIRE(in.good());
  return nlohmann::json::parse(in);
}

std::vector<uint8_t> FromHex(const std::string& hex) {
  REQUIRE(hex.size() % 2 == 0);
  std::vector<uint8_t> out(hex.size() / 2);
  for (size_t i = 0; i < out.size(); ++i) {
    out[i] = static_cast<uint8_t>(std::stoul(hex.substr(2 * i, 2), nullptr, 16));
  }
  return out;
}

std::string ToHex(const uint8_t* data, size_t n) {
  static const char* digits = "0123456789abcdef";
  std::string s;
  for (size_t i = 0; i < n; ++i) {
    s += digits[data[i] >> 4];
    s += digits[data[i] & 15];
  }
  return s;
}

// The reference Hadamard matrix by the Sylvester recursion, in double: H_{2n} = [H H; H -H].
std::vector<double> SylvesterHadamard(size_t n) {
  std::vector<double> h{1.0};
  for (size_t m = 1; m < n; m *= 2) {
    std::vector<double> next(4 * m * m);
    for (size_t i = 0; i < m; ++i) {
      for (size_t j = 0; j < m; ++j) {
        const double v = h[i * m + j];
        next[i * 2 * m + j] = v;
        next[i * 2 * m + j + m] = v;
        next[(i + m) * 2 * m + j] = v;
        next[(i + m) * 2 * m + j + m] = -v;
      }
    }
    h.swap(next);
  }
  const double scale = 1.0 / std::sqrt(static_cast<double>(n));
  for (double& v : h) v *= scale;
  return h;
}

std::vector<float> RandomWeights(size_t n, uint32_t seed) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> dist(0.0f, 0.05f);
  std::vector<float> w(n);
  for (float& v : w) v = dist(gen);
  return w;
}

}  // namespace

// ---------------------------------------------------------------- random numbers and codebooks

TEST_CASE("MT19937 matches std::mt19937 (an independent implementation)", "[quant]") {
  for (uint32_t seed : {0u, 1u, 5489u, 0xffffffffu}) {
    needle::quant::NumpyRandomState ours(seed);
    std::mt19937 ref(seed);
    for (int i = 0; i < 2000; ++i) REQUIRE(ours.NextU32() == ref());
  }
  // The C++ standard's check value: the 10000th draw of a default-seeded (5489) mt19937.
  needle::quant::NumpyRandomState ours(5489);
  uint32_t v = 0;
  for (int i = 0; i < 10000; ++i) v = ours.NextU32();
  CHECK(v == 4123659995u);
}

TEST_CASE("RandomState(0) doubles and Gaussians match numpy", "[quant]") {
  // Values printed by numpy 1.24: RandomState(0).random_sample(3) and RandomState(0).randn(6).
  needle::quant::NumpyRandomState u(0);
  CHECK(u.NextDouble() == 0x1.18fe1565f12a8p-1);
  CHECK(u.NextDouble() == 0x1.6e2d4cf608733p-1);
  CHECK(u.NextDouble() == 0x1.349d66b6e894bp-1);
  needle::quant::NumpyRandomState g(0);
  const double expected[] = {0x1.c398ef3e5cfa5p+0, 0x1.99c2cfacc8953p-2, 0x1.f51d25222c9abp-1,
                             0x1.1ed5969e3314ep+1, 0x1.de1847cb13ddap+0, -0x1.f45dc42a58c82p-1};
  for (double e : expected) CHECK(g.NextGaussian() == e);
  // ... and the last three of randn(400000), the codebook fit's sample set.
  needle::quant::NumpyRandomState all(0);
  std::vector<double> x(400000);
  for (double& v : x) v = all.NextGaussian();
  CHECK(x[399997] == 0x1.3d06dc218a688p+0);
  CHECK(x[399998] == -0x1.00a03e8e72b1dp-3);
  CHECK(x[399999] == 0x1.231ba99b5b0f7p-1);
}

TEST_CASE("Lloyd-Max codebooks are bit-identical to codebooks.json", "[quant]") {
  const nlohmann::json golden = LoadJson("codebooks.json");
  for (uint32_t group : {32u, 64u, 128u}) {
    const nlohmann::json& g = golden.at(std::to_string(group));
    std::vector<float> file;
    for (uint32_t bits : {2u, 3u, 4u}) {
      INFO("group " << group << " bits " << bits);
      const std::vector<float> cb = needle::quant::LloydMaxCodebook(bits, group);
      const auto& want = g.at("cb" + std::to_string(bits));
      REQUIRE(cb.size() == want.size());
      REQUIRE(cb.size() == (size_t{1} << bits));
      for (size_t k = 0; k < cb.size(); ++k) {
        INFO("level " << k);
        CHECK(FloatBits(cb[k]) == FloatBits(want[k].get<float>()));
      }
      file.insert(file.end(), cb.begin(), cb.end());
    }
    CHECK(needle::quant::FileCodebooks(group) == file);
    const std::vector<float> ternary = needle::quant::Levels(file, kTernaryBits, group);
    const auto& want = g.at("ternary");
    REQUIRE(ternary.size() == 3);
    for (size_t k = 0; k < 3; ++k) CHECK(FloatBits(ternary[k]) == FloatBits(want[k].get<float>()));
  }
  CHECK_THROWS_AS(needle::quant::LloydMaxCodebook(5, 128), needle::InvalidInput);
  CHECK_THROWS_AS(needle::quant::LloydMaxCodebook(2, 96), needle::InvalidInput);
}

TEST_CASE("numpy pairwise sum follows numpy's blocking", "[quant]") {
  // Sums whose value depends on the order: 1 + many tiny terms. Left to right, every tiny term is
  // lost; numpy's 8 accumulators (and, past 128 elements, the split) keep some of them.
  std::vector<float> a(8 + 8 * 3, 0x1p-24f);
  a[0] = 1.0f;
  // n = 32: r[0] = 1 + 3 * 2^-24 rounds back to 1 one term at a time; r[1..7] = 4 * 2^-24 each,
  // combined as ((r0 + r1) + (r2 + r3)) + ((r4 + r5) + (r6 + r7)) = 1 + 7 * 2^-22 exactly.
  CHECK(needle::quant::NumpyPairwiseSum(a.data(), a.size()) == 1.0f + 7 * 0x1p-22f);
  float left_to_right = 0.0f;
  for (float v : a) left_to_right += v;
  CHECK(left_to_right == 1.0f);
  // n < 8: a plain loop.
  const double small[] = {1.0, 0x1p-53, 0x1p-53};
  CHECK(needle::quant::NumpyPairwiseSum(small, 3) == 1.0);
}

// ---------------------------------------------------------------- the upstream exporter's cases

TEST_CASE("Quantize and Dequantize reproduce every pack.json case", "[quant]") {
  const nlohmann::json cases = LoadJson("pack.json").at("cases");
  REQUIRE(cases.size() >= 7);
  for (size_t i = 0; i < cases.size(); ++i) {
    const nlohmann::json& c = cases[i];
    CqParams p;
    p.rows = c.at("rows").get<uint64_t>();
    p.cols = c.at("cols").get<uint64_t>();
    p.group = c.at("group").get<uint32_t>();
    p.record_bits = c.at("record_bits").get<uint32_t>();
    INFO("case " << i << ": [" << p.rows << ", " << p.cols << "] group " << p.group << " bits "
                 << p.record_bits);
    const std::vector<float> weights = c.at("weights").get<std::vector<float>>();
    const std::vector<uint8_t> codes_want = FromHex(c.at("packed_hex").get<std::string>());
    const std::vector<uint8_t> norms_want = FromHex(c.at("norms_fp16_hex").get<std::string>());
    const std::vector<float> dequant_want = c.at("dequant").get<std::vector<float>>();
    REQUIRE(codes_want.size() == p.code_bytes());
    REQUIRE(norms_want.size() == p.norm_bytes());

    const std::vector<float> levels =
        needle::quant::Levels(needle::quant::FileCodebooks(p.group), p.record_bits, p.group);
    const std::vector<uint8_t> blob = needle::quant::Quantize(weights, p, levels);
    REQUIRE(blob.size() == p.blob_bytes());
    CHECK(ToHex(blob.data(), p.code_bytes()) == c.at("packed_hex").get<std::string>());
    CHECK(ToHex(blob.data() + p.code_bytes(), p.norm_bytes()) ==
          c.at("norms_fp16_hex").get<std::string>());

    // Dequantize the upstream bytes. Tolerance 0 (bit-exact): we sum each output over the
    // group in the same order and f32 rounding as the reference matmul upstream used.
    std::vector<uint8_t> upstream_blob = codes_want;
    upstream_blob.insert(upstream_blob.end(), norms_want.begin(), norms_want.end());
    const std::vector<float> dequant = needle::quant::Dequantize(upstream_blob, p, levels);
    REQUIRE(dequant.size() == dequant_want.size());
    size_t mismatches = 0;
    for (size_t k = 0; k < dequant.size(); ++k) mismatches += dequant[k] != dequant_want[k];
    CHECK(mismatches == 0);

    std::vector<float> row(p.cols);
    for (uint64_t r = 0; r < p.rows; ++r) {
      needle::quant::DequantizeRow(upstream_blob, p, levels, r, row);
      CHECK(std::equal(row.begin(), row.end(), dequant.begin() + r * p.cols));
    }
  }
}

// ---------------------------------------------------------------- packing

TEST_CASE("PackRow writes an LSB-first bit stream and UnpackRow inverts it", "[quant]") {
  std::mt19937 gen(7);
  for (uint32_t record_bits : {2u, 3u, 4u, kTernaryBits}) {
    const uint32_t bits = record_bits == kTernaryBits ? 2 : record_bits;
    const uint32_t levels = record_bits == kTernaryBits ? 3 : 1u << bits;
    for (size_t n : {8, 16, 24, 40, 56, 128, 136, 200, 1000, 4104}) {
      INFO("bits " << record_bits << " n " << n);
      std::vector<uint8_t> codes(n);
      for (uint8_t& c : codes) c = static_cast<uint8_t>(gen() % levels);
      std::vector<uint8_t> packed(n * bits / 8);
      needle::quant::PackRow(codes, record_bits, packed);
      // Independent bit-by-bit writer; ternary trits 0, 1, 2 are crumbs 3, 0, 1.
      std::vector<uint8_t> want(packed.size(), 0);
      for (size_t k = 0; k < n; ++k) {
        const uint32_t v = record_bits == kTernaryBits ? (codes[k] + 3) % 4 : codes[k];
        for (uint32_t b = 0; b < bits; ++b) {
          if ((v >> b) & 1)
            want[(k * bits + b) / 8] |= static_cast<uint8_t>(1u << ((k * bits + b) % 8));
        }
      }
      REQUIRE(packed == want);
      std::vector<uint8_t> back(n, 0xee);
      needle::quant::UnpackRow(packed, record_bits, back);
      REQUIRE(back == codes);
    }
  }
}

TEST_CASE("Packing layouts: nibbles, 3-bit chunks and ternary crumbs", "[quant]") {
  std::vector<uint8_t> out(4);
  // 4 bits: low nibble = even column.
  const uint8_t nib[8] = {1, 2, 3, 4, 5, 6, 7, 15};
  needle::quant::PackRow(nib, 4, out);
  CHECK(out == std::vector<uint8_t>{0x21, 0x43, 0x65, 0xf7});
  // 3 bits: eight codes fill three bytes, code k at bits [3k, 3k+3).
  const uint8_t tri[8] = {7, 0, 0, 0, 0, 0, 0, 5};  // bits 0-2 and 21-23
  std::vector<uint8_t> three(3);
  needle::quant::PackRow(tri, 3, three);
  CHECK(three == std::vector<uint8_t>{0x07, 0x00, 0xa0});
  // Ternary: trits 0, 1, 2, 0 are crumbs 3, 0, 1, 3 -> 0b11'01'00'11.
  const uint8_t trits[4] = {0, 1, 2, 0};
  std::vector<uint8_t> one(1);
  needle::quant::PackRow(trits, kTernaryBits, one);
  CHECK(one[0] == 0xd3);
  // The unused crumb 2 decodes out of range and Dequantize rejects it.
  uint8_t decoded[4];
  const uint8_t bad = 0x02;
  needle::quant::UnpackRow({&bad, 1}, kTernaryBits, decoded);
  CHECK(decoded[0] == 3);
  CqParams p{.rows = 1, .cols = 8, .group = 8, .record_bits = kTernaryBits};
  std::vector<uint8_t> blob(p.blob_bytes(), 0);
  blob[0] = 0x02;
  const std::vector<float> levels = needle::quant::Levels({}, kTernaryBits, 8);
  CHECK_THROWS_AS(needle::quant::Dequantize(blob, p, levels), needle::FormatError);
}

// ---------------------------------------------------------------- quantize behaviour

TEST_CASE("NearestLevel: nearest entry, ties to the lower index, clamped ends", "[quant]") {
  const std::vector<float> levels = {-1.0f, 0.0f, 1.0f, 2.0f};
  CHECK(needle::quant::NearestLevel(levels, -5.0f) == 0);
  CHECK(needle::quant::NearestLevel(levels, -1.0f) == 0);
  CHECK(needle::quant::NearestLevel(levels, -0.5f) == 0);  // tie
  CHECK(needle::quant::NearestLevel(levels, -0.49f) == 1);
  CHECK(needle::quant::NearestLevel(levels, 0.0f) == 1);
  CHECK(needle::quant::NearestLevel(levels, 0.5f) == 1);  // tie
  CHECK(needle::quant::NearestLevel(levels, 0.51f) == 2);
  CHECK(needle::quant::NearestLevel(levels, 1.5f) == 2);  // tie
  CHECK(needle::quant::NearestLevel(levels, 1.75f) == 3);
  CHECK(needle::quant::NearestLevel(levels, 9.0f) == 3);
}

TEST_CASE("Quantize zero-pads widths that are not a multiple of the group", "[quant]") {
  for (uint32_t record_bits : {2u, 3u, 4u, kTernaryBits}) {
    for (uint32_t group : {8u, 32u, 64u}) {
      for (uint64_t cols : {1u, 3u, 7u, 33u, 65u, 130u}) {
        INFO("bits " << record_bits << " group " << group << " cols " << cols);
        CqParams p{.rows = 3, .cols = cols, .group = group, .record_bits = record_bits};
        const std::vector<float> levels =
            needle::quant::Levels(needle::quant::FileCodebooks(group), record_bits, group);
        const std::vector<float> w = RandomWeights(p.rows * cols, static_cast<uint32_t>(cols));
        // The same matrix padded explicitly to in_pad columns must give the same blob.
        CqParams padded = p;
        padded.cols = p.in_pad();
        std::vector<float> wp(p.rows * padded.cols, 0.0f);
        for (uint64_t r = 0; r < p.rows; ++r) {
          std::copy(w.begin() + r * cols, w.begin() + (r + 1) * cols, wp.begin() + r * padded.cols);
        }
        const std::vector<uint8_t> blob = needle::quant::Quantize(w, p, levels);
        REQUIRE(blob.size() == p.blob_bytes());
        CHECK(blob == needle::quant::Quantize(wp, padded, levels));

        const std::vector<float> dq = needle::quant::Dequantize(blob, p, levels);
        const std::vector<float> dqp = needle::quant::Dequantize(blob, padded, levels);
        REQUIRE(dq.size() == p.rows * cols);
        double err = 0, energy = 0;
        for (uint64_t r = 0; r < p.rows; ++r) {
          for (uint64_t c = 0; c < cols; ++c) {
            CHECK(dq[r * cols + c] == dqp[r * padded.cols + c]);
            err += std::pow(dq[r * cols + c] - w[r * cols + c], 2);
            energy += std::pow(w[r * cols + c], 2);
          }
        }
        // Reconstruction quality: a sanity bound, loose (tiny groups, 2-bit, ternary).
        CHECK(err <= 0.9 * energy);
      }
    }
  }
}

TEST_CASE("Quantize is accurate on Gaussian weights and keeps group norms", "[quant]") {
  // Relative MSE of Lloyd-Max on unit-variance Gaussians, with headroom: 2 bits 0.1175,
  // 3 bits 0.03454, 4 bits 0.009497 (Max 1960); the rotated unit groups are near-Gaussian.
  const std::pair<uint32_t, double> limits[] = {{2, 0.14}, {3, 0.045}, {4, 0.013}};
  for (auto [bits, limit] : limits) {
    CqParams p{.rows = 16, .cols = 512, .group = 128, .record_bits = bits};
    const std::vector<float> levels =
        needle::quant::Levels(needle::quant::FileCodebooks(128), bits, 128);
    const std::vector<float> w = RandomWeights(p.rows * p.cols, 99);
    const std::vector<uint8_t> blob = needle::quant::Quantize(w, p, levels);
    const std::vector<float> dq = needle::quant::Dequantize(blob, p, levels);
    double err = 0, energy = 0;
    for (size_t k = 0; k < w.size(); ++k) {
      err += std::pow(dq[k] - w[k], 2);
      energy += std::pow(w[k], 2);
    }
    INFO("bits " << bits << " relative MSE " << err / energy);
    CHECK(err / energy < limit);
    // Stored norm = f16 of the group's L2 norm (rotation preserves it).
    for (uint64_t g = 0; g < p.rows * p.groups_per_row(); ++g) {
      double sq = 0;
      for (uint32_t k = 0; k < 128; ++k) sq += std::pow(w[g * 128 + k], 2);
      const float norm =
          needle::F16ToF32(needle::LoadLE<uint16_t>(blob.data() + p.code_bytes() + 2 * g));
      CHECK(std::fabs(norm - std::sqrt(sq)) <= 1e-3 * std::sqrt(sq));
    }
  }
}

TEST_CASE("Quantize and Dequantize reject bad input", "[quant]") {
  const std::vector<float> levels = needle::quant::Levels(needle::quant::FileCodebooks(32), 2, 32);
  std::vector<float> w(64, 0.1f);
  CHECK_THROWS_AS(needle::quant::Quantize(w, CqParams{.rows = 2, .cols = 32, .group = 24}, levels),
                  needle::InvalidInput);
  CHECK_THROWS_AS(needle::quant::Quantize(
                      w, CqParams{.rows = 2, .cols = 32, .group = 32, .record_bits = 6}, levels),
                  needle::InvalidInput);
  CHECK_THROWS_AS(needle::quant::Quantize(w, CqParams{.rows = 3, .cols = 32, .group = 32}, levels),
                  needle::InvalidInput);
  w[40] = std::nanf("");
  CHECK_THROWS_AS(needle::quant::Quantize(w, CqParams{.rows = 2, .cols = 32, .group = 32}, levels),
                  needle::InvalidInput);
  std::vector<uint8_t> short_blob(10);
  CHECK_THROWS_AS(
      needle::quant::Dequantize(short_blob, CqParams{.rows = 2, .cols = 32, .group = 32}, levels),
      needle::InvalidInput);
  // All-zero groups: norm 0, codes of u = 0 / 1e-12 = 0, reconstruct to exact zeros.
  std::vector<float> zeros(64, 0.0f);
  const CqParams p{.rows = 2, .cols = 32, .group = 32};
  const std::vector<float> back =
      needle::quant::Dequantize(needle::quant::Quantize(zeros, p, levels), p, levels);
  for (float v : back) CHECK(v == 0.0f);
}

// ---------------------------------------------------------------- Walsh-Hadamard transform

TEST_CASE("FWHT equals the explicit Hadamard product", "[quant]") {
  std::mt19937 gen(3);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  for (size_t n = 1; n <= 4096; n *= 2) {
    INFO("n " << n);
    std::vector<float> x(n);
    for (float& v : x) v = dist(gen);
    const std::vector<double> h = SylvesterHadamard(n);
    std::vector<double> want(n, 0.0);
    double norm = 0;
    for (size_t i = 0; i < n; ++i) {
      norm += double{x[i]} * x[i];
      for (size_t j = 0; j < n; ++j) want[j] += x[i] * h[i * n + j];
    }
    norm = std::sqrt(norm);
    std::vector<float> y = x;
    needle::kernels::FwhtReference(y.data(), n);
    // f32 butterflies: log2(n) roundings on values bounded by the vector's norm, plus the scale.
    const double log2n = std::log2(static_cast<double>(n));
    const double tolerance = 2.0 * (log2n + 1) * 0x1p-24 * std::max(norm, 1.0);
    double max_err = 0;
    for (size_t j = 0; j < n; ++j) max_err = std::max(max_err, std::fabs(y[j] - want[j]));
    CHECK(max_err <= tolerance);

    // The CQ rotation (sequential sums) computes the same product.
    if (n <= 1024) {
      std::vector<float> r(n);
      needle::quant::RotateGroupExact(x.data(), static_cast<uint32_t>(n), r.data());
      double rot_err = 0;
      for (size_t j = 0; j < n; ++j) rot_err = std::max(rot_err, std::fabs(r[j] - want[j]));
      CHECK(rot_err <= 2.0 * (n + 1) * 0x1p-24 * std::max(norm, 1.0));
    }
  }
}

TEST_CASE("Every compiled FWHT ISA is bit-identical to the reference", "[quant]") {
  // Tolerance 0: the ISA versions do the reference's butterflies in the same order and round
  // identically (adds, subtracts, one final multiply; no FMA).
  using needle::kernels::Isa;
  std::mt19937 gen(11);
  std::uniform_real_distribution<float> dist(-100.0f, 100.0f);
  const Isa best = needle::kernels::BestIsa();
  size_t isas = 0;
  for (Isa isa :
       {Isa::kScalar, Isa::kNeon, Isa::kDotprod, Isa::kAvx2, Isa::kAvx512, Isa::kSimd128}) {
    if (!needle::kernels::IsaSupported(isa)) continue;
    ++isas;
    needle::kernels::SetIsaLimit(isa);
    INFO("isa " << needle::kernels::IsaName(needle::kernels::ActiveIsa()));
    for (size_t n = 1; n <= 4096; n *= 2) {
      INFO("n " << n);
      std::vector<float> x(n);
      for (float& v : x) v = dist(gen);
      std::vector<float> ref = x, got = x;
      needle::kernels::FwhtReference(ref.data(), n);
      needle::kernels::Fwht(got.data(), n);
      CHECK(std::memcmp(ref.data(), got.data(), n * sizeof(float)) == 0);
      std::vector<float> uref = x, ugot = x;  // the butterflies alone (official path)
      needle::kernels::FwhtUnnormalizedReference(uref.data(), n);
      needle::kernels::FwhtUnnormalized(ugot.data(), n);
      CHECK(std::memcmp(uref.data(), ugot.data(), n * sizeof(float)) == 0);
      if (n > 1) CHECK(std::memcmp(uref.data(), ref.data(), n * sizeof(float)) != 0);
#if defined(NEEDLE_X86)
      if (n >= 8 && best >= Isa::kAvx2) {
        std::vector<float> avx = x;
        needle::kernels::FwhtAvx2(avx.data(), n);
        CHECK(std::memcmp(ref.data(), avx.data(), n * sizeof(float)) == 0);
      }
#endif
      // A family's own versions (normalized and not), called directly (n >= 8).
      [[maybe_unused]] auto check_family = [&](void (*fwht)(float*, size_t),
                                               void (*unnormalized)(float*, size_t)) {
        std::vector<float> got_n = x, got_u = x;
        fwht(got_n.data(), n);
        unnormalized(got_u.data(), n);
        CHECK(std::memcmp(ref.data(), got_n.data(), n * sizeof(float)) == 0);
        CHECK(std::memcmp(uref.data(), got_u.data(), n * sizeof(float)) == 0);
      };
#if defined(NEEDLE_ARM)
      if (n >= 8) check_family(&needle::kernels::FwhtNeon, &needle::kernels::FwhtUnnormalizedNeon);
#endif
#if defined(NEEDLE_WASM)
      if (n >= 8)
        check_family(&needle::kernels::FwhtSimd128, &needle::kernels::FwhtUnnormalizedSimd128);
#endif
    }
  }
#if defined(NEEDLE_ARM)
  CHECK(isas >= 2);  // scalar and neon at least
#endif
#if defined(NEEDLE_WASM)
  CHECK(isas == 2);  // scalar and simd128
#endif
  CHECK(isas >= 1);
  needle::kernels::SetIsaLimit(best);
  CHECK(needle::kernels::ActiveIsa() == best);
}

TEST_CASE("ISA names parse and the limit clamps to the CPU", "[quant]") {
  using needle::kernels::Isa;
  CHECK(needle::kernels::ParseIsa("scalar") == Isa::kScalar);
  CHECK(needle::kernels::ParseIsa("avx2") == Isa::kAvx2);
  CHECK(needle::kernels::ParseIsa("neon") == Isa::kNeon);
  CHECK(needle::kernels::ParseIsa("dotprod") == Isa::kDotprod);
  CHECK(needle::kernels::ParseIsa("simd128") == Isa::kSimd128);
  // The other architecture's levels are never supported; limiting to one of them means scalar.
#if defined(NEEDLE_ARM)
  CHECK(needle::kernels::IsaSupported(Isa::kNeon));
  CHECK_FALSE(needle::kernels::IsaSupported(Isa::kAvx2));
  CHECK(needle::kernels::SetIsaLimit(Isa::kAvx2) == needle::kernels::BestIsa());
  CHECK(needle::kernels::SetIsaLimit(Isa::kNeon) == Isa::kNeon);
  CHECK(needle::kernels::BestIsa() ==
        (needle::kernels::GetCpuFeatures().dotprod ? Isa::kDotprod : Isa::kNeon));
#elif defined(NEEDLE_X86)
  CHECK_FALSE(needle::kernels::IsaSupported(Isa::kNeon));
  CHECK_FALSE(needle::kernels::IsaSupported(Isa::kDotprod));
  CHECK(needle::kernels::SetIsaLimit(Isa::kDotprod) == Isa::kScalar);
#elif defined(NEEDLE_WASM)
  CHECK(needle::kernels::BestIsa() == Isa::kSimd128);
  CHECK_FALSE(needle::kernels::IsaSupported(Isa::kAvx2));
  CHECK_FALSE(needle::kernels::IsaSupported(Isa::kNeon));
  CHECK(needle::kernels::SetIsaLimit(Isa::kAvx2) == Isa::kScalar);
  CHECK(needle::kernels::SetIsaLimit(Isa::kSimd128) == Isa::kSimd128);
#endif
#if !defined(NEEDLE_WASM)
  CHECK_FALSE(needle::kernels::IsaSupported(Isa::kSimd128));
#endif
  CHECK(needle::kernels::ParseIsa("auto") == needle::kernels::BestIsa());
  CHECK_FALSE(needle::kernels::ParseIsa("sse9").has_value());
  CHECK(needle::kernels::SetIsaLimit(Isa::kScalar) == Isa::kScalar);
#if !defined(NEEDLE_WASM)
  CHECK(needle::kernels::SetIsaLimit(Isa::kAvx512) == needle::kernels::BestIsa());
#endif
  needle::kernels::SetIsaLimit(needle::kernels::BestIsa());
}

TEST_CASE("Every CQ tensor of the fixture models decodes and rows match the whole matrix",
          "[quant]") {
  for (const char* model : {"tiny.cact", "small.cact"}) {
    const auto file =
        needle::format::CactFile::Open(std::string(NEEDLE_TEST_DATA) + "/models/" + model);
    size_t checked = 0;
    for (const auto& t : file.tensors()) {
      if (t.dtype != needle::format::DType::kCQ) continue;
      INFO(model << " " << t.name);
      const CqParams p{.rows = t.rows(), .cols = t.cols(), .group = t.group, .record_bits = t.bits};
      // The header's codebooks are the regenerated ones.
      REQUIRE(std::equal(file.codebooks().begin(), file.codebooks().end(),
                         needle::quant::FileCodebooks(t.group).begin()));
      const std::vector<float> levels = needle::quant::Levels(file.codebooks(), t.bits, t.group);
      const std::vector<float> w = needle::quant::Dequantize(file.data(t), p, levels);
      REQUIRE(w.size() == p.rows * p.cols);
      CHECK(std::all_of(w.begin(), w.end(), [](float v) { return std::isfinite(v); }));
      std::vector<float> row(p.cols);
      for (uint64_t r : {uint64_t{0}, p.rows / 2, p.rows - 1}) {
        needle::quant::DequantizeRow(file.data(t), p, levels, r, row);
        CHECK(std::equal(row.begin(), row.end(), w.begin() + r * p.cols));
      }
      ++checked;
    }
    CHECK(checked > 10);
  }
}
