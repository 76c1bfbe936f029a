// CQ product kernels: the scalar reference against an explicit dense Hadamard computation, and
// every compiled ISA against the scalar reference on awkward sizes.
#include <algorithm>
#include <atomic>
#include <bit>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "base/fp16.h"
#include "kernels/cq_matmul.h"
#include "kernels/dispatch.h"
#include "kernels/fwht.h"
#include "kernels/ops.h"
#include "kernels/parallel.h"

namespace {

using needle::kernels::CqMatrix;

// Named error limits. Reference vs dense: relative to the largest |output| of a case. ISA vs
// reference: relative to the largest sum of |terms| of an output (rounding error of a reordered
// sum scales with it, not with the output, which cancellation can make arbitrarily small).
constexpr double kReferenceVsDenseRel = 2e-5;  // scalar code-domain product vs dense f64 math
constexpr double kIsaVsReferenceRel = 2e-5;    // any ISA vs the scalar reference

// A random CQ matrix with its storage.
struct F32TestMatrix {
  CqMatrix m;
  std::vector<uint8_t> codes, norms;
  std::vector<uint32_t> raw;  // raw code per element [rows, in_pad]
};

F32TestMatrix MakeMatrix(size_t rows, size_t cols, size_t group, uint32_t bits, std::mt19937* rng) {
  F32TestMatrix t;
  CqMatrix& m = t.m;
  m.rows = rows;
  m.cols = cols;
  m.group = group;
  m.in_pad = (cols + group - 1) / group * group;
  m.groups_per_row = m.in_pad / group;
  m.code_bits = bits;
  m.row_bytes = m.in_pad * bits / 8;
  std::uniform_real_distribution<float> level(-0.5f, 0.5f), norm(0.1f, 3.f);
  for (uint32_t i = 0; i < (1u << bits); ++i) m.levels[i] = level(*rng);
  t.codes.assign(rows * m.row_bytes, 0);
  t.raw.resize(rows * m.in_pad);
  for (size_t r = 0; r < rows; ++r)
    for (size_t k = 0; k < m.in_pad; ++k) {
      const uint32_t c = (*rng)() & ((1u << bits) - 1);
      t.raw[r * m.in_pad + k] = c;
      const size_t bit = k * bits;
      t.codes[r * m.row_bytes + bit / 8] |= static_cast<uint8_t>(c << (bit % 8));
      if (bit % 8 + bits > 8)
        t.codes[r * m.row_bytes + bit / 8 + 1] |= static_cast<uint8_t>(c >> (8 - bit % 8));
    }
  t.norms.resize(rows * m.groups_per_row * 2);
  for (size_t i = 0; i < rows * m.groups_per_row; ++i) {
    const uint16_t h = needle::F32ToF16(norm(*rng));
    t.norms[2 * i] = static_cast<uint8_t>(h & 0xff);
    t.norms[2 * i + 1] = static_cast<uint8_t>(h >> 8);
  }
  m.codes = t.codes.data();
  m.norms = t.norms.data();
  return t;
}

// Dense f64 reference: w = (level * norm) @ H per group, y = w . x (x zero-padded).
std::vector<double> DenseProduct(const F32TestMatrix& t, const std::vector<float>& x, size_t n) {
  const CqMatrix& m = t.m;
  std::vector<double> y(n * m.rows, 0.0);
  const double s = 1.0 / std::sqrt(static_cast<double>(m.group));
  for (size_t r = 0; r < m.rows; ++r) {
    std::vector<double> w(m.in_pad, 0.0);
    for (size_t g = 0; g < m.groups_per_row; ++g) {
      const double norm = needle::F16ToF32(
          static_cast<uint16_t>(t.norms[2 * (r * m.groups_per_row + g)] |
                                (t.norms[2 * (r * m.groups_per_row + g) + 1] << 8)));
      for (size_t j = 0; j < m.group; ++j) {
        double acc = 0;
        for (size_t i = 0; i < m.group; ++i) {
          const double h = (std::popcount(i & j) & 1) ? -s : s;
          acc += m.levels[t.raw[r * m.in_pad + g * m.group + i]] * norm * h;
        }
        w[g * m.group + j] = acc;
      }
    }
    for (size_t tok = 0; tok < n; ++tok) {
      double acc = 0;
      for (size_t i = 0; i < m.cols; ++i) acc += w[i] * x[tok * m.cols + i];
      y[tok * m.rows + r] = acc;
    }
  }
  return y;
}

// The largest over outputs (rows [row_begin, row_end), n tokens) of sum |norm * level * x_hat|.
double LargestTermSum(const F32TestMatrix& t, const std::vector<float>& x, size_t n,
                      size_t row_begin, size_t row_end) {
  const CqMatrix& m = t.m;
  std::vector<float> x_hat(n * m.in_pad);
  needle::kernels::CqTransformActivations(x.data(), n, m.cols, m.cols, m.group, m.in_pad,
                                          x_hat.data());
  double largest = 1e-30;
  for (size_t r = row_begin; r < row_end; ++r)
    for (size_t tok = 0; tok < n; ++tok) {
      double sum = 0;
      for (size_t g = 0; g < m.groups_per_row; ++g) {
        const double norm = needle::F16ToF32(
            static_cast<uint16_t>(t.norms[2 * (r * m.groups_per_row + g)] |
                                  (t.norms[2 * (r * m.groups_per_row + g) + 1] << 8)));
        for (size_t i = g * m.group; i < (g + 1) * m.group; ++i)
          sum += norm * std::fabs(m.levels[t.raw[r * m.in_pad + i]] * x_hat[tok * m.in_pad + i]);
      }
      largest = std::max(largest, sum);
    }
  return largest;
}

std::vector<float> RunKernel(needle::kernels::CqGemmFn fn, const CqMatrix& m,
                             const std::vector<float>& x, size_t n, size_t row_begin,
                             size_t row_end) {
  std::vector<float> x_hat(n * m.in_pad);
  needle::kernels::CqTransformActivations(x.data(), n, m.cols, m.cols, m.group, m.in_pad,
                                          x_hat.data());
  std::vector<float> y(n * m.rows, 0.f);
  fn(m, x_hat.data(), n, row_begin, row_end, y.data() + row_begin, m.rows);
  return y;
}

std::vector<float> RandomActivations(size_t count, std::mt19937* rng) {
  std::normal_distribution<float> dist(0.f, 1.f);
  std::vector<float> x(count);
  for (float& v : x) v = dist(*rng);
  return x;
}

}  // namespace

TEST_CASE("CQ reference product equals dense Hadamard math", "[kernels]") {
  std::mt19937 rng(7);
  for (uint32_t bits : {2u, 3u, 4u})
    for (size_t group : {size_t{1}, size_t{8}, size_t{32}, size_t{128}})
      for (size_t cols : {size_t{1}, size_t{7}, size_t{33}, size_t{129}})
        for (size_t rows : {size_t{1}, size_t{5}, size_t{17}}) {
          if (group * bits % 8 != 0) continue;  // rows must be whole bytes (as in the format)
          const F32TestMatrix t = MakeMatrix(rows, cols, group, bits, &rng);
          const size_t n = 3;
          const auto x = RandomActivations(n * cols, &rng);
          const auto dense = DenseProduct(t, x, n);
          const auto got = RunKernel(&needle::kernels::CqGemmReference, t.m, x, n, 0, rows);
          double max_diff = 0, max_ref = 1e-12;
          for (size_t i = 0; i < dense.size(); ++i) {
            max_diff = std::max(max_diff, std::fabs(dense[i] - got[i]));
            max_ref = std::max(max_ref, std::fabs(dense[i]));
          }
          INFO("bits " << bits << " group " << group << " rows " << rows << " cols " << cols);
          CHECK(max_diff / max_ref <= kReferenceVsDenseRel);
        }
}

TEST_CASE("CqDecodeRow equals the decode by definition bit for bit", "[kernels]") {
  // Definition (cq_matmul.h): per group levels[code] * norm, one code at a time, then the
  // reference FWHT; the row cropped to cols.
  std::mt19937 rng(5);
  size_t rows_checked = 0;
  for (uint32_t bits : {2u, 3u, 4u})
    for (size_t group : {size_t{1}, size_t{8}, size_t{32}, size_t{128}})
      for (size_t cols : {size_t{1}, size_t{7}, size_t{129}, size_t{300}}) {
        if (group * bits % 8 != 0) continue;
        const F32TestMatrix t = MakeMatrix(5, cols, group, bits, &rng);
        const CqMatrix& m = t.m;
        std::vector<float> got(m.cols), scratch(m.in_pad), want(m.in_pad);
        for (size_t r = 0; r < m.rows; ++r) {
          for (size_t g = 0; g < m.groups_per_row; ++g) {
            const float norm = needle::F16ToF32(
                needle::LoadLE<uint16_t>(m.norms + 2 * (r * m.groups_per_row + g)));
            for (size_t i = g * m.group; i < (g + 1) * m.group; ++i)
              want[i] =
                  m.levels[needle::kernels::CqCodeAt(m.codes + r * m.row_bytes, i, bits)] * norm;
            needle::kernels::FwhtReference(want.data() + g * m.group, m.group);
          }
          needle::kernels::CqDecodeRow(m, r, got.data(), scratch.data());
          INFO("bits " << bits << " group " << group << " cols " << cols << " row " << r);
          CHECK(std::memcmp(got.data(), want.data(), m.cols * sizeof(float)) == 0);
          ++rows_checked;
        }
      }
  CHECK(rows_checked > 100);
}

TEST_CASE("every compiled ISA matches the scalar CQ reference on awkward sizes", "[kernels]") {
  const auto isas = needle::kernels::AvailableIsas();
  REQUIRE(isas.front() == "scalar");
  std::mt19937 rng(11);
  const size_t sizes[] = {1, 2, 3, 5, 7, 8, 15, 16, 17, 31, 33, 63, 65, 127, 129, 255, 257};
  size_t cases = 0;
  for (const auto& isa : isas) {
    const auto& table = needle::kernels::KernelsFor(isa);
    for (uint32_t bits : {2u, 3u, 4u})
      for (size_t group : {size_t{4}, size_t{8}, size_t{16}, size_t{64}, size_t{128}})
        for (size_t i = 0; i < std::size(sizes); i += 2) {
          if (group * bits % 8 != 0) continue;
          const size_t rows = sizes[i], cols = sizes[(i * 7 + bits) % std::size(sizes)];
          const F32TestMatrix t = MakeMatrix(rows, cols, group, bits, &rng);
          // Token counts around every ISA's tile (AVX2 6/8, AVX-512 12) and its remainders.
          for (size_t n :
               {size_t{1}, size_t{3}, size_t{4}, size_t{5}, size_t{9}, size_t{13}, size_t{25}}) {
            const auto x = RandomActivations(n * cols, &rng);
            // A sub-range of rows checks the row offset handling too.
            const size_t b = rows > 2 ? 1 : 0, e = rows > 3 ? rows - 1 : rows;
            const auto ref = RunKernel(&needle::kernels::CqGemmReference, t.m, x, n, b, e);
            const auto got = RunKernel(table.cq_gemm, t.m, x, n, b, e);
            double max_diff = 0;
            for (size_t k = 0; k < ref.size(); ++k)
              max_diff = std::max(max_diff, static_cast<double>(std::fabs(ref[k] - got[k])));
            INFO(isa << " bits " << bits << " group " << group << " rows " << rows << " cols "
                     << cols << " tokens " << n);
            CHECK(max_diff / LargestTermSum(t, x, n, b, e) <= kIsaVsReferenceRel);
            ++cases;
          }
        }
  }
  CHECK(cases > 0);
}

TEST_CASE("ChunkPool runs every chunk exactly once, job after job", "[kernels][parallel]") {
  for (int threads : {1, 2, 3, 5}) {
    needle::kernels::ChunkPool pool(threads);
    CHECK(pool.threads() == threads);
    std::vector<std::atomic<int>> hits(97);
    long bad = 0;
    for (int job = 0; job < 3000; ++job) {
      const size_t chunks = static_cast<size_t>(job % 97) + 1;
      for (auto& h : hits) h.store(0);
      pool.Run(chunks, [&](size_t c) { hits[c].fetch_add(1); });
      for (size_t c = 0; c < hits.size(); ++c) bad += hits[c].load() != (c < chunks ? 1 : 0);
    }
    INFO("threads " << threads);
    CHECK(bad == 0);
  }
}

TEST_CASE("ChunkPool pinned jobs run every part's chunks exactly once, mixed with other jobs",
          "[kernels][parallel]") {
  for (int threads : {1, 2, 3, 5}) {
    needle::kernels::ChunkPool pool(threads);
    const size_t parts = static_cast<size_t>(threads);
    std::vector<std::atomic<int>> hits(parts * 13);
    long bad = 0, out_of_range = 0;
    for (int job = 0; job < 3000; ++job) {
      const size_t per_part = static_cast<size_t>(job % 13) + 1;
      for (auto& h : hits) h.store(0);
      pool.RunPinned(per_part, [&](size_t part, size_t c) {
        if (part >= parts || c >= per_part) {
          ++out_of_range;
          return;
        }
        hits[part * 13 + c].fetch_add(1);
      });
      for (size_t p = 0; p < parts; ++p)
        for (size_t c = 0; c < 13; ++c) bad += hits[p * 13 + c].load() != (c < per_part ? 1 : 0);
      if (job % 3 == 0) {  // an unpinned job between: the generations interleave
        std::vector<std::atomic<int>> once(7);
        pool.Run(7, [&](size_t c) { once[c].fetch_add(1); });
        for (auto& o : once) bad += o.load() != 1;
      }
      // One chunk per part.
      std::vector<std::atomic<int>> single(parts);
      pool.RunPinned([&](size_t part) { single[part].fetch_add(1); });
      for (auto& h : single) bad += h.load() != 1;
    }
    INFO("threads " << threads);
    CHECK(bad == 0);
    CHECK(out_of_range == 0);
  }
}

TEST_CASE("ChunkPool side tasks run once beside jobs, which still run every chunk once",
          "[kernels][parallel]") {
  for (int threads : {1, 2, 3}) {
    needle::kernels::ChunkPool pool(threads);
    std::vector<std::atomic<int>> hits(41);
    long bad = 0, side_runs = 0, jobs_between = 0;
    for (int round = 0; round < 2000; ++round) {
      std::atomic<int> side{0};
      // The side task takes a while, so jobs start while a worker may still be running it.
      const auto task = [&] {
        volatile int spin = 0;
        for (int i = 0; i < 200 * (round % 4); ++i) spin = spin + 1;
        side.fetch_add(1);
      };
      pool.Post(task);
      for (int job = 0; job < round % 3; ++job) {
        const size_t chunks = static_cast<size_t>((round + job) % 41) + 1;
        for (auto& h : hits) h.store(0);
        pool.Run(chunks, [&](size_t c) { hits[c].fetch_add(1); });
        for (size_t c = 0; c < hits.size(); ++c) bad += hits[c].load() != (c < chunks ? 1 : 0);
        ++jobs_between;
      }
      pool.Join();
      side_runs += side.load();
      bad += side.load() != 1;
    }
    pool.Join();  // nothing posted: returns at once
    INFO("threads " << threads);
    CHECK(bad == 0);
    CHECK(side_runs == 2000);
    CHECK(jobs_between > 0);
  }
}

TEST_CASE("RoPE from cached angles equals the per-call rotation bit for bit", "[kernels]") {
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> value(-3.f, 3.f);
  for (size_t hd : {size_t{2}, size_t{8}, size_t{64}, size_t{130}}) {
    std::vector<float> freqs(hd / 2), cs(hd);
    needle::kernels::RopeFrequencies(hd, 100000.f, freqs.data());
    for (float pos : {0.f, 1.f, 37.f, 2047.f}) {
      std::vector<float> a(hd);
      for (float& v : a) v = value(rng);
      std::vector<float> b = a;
      needle::kernels::RopeHalfSplit(a.data(), hd, freqs.data(), pos);
      needle::kernels::RopeAngles(hd, freqs.data(), pos, cs.data());
      needle::kernels::RopeRotate(b.data(), hd, cs.data());
      INFO("head_dim " << hd << " pos " << pos);
      CHECK(std::memcmp(a.data(), b.data(), hd * sizeof(float)) == 0);
    }
  }
}

TEST_CASE("ZcNormRows equals ZcNorm row by row bit for bit", "[kernels]") {
  std::mt19937 rng(7);
  std::normal_distribution<float> dist(0.f, 3.f);
  for (size_t rows : {1, 3, 12, 16, 17, 40}) {
    for (size_t n : {1, 7, 64, 128}) {
      std::vector<float> x(rows * n), scale(n), want(rows * n);
      for (float& v : x) v = dist(rng);
      for (float& v : scale) v = 0.1f * dist(rng);
      for (size_t r = 0; r < rows; ++r)
        needle::kernels::ZcNorm(&x[r * n], scale.data(), n, 1e-6f, &want[r * n]);
      std::vector<float> got = x;  // in place, as the decoder calls it
      needle::kernels::ZcNormRows(got.data(), scale.data(), rows, n, 1e-6f, got.data());
      INFO("rows " << rows << " n " << n);
      REQUIRE(std::memcmp(got.data(), want.data(), want.size() * 4) == 0);
    }
  }
}

TEST_CASE("InvRmsRows and RmsUnitRows over strided rows equal the one-row versions", "[kernels]") {
  // Blocks of 16, 8, 4, 2 and 1 rows (the 16-row sums turn 4 x 4 blocks into lanes), row
  // lengths with and without a tail of fewer than 4, rows further apart than their length.
  std::mt19937 rng(70);
  std::normal_distribution<float> dist(0.f, 3.f);
  for (size_t rows : {1, 8, 15, 16, 31, 32, 33}) {
    for (size_t n : {3, 5, 512, 2051}) {
      const size_t ldx = n + 5;
      std::vector<float> x(rows * ldx);
      for (float& v : x) v = dist(rng);
      for (size_t r = 0; r < rows; r += 5) x[r * ldx + n / 2] = 1e30f;  // large squares too
      std::vector<float> inv(rows), want_unit(rows * n), unit(rows * ldx, -7.f);
      needle::kernels::InvRmsRows(x.data(), ldx, rows, n, 1e-6f, inv.data());
      needle::kernels::RmsUnitRows(x.data(), ldx, rows, n, 1e-6f, unit.data(), ldx);
      INFO("rows " << rows << " n " << n);
      for (size_t r = 0; r < rows; ++r) {
        const float want = needle::kernels::InvRms(&x[r * ldx], n, 1e-6f);
        REQUIRE(std::memcmp(&inv[r], &want, 4) == 0);
        needle::kernels::RmsUnit(&x[r * ldx], n, 1e-6f, &want_unit[r * n]);
        REQUIRE(std::memcmp(&unit[r * ldx], &want_unit[r * n], n * 4) == 0);
      }
    }
  }
}

TEST_CASE("Dots16, Axpy, Scale and LaneMean equal plain loops bit for bit", "[kernels]") {
  // The vector-cloned ops the probe pooling uses: every lane / element its own operations in the
  // reference order (a volatile product keeps the compiler from fusing the expectation).
  std::mt19937 rng(11);
  std::normal_distribution<float> dist(0.f, 2.f);
  for (size_t n : {1, 7, 64, 512, 513}) {
    std::vector<float> x(n), p(16 * n), y(n);
    for (float& v : x) v = dist(rng);
    for (float& v : p) v = dist(rng);
    for (float& v : y) v = dist(rng);
    float want[16];
    for (size_t q = 0; q < 16; ++q) {
      float acc = 0.f;
      for (size_t i = 0; i < n; ++i) {
        const volatile float prod = x[i] * p[16 * i + q];
        acc = prod + acc;
      }
      want[q] = acc;
    }
    float got[16];
    needle::kernels::Dots16(x.data(), p.data(), n, got);
    INFO("n " << n);
    CHECK(std::memcmp(got, want, sizeof want) == 0);

    const float a = dist(rng);
    std::vector<float> axpy = y, scaled = y, want_axpy(n), want_scaled(n);
    for (size_t i = 0; i < n; ++i) {
      const volatile float prod = a * x[i];
      want_axpy[i] = y[i] + prod;
      want_scaled[i] = a * y[i];
    }
    needle::kernels::Axpy(a, x.data(), axpy.data(), n);
    needle::kernels::Scale(a, scaled.data(), n);
    CHECK(std::memcmp(axpy.data(), want_axpy.data(), n * 4) == 0);
    CHECK(std::memcmp(scaled.data(), want_scaled.data(), n * 4) == 0);

    for (size_t lanes : {1, 3, 4}) {
      std::vector<float> lanes_x(lanes * n), mean(n), want_mean(n);
      for (float& v : lanes_x) v = dist(rng);
      for (size_t i = 0; i < n; ++i) {
        float sum = 0.f;
        for (size_t l = 0; l < lanes; ++l) sum += lanes_x[l * n + i];
        want_mean[i] = sum / static_cast<float>(lanes);
      }
      needle::kernels::LaneMean(lanes_x.data(), lanes, n, mean.data());
      INFO("lanes " << lanes);
      CHECK(std::memcmp(mean.data(), want_mean.data(), n * 4) == 0);
    }
  }
}

TEST_CASE("ArgMax returns std::max_element's index", "[kernels]") {
  std::mt19937 rng(12);
  std::normal_distribution<float> dist(0.f, 3.f);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  size_t checked = 0;
  for (size_t n : {1, 2, 7, 16, 17, 100, 8192}) {
    for (const char* kind : {"normal", "ties", "zeros", "nan", "nan-first", "inf"}) {
      std::vector<float> x(n);
      for (float& v : x) v = dist(rng);
      if (std::strcmp(kind, "ties") == 0)
        for (float& v : x) v = std::round(v);  // many equal maxima
      if (std::strcmp(kind, "zeros") == 0)
        for (size_t i = 0; i < n; ++i) x[i] = i % 2 ? 0.0f : -0.0f;
      if (std::strcmp(kind, "nan") == 0) x[n / 2] = nan;
      if (std::strcmp(kind, "nan-first") == 0) x[0] = nan;
      if (std::strcmp(kind, "inf") == 0) x[n - 1] = std::numeric_limits<float>::infinity();
      const size_t want = static_cast<size_t>(std::max_element(x.begin(), x.end()) - x.begin());
      INFO(kind << " n " << n);
      CHECK(needle::kernels::ArgMax(x.data(), n) == want);
      ++checked;
    }
  }
  CHECK(checked == 42);
}
