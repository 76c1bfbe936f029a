// The official path's branches the shared fixtures do not reach (NUMERICS.md marks them [code]):
// 3-bit and ternary tensors, head_dim 128 (two K/V blocks per head), lanes != 4. Synthesized
// models exercise them: every ISA and thread count must give the scalar reference's bits, and the
// int8 arithmetic must compute the same network as the f32 path (cosine of the logits).
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "convert/synth.h"
#include "format/cact.h"
#include "kernels/dispatch.h"
#include "model/decoder.h"
#include "model/golden.h"
#include "test_util.h"

using namespace needle;

namespace {

struct PathVariant {
  const char* name;
  uint32_t head_dim, lanes;
  const char* bits;
};

std::vector<float> Logits(const model::Model& m, model::NumericPath path,
                          const kernels::KernelTable& kernels, int threads,
                          const std::vector<int32_t>& ids, uint32_t window) {
  model::DecoderConfig cfg;
  cfg.path = path;
  cfg.kernels = &kernels;
  cfg.threads = threads;
  cfg.kv_window = window;
  cfg.sink_len = window ? 4 : 0;
  cfg.max_positions = 64;
  model::Decoder dec(m, cfg);
  std::vector<float> logits(m.geometry().vocab);
  dec.Prefill({ids.data(), 30}, {});
  for (size_t t = 30; t < ids.size(); ++t) dec.Step(ids[t], logits);
  return logits;
}

}  // namespace

TEST_CASE(
    "official numerics on 3-bit, ternary, head_dim 128 and 2 or 3 lanes: every ISA equals "
    "scalar, and the network equals the f32 path's",
    "[model][official][geometry]") {
  const PathVariant variants[] = {
      {"head_dim 128, 3-bit layers", 128, 4, "embedding=4,mhc=4,default=3"},
      {"2 lanes, ternary layers", 64, 2, "embedding=4,mhc=4,default=1.58"},
      {"3 lanes, 2-bit", 64, 3, "embedding=4,mhc=3,default=2"},
  };
  for (const PathVariant& v : variants) {
    INFO(v.name);
    testing::TempDir dir;
    convert::SynthOptions o;
    o.like = testing::ModelPath("tiny.cact");
    o.progress = false;
    o.geometry = convert::OfficialGeometry();
    o.geometry.d_model = 256;
    o.geometry.num_heads = 4;
    o.geometry.num_kv_heads = 2;
    o.geometry.head_dim = v.head_dim;
    o.geometry.lanes = v.lanes;
    o.geometry.num_layers = 3;
    o.geometry.engram_sites = {0, 2};
    o.geometry.engram_slots = 256;
    o.bits = convert::BitsMap::Parse(v.bits);
    o.seed = 5;
    convert::Synth(dir / "m.cact", o);
    const auto file = format::CactFile::Open(dir / "m.cact");
    const model::Model m(file);
    std::vector<int32_t> ids;
    for (int i = 0; i < 40; ++i) ids.push_back((i * 733 + 19) % 8000 + 14);

    // Window 16: the 40 tokens wrap the ring.
    const auto ref =
        Logits(m, model::NumericPath::kOfficial, kernels::ReferenceKernels(), 1, ids, 16);
    for (const std::string& isa : kernels::AvailableIsas())
      for (int threads : {1, 2}) {
        INFO("isa " << isa << " threads " << threads);
        const auto got =
            Logits(m, model::NumericPath::kOfficial, kernels::KernelsFor(isa), threads, ids, 16);
        CHECK(std::memcmp(got.data(), ref.data(), ref.size() * 4) == 0);
      }
    // Without a window (the two paths' window rules differ inside a prefill call).
    const auto off = Logits(m, model::NumericPath::kOfficial, kernels::ActiveKernels(), 1, ids, 0);
    const auto f32 = Logits(m, model::NumericPath::kF32, kernels::ActiveKernels(), 1, ids, 0);
    const double cosine = model::Cosine(off.data(), f32.data(), off.size());
    INFO("cosine official vs f32 " << cosine << ", max|diff| "
                                   << model::MaxAbsDiff(off.data(), f32.data(), off.size()));
    CHECK(cosine >= 0.999);
    CHECK(model::MaxAbsDiff(off.data(), f32.data(), off.size()) > 0.f);
  }
}
