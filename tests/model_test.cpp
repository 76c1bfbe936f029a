// Forward pass against the upstream goldens (tiny, small, official geometry), thread-count
// independence, windowed decoding, snapshots.
#include <sys/wait.h>

#include <catch2/catch.hpp>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "base/error.h"
#include "base/pages.h"
#include "format/cact.h"
#include "model/decoder.h"
#include "model/golden.h"
#include "model/numerics.h"
#include "test_util.h"

namespace {

using needle::model::Decoder;
using needle::model::DecoderConfig;
using needle::model::Model;

using needle::testing::ModelPath;
std::string GoldenPath(const std::string& dir) {
  return needle::testing::DataPath("golden/" + dir + "/golden.json");
}

using needle::model::NumericPath;

// Upstream f32 reference entries. The f32 path must track them within the f32 tolerance at every
// position; the official (int8) path as the engine does (cosine, same top-1).
void CheckReferences(const std::string& model_file, const std::string& golden_dir,
                     NumericPath path = NumericPath::kF32) {
  const auto file = needle::format::CactFile::Open(ModelPath(model_file));
  const Model model(file);
  const auto golden = needle::model::LoadGolden(GoldenPath(golden_dir), model.geometry().vocab);
  REQUIRE(golden.reference.size() == 8);
  const needle::model::Tolerances tol;
  for (size_t i = 0; i < golden.reference.size(); ++i) {
    const auto& c = golden.reference[i];
    const auto r = needle::model::RunReference(model, c, tol, 1, nullptr, path);
    INFO(model_file << " " << needle::model::NumericPathName(path) << " reference " << i << " ("
                    << c.ids.size() << " ids, window " << c.kv_window << ", sinks " << c.sink_len
                    << "): max|diff| " << r.max_abs_diff << " cosine " << r.cosine
                    << " top5 mismatches " << r.top5_mismatches << " first at "
                    << r.first_mismatch);
    if (path == NumericPath::kF32) {
      CHECK(r.max_abs_diff <= tol.reference_max_abs);
      CHECK(r.top5_mismatches == 0);
    } else {
      CHECK(r.max_abs_diff > 0.f);  // int8 arithmetic is not the f32 reference
      CHECK(r.cosine >= tol.cross_cosine);
      CHECK(r.top1 == r.expected_top1);
    }
    CHECK(r.pass);
  }
}

}  // namespace

TEST_CASE("row chunks cover every job row once, in whole tiles, chunks spanning jobs", "[model]") {
  // How a product's rows are shared among threads (model::RowChunks): the rows of the jobs joined
  // end to end, cut into about `target` chunks of 16-row tiles.
  using needle::model::ProjectJob;
  using needle::model::RowChunks;
  const std::vector<std::vector<size_t>> sizes = {{512, 256, 256, 512}, {8192},     {512},    {16},
                                                  {40, 7, 300},         {512, 512}, {1, 1, 1}};
  for (const auto& rows : sizes)
    for (const size_t target : {1, 2, 3, 4, 8}) {
      std::vector<ProjectJob> jobs;
      size_t total = 0, tiles = 0;
      for (size_t k = 0; k < rows.size(); ++k) {
        const size_t begin = 3 * k;  // jobs need not start at row 0
        jobs.push_back({nullptr, begin, begin + rows[k], nullptr, 0});
        total += rows[k];
        tiles += (rows[k] + 15) / 16;
      }
      const RowChunks chunks(jobs, target);
      INFO("jobs " << rows.size() << " rows " << total << " target " << target);
      REQUIRE(chunks.count >= 1);
      REQUIRE(chunks.count <= target);
      std::vector<std::vector<int>> seen(rows.size());
      for (size_t k = 0; k < rows.size(); ++k) seen[k].assign(rows[k], 0);
      size_t largest = 0, smallest = SIZE_MAX;
      for (size_t c = 0; c < chunks.count; ++c) {
        size_t in_chunk = 0;
        chunks.ForChunk(jobs, c, [&](size_t k, size_t b, size_t e) {
          REQUIRE(b < e);
          REQUIRE(b >= jobs[k].row_begin);
          REQUIRE(e <= jobs[k].row_end);
          REQUIRE((b - jobs[k].row_begin) % 16 == 0);  // whole tiles of the job
          for (size_t r = b; r < e; ++r) ++seen[k][r - jobs[k].row_begin];
          in_chunk += (e - b + 15) / 16;
        });
        largest = std::max(largest, in_chunk);
        smallest = std::min(smallest, in_chunk);
      }
      for (const auto& s : seen)
        for (const int n : s) REQUIRE(n == 1);
      // Balanced: every chunk but the last holds the same number of tiles.
      REQUIRE(largest == (tiles + chunks.count - 1) / chunks.count);
      if (chunks.count > 1) REQUIRE(smallest >= 1);
    }
}

TEST_CASE("tiny matches the upstream f32 reference logits", "[model]") {
  CheckReferences("tiny.cact", "tiny");
}

namespace {

// The official engine's first-step logits. The official path must give every logit bit for bit;
// the f32 path agrees as f32 and int8 arithmetic agree.
void CheckOfficial(const std::string& model_file, const std::string& golden_dir,
                   NumericPath path = NumericPath::kOfficial, int threads = 1,
                   const needle::kernels::KernelTable* kernels = nullptr) {
  const auto file = needle::format::CactFile::Open(ModelPath(model_file));
  const Model model(file);
  const auto golden = needle::model::LoadGolden(GoldenPath(golden_dir), model.geometry().vocab);
  REQUIRE(golden.official.size() == 6);
  const needle::model::Tolerances tol;
  for (size_t i = 0; i < golden.official.size(); ++i) {
    const auto r =
        needle::model::RunOfficial(model, golden.official[i], tol, threads, kernels, path);
    INFO(model_file << " " << needle::model::NumericPathName(path) << " official " << i
                    << ": cosine " << r.cosine << " max|diff| " << r.max_abs_diff << " equal "
                    << r.equal_logits << " top1 " << r.top1 << " expected " << r.expected_top1);
    if (path == NumericPath::kOfficial) {
      CHECK(r.equal_logits == model.geometry().vocab);
      CHECK(r.max_abs_diff == 0.f);
    } else {
      CHECK(r.max_abs_diff > 0.f);
      CHECK(r.cosine >= tol.cross_cosine);
      CHECK(r.top1 == r.expected_top1);
    }
    CHECK(r.pass);
  }
}

}  // namespace

TEST_CASE("tiny, official numerics: the engine's first-step logits bit for bit", "[model]") {
  CheckOfficial("tiny.cact", "tiny");
  CheckReferences("tiny.cact", "tiny", NumericPath::kOfficial);
}

TEST_CASE("tiny, f32 numerics: close to the engine's first-step logits", "[model]") {
  CheckOfficial("tiny.cact", "tiny", NumericPath::kF32);
}

TEST_CASE("small matches the upstream f32 reference logits", "[model]") {
  CheckReferences("small.cact", "small");
}

TEST_CASE("small, official numerics: the engine's first-step logits bit for bit", "[model]") {
  CheckOfficial("small.cact", "small");
  CheckReferences("small.cact", "small", NumericPath::kOfficial);
  CheckOfficial("small.cact", "small", NumericPath::kF32);
}

TEST_CASE("official geometry matches the upstream reference and the official engine",
          "[model][long]") {
  CheckOfficial("official-geometry.cact", "official");
#ifndef NEEDLE_SANITIZED
  // The sanitizer build (10-15x slower) checks the official path only here: the f32 path's code
  // is the same for every geometry, and the tiny and small tests run it there.
  CheckReferences("official-geometry.cact", "official");
  CheckOfficial("official-geometry.cact", "official", NumericPath::kF32);
#endif
}

TEST_CASE("official numerics: every ISA and thread count gives the engine's logits",
          "[model][isa]") {
  for (const std::string& isa : needle::kernels::AvailableIsas())
    for (int threads : {1, 2}) {
      INFO("isa " << isa << " threads " << threads);
      CheckOfficial("small.cact", "small", NumericPath::kOfficial, threads,
                    &needle::kernels::KernelsFor(isa));
    }
}

namespace {

// A deterministic token stream (ids spread over the vocabulary).
std::vector<int32_t> Tokens(size_t n, uint32_t vocab, uint32_t seed) {
  std::vector<int32_t> ids(n);
  uint32_t s = seed;
  for (auto& id : ids) {
    s = s * 1664525u + 1013904223u;
    id = static_cast<int32_t>((s >> 8) % vocab);
  }
  return ids;
}

std::vector<float> AllLogits(const Model& model, DecoderConfig cfg,
                             const std::vector<int32_t>& ids) {
  Decoder dec(model, cfg);
  std::vector<float> all(ids.size() * model.geometry().vocab);
  dec.Prefill(ids, {}, all);
  return all;
}

}  // namespace

TEST_CASE("logits do not depend on the thread count", "[model][threads]") {
  const auto file = needle::format::CactFile::Open(ModelPath("small.cact"));
  const Model model(file);
  const auto ids = Tokens(40, model.geometry().vocab, 3);
  for (const NumericPath path : {NumericPath::kOfficial, NumericPath::kF32})
    for (const char* isa : {"scalar", "best"}) {
      DecoderConfig cfg;
      cfg.path = path;
      cfg.kv_window = 16;
      cfg.sink_len = 5;
      cfg.max_batch = 11;
      if (std::string(isa) == "scalar") cfg.kernels = &needle::kernels::ReferenceKernels();
      cfg.threads = 1;
      const auto one = AllLogits(model, cfg, ids);
      cfg.threads = 2;
      const auto two = AllLogits(model, cfg, ids);
      INFO("kernels " << isa << " numerics " << needle::model::NumericPathName(path));
      REQUIRE(one.size() == two.size());
      CHECK(std::memcmp(one.data(), two.data(), one.size() * sizeof(float)) == 0);
      // Single-token steps (the decode kernels) too.
      std::vector<float> step1(model.geometry().vocab), step2(model.geometry().vocab);
      cfg.threads = 1;
      Decoder d1(model, cfg);
      cfg.threads = 2;
      Decoder d2(model, cfg);
      for (int32_t id : ids) {
        d1.Step(id, step1);
        d2.Step(id, step2);
        REQUIRE(std::memcmp(step1.data(), step2.data(), step1.size() * sizeof(float)) == 0);
      }
    }
}

// Decode steps over a long context: past ~128 visible keys one token's attention is split by kv
// head among the threads (numerics_official.cpp); the bits must not change.
TEST_CASE("official decode steps over a long context do not depend on the thread count",
          "[model][threads]") {
  const auto file = needle::format::CactFile::Open(ModelPath("small.cact"));
  const Model model(file);
  const auto ids = Tokens(300, model.geometry().vocab, 5);
  for (const char* isa : {"scalar", "best"}) {
    DecoderConfig cfg;
    cfg.path = NumericPath::kOfficial;
    cfg.max_positions = 320;
    if (std::string(isa) == "scalar") cfg.kernels = &needle::kernels::ReferenceKernels();
    cfg.threads = 1;
    Decoder d1(model, cfg);
    cfg.threads = 2;
    Decoder d2(model, cfg);
    std::vector<float> step1(model.geometry().vocab), step2(model.geometry().vocab);
    size_t same = 0;
    for (int32_t id : ids) {
      d1.Step(id, step1);
      d2.Step(id, step2);
      same += std::memcmp(step1.data(), step2.data(), step1.size() * sizeof(float)) == 0;
    }
    INFO("kernels " << isa);
    CHECK(same == ids.size());
  }
}

TEST_CASE("a decoded token's int8 multiply-adds follow from the geometry", "[model]") {
  for (const char* name : {"tiny.cact", "official-geometry.cact"}) {
    INFO(name);
    const auto file = needle::format::CactFile::Open(ModelPath(name));
    const Model model(file);
    const auto& g = model.geometry();
    const auto pad = [](uint64_t n) { return (n + 127) / 128 * 128; };  // 128-groups
    const uint64_t d = g.d_model, attn = g.attn_dim(), kv = g.kv_dim(), lanes = g.lanes;
    uint64_t want = g.vocab * pad(d);                                      // the LM head
    want += g.num_layers * (2 * attn * pad(d) + 2 * kv * pad(d));          // q, gate; k, v
    want += g.num_layers * d * pad(attn);                                  // out
    want += g.engram_sites.size() * 2 * d * pad(g.engram_dim());           // engram key, value
    const uint64_t phi_rows = g.num_layers * (2 * lanes + lanes * lanes);  // pre, post, res
    CHECK(needle::model::CqMacsPerToken(model.weights(), true) == want + phi_rows * lanes * d);
    CHECK(needle::model::CqMacsPerToken(model.weights(), false) ==
          want + phi_rows * pad(lanes * d));
  }
}

TEST_CASE("engram table rows are read from the file: their pages stay out of the resident set",
          "[model][memory]") {
  using needle::format::LoadMode;
  const std::string path = ModelPath("official-geometry.cact");
  const auto copy = needle::format::CactFile::Open(path, LoadMode::kRead);
  const Model heap(copy);
  // Both paths: the official one also drops the pages of the matrices it copies (ranges merged
  // across neighbours), the f32 one only what the weights drop.
  for (const NumericPath numerics : {NumericPath::kOfficial, NumericPath::kF32}) {
    INFO("numerics " << (numerics == NumericPath::kOfficial ? "official" : "f32"));
    const auto mapped = needle::format::CactFile::Open(path, LoadMode::kMmap);
    REQUIRE(mapped.is_mapped());
    // Every page resident first: what stays out afterwards was dropped, not just never read.
    (void)needle::testing::TouchPages(mapped.bytes());
    const Model model(mapped);
    const auto ids = Tokens(24, model.geometry().vocab, 11);
    DecoderConfig cfg;
    cfg.path = numerics;
    cfg.max_positions = 64;
    Decoder dec(model, cfg), ref(heap, cfg);
    std::vector<float> got(model.geometry().vocab), want(got.size());
    size_t same = 0;
    for (int32_t id : ids) {  // one token at a time: 16 table rows each
      dec.Step(id, got);
      ref.Step(id, want);
      same += std::memcmp(got.data(), want.data(), got.size() * sizeof(float)) == 0;
    }
    CHECK(same == ids.size());  // rows read with pread = rows of the heap copy
    uint64_t table_bytes = 0;
    long table_resident = 0;
    for (const auto& t : mapped.tensors())
      if (t.name.find(".tables") != std::string::npos) {
        table_bytes += t.nbytes;
        table_resident += needle::testing::ResidentBytesOfRange(mapped.data(t).data(), t.nbytes);
      }
    const long resident = needle::testing::ResidentKbOfMapping(mapped.bytes().data());
    INFO("mapping resident " << resident << " KB, file " << mapped.bytes().size() / 1024
                             << " KB, tables " << table_bytes / 1024 << " KB, of them resident "
                             << table_resident / 1024 << " KB");
    REQUIRE(table_bytes > 2000000);
#if defined(NEEDLE_X86)  // native Linux; qemu-user (the aarch64 job) ignores MADV_DONTNEED
    // Reading rows through the mapping would fault them back in 64 KB at a time (24 x 16 reads).
    CHECK(resident > 0);
    CHECK(resident <= static_cast<long>((mapped.bytes().size() - table_bytes) / 1024) + 64);
    CHECK(table_resident == 0);  // (pagemap's present bits of the tables' own pages)
#endif
  }
}

TEST_CASE("a multi-token prefill leaves only the first token's share of the block scratch resident",
          "[model][memory]") {
  // Issue 8's memory: single-token steps touch only slot 0 of the [max_batch, ...] buffers, so
  // the rest (~2.3 MB at the official geometry) need not stay resident while the KV ring fills.
  const auto file = needle::format::CactFile::Open(ModelPath("official-geometry.cact"));
  const Model model(file);
  DecoderConfig cfg;
  cfg.path = NumericPath::kOfficial;
  cfg.max_positions = 128;
  Decoder dec(model, cfg);
  const Decoder::ScratchUse fresh = dec.BlockScratchUse();
  INFO("scratch " << fresh.bytes << " bytes, resident when built " << fresh.resident);
  REQUIRE(fresh.bytes > 2000000);
  std::vector<float> logits(model.geometry().vocab);
  dec.Prefill(Tokens(70, model.geometry().vocab, 3), logits);  // three blocks of up to 32
  const Decoder::ScratchUse after = dec.BlockScratchUse();
  for (int32_t id : Tokens(8, model.geometry().vocab, 4)) dec.Step(id, logits);
  const Decoder::ScratchUse decoding = dec.BlockScratchUse();
  INFO("resident after the prefill " << after.resident << ", after 8 steps " << decoding.resident);
#if defined(NEEDLE_X86)  // native Linux; qemu-user (the aarch64 job) ignores MADV_DONTNEED
  // The measure sees the pages of a buffer as large, once written.
  std::vector<float> written(fresh.bytes / sizeof(float), 1.f);
  CHECK(static_cast<size_t>(needle::ResidentBytes(written.data(), fresh.bytes)) > fresh.bytes / 2);
  // Never zeroed: the buffers' pages are not touched until a block uses them (the smaller
  // buffers come from the heap, whose pages earlier allocations of the process may have touched;
  // zero-filled, all of it was resident).
  CHECK(fresh.resident < fresh.bytes * 3 / 4);
  CHECK(after.resident < fresh.bytes / 5);  // slot 0 of each buffer and its edge pages
  CHECK(decoding.resident < fresh.bytes / 5);
#endif
}

TEST_CASE("huge-page buffers: aligned, zeroed or untouched, given back when freed",
          "[model][memory]") {
  constexpr size_t kHuge = size_t{2} << 20;
  const size_t bytes = kHuge + 12345;  // a whole huge region and a partial one
  needle::HugePageBuffer zeroed(bytes);
  REQUIRE(zeroed.size() == bytes);
  CHECK(std::all_of(zeroed.data(), zeroed.data() + bytes, [](uint8_t b) { return b == 0; }));
  std::fill(zeroed.data(), zeroed.data() + bytes, uint8_t{7});  // writable to the last byte
  CHECK(zeroed.data()[bytes - 1] == 7);
  needle::HugePageBuffer moved(std::move(zeroed));
  CHECK(moved.data()[0] == 7);
  CHECK(zeroed.data() == nullptr);  // NOLINT(bugprone-use-after-move): moved-from is empty
#if defined(__linux__)
  CHECK(reinterpret_cast<uintptr_t>(moved.data()) % kHuge == 0);
#endif
#if defined(NEEDLE_X86)  // native Linux (qemu-user's residency answers are not the kernel's)
  needle::HugePageBuffer untouched(bytes, /*zeroed=*/false);
  CHECK(needle::ResidentBytes(untouched.data(), bytes) == 0);
  // Its own mapping: freed, its pages are no longer the process's (a heap block could stay).
  const auto* where = moved.data();
  { needle::HugePageBuffer gone(std::move(moved)); }
  CHECK(needle::ResidentBytes(where, bytes) == 0);
#endif
}

TEST_CASE("decoders of one model share its derived data, built once, also across threads",
          "[model][threads]") {
  const auto file = needle::format::CactFile::Open(ModelPath("small.cact"));
  const Model model(file);
  const auto ids = Tokens(40, model.geometry().vocab, 5);
  DecoderConfig cfg;
  cfg.path = NumericPath::kF32;
  { Decoder f32(model, cfg); }
  CHECK(model.derived().size() == 0);  // the f32 path derives nothing
  // The official path's int8 φ rows: four decoders on four threads, one build.
  cfg.path = NumericPath::kOfficial;
  std::vector<std::vector<float>> logits(4);
  std::vector<std::thread> threads;
  for (auto& out : logits)
    threads.emplace_back([&model, &cfg, &ids, &out] { out = AllLogits(model, cfg, ids); });
  for (auto& t : threads) t.join();
  // The int8 φ rows and the projected matrices' copies (tiles where the kernel table reads them).
  const size_t derived = 2;
  CHECK(model.derived().size() == derived);
  // Against a decoder of a second model of the same file (its own build, on two threads).
  const Model other(file);
  DecoderConfig two = cfg;
  two.threads = 2;
  const auto fresh = AllLogits(other, two, ids);
  CHECK(other.derived().size() == derived);
  for (const auto& l : logits) {
    REQUIRE(l.size() == fresh.size());
    CHECK(std::memcmp(l.data(), fresh.data(), l.size() * sizeof(float)) == 0);
  }
}

TEST_CASE("batched prefill equals one token per step, also across ring wrap-around",
          "[model][window]") {
  const auto file = needle::format::CactFile::Open(ModelPath("tiny.cact"));
  const Model model(file);
  const uint32_t V = model.geometry().vocab;
  const auto ids = Tokens(50, V, 9);
  for (uint32_t window : {0u, 8u}) {
    DecoderConfig cfg;
    cfg.path = NumericPath::kF32;  // each position's own window (upstream semantics)
    cfg.kv_window = window;
    cfg.sink_len = 3;
    cfg.max_positions = 64;
    cfg.max_batch = 32;  // > window: the ring wraps inside one block
    const auto batched = AllLogits(model, cfg, ids);
    cfg.max_batch = 1;
    Decoder dec(model, cfg);
    std::vector<float> step(V);
    for (size_t t = 0; t < ids.size(); ++t) {
      dec.Step(ids[t], step);
      INFO("window " << window << " position " << t);
      REQUIRE(needle::model::MaxAbsDiff(step.data(), batched.data() + t * V, V) <= 1e-5f);
    }
  }
  // A window this small must change the logits (the test would be vacuous otherwise).
  DecoderConfig full, windowed;
  full.path = windowed.path = NumericPath::kF32;
  full.max_positions = 64;
  windowed.kv_window = 8;
  windowed.sink_len = 3;
  const auto a = AllLogits(model, full, ids), b = AllLogits(model, windowed, ids);
  CHECK(needle::model::MaxAbsDiff(a.data() + 49 * V, b.data() + 49 * V, V) > 1e-3f);
}

TEST_CASE("a prefix snapshot restores the exact state", "[model][snapshot]") {
  const auto file = needle::format::CactFile::Open(ModelPath("tiny.cact"));
  const Model model(file);
  const uint32_t V = model.geometry().vocab;
  const auto prefix = Tokens(30, V, 4), turn_a = Tokens(12, V, 5), turn_b = Tokens(9, V, 6);
  DecoderConfig cfg;
  cfg.path = NumericPath::kF32;
  cfg.kv_window = 16;
  cfg.sink_len = 30;
  Decoder dec(model, cfg);
  dec.Prefill(prefix, {});
  needle::model::Snapshot snap;
  dec.Save(&snap);
  std::vector<float> a1(V), a2(V), b1(V), fresh(V);
  dec.Prefill(turn_a, a1);
  dec.Restore(snap);
  dec.Prefill(turn_b, b1);
  dec.Restore(snap);
  CHECK(dec.position() == 30);
  dec.Prefill(turn_a, a2);
  CHECK(std::memcmp(a1.data(), a2.data(), V * sizeof(float)) == 0);
  Decoder other(model, cfg);
  std::vector<int32_t> both = prefix;
  both.insert(both.end(), turn_b.begin(), turn_b.end());
  other.Prefill(both, fresh);
  CHECK(needle::model::MaxAbsDiff(b1.data(), fresh.data(), V) <= 1e-5f);
}

TEST_CASE("needle verify passes tiny with its golden and fails a too-strict tolerance",
          "[model][cli][verify]") {
  const std::string cmd = std::string("'") + NEEDLE_BINARY + "' verify '" + ModelPath("tiny.cact") +
                          "' --golden '" + GoldenPath("tiny") + "' --json -t 1";
  auto run = [](const std::string& c, std::string* out) {
    FILE* p = popen(c.c_str(), "r");
    REQUIRE(p != nullptr);
    char buf[4096];
    size_t got;
    while ((got = fread(buf, 1, sizeof buf, p)) > 0) out->append(buf, got);
    const int status = pclose(p);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  };
  std::string out;
  REQUIRE(run(cmd, &out) == 0);
  const auto j = nlohmann::json::parse(out);
  CHECK(j["pass"] == true);
  CHECK(j["numerics"] == "official");
  for (const auto& o : j["golden"]["official"]) {
    CHECK(o["max_abs_diff"].get<double>() == 0.0);
    CHECK(o["equal_logits"].get<int>() == 8192);
  }
  CHECK(j["file"]["sha256"].get<std::string>().size() == 64);
  CHECK(j["kernels"]["pass"] == true);
  CHECK(j["decode"]["pass"] == true);
  REQUIRE(j["golden"]["reference"].size() == 8);
  REQUIRE(j["golden"]["official"].size() == 6);
  CHECK(j["golden"]["reference"][7]["kv_window"] == 256);
  CHECK(j["golden"]["reference"][7]["sink_len"] == 40);
  for (const auto& r : j["golden"]["reference"]) CHECK(r["pass"] == true);
  for (const auto& o : j["golden"]["official"]) CHECK(o["cosine"].get<double>() >= 0.9998);

  std::string f32;
  REQUIRE(run(cmd + " --numerics f32", &f32) == 0);
  const auto jf = nlohmann::json::parse(f32);
  CHECK(jf["numerics"] == "f32");
  for (const auto& r : jf["golden"]["reference"]) CHECK(r["max_abs_diff"].get<double>() <= 2e-3);
  for (const auto& o : jf["golden"]["official"]) CHECK(o["max_abs_diff"].get<double>() > 0.0);
  std::string strict;
  CHECK(run(cmd + " --numerics f32 --max-abs 1e-9", &strict) == 1);
  CHECK(nlohmann::json::parse(strict)["pass"] == false);
}

TEST_CASE("probe heads: streamed pooling equals softmax pooling over all cells", "[model][heads]") {
  const auto file = needle::format::CactFile::Open(ModelPath("small.cact"));
  const Model model(file);
  const auto& g = model.geometry();
  const auto& heads = model.weights().heads;
  REQUIRE(heads.size() == 2);
  const auto ids = Tokens(45, g.vocab, 12);
  std::vector<float> cells;
  DecoderConfig cfg;
  cfg.kv_window = 16;
  cfg.sink_len = 4;
  cfg.max_batch = 7;
  cfg.pool_heads = true;
  cfg.cell_log = &cells;
  Decoder dec(model, cfg);
  dec.Prefill({ids.data(), 30}, {});
  needle::model::Snapshot snap;
  dec.Save(&snap);
  dec.Prefill({ids.data() + 30, 15}, {});
  const size_t d = g.d_model, num_cells = cells.size() / d;
  REQUIRE(num_cells == (g.num_layers + 1) * ids.size());

  for (size_t hi = 0; hi < heads.size(); ++hi) {
    const auto& h = heads[hi];
    // Independent f64 reference: full softmax over all cells per probe, then the projection.
    std::vector<double> pooled(h.num_probes * d, 0.0);
    for (size_t k = 0; k < h.num_probes; ++k) {
      std::vector<double> score(num_cells);
      double max = -1e300;
      for (size_t c = 0; c < num_cells; ++c) {
        double s = 0;
        for (size_t i = 0; i < d; ++i) s += double{cells[c * d + i]} * h.probes[k * d + i];
        score[c] = s / std::sqrt(static_cast<double>(d));
        max = std::max(max, score[c]);
      }
      double total = 0;
      for (double& s : score) total += (s = std::exp(s - max));
      for (size_t c = 0; c < num_cells; ++c)
        for (size_t i = 0; i < d; ++i) pooled[k * d + i] += score[c] / total * cells[c * d + i];
    }
    std::vector<double> expect(h.out_dim);
    double norm = 0;
    std::vector<float> proj(h.proj.size);
    h.proj.Read(0, proj.size(), proj.data());
    for (size_t o = 0; o < h.out_dim; ++o) {
      double v = h.bias[o];
      for (size_t j = 0; j < pooled.size(); ++j)
        v += double{proj[o * pooled.size() + j]} * pooled[j];
      expect[o] = v;
      norm += v * v;
    }
    if (h.kind == needle::format::HeadKind::kContrastive)
      for (double& v : expect) v /= std::sqrt(norm);
    std::vector<float> got(h.out_dim);
    dec.HeadOutput(hi, got);
    double max_diff = 0, max_ref = 0;
    for (size_t o = 0; o < h.out_dim; ++o) {
      max_diff = std::max(max_diff, std::fabs(got[o] - expect[o]));
      max_ref = std::max(max_ref, std::fabs(expect[o]));
    }
    INFO("head " << hi << " max diff " << max_diff << " max |ref| " << max_ref);
    CHECK(max_diff <= 1e-4 * std::max(1.0, max_ref));
  }

  // Restoring the snapshot and feeding the same tokens again gives the same pooled outputs.
  std::vector<float> before(heads[1].out_dim), after(heads[1].out_dim);
  dec.HeadOutput(1, before);
  dec.Restore(snap);
  dec.Prefill({ids.data() + 30, 15}, {});
  dec.HeadOutput(1, after);
  CHECK(before == after);
}

TEST_CASE("the sink length can be changed before the prefix is fed", "[model][window]") {
  const auto file = needle::format::CactFile::Open(ModelPath("tiny.cact"));
  const Model model(file);
  const uint32_t V = model.geometry().vocab;
  const auto golden = needle::model::LoadGolden(GoldenPath("tiny"), V);
  const auto& c = golden.reference.back();
  REQUIRE(c.kv_window == 256);
  REQUIRE(c.sink_len == 40);
  DecoderConfig cfg;
  cfg.path = NumericPath::kF32;
  cfg.kv_window = c.kv_window;
  cfg.sink_len = 5;
  cfg.max_sink_len = 64;
  Decoder dec(model, cfg);
  std::vector<float> logits(V);
  dec.Prefill({c.ids.data(), 3}, {});
  dec.Reset();
  dec.SetSinkLen(c.sink_len);
  CHECK(dec.sink_len() == 40);
  dec.Prefill(c.ids, logits);
  CHECK(needle::model::MaxAbsDiff(logits.data(), c.last_logits.data(), V) <= 2e-3f);
  CHECK_THROWS_AS(dec.SetSinkLen(10), needle::InvalidInput);  // positions already fed
  dec.Reset();
  CHECK_THROWS_AS(dec.SetSinkLen(65), needle::InvalidInput);  // beyond the capacity
}

TEST_CASE(
    "official numerics: calls of one token equal a batched call without a window, and the "
    "chunk-level window makes them differ with one",
    "[model][window][official]") {
  const auto file = needle::format::CactFile::Open(ModelPath("tiny.cact"));
  const Model model(file);
  const uint32_t V = model.geometry().vocab;
  const auto ids = Tokens(40, V, 21);
  for (uint32_t window : {0u, 8u}) {
    DecoderConfig cfg;
    cfg.kv_window = window;
    cfg.sink_len = 3;
    cfg.max_positions = 64;
    const auto batched = AllLogits(model, cfg, ids);
    Decoder dec(model, cfg);
    std::vector<float> step(V);
    size_t equal_positions = 0;
    for (size_t t = 0; t < ids.size(); ++t) {
      dec.Step(ids[t], step);
      equal_positions += std::memcmp(step.data(), batched.data() + t * V, V * 4) == 0 ? 1 : 0;
    }
    INFO("window " << window << ": " << equal_positions << " of " << ids.size() << " equal");
    if (window == 0) {
      CHECK(equal_positions == ids.size());  // the M=1 and M>1 arithmetic is the same
    } else {
      // Inside a 32-token call, position t sees the sinks and max(sinks, call end - W) .. t,
      // not its own last W positions: only the sinks see the same keys either way.
      CHECK(equal_positions < ids.size());
      CHECK(equal_positions >= 3);
    }
  }
}

TEST_CASE("official numerics: a prefix snapshot restores the exact state", "[model][snapshot]") {
  const auto file = needle::format::CactFile::Open(ModelPath("small.cact"));
  const Model model(file);
  const uint32_t V = model.geometry().vocab;
  const auto prefix = Tokens(40, V, 4), turn_a = Tokens(12, V, 5), turn_b = Tokens(9, V, 6);
  DecoderConfig cfg;
  cfg.kv_window = 16;
  cfg.sink_len = 40;
  Decoder dec(model, cfg);
  dec.Prefill(prefix, {});
  needle::model::Snapshot snap;
  dec.Save(&snap);
  CHECK(snap.kv.kq.size() == size_t{model.geometry().num_layers} * 40 * model.geometry().kv_dim());
  CHECK(snap.kv.k.empty());
  std::vector<float> a1(V), a2(V), b1(V), fresh(V);
  dec.Prefill(turn_a, a1);
  dec.Restore(snap);
  dec.Prefill(turn_b, b1);
  dec.Restore(snap);
  dec.Prefill(turn_a, a2);
  CHECK(std::memcmp(a1.data(), a2.data(), V * sizeof(float)) == 0);
  Decoder other(model, cfg);
  other.Prefill(prefix, {});
  other.Prefill(turn_b, fresh);
  CHECK(std::memcmp(b1.data(), fresh.data(), V * sizeof(float)) == 0);
  // A snapshot of the other path is refused.
  DecoderConfig f32 = cfg;
  f32.path = NumericPath::kF32;
  Decoder reference(model, f32);
  CHECK_THROWS_AS(reference.Restore(snap), needle::InvalidInput);
}

namespace {
// The rewind tests' decoder: a 16-slot window after 8 sinks (a 30-position context wraps the
// ring, so explored tokens overwrite live slots), with the probe heads' pooling on.
// Every part of two decoders' saved states is the same (position, K/V of either path, rings,
// pooling).
void CheckSameState(const needle::model::Snapshot& got, const needle::model::Snapshot& want) {
  CHECK(got.position == want.position);
  CHECK(got.kv.kq == want.kv.kq);
  CHECK(got.kv.vq == want.kv.vq);
  CHECK(got.kv.k_scale == want.kv.k_scale);
  CHECK(got.kv.v_scale == want.kv.v_scale);
  CHECK(got.kv.k == want.kv.k);
  CHECK(got.kv.v == want.kv.v);
  CHECK(got.engram_ring == want.engram_ring);
  CHECK(got.token_ring == want.token_ring);
  CHECK(got.pool_stats == want.pool_stats);
  CHECK(got.pool_acc == want.pool_acc);
}

DecoderConfig RewindConfig(NumericPath path) {
  DecoderConfig cfg;
  cfg.path = path;
  cfg.kv_window = 16;
  cfg.sink_len = 8;
  cfg.pool_heads = true;
  return cfg;
}

// fn(cfg, c) for both numeric paths, 1 and 2 threads and every case c (a window and a context
// length): cfg is RewindConfig with the case's window and the thread count, named in INFO.
template <class Case, size_t N, class Fn>
void ForPathsThreadsCases(const Case (&cases)[N], const Fn& fn) {
  for (const NumericPath path : {NumericPath::kOfficial, NumericPath::kF32})
    for (const int threads : {1, 2})
      for (const Case& c : cases) {
        INFO(needle::model::NumericPathName(path)
             << " threads " << threads << " window " << c.window << " context " << c.context);
        DecoderConfig cfg = RewindConfig(path);
        cfg.kv_window = c.window;
        cfg.threads = threads;
        fn(cfg, c);
      }
}
}  // namespace

TEST_CASE("StepEach leaves the logits, state and call history of one Step per token",
          "[model][snapshot]") {
  // A teacher-forced value (Session::DecodeCall's enum selection): its tokens run as
  // multi-token passes up to the ring's wrap and one per pass after it.
  const auto file = needle::format::CactFile::Open(ModelPath("small.cact"));
  const Model model(file);
  const uint32_t V = model.geometry().vocab;
  struct Case {
    uint32_t window;
    size_t context, fed;
  };
  // Window 16 after 8 sinks: the ring wraps at position 24. No window: 40 tokens cross the
  // 8-token pass limit five times.
  const Case cases[] = {{16, 2, 12}, {16, 18, 11}, {16, 30, 6}, {0, 3, 40}};
  ForPathsThreadsCases(cases, [&](const DecoderConfig& cfg, const Case& c) {
    const auto context = Tokens(c.context, V, 11), fed = Tokens(c.fed, V, 12);
    Decoder dec(model, cfg), ref(model, cfg);
    std::vector<float> got(c.fed * V), want(c.fed * V);
    needle::model::Snapshot got_state, want_state, mid;
    dec.Prefill(context, {});
    ref.Prefill(context, {});
    dec.StepEach(fed, got);
    for (size_t i = 0; i < fed.size(); ++i)
      ref.Step(fed[i], std::span<float>(want).subspan(i * V, V));
    CHECK(std::memcmp(got.data(), want.data(), got.size() * sizeof(float)) == 0);
    dec.Save(&got_state);
    ref.Save(&want_state);
    CheckSameState(got_state, want_state);
    // The forward-call history: a rewind to a position inside the fed tokens keeps the probe
    // cache valid as after single steps (a pass recorded as one call would drop it).
    Decoder probe(model, cfg);
    probe.Prefill(context, {});
    for (size_t i = 0; i + 2 < fed.size(); ++i) probe.Step(fed[i], std::span<float>(want).first(V));
    probe.Save(&mid);
    dec.Rewind(mid);
    ref.Rewind(mid);
    CHECK(dec.PoolCacheValid() == ref.PoolCacheValid());
    CHECK(dec.PoolCacheValid());  // the position is among the last 16 call starts
  });
  // A wrong buffer size is refused before anything is fed.
  Decoder dec(model, RewindConfig(NumericPath::kOfficial));
  std::vector<float> small(V);
  const auto two = Tokens(2, V, 13);
  CHECK_THROWS_AS(dec.StepEach(two, small), needle::InvalidInput);
  CHECK(dec.position() == 0);
}

TEST_CASE(
    "branch passes give every branch token the bits of its own steps and the adopted "
    "branch the state of re-feeding it",
    "[model][snapshot]") {
  // Session::DecodeCall's value-start branching and enum grounding: the candidates grow side by
  // side, one pass per depth with a token of every branch still open. The reference explores
  // them one after the other from a rewind (the engine's way), rewinds again and feeds the
  // winner's tokens once more.
  const auto file = needle::format::CactFile::Open(ModelPath("small.cact"));
  const Model model(file);
  const uint32_t V = model.geometry().vocab;
  struct Case {
    uint32_t window;
    size_t context;
    int adopt;
  };
  // Window 16 after 8 sinks: wrapped before the branch point (30), wrapping during the branches
  // (20: positions 20..26), not yet (5); no window. Branches of 5, 2, 7 and 17 tokens: the last
  // one's 17 calls push the branch point out of the engine's call history (kPoolHistory), which
  // drops the probe cache at the rewind after it.
  const Case cases[] = {{16, 30, 2}, {16, 20, 0}, {16, 5, -1}, {0, 9, 1}};
  const std::vector<std::vector<int32_t>> seqs = {Tokens(5, V, 21), Tokens(2, V, 22),
                                                  Tokens(7, V, 23), Tokens(17, V, 25)};
  ForPathsThreadsCases(cases, [&](DecoderConfig cfg, const Case& c) {
    Decoder ref(model, cfg);
    // Slots for the branches past the ring from the start, or grown (after the prefill: the
    // ring's contents must stay) by the first exploration.
    if (cfg.threads == 1) {
      cfg.branch_width = 4;
      cfg.branch_tokens = 17;
    } else {
      cfg.branch_width = 2;
      cfg.branch_tokens = 3;
    }
    Decoder dec(model, cfg);
    needle::model::Snapshot base, got_state, want_state;
    const auto context = Tokens(c.context, V, 20);
    ref.Prefill(context, {});
    ref.Save(&base);
    std::vector<std::vector<float>> want(seqs.size());
    for (size_t b = 0; b < seqs.size(); ++b) {
      ref.Rewind(base);
      want[b].resize(seqs[b].size() * V);
      for (size_t i = 0; i < seqs[b].size(); ++i)
        ref.Step(seqs[b][i], std::span<float>(want[b]).subspan(i * V, V));
    }
    ref.Rewind(base);
    std::vector<float> scratch(V);
    if (c.adopt >= 0)
      for (int32_t id : seqs[c.adopt]) ref.Step(id, scratch);

    dec.Prefill(context, {});
    dec.BeginBranches(seqs.size(), 17);
    std::vector<float> got;
    size_t compared = 0;
    for (size_t k = 0; k < 17; ++k) {
      std::vector<uint32_t> live;
      std::vector<int32_t> ids;
      for (size_t b = 0; b < seqs.size(); ++b)
        if (k < seqs[b].size()) {
          live.push_back(static_cast<uint32_t>(b));
          ids.push_back(seqs[b][k]);
        }
      got.assign(live.size() * V, 0.f);
      dec.StepBranches(live, ids, got);
      for (size_t j = 0; j < live.size(); ++j) {
        INFO("branch " << live[j] << " depth " << k);
        CHECK(std::memcmp(&got[j * V], &want[live[j]][k * V], V * sizeof(float)) == 0);
        ++compared;
      }
    }
    CHECK(compared == 31);
    CHECK(dec.position() == static_cast<uint32_t>(c.context));  // untouched while exploring
    for (size_t b = 0; b < seqs.size(); ++b) CHECK(dec.BranchDepth(b) == seqs[b].size());
    dec.EndBranches(c.adopt);
    CHECK(dec.position() == ref.position());
    dec.Save(&got_state);
    ref.Save(&want_state);
    CheckSameState(got_state, want_state);
    CHECK(dec.PoolCacheValid() == ref.PoolCacheValid());
    CHECK_FALSE(ref.PoolCacheValid());
    std::vector<float> head_got(1), head_want(1);
    dec.HeadOutput(1, head_got);
    ref.HeadOutput(1, head_want);
    CHECK(needle::testing::SameBits(head_got, head_want));
    // The next step and the call history behind it: rewinds inside the adopted positions
    // and to the branch point keep or drop the probe cache alike.
    std::vector<float> next_got(V), next_want(V);
    dec.Step(7, next_got);
    ref.Step(7, next_want);
    CHECK(needle::testing::SameBits(next_got, next_want));
    if (c.adopt >= 0) {
      Decoder probe(model, cfg);
      needle::model::Snapshot mid;
      probe.Prefill(context, {});
      probe.Step(seqs[c.adopt][0], next_want);
      probe.Save(&mid);
      dec.Rewind(mid);
      ref.Rewind(mid);
      CHECK(dec.PoolCacheValid() == ref.PoolCacheValid());
    }
    dec.Rewind(base);
    ref.Rewind(base);
    CHECK(dec.PoolCacheValid() == ref.PoolCacheValid());
  });
  // Bad use is refused.
  Decoder dec(model, RewindConfig(NumericPath::kOfficial));
  std::vector<float> logits(2 * V);
  const std::vector<uint32_t> both = {0, 1}, first = {0}, twice = {1, 1};
  const std::vector<int32_t> ids = {5, 6}, one = {5}, bad = {5, static_cast<int32_t>(V)};
  dec.Prefill(Tokens(3, V, 24), {});
  CHECK_THROWS_AS(dec.StepBranches(first, one, std::span<float>(logits).first(V)),
                  needle::InvalidInput);  // not begun
  CHECK_THROWS_AS(dec.BeginBranches(0, 2), needle::InvalidInput);
  CHECK_THROWS_AS(dec.BeginBranches(2, 0), needle::InvalidInput);
  dec.BeginBranches(2, 2);
  CHECK_THROWS_AS(dec.BeginBranches(2, 2), needle::InvalidInput);  // already under way
  CHECK_THROWS_AS(dec.StepBranches(both, bad, logits), needle::InvalidInput);
  CHECK_THROWS_AS(dec.StepBranches(twice, ids, logits), needle::InvalidInput);
  dec.StepBranches(first, one, std::span<float>(logits).first(V));
  CHECK_THROWS_AS(dec.StepBranches(both, ids, logits), needle::InvalidInput);  // depths 1 and 0
  dec.StepBranches(first, one, std::span<float>(logits).first(V));
  CHECK_THROWS_AS(dec.StepBranches(first, one, std::span<float>(logits).first(V)),
                  needle::InvalidInput);  // a third position
  CHECK_THROWS_AS(dec.EndBranches(2), needle::InvalidInput);
  dec.EndBranches(0);
  CHECK(dec.position() == 5);
  // An exploration left open (an exception on the way) ends with a Reset or Restore.
  needle::model::Snapshot at5;
  dec.Save(&at5);
  dec.BeginBranches(1, 1);
  dec.Restore(at5);
  dec.BeginBranches(1, 1);
  dec.Reset();
  dec.BeginBranches(1, 1);
  dec.EndBranches(-1);
  CHECK(dec.position() == 0);
}

TEST_CASE("a decode step attends to the sinks and the window, or to everything without one",
          "[model][window]") {
  // No window: every position up to p.
  const needle::model::KvRing all{0, 0, 100};
  CHECK(all.StepVisibleCount(0) == 1);
  CHECK(all.StepVisibleCount(9) == 10);
  // Window 4, sinks 2: positions 0..p until the ring holds 6, then 0, 1 and the last 4.
  const needle::model::KvRing ring{4, 2, 6};
  CHECK(ring.StepVisibleCount(0) == 1);  // {0}
  CHECK(ring.StepVisibleCount(1) == 2);  // {0, 1}
  CHECK(ring.StepVisibleCount(3) == 4);  // {0, 1, 2, 3}
  CHECK(ring.StepVisibleCount(5) == 6);  // {0, 1, 2..5}
  CHECK(ring.StepVisibleCount(6) == 6);  // {0, 1, 3..6}
  CHECK(ring.StepVisibleCount(100) == 6);
  // More sinks than positions so far: only those.
  const needle::model::KvRing sinks{4, 8, 12};
  CHECK(sinks.StepVisibleCount(2) == 3);
  CHECK(sinks.StepVisibleCount(10) == 11);  // {0..7, 8..10}
  CHECK(sinks.StepVisibleCount(20) == 12);  // {0..7, 17..20}
}
