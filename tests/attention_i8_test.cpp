// Int8 attention kernel (kernels/attention_i8.h): every compiled table (and both AVX-512 versions,
// with and without VNNI, where the CPU has them) against the scalar reference, bit for bit
// (memcmp of the outputs and of the softmax weights), over head layouts, head sizes, awkward key
// counts, random slot orders and extreme scales.
#include "kernels/attention_i8.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "kernels/arm/kernels_arm.h"
#include "kernels/cpu_features.h"
#include "kernels/cq_int8.h"
#include "kernels/dispatch.h"
#include "kernels/wasm/kernels_wasm.h"
#include "test_util.h"

namespace {

using needle::testing::SameBits;

namespace k = needle::kernels;

struct AttentionVariant {
  std::string name;
  k::AttendI8Fn attend;
  k::AttendExpfFn expf_array;
};

std::vector<AttentionVariant> AttentionVariants() {
  std::vector<AttentionVariant> out;
  for (const std::string& isa : k::AvailableIsas()) {
    const k::KernelTable& t = k::KernelsFor(isa);
    out.push_back({isa, t.attend_i8, &k::AttendExpfScalar});
    if (t.expf_array != nullptr) out.push_back({isa + "+expf", t.attend_i8, t.expf_array});
  }
#if defined(NEEDLE_X86)
  if (k::BestIsa() >= k::Isa::kAvx512) {
    out.push_back({"avx512-bw", &k::AttendI8Avx512, &k::AttendExpfScalar});
    if (k::GetCpuFeatures().avx512vnni)
      out.push_back({"avx512-vnni", &k::AttendI8Avx512Vnni, &k::AttendExpfScalar});
  }
  // A test that only compares the reference with itself would pass vacuously.
  if (k::GetCpuFeatures().avx2 && k::GetCpuFeatures().fma && k::GetCpuFeatures().f16c)
    REQUIRE(out.size() >= 2);
#endif
#if defined(NEEDLE_ARM)
  REQUIRE(out.size() >= 4);  // scalar and neon, each with both exponentials
  if (k::GetCpuFeatures().dotprod) {
    REQUIRE(out.size() >= 6);
    REQUIRE(out.back().attend == &k::AttendI8Dotprod);
  }
#endif
#if defined(NEEDLE_WASM)
  REQUIRE(out.size() >= 4);  // scalar and simd128, each with both exponentials
  REQUIRE(out.back().attend == &k::AttendI8Simd128);
#endif
  REQUIRE(out.front().name == "scalar");
  REQUIRE(out.front().attend == &k::AttendI8Reference);
  return out;
}

// A ring of `slots` slots for kv_heads x head_dim, one token's queries, and a visiting order.
struct Case {
  size_t heads = 0, kv_heads = 0, head_dim = 0, slots = 0;
  std::vector<int8_t> k, v, q;
  std::vector<float> k_scale, v_scale, qse;
  std::vector<uint32_t> order;
};

// Codes from the engine's quantizer on random data (spiky rows reach +-127); scales either
// realistic (amax / 127 of unit data) or extreme (2^-60 .. 2^20 keys and values, 2^-20 .. 2^10
// queries: tiny, subnormal-range and huge scores, one-hot softmaxes, without overflow).
Case MakeCase(size_t heads, size_t kv_heads, size_t head_dim, size_t count, bool extreme,
              std::mt19937* rng) {
  Case c;
  c.heads = heads;
  c.kv_heads = kv_heads;
  c.head_dim = head_dim;
  c.slots = count + 5;
  const size_t kvd = kv_heads * head_dim, kvb = kvd / k::kAttendBlock;
  std::normal_distribution<float> normal(0.f, 1.f);
  std::uniform_int_distribution<int> pick(0, 9);
  std::uniform_real_distribution<float> expo(0.f, 1.f);
  auto fill = [&](size_t rows, size_t block, std::vector<int8_t>* codes, std::vector<float>* scale,
                  float lo, float hi) {
    codes->resize(rows * block);
    scale->resize(rows);
    std::vector<float> x(block);
    for (size_t r = 0; r < rows; ++r) {
      const int kind = pick(*rng);
      for (size_t j = 0; j < block; ++j)
        x[j] = kind == 0 ? 0.f : (kind == 1 && j % 7 != 0) ? 0.01f * normal(*rng) : normal(*rng);
      if (kind == 2) x[r % block] = 50.f;  // a spike: the other codes near 0
      const float s = k::QuantizeI8(x.data(), block, &(*codes)[r * block]);
      (*scale)[r] = extreme ? std::exp2(lo + (hi - lo) * expo(*rng)) : s;
    }
  };
  fill(c.slots * kvb, k::kAttendBlock, &c.k, &c.k_scale, -60.f, 20.f);
  fill(c.slots * kvb, k::kAttendBlock, &c.v, &c.v_scale, -60.f, 20.f);
  fill(heads, head_dim, &c.q, &c.qse, -20.f, 10.f);
  if (!extreme)
    for (float& s : c.qse) s = s * (1.0f / std::sqrt(static_cast<float>(head_dim)));
  c.order.resize(c.slots);
  std::iota(c.order.begin(), c.order.end(), 0u);
  std::shuffle(c.order.begin(), c.order.end(), *rng);
  c.order.resize(count);
  return c;
}

struct Result {
  std::vector<float> o, scores;
};

Result Run(const AttentionVariant& var, const Case& c) {
  const size_t count = c.order.size();
  Result r;
  r.o.assign(c.heads * c.head_dim, -7.f);  // the kernel writes every element
  r.scores.assign(count * c.heads + 1, -7.f);
  const k::I8Queries q{c.q.data(), c.qse.data(), c.heads};
  const k::I8KvView kv{c.k.data(),       c.v.data(), c.k_scale.data(),
                       c.v_scale.data(), c.kv_heads, c.head_dim};
  var.attend(q, kv, c.order.data(), count, var.expf_array, r.scores.data(), r.o.data());
  REQUIRE(r.scores.back() == -7.f);  // scratch is count * heads
  return r;
}

}  // namespace

TEST_CASE("attend_i8: every ISA gives the reference's bits", "[kernels][attention]") {
  const std::vector<AttentionVariant> variants = AttentionVariants();
  // 12 heads: a full vector of 8 and a masked tail of 4 (with 12 kv heads and head_dim 128 the
  // tail's scales come from a gather).
  // 8 heads of 8, 4, 2 and 1 kv heads: the VNNI table's 8-head score loop for every group size.
  const size_t layouts[][2] = {{2, 1}, {4, 2}, {8, 1}, {8, 2}, {8, 4}, {8, 8}, {12, 4}, {12, 12}};
  const size_t counts[] = {1, 2, 3, 7, 8, 15, 16, 17, 63, 64, 65, 276, 300};
  std::mt19937 rng(20240611);
  size_t cases = 0;
  for (const auto& layout : layouts)
    for (const size_t head_dim : {size_t{64}, size_t{128}})
      for (const size_t count : counts)
        for (const bool extreme : {false, true}) {
          const Case c = MakeCase(layout[0], layout[1], head_dim, count, extreme, &rng);
          const Result ref = Run(variants.front(), c);
          for (const float x : ref.o) REQUIRE(std::isfinite(x));
          for (size_t i = 1; i < variants.size(); ++i) {
            INFO(variants[i].name << " heads " << layout[0] << "/" << layout[1] << " hd "
                                  << head_dim << " count " << count << " extreme " << extreme);
            const Result got = Run(variants[i], c);
            CHECK(SameBits(got.o, ref.o));
            CHECK(SameBits(got.scores, ref.scores));
          }
          ++cases;
        }
  CHECK(cases == 8 * 2 * 13 * 2);
}

TEST_CASE("attend_i8: views of some kv heads (the ring's row) give the full call's bits",
          "[kernels][attention]") {
  // How the decoder splits one token's heads among threads: kv heads [g0, g0 + n) and their
  // query heads, k / v / scales offset to head g0, row = the ring's kv_dim.
  const std::vector<AttentionVariant> variants = AttentionVariants();
  std::mt19937 rng(99);
  for (const size_t count : {size_t{1}, size_t{17}, size_t{300}}) {
    const Case c = MakeCase(8, 4, 64, count, false, &rng);
    const size_t kvd = c.kv_heads * c.head_dim, nb = c.head_dim / k::kAttendBlock;
    const size_t group = c.heads / c.kv_heads;
    for (const AttentionVariant& var : variants) {
      const Result full = Run(var, c);
      for (const auto& [g0, n] : {std::pair<size_t, size_t>{0, 2}, {2, 2}, {1, 3}, {3, 1}}) {
        INFO(var.name << " count " << count << " kv heads " << g0 << ".." << g0 + n);
        const size_t h0 = g0 * group, hn = n * group;
        const k::I8Queries q{c.q.data() + h0 * c.head_dim, c.qse.data() + h0, hn};
        k::I8KvView kv{c.k.data() + g0 * c.head_dim,
                       c.v.data() + g0 * c.head_dim,
                       c.k_scale.data() + g0 * nb,
                       c.v_scale.data() + g0 * nb,
                       n,
                       c.head_dim};
        kv.row = kvd;
        std::vector<float> o(hn * c.head_dim, -7.f), scores(count * hn, -7.f);
        var.attend(q, kv, c.order.data(), count, var.expf_array, scores.data(), o.data());
        CHECK(std::memcmp(o.data(), full.o.data() + h0 * c.head_dim, o.size() * sizeof(float)) ==
              0);
        for (size_t i = 0; i < count; ++i)
          CHECK(std::memcmp(&scores[i * hn], &full.scores[i * c.heads + h0], hn * sizeof(float)) ==
                0);
      }
    }
  }
}

TEST_CASE("attend_i8 block: a call's tokens at once give each token's bits alone",
          "[kernels][attention]") {
  // The block kernels against AttendI8Reference run token by token: token t's keys are the first
  // counts[t] of one visiting list (a prefill call: each list a prefix of the longest), every
  // token its own queries. Counts grow by one per token (a call's positions) or stay equal.
  std::vector<std::pair<std::string, k::AttendI8BlockFn>> blocks;
  for (const std::string& isa : k::AvailableIsas())
    if (k::KernelsFor(isa).attend_i8_block != nullptr)
      blocks.emplace_back(isa, k::KernelsFor(isa).attend_i8_block);
#if defined(NEEDLE_X86)
  if (k::GetCpuFeatures().avx512vnni && k::BestIsa() >= k::Isa::kAvx512)
    REQUIRE(!blocks.empty());  // a test of nothing would pass
#endif
  blocks.emplace_back("reference", &k::AttendI8BlockReference);
  const size_t layouts[][2] = {{2, 1}, {8, 4}, {8, 8}, {12, 4}, {16, 2}};
  std::mt19937 rng(515);
  size_t compared = 0;
  for (const auto& layout : layouts)
    for (const size_t head_dim : {size_t{64}, size_t{128}})
      for (const size_t tokens : {size_t{1}, size_t{4}, size_t{7}, size_t{16}, size_t{32}})
        for (const size_t first : {size_t{1}, size_t{40}, size_t{290}})
          for (const int shape : {0, 1, 2}) {  // 0: +1 per token, 1: equal counts, 2: mixed
            const bool extreme = (first + tokens + static_cast<size_t>(shape)) % 3 == 0;
            std::vector<size_t> counts(tokens);
            for (size_t t = 0; t < tokens; ++t)
              counts[t] = shape == 0 ? first + t : shape == 1 ? first : first + t / 3 * 2;
            const size_t longest = counts.back();
            Case c = MakeCase(layout[0], layout[1], head_dim, longest, extreme, &rng);
            const size_t H = c.heads, row = H * head_dim;
            // Every token's queries: token 0's are the case's, the others re-drawn.
            std::vector<int8_t> q(tokens * row);
            std::vector<float> qse(tokens * H);
            std::uniform_int_distribution<int> code(-127, 127);
            std::uniform_real_distribution<float> scale(0.001f, 0.2f);
            for (size_t t = 0; t < tokens; ++t)
              for (size_t j = 0; j < row; ++j)
                q[t * row + j] = t == 0 ? c.q[j] : static_cast<int8_t>(code(rng));
            for (size_t t = 0; t < tokens; ++t)
              for (size_t h = 0; h < H; ++h) qse[t * H + h] = t == 0 ? c.qse[h] : scale(rng);
            const k::I8QueryBlock qb{q.data(), qse.data(), H, tokens, counts.data()};
            const k::I8KvView kv{c.k.data(),       c.v.data(), c.k_scale.data(),
                                 c.v_scale.data(), c.kv_heads, c.head_dim};
            // Token by token through the reference.
            std::vector<float> want(tokens * row), scores(longest * H);
            for (size_t t = 0; t < tokens; ++t) {
              const k::I8Queries one{q.data() + t * row, qse.data() + t * H, H};
              k::AttendI8Reference(one, kv, c.order.data(), counts[t], &k::AttendExpfScalar,
                                   scores.data(), want.data() + t * row);
            }
            for (const auto& [name, block] : blocks) {
              INFO(name << " heads " << H << "/" << c.kv_heads << " hd " << head_dim << " tokens "
                        << tokens << " counts " << counts.front() << ".." << longest << " extreme "
                        << extreme);
              // The scratch as sized, at an address that is not 64-byte aligned, guarded.
              const size_t bytes = k::AttendI8BlockScratchBytes(qb, kv);
              std::vector<unsigned char> scratch(bytes + 8 + 64, 0xA5);
              std::vector<float> got(tokens * row, -7.f);
              block(qb, kv, c.order.data(), &k::AttendExpfScalar, scratch.data() + 8, got.data());
              CHECK(SameBits(got, want));
              CHECK(std::all_of(scratch.begin(), scratch.begin() + 8,
                                [](unsigned char b) { return b == 0xA5; }));
              CHECK(std::all_of(scratch.end() - 64, scratch.end(),
                                [](unsigned char b) { return b == 0xA5; }));
              ++compared;
            }
          }
  CHECK(compared == 5 * 2 * 5 * 3 * 3 * blocks.size());
}

TEST_CASE("attend_i8: a one-key softmax returns the dequantized value", "[kernels][attention]") {
  // With one key the weight is expf(0) * (1 / 1) = 1, so o_j = vs * (float)v_j exactly.
  std::mt19937 rng(7);
  const Case c = MakeCase(8, 4, 64, 1, false, &rng);
  for (const AttentionVariant& var : AttentionVariants()) {
    INFO(var.name);
    const Result r = Run(var, c);
    const size_t slot = c.order[0];
    for (size_t h = 0; h < 8; ++h)
      for (size_t j = 0; j < 64; ++j) {
        const size_t g = h / 2;
        const float want =
            c.v_scale[slot * 4 + g] * static_cast<float>(c.v[slot * 256 + g * 64 + j]);
        REQUIRE(r.o[h * 64 + j] == want);
      }
  }
}

TEST_CASE("attend_i8: speed per decode step", "[.][bench][attention]") {
  // 8 heads / 4 kv heads, head_dim 64, 276 keys: one token of one layer.
  std::mt19937 rng(11);
  const Case c = MakeCase(8, 4, 64, 276, false, &rng);
  const Result ref = Run(AttentionVariants().front(), c);
  const k::I8Queries q{c.q.data(), c.qse.data(), c.heads};
  const k::I8KvView kv{c.k.data(),       c.v.data(), c.k_scale.data(),
                       c.v_scale.data(), c.kv_heads, c.head_dim};
  for (const AttentionVariant& var : AttentionVariants()) {
    Result r = Run(var, c);
    double best = 1e30;
    for (int rep = 0; rep < 7; ++rep) {
      const int iters = 2000;
      const auto t0 = std::chrono::steady_clock::now();
      for (int it = 0; it < iters; ++it)
        var.attend(q, kv, c.order.data(), c.order.size(), var.expf_array, r.scores.data(),
                   r.o.data());
      const double us =
          std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() /
          iters;
      best = std::min(best, us);
    }
    CHECK(SameBits(r.o, ref.o));
    std::printf("attend_i8 %-14s %8.2f us per call (8/4 heads, hd 64, 276 keys)\n",
                var.name.c_str(), best);
  }
}
