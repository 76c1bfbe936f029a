// Forward pass against the upstream goldens (tiny, small, official geometry), thread-count
// independence, windowed decoding, snapshots.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "format/cact.h"
#include "model/decoder.h"
#include "model/golden.h"

namespace {

using needle::model::Decoder;
using needle::model::DecoderConfig;
using needle::model::Model;

std::string ModelPath(const std::string& name) {
  return std::string(NEEDLE_TEST_DATA) + "/models/" + name;
}
std::string GoldenPath(const std::string& dir) {
  return std::string(NEEDLE_TEST_DATA) + "/golden/" + dir + "/golden.json";
}

void CheckReferences(const std::string& model_file, const std::string& golden_dir) {
  const auto file = needle::format::CactFile::Open(ModelPath(model_file));
  const Model model(file);
  const auto golden = needle::model::LoadGolden(GoldenPath(golden_dir), model.geometry().vocab);
  REQUIRE(golden.reference.size() == 8);
  const needle::model::Tolerances tol;
  for (size_t i = 0; i < golden.reference.size(); ++i) {
    const auto& c = golden.reference[i];
    const auto r = needle::model::RunReference(model, c, tol, 1);
    INFO(model_file << " reference " << i << " (" << c.ids.size() << " ids, window "
                    << c.kv_window << ", sinks " << c.sink_len << "): max|diff| "
                    << r.max_abs_diff << " cosine " << r.cosine << " top5 mismatches "
                    << r.top5_mismatches << " first at " << r.first_mismatch);
    CHECK(r.max_abs_diff <= tol.reference_max_abs);
    CHECK(r.top5_mismatches == 0);
  }
}

}  // namespace

TEST_CASE("tiny matches the upstream f32 reference logits", "[model]") {
  CheckReferences("tiny.cact", "tiny");
}
