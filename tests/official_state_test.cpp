// Decode-step exactness against the official engine's internal state (tests/data/official-state,
// made by scripts/official/make-dumps.sh from the running engine): the engine's forward calls are
// replayed (prefix and turn prefills, one call per decoded token), then the first-step logits,
// every int8 K/V code and f32 scale of every live position, the engram ring values and the RoPE
// table must be identical, bit for bit, for every ISA and thread count.
#include <catch2/catch.hpp>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "format/cact.h"
#include "kernels/dispatch.h"
#include "kernels/ops.h"
#include "model/decoder.h"

namespace {

using needle::model::Decoder;
using needle::model::DecoderConfig;
using needle::model::Model;

std::string Dir(const std::string& name) {
  return std::string(NEEDLE_TEST_DATA) + "/official-state/" + name;
}

template <class T>
std::vector<T> ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  REQUIRE(in.good());
  std::vector<char> b((std::istreambuf_iterator<char>(in)), {});
  REQUIRE(b.size() % sizeof(T) == 0);
  std::vector<T> v(b.size() / sizeof(T));
  std::memcpy(v.data(), b.data(), b.size());
  return v;
}

size_t CountDiffering(const void* a, const void* b, size_t n, size_t elem) {
  size_t bad = 0;
  for (size_t i = 0; i < n; ++i)
    bad += std::memcmp(static_cast<const char*>(a) + i * elem,
                       static_cast<const char*>(b) + i * elem, elem) != 0;
  return bad;
}

void CheckCase(const std::string& name, const needle::kernels::KernelTable& kernels, int threads) {
  INFO("case " << name << ", isa " << kernels.isa << ", threads " << threads);
  std::ifstream cj(Dir(name) + "/case.json");
  REQUIRE(cj.good());
  const auto c = nlohmann::json::parse(cj);
  const auto file = needle::format::CactFile::Open(std::string(NEEDLE_TEST_DATA) + "/models/" +
                                                   c["model"].get<std::string>());
  const Model model(file);
  const auto& g = model.geometry();
  const auto tokens = c["tokens"].get<std::vector<int32_t>>();
  const auto calls = c["calls"].get<std::vector<std::vector<uint32_t>>>();
  const auto live = c["live"].get<std::vector<uint32_t>>();
  const uint32_t first_step = c["first_step"].get<uint32_t>();
  const uint32_t W = c["kv_window"].get<uint32_t>(), P = c["sink_len"].get<uint32_t>();

  DecoderConfig cfg;
  cfg.kv_window = W;
  cfg.sink_len = P;
  cfg.threads = threads;
  cfg.kernels = &kernels;
  Decoder dec(model, cfg);
  std::vector<float> logits(g.vocab), first(g.vocab);
  bool got_first = false;
  for (const auto& call : calls) {
    REQUIRE(call.size() == 2);
    REQUIRE(call[0] == dec.position());  // the calls cover the tokens in order
    dec.Prefill({tokens.data() + call[0], call[1] - call[0]}, logits);
    if (call[1] == first_step) {
      first = logits;
      got_first = true;
    }
  }
  REQUIRE(got_first);
  REQUIRE(dec.position() == tokens.size());

  const auto engine_logits = ReadAll<float>(Dir(name) + "/logits.f32");
  REQUIRE(engine_logits.size() == g.vocab);
  CHECK(CountDiffering(first.data(), engine_logits.data(), g.vocab, 4) == 0);

  needle::model::Snapshot snap;
  dec.Save(&snap);
  const size_t L = g.num_layers, kvd = g.kv_dim(), kvb = kvd / 64, n = live.size();
  const size_t used = std::min<size_t>(tokens.size(), size_t{P} + W);
  const auto k = ReadAll<int8_t>(Dir(name) + "/k.i8"), v = ReadAll<int8_t>(Dir(name) + "/v.i8");
  const auto ks = ReadAll<float>(Dir(name) + "/ks.f32"), vs = ReadAll<float>(Dir(name) + "/vs.f32");
  REQUIRE(k.size() == L * n * kvd);
  REQUIRE(ks.size() == L * n * kvb);
  REQUIRE(snap.kv.kq.size() == L * used * kvd);
  const needle::model::KvRing ring{W, P, size_t{P} + W};
  size_t bad_codes = 0, bad_scales = 0;
  for (size_t l = 0; l < L; ++l)
    for (size_t i = 0; i < n; ++i) {
      const size_t slot = ring.Slot(live[i]);
      REQUIRE(slot < used);
      bad_codes +=
          CountDiffering(&snap.kv.kq[(l * used + slot) * kvd], &k[(l * n + i) * kvd], kvd, 1);
      bad_codes +=
          CountDiffering(&snap.kv.vq[(l * used + slot) * kvd], &v[(l * n + i) * kvd], kvd, 1);
      bad_scales +=
          CountDiffering(&snap.kv.k_scale[(l * used + slot) * kvb], &ks[(l * n + i) * kvb], kvb, 4);
      bad_scales +=
          CountDiffering(&snap.kv.v_scale[(l * used + slot) * kvb], &vs[(l * n + i) * kvb], kvb, 4);
    }
  CHECK(bad_codes == 0);
  CHECK(bad_scales == 0);

  // Engram rings: the values the conv reads (scale * code) of the positions our ring still holds.
  const size_t d = g.d_model, sites = g.engram_sites.size();
  const size_t conv_ring = size_t{g.engram_conv_taps - 1} * g.engram_conv_dilation + 1;
  const auto rq = ReadAll<int8_t>(Dir(name) + "/ring.i8");
  const auto rs = ReadAll<float>(Dir(name) + "/rings.f32");
  REQUIRE(rq.size() == sites * n * d);
  REQUIRE(snap.engram_ring.size() == sites * conv_ring * d);
  size_t bad_ring = 0, compared = 0;
  for (size_t s = 0; s < sites; ++s)
    for (size_t i = 0; i < n; ++i) {
      const uint32_t p = live[i];
      if (p + conv_ring < tokens.size()) continue;  // no longer in our (shorter) ring
      for (size_t e = 0; e < d; ++e) {
        const float engine =
            rs[(s * n + i) * (d / 32) + e / 32] * static_cast<float>(rq[(s * n + i) * d + e]);
        bad_ring += std::memcmp(&engine, &snap.engram_ring[(s * conv_ring + p % conv_ring) * d + e],
                                4) != 0;
        ++compared;
      }
    }
  CHECK(compared == sites * conv_ring * d);
  CHECK(bad_ring == 0);

  // The RoPE table (musl powf).
  const auto invf = ReadAll<float>(Dir(name) + "/invf.f32");
  REQUIRE(invf.size() == g.head_dim / 2);
  std::vector<float> ours(g.head_dim / 2);
  needle::kernels::RopeFrequencies(g.head_dim, g.rope_theta, ours.data());
  CHECK(CountDiffering(ours.data(), invf.data(), ours.size(), 4) == 0);
}

const char* const kCases[] = {"tiny-q1",   "small-sys",      "tiny-conv",    "crafted8",
                              "tiny-long", "tiny-long-conv", "official-conv"};

}  // namespace

TEST_CASE("official numerics: the engine's K/V codes, scales, rings and logits after decoding",
          "[model][official]") {
  for (const char* name : kCases) CheckCase(name, needle::kernels::ActiveKernels(), 1);
}

TEST_CASE("official numerics: engine state identical with every ISA and 2 threads",
          "[model][official][isa]") {
  for (const std::string& isa : needle::kernels::AvailableIsas())
    for (const char* name : {"tiny-conv", "tiny-long-conv", "crafted8"})
      CheckCase(name, needle::kernels::KernelsFor(isa), 2);
  // Three threads: a 32-token chunk's parts (10, 11, 11 tokens) miss the 16-token tiles, and the
  // products split by rows.
  CheckCase("tiny-long-conv", needle::kernels::ActiveKernels(), 3);
}
