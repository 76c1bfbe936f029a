// Array math kernels (kernels/vmath.h): every compiled table's expf_array / logf_array against the
// scalar libm ports bit for bit (NaN payloads aside) on the engine's libm vectors, special values,
// random bit patterns, dense ranges, every tail length and unaligned / in-place buffers; and its
// quantize_i8 against kernels::QuantizeI8 (memcmp). The hidden [.vmathbench] case prints speeds.
#include "kernels/vmath.h"

#include <algorithm>
#include <bit>
#include <catch2/catch.hpp>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "kernels/cq_int8.h"
#include "kernels/dispatch.h"
#include "kernels/libm.h"
#include "libm_vectors.h"
#include "test_util.h"

namespace {

using needle::testing::FloatBits;

namespace k = needle::kernels;
namespace libm = needle::kernels::libm;

constexpr float kInf = std::numeric_limits<float>::infinity();

float FromBits(uint32_t u) { return std::bit_cast<float>(u); }

// Every table this build and CPU can run (scalar first).
std::vector<const k::KernelTable*> Tables() {
  std::vector<const k::KernelTable*> tables;
  for (const std::string& isa : k::AvailableIsas()) tables.push_back(&k::KernelsFor(isa));
#if defined(NEEDLE_ARM)
  REQUIRE(tables.size() >= 2);  // every AArch64 CPU runs the neon table
#endif
#if defined(NEEDLE_WASM)
  REQUIRE(tables.size() == 2);  // scalar and simd128
  REQUIRE(tables.back()->expf_array != tables.front()->expf_array);
#endif
  return tables;
}

// The inputs (first float of every record) of one function in tests/data/libm/vectors.bin (format:
// "NLIBMV1\n", then per function: name[8], arity u32, count u32, count * (arity + 1) f32 bits).
std::vector<float> EngineInputs(const std::string& function) {
  std::vector<float> inputs;
  for (const auto& set : needle::testing::ReadLibmVectors("libm/vectors.bin", "NLIBMV1\n", 4)) {
    if (set.name != function) continue;
    const size_t stride = 4 * (size_t{set.arity} + 1);
    for (size_t i = 0; i < set.count; ++i) {
      float x = 0;
      std::memcpy(&x, set.records.data() + i * stride, 4);
      inputs.push_back(x);
    }
  }
  REQUIRE(inputs.size() > 10000);
  return inputs;
}

// Values at and around every branch of Expf and Logf, one ulp either side.
std::vector<float> SpecialValues() {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> base = {0.0f,
                             -0.0f,
                             1.0f,
                             -1.0f,
                             kInf,
                             -kInf,
                             nan,
                             -nan,
                             FromBits(0x7f800001),  // signaling NaN
                             FromBits(0xff812345),
                             FromBits(0x00000001),  // smallest subnormal
                             FromBits(0x007fffff),  // largest subnormal
                             FromBits(0x80000001),
                             FromBits(0x00800000),  // smallest normal
                             std::numeric_limits<float>::max(),
                             -std::numeric_limits<float>::max(),
                             88.0f,
                             -88.0f,
                             0x1.62e42ep6f,   // Expf overflow limit
                             -0x1.9fe368p6f,  // Expf underflow limit
                             -87.33654f,      // Expf results turn subnormal
                             -103.0f,
                             -104.0f,
                             89.0f,
                             0x1.66p-1f,
                             0x1.66p0f,
                             0.5f,
                             2.0f,
                             1e-30f,
                             1e30f,
                             -1e-30f};
  std::vector<float> out;
  for (float v : base) {
    out.push_back(v);
    if (std::isfinite(v)) {
      out.push_back(std::nextafter(v, kInf));
      out.push_back(std::nextafter(v, -kInf));
    }
  }
  return out;
}

bool Same(float got, float want) {
  return FloatBits(got) == FloatBits(want) || (std::isnan(got) && std::isnan(want));
}

// Number of elements where fn(x) differs from ref(x); the first few are reported.
size_t Mismatches(const char* what, k::ExpfArrayFn fn, float (*ref)(float),
                  const std::vector<float>& x) {
  std::vector<float> y(x.size());
  fn(x.data(), y.data(), x.size());
  size_t bad = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    const float want = ref(x[i]);
    if (!Same(y[i], want) && bad++ < 5)
      UNSCOPED_INFO(what << "(" << x[i] << " = 0x" << std::hex << FloatBits(x[i]) << "): got 0x"
                         << FloatBits(y[i]) << " want 0x" << FloatBits(want) << std::dec);
  }
  return bad;
}

// Every length 0..67 at offsets 0..3 (unaligned), out of place and in place, with guard values
// around the output that must stay untouched. Returns the number of failures.
size_t TailFailures(k::ExpfArrayFn fn, float (*ref)(float), const std::vector<float>& pool) {
  constexpr size_t kGuard = 16;
  const float guard = FromBits(0x7fa5a5a5);
  size_t bad = 0;
  size_t start = 0;
  for (size_t n = 0; n <= 67; ++n) {
    for (size_t offset = 0; offset < 4; ++offset) {
      std::vector<float> x(n), want(n);
      for (size_t i = 0; i < n; ++i) x[i] = pool[(start + i) % pool.size()];
      start += 7;
      for (size_t i = 0; i < n; ++i) want[i] = ref(x[i]);
      for (bool in_place : {false, true}) {
        std::vector<float> buf(n + 2 * kGuard + offset, guard);
        float* y = buf.data() + kGuard + offset;
        std::vector<float> src(x);
        const float* in = src.data();
        if (in_place) {
          std::copy(x.begin(), x.end(), y);
          in = y;
        }
        fn(in, y, n);
        for (size_t i = 0; i < n; ++i) bad += Same(y[i], want[i]) ? 0 : 1;
        for (size_t i = 0; i < kGuard + offset; ++i)
          bad += FloatBits(buf[i]) == FloatBits(guard) ? 0 : 1;
        for (size_t i = kGuard + offset + n; i < buf.size(); ++i)
          bad += FloatBits(buf[i]) == FloatBits(guard) ? 0 : 1;
        // (n > 0: memcmp of an empty vector's null data() is undefined, UBSan stops there)
        if (!in_place && n > 0)
          bad += std::memcmp(src.data(), x.data(), n * sizeof(float)) == 0 ? 0 : 1;
      }
    }
  }
  return bad;
}

// Random bit patterns (all classes: NaN, inf, subnormal, negative).
std::vector<float> RandomBits(size_t count, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<float> x(count);
  for (float& v : x) v = FromBits(static_cast<uint32_t>(rng()));
  return x;
}

// count evenly spaced values from lo to hi.
std::vector<float> Grid(float lo, float hi, size_t count) {
  std::vector<float> x(count);
  for (size_t i = 0; i < count; ++i)
    x[i] = static_cast<float>(lo + (static_cast<double>(hi) - lo) * static_cast<double>(i) /
                                       static_cast<double>(count - 1));
  return x;
}

// Every `stride`-th float bit pattern in [first, last].
std::vector<float> BitStride(uint32_t first, uint32_t last, uint32_t stride) {
  std::vector<float> x;
  for (uint64_t b = first; b <= last; b += stride) x.push_back(FromBits(static_cast<uint32_t>(b)));
  return x;
}

// Every bit pattern in [first, first + count).
std::vector<float> BitRun(uint32_t first, uint32_t count) {
  return BitStride(first, first + count - 1, 1);
}

struct VmathCase {
  const char* name;
  std::vector<float> x;
};

void CheckFunction(bool expf) {
  float (*ref)(float) = expf ? libm::Expf : libm::Logf;
  std::vector<VmathCase> cases;
  cases.push_back({"engine vectors", EngineInputs(expf ? "expf" : "logf")});
  cases.push_back({"special values", SpecialValues()});
  cases.push_back({"random bits", RandomBits(4 << 20, expf ? 1 : 2)});
  if (expf) {
    cases.push_back({"grid [-110, 90]", Grid(-110.0f, 90.0f, 3 << 20)});
    // Every float of [-110, 90] at a prime stride: all binades, subnormals included.
    std::vector<float> strided = BitStride(0, FloatBits(90.0f), 797);
    const std::vector<float> negative = BitStride(0x80000000u, FloatBits(-110.0f), 797);
    strided.insert(strided.end(), negative.begin(), negative.end());
    cases.push_back({"bit stride [-110, 90]", strided});
    // Every float next to the range limits and where results turn subnormal or zero.
    std::vector<float> edges;
    for (float v : {88.0f, 0x1.62e42ep6f, -0x1.9fe368p6f, -87.33654f, -88.0f, -100.0f}) {
      const std::vector<float> run = BitRun(FloatBits(v) - (1u << 16), 1u << 17);
      edges.insert(edges.end(), run.begin(), run.end());
    }
    cases.push_back({"bits around the limits", edges});
  } else {
    cases.push_back({"grid (0, 1e30]", Grid(1e-30f, 1e30f, 1 << 20)});
    cases.push_back({"grid (0, 4]", Grid(1e-7f, 4.0f, 2 << 20)});
    cases.push_back({"bit stride (0, 1e30]", BitStride(1, FloatBits(1e30f), 397)});
    std::vector<float> edges;
    for (uint32_t first : {0u, 0x00800000u - (1u << 16), FloatBits(1.0f) - (1u << 16),
                           FloatBits(0x1.66p-1f) - (1u << 16), 0x7f800000u - (1u << 16)}) {
      const std::vector<float> run = BitRun(first, 1u << 17);
      edges.insert(edges.end(), run.begin(), run.end());
    }
    cases.push_back({"bits around subnormal, 1, the table limits and inf", edges});
  }
  std::vector<float> pool = SpecialValues();
  const std::vector<float> random = RandomBits(4096, 3);
  const std::vector<float> grid = expf ? Grid(-110.0f, 90.0f, 4096) : Grid(1e-6f, 1e6f, 4096);
  pool.insert(pool.end(), random.begin(), random.end());
  pool.insert(pool.end(), grid.begin(), grid.end());
  std::shuffle(pool.begin(), pool.end(), std::mt19937(4));
  const std::vector<const k::KernelTable*> tables = Tables();
  INFO(tables.size() << " tables");
  REQUIRE(!tables.empty());
  for (const k::KernelTable* table : tables) {
    const k::ExpfArrayFn fn = expf ? table->expf_array : table->logf_array;
    REQUIRE(fn != nullptr);
    for (const VmathCase& c : cases) {
      INFO(table->isa << " " << (expf ? "expf" : "logf") << " " << c.name << ": " << c.x.size()
                      << " values");
      CHECK(Mismatches(expf ? "expf" : "logf", fn, ref, c.x) == 0);
    }
    INFO(table->isa << " tails, offsets, in place");
    CHECK(TailFailures(fn, ref, pool) == 0);
  }
}

// Quantizer inputs of length n: the named pattern.
std::vector<float> QuantizeInput(const std::string& kind, size_t n, std::mt19937& rng) {
  std::vector<float> v(n);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_int_distribution<int> level(-127, 126);
  if (kind == "normal") {
    for (float& x : v) x = normal(rng);
  } else if (kind == "zeros") {
    std::fill(v.begin(), v.end(), 0.0f);
  } else if (kind == "ties") {  // amax 127 * 2^-3: s = 2^-3 exactly, v / s = k + 0.5
    for (float& x : v) x = (static_cast<float>(level(rng)) + 0.5f) * 0.125f;
    v[rng() % n] = 127.0f * 0.125f;
  } else if (kind == "huge") {
    for (float& x : v) x = normal(rng) * 1e37f;
  } else if (kind == "tiny") {  // subnormal: s underflows, 1/s overflows
    for (float& x : v) x = normal(rng) * 1e-42f;
  } else if (kind == "scaled") {  // one spike, many values near zero
    for (float& x : v) x = normal(rng) * 1e-3f;
    v[rng() % n] = -1e4f;
  } else if (kind == "nonfinite") {
    for (float& x : v) x = normal(rng);
    v[rng() % n] = std::numeric_limits<float>::quiet_NaN();
    if (n > 2) v[rng() % n] = (rng() & 1) ? kInf : -kInf;
  } else {  // "nan": amax ignores NaN
    for (float& x : v) x = normal(rng);
    v[rng() % n] = std::numeric_limits<float>::quiet_NaN();
  }
  return v;
}

}  // namespace

TEST_CASE("expf_array equals libm::Expf bit for bit on every ISA", "[kernels][vmath]") {
  CheckFunction(true);
}

TEST_CASE("logf_array equals libm::Logf bit for bit on every ISA", "[kernels][vmath]") {
  CheckFunction(false);
}

TEST_CASE("the scalar QuantizeI8 rounds like roundf", "[kernels][vmath]") {
  // Independent expectation for finite products: (int8)(int32)roundf(v * (1/s)).
  std::mt19937 rng(5);
  for (const char* kind : {"normal", "ties", "huge", "scaled"}) {
    for (size_t n : {1, 33, 128, 2049}) {
      const std::vector<float> v = QuantizeInput(kind, n, rng);
      std::vector<int8_t> q(n);
      const float s = k::QuantizeI8(v.data(), n, q.data());
      float amax = 0.0f;
      for (float x : v) amax = std::max(amax, std::fabs(x));
      REQUIRE(FloatBits(s) == FloatBits(amax > 0.0f ? amax / 127.0f : 1.0f));
      const float inv = 1.0f / s;
      size_t bad = 0;
      for (size_t i = 0; i < n; ++i)
        bad += q[i] == static_cast<int8_t>(static_cast<int32_t>(std::roundf(v[i] * inv))) ? 0 : 1;
      INFO(kind << " n=" << n);
      CHECK(bad == 0);
    }
  }
  int8_t q[4];
  const float ties[4] = {-2.5f, -0.5f, 0.5f, 127.0f};  // s = 1
  CHECK(k::QuantizeI8(ties, 4, q) == 1.0f);
  CHECK(q[0] == -3);
  CHECK(q[1] == -1);
  CHECK(q[2] == 1);
  CHECK(q[3] == 127);
}

TEST_CASE("quantize_i8 equals QuantizeI8 on every ISA", "[kernels][vmath]") {
  const std::vector<const k::KernelTable*> tables = Tables();
  REQUIRE(!tables.empty());
  std::mt19937 rng(6);
  for (const char* kind :
       {"normal", "zeros", "ties", "huge", "tiny", "scaled", "nan", "nonfinite"}) {
    for (size_t n : {1, 2, 7, 15, 16, 17, 31, 32, 33, 64, 127, 128, 512, 2048, 2049}) {
      for (size_t offset : {0, 1, 3}) {
        const std::vector<float> v = QuantizeInput(kind, n, rng);
        std::vector<float> src(n + offset);
        std::copy(v.begin(), v.end(), src.begin() + static_cast<std::ptrdiff_t>(offset));
        std::vector<int8_t> want(n + 8, 0x5a);
        const float want_s = k::QuantizeI8(v.data(), n, want.data());
        for (const k::KernelTable* table : tables) {
          REQUIRE(table->quantize_i8 != nullptr);
          std::vector<int8_t> got(n + 8 + offset, 0x5a);
          const float s = table->quantize_i8(src.data() + offset, n, got.data() + offset);
          INFO(table->isa << " " << kind << " n=" << n << " offset=" << offset);
          CHECK(FloatBits(s) == FloatBits(want_s));
          CHECK(std::memcmp(got.data() + offset, want.data(), n + 8) == 0);  // guard bytes too
          for (size_t i = 0; i < offset; ++i) CHECK(got[i] == 0x5a);
        }
      }
    }
  }
  for (const k::KernelTable* table : tables) {  // n = 0: scale 1, nothing written
    int8_t q = 0x5a;
    const float x = 3.0f;
    CHECK(table->quantize_i8(&x, 0, &q) == 1.0f);
    CHECK(q == 0x5a);
  }
}

namespace {

// `count` n x n matrices of Sinkhorn inputs (the mHC's logits): scaled normals, or special values
// (ties, signed zeros, huge logits whose exponentials underflow, NaN, infinities) mixed in.
std::vector<float> SinkhornInput(const char* kind, size_t n, size_t count, std::mt19937& rng) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> p(n * n * count);
  const float scale = std::strcmp(kind, "wide") == 0 ? 40.0f : 2.0f;
  for (float& v : p) v = scale * normal(rng);
  if (std::strcmp(kind, "special") == 0) {
    const float specials[] = {
        0.0f,    -0.0f,  1.0f,  1.0f, 200.0f,
        -200.0f, -1e30f, -kInf, kInf, std::numeric_limits<float>::quiet_NaN()};
    for (size_t i = 0; i < p.size(); i += 3) p[i] = specials[rng() % std::size(specials)];
  }
  return p;
}

bool SameFloat(float a, float b) {
  return (std::isnan(a) && std::isnan(b)) || FloatBits(a) == FloatBits(b);
}

}  // namespace

TEST_CASE("sinkhorn equals the reference bit for bit on every ISA", "[kernels][vmath]") {
  const std::vector<const k::KernelTable*> tables = Tables();
  REQUIRE(!tables.empty());
  std::mt19937 rng(8);
  size_t compared = 0;
  for (const char* kind : {"normal", "wide", "special"}) {
    for (size_t n : {2, 3, 4, 5}) {
      for (size_t count : {1, 2, 3, 4, 5, 7, 8, 9, 16}) {
        if (n != 4 && count > 3) continue;  // the register path is n = 4 only
        for (int rounds : {0, 1, 20}) {
          const std::vector<float> in = SinkhornInput(kind, n, count, rng);
          std::vector<float> want = in;
          std::vector<float> scratch(count * (n * n + 2 * n));
          k::SinkhornReference(want.data(), n, count, rounds, scratch.data());
          for (const k::KernelTable* table : tables) {
            REQUIRE(table->sinkhorn != nullptr);
            std::vector<float> got = in;
            std::fill(scratch.begin(), scratch.end(), 7.0f);
            table->sinkhorn(got.data(), n, count, rounds, scratch.data());
            size_t bad = 0;
            for (size_t i = 0; i < got.size(); ++i) bad += SameFloat(got[i], want[i]) ? 0 : 1;
            INFO(table->isa << " " << kind << " n=" << n << " count=" << count
                            << " rounds=" << rounds);
            CHECK(bad == 0);
            ++compared;
          }
        }
      }
    }
  }
  CHECK(compared > 0);
}

TEST_CASE("the reference sinkhorn makes finite matrices doubly stochastic", "[kernels][vmath]") {
  // Independent of the kernels: after 20 rounds ending with the columns, every column of P sums
  // to 1 (rounding aside) and every row nearly so; 0 rounds is expf of the input.
  std::mt19937 rng(9);
  for (size_t n : {2, 4, 5}) {
    const size_t count = 3;
    std::vector<float> p = SinkhornInput("normal", n, count, rng);
    for (float& v : p) v *= 0.25f;  // logits of the mHC's size (rows converge within 20 rounds)
    const std::vector<float> in = p;
    std::vector<float> scratch(count * (n * n + 2 * n));
    k::SinkhornReference(p.data(), n, count, 20, scratch.data());
    for (size_t c = 0; c < count; ++c) {
      for (size_t l = 0; l < n; ++l) {
        double col = 0, row = 0;
        for (size_t k2 = 0; k2 < n; ++k2) {
          col += p[c * n * n + k2 * n + l];
          row += p[c * n * n + l * n + k2];
        }
        INFO("n=" << n << " matrix " << c << " line " << l);
        CHECK(std::fabs(col - 1.0) < 1e-5);
        CHECK(std::fabs(row - 1.0) < 1e-3);
      }
    }
    std::vector<float> e = in;
    k::SinkhornReference(e.data(), n, count, 0, scratch.data());
    for (size_t i = 0; i < e.size(); ++i) CHECK(FloatBits(e[i]) == FloatBits(libm::Expf(in[i])));
  }
}

TEST_CASE("vmath kernel speed", "[.vmathbench]") {
  constexpr size_t kN = 4096;
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> exp_in(-20.0f, 5.0f), log_in(1e-3f, 1e3f);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> xe(kN), xl(kN), xq(kN), y(kN);
  std::vector<int8_t> q(kN);
  for (size_t i = 0; i < kN; ++i) {
    xe[i] = exp_in(rng);
    xl[i] = log_in(rng);
    xq[i] = normal(rng);
  }
  // Median over 15 runs of ns per element, each run long enough to time.
  auto time = [&](auto&& run) {
    std::vector<double> ns;
    for (int r = 0; r < 15; ++r) {
      constexpr int kReps = 200;
      const auto t0 = std::chrono::steady_clock::now();
      for (int i = 0; i < kReps; ++i) run();
      const auto t1 = std::chrono::steady_clock::now();
      ns.push_back(std::chrono::duration<double, std::nano>(t1 - t0).count() / (kReps * kN));
    }
    std::sort(ns.begin(), ns.end());
    return ns[ns.size() / 2];
  };
  float sink = 0.0f;
  for (const k::KernelTable* table : Tables()) {
    const double e = time([&] {
      table->expf_array(xe.data(), y.data(), kN);
      sink += y[kN / 2];
    });
    const double l = time([&] {
      table->logf_array(xl.data(), y.data(), kN);
      sink += y[kN / 2];
    });
    const double qs = time([&] { sink += table->quantize_i8(xq.data(), kN, q.data()); });
    std::printf("%-7s expf_array %.3f ns/elt  logf_array %.3f ns/elt  quantize_i8 %.3f ns/elt\n",
                table->isa, e, l, qs);
  }
  CHECK(std::isfinite(sink));
}
