// The musl libm ports against the official engine's own results, bit for bit: inputs and expected
// bits in tests/data/libm/vectors.bin (written by scripts/official/make_libm_vectors.py).
#include "kernels/libm.h"

#include <bit>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "libm_vectors.h"

namespace {

namespace libm = needle::kernels::libm;

// One function's vectors: per record `arity` input floats, then the engine's result.
struct VectorSet {
  uint32_t arity = 0;
  std::vector<uint32_t> words;  // [count, arity + 1] float bits
  size_t count() const { return words.size() / (arity + 1); }
};

std::map<std::string, VectorSet> LoadVectors() {
  std::map<std::string, VectorSet> sets;
  for (const auto& set : needle::testing::ReadLibmVectors("libm/vectors.bin", "NLIBMV1\n", 4)) {
    VectorSet& v = sets[set.name];
    v.arity = set.arity;
    v.words.resize(set.records.size() / 4);
    std::memcpy(v.words.data(), set.records.data(), set.records.size());  // little-endian
  }
  return sets;
}

const std::map<std::string, VectorSet>& Vectors() {
  static const std::map<std::string, VectorSet> sets = LoadVectors();
  return sets;
}

// Equal bits, or both NaN (the NaN payload is not part of the contract: the engine's NaNs pass
// through JavaScript numbers).
bool SameResult(float got, float want) {
  return std::bit_cast<uint32_t>(got) == std::bit_cast<uint32_t>(want) ||
         (std::isnan(got) && std::isnan(want));
}

// Runs `f` on every record of `name`; returns the number of mismatches (the first few are shown).
template <typename Fn>
size_t CountMismatches(const std::string& name, Fn f, size_t* count) {
  const auto it = Vectors().find(name);
  REQUIRE(it != Vectors().end());
  const VectorSet& set = it->second;
  const size_t stride = set.arity + 1;
  size_t bad = 0;
  for (size_t i = 0; i < set.count(); ++i) {
    const uint32_t* rec = &set.words[i * stride];
    const float x = std::bit_cast<float>(rec[0]);
    const float y = set.arity == 2 ? std::bit_cast<float>(rec[1]) : 0.0f;
    const float want = std::bit_cast<float>(rec[set.arity]);
    const float got = f(x, y);
    if (!SameResult(got, want) && bad++ < 5) {
      UNSCOPED_INFO(name << "(" << x << (set.arity == 2 ? ", " + std::to_string(y) : "")
                         << ") bits " << std::hex << rec[0] << ": got " << got << " ("
                         << std::bit_cast<uint32_t>(got) << ") want " << want << " ("
                         << rec[set.arity] << ")" << std::dec);
    }
  }
  *count = set.count();
  return bad;
}

void CheckAll(const std::string& name, float (*unary)(float)) {
  size_t count = 0;
  const size_t bad = CountMismatches(
      name, [&](float x, float) { return unary(x); }, &count);
  INFO(name << ": " << count << " vectors");
  CHECK(count > 10000);
  CHECK(bad == 0);
}

}  // namespace

TEST_CASE("expf equals the engine's musl expf bit for bit", "[libm]") {
  CheckAll("expf", libm::Expf);
}

TEST_CASE("logf equals the engine's musl logf bit for bit", "[libm]") {
  CheckAll("logf", libm::Logf);
}

TEST_CASE("sinf equals the engine's musl sinf bit for bit", "[libm]") {
  CheckAll("sinf", libm::Sinf);
}

TEST_CASE("cosf equals the engine's musl cosf bit for bit", "[libm]") {
  CheckAll("cosf", libm::Cosf);
}

TEST_CASE("powf equals the engine's musl powf bit for bit, RoPE grid included", "[libm]") {
  size_t count = 0;
  const size_t bad = CountMismatches(
      "powf", [](float x, float y) { return libm::Powf(x, y); }, &count);
  INFO("powf: " << count << " vectors");
  CHECK(count > 10000);
  CHECK(bad == 0);
}

// The double exp and log (tests/data/libm/vectors-f64.bin, written by
// scripts/official/make_libm_vectors_f64.py): per function, pairs of input and engine result bits.
std::map<std::string, std::vector<uint64_t>> LoadVectorsF64() {
  std::map<std::string, std::vector<uint64_t>> sets;
  for (const auto& set : needle::testing::ReadLibmVectors("libm/vectors-f64.bin", "NLIBMD1\n", 8)) {
    REQUIRE(set.arity == 1);
    std::vector<uint64_t>& words = sets[set.name];
    words.resize(set.records.size() / 8);
    std::memcpy(words.data(), set.records.data(), set.records.size());
  }
  return sets;
}

void CheckAllF64(const std::string& name, double (*f)(double)) {
  static const auto sets = LoadVectorsF64();
  const auto it = sets.find(name);
  REQUIRE(it != sets.end());
  const std::vector<uint64_t>& w = it->second;
  size_t bad = 0;
  for (size_t i = 0; i + 1 < w.size(); i += 2) {
    const double x = std::bit_cast<double>(w[i]), want = std::bit_cast<double>(w[i + 1]);
    const double got = f(x);
    if (std::bit_cast<uint64_t>(got) != w[i + 1] && !(std::isnan(got) && std::isnan(want)) &&
        bad++ < 5)
      UNSCOPED_INFO(name << "(" << x << ") bits " << std::hex << w[i] << ": got "
                         << std::bit_cast<uint64_t>(got) << " want " << w[i + 1] << std::dec);
  }
  INFO(name << ": " << w.size() / 2 << " vectors");
  CHECK(w.size() / 2 > 20000);
  CHECK(bad == 0);
}

TEST_CASE("exp (double) equals the engine's musl exp bit for bit", "[libm]") {
  CheckAllF64("exp", libm::Exp);
}

TEST_CASE("log (double) equals the engine's musl log bit for bit", "[libm]") {
  CheckAllF64("log", libm::Log);
}

TEST_CASE("libm ports give the exact values and special cases", "[libm]") {
  constexpr float kInf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  CHECK(libm::Expf(0.0f) == 1.0f);
  CHECK(libm::Expf(-0.0f) == 1.0f);
  CHECK(libm::Expf(kInf) == kInf);
  CHECK(libm::Expf(-kInf) == 0.0f);
  CHECK(libm::Expf(89.0f) == kInf);
  CHECK(libm::Expf(-104.0f) == 0.0f);
  CHECK(std::isnan(libm::Expf(nan)));
  CHECK(std::bit_cast<uint32_t>(libm::Logf(1.0f)) == 0u);  // +0, not -0
  CHECK(libm::Logf(0.0f) == -kInf);
  CHECK(libm::Logf(-0.0f) == -kInf);
  CHECK(libm::Logf(kInf) == kInf);
  CHECK(std::isnan(libm::Logf(-1.0f)));
  CHECK(std::isnan(libm::Logf(nan)));
  CHECK(std::bit_cast<uint32_t>(libm::Sinf(0.0f)) == 0u);
  CHECK(std::bit_cast<uint32_t>(libm::Sinf(-0.0f)) == 0x80000000u);
  CHECK(libm::Sinf(0x1p-20f) == 0x1p-20f);  // tiny: sin x = x
  CHECK(libm::Cosf(0.0f) == 1.0f);
  CHECK(libm::Cosf(0x1p-20f) == 1.0f);
  CHECK(std::isnan(libm::Sinf(kInf)));
  CHECK(std::isnan(libm::Cosf(-kInf)));
  CHECK(libm::Powf(2.0f, 10.0f) == 1024.0f);
  CHECK(libm::Powf(-2.0f, 3.0f) == -8.0f);
  CHECK(libm::Powf(nan, 0.0f) == 1.0f);
  CHECK(libm::Powf(1.0f, nan) == 1.0f);
  CHECK(std::isnan(libm::Powf(-2.0f, 0.5f)));
  CHECK(libm::Powf(0.0f, -1.0f) == kInf);
}
