// Whole turns against the official engine's session goldens (tests/data/golden/session): reply
// envelope (timing fields aside), call text as generated, think text, the engine's return value
// (generated tokens) and turn ids, for fresh turns and conversations with <= 5 tools.
#include "session/session.h"

#include <catch2/catch.hpp>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <utility>

#include "format/cact.h"
#include "test_util.h"

using namespace needle;
using namespace needle::testing;
using nlohmann::json;

namespace {

// Steps where our f32 logits and the engine's int8 logits rank two valid tokens differently.
// Each was traced (needle run --trace): the two top candidates differ by less than the int8 vs
// f32 logit error on that model, e.g. small-crafted-0.8 keys "room" 8.9184 vs "state" 8.9119.
const std::set<std::pair<int, int>>& NearTies(const std::string& model) {
  static const std::set<std::pair<int, int>> none;
  static const std::set<std::pair<int, int>> crafted08 = {
      {0, 0}, {0, 1}, {1, 0}, {1, 1}, {2, 0}, {2, 1}, {3, 1}, {4, 0}, {4, 1}, {4, 2}, {4, 3}};
  static const std::set<std::pair<int, int>> small = {{3, 1}};
  static const std::set<std::pair<int, int>> tiny = {{0, 2}};
  static const std::set<std::pair<int, int>> official = {{0, 2}};
  if (model == "small-crafted-0.8") return crafted08;
  if (model == "small") return small;
  if (model == "tiny") return tiny;
  if (model == "official-geometry") return official;
  return none;
}

void CheckModel(const std::string& model, int expected_matches) {
  const json golden =
      json::parse(std::ifstream(DataPath("golden/session/" + model + ".session.json")));
  const format::CactFile file = format::CactFile::Open(ModelPath(model + ".cact"));
  int matches = 0, checked = 0;
  for (size_t ci = 0; ci < golden["cases"].size(); ++ci) {
    const json& c = golden["cases"][ci];
    if (c["tools"].size() > 5) continue;  // retrieval is not implemented yet
    session::Session s(file, {}, c["system"].get<std::string>(),
                       c["tools_text"].get<std::string>());
    for (size_t si = 0; si < c["steps"].size(); ++si) {
      const json& step = c["steps"][si];
      if (!c["conversation"].get<bool>()) s.Reset();
      const session::Reply r = s.Respond(step["input"].get<std::string>(), c["max_tokens"]);
      json ours = json::parse(r.EnvelopeJson());
      json theirs = step["reply"];
      for (const char* k : {"prefill_tps", "decode_tps", "peak_ram_mb", "confidence"}) {
        CHECK(ours.contains(k) == theirs.contains(k));
        ours.erase(k);
        theirs.erase(k);
      }
      const bool near_tie = NearTies(model).count({static_cast<int>(ci), static_cast<int>(si)});
      const std::string calls = step["debug_calls"].is_null() ? "" : step["debug_calls"];
      const std::string think = step["debug_think"].is_null() ? "" : step["debug_think"];
      const bool same = ours == theirs && r.calls_text == calls && r.think_text == think &&
                        r.counted_tokens == step["returned"] && r.turn.turn_ids == step["turn_ids"];
      INFO(model << " case " << ci << " step " << si << "\n ours:   " << r.calls_text
                 << "\n engine: " << calls);
      // Turn rendering never depends on logits.
      CHECK(r.turn.turn_ids == step["turn_ids"].get<std::vector<int32_t>>());
      if (!near_tie) {
        CHECK(ours == theirs);
        CHECK(r.calls_text == calls);
        CHECK(r.think_text == think);
        CHECK(r.counted_tokens == step["returned"].get<int>());
      }
      if (c["tools"].empty()) CHECK(r.confidence.value_or(-1) == 1.0);
      matches += same;
      ++checked;
    }
  }
  WARN(model << ": " << matches << " / " << checked << " turns identical to the engine");
  CHECK(matches >= expected_matches);
}

}  // namespace

TEST_CASE("session turns match the engine on small-crafted-0.5", "[session][golden]") {
  CheckModel("small-crafted-0.5", 17);
}
TEST_CASE("session turns match the engine on small-crafted-0.8", "[session][golden]") {
  CheckModel("small-crafted-0.8", 6);
}
TEST_CASE("session turns match the engine on small", "[session][golden]") {
  CheckModel("small", 16);
}
TEST_CASE("session turns match the engine on tiny", "[session][golden]") { CheckModel("tiny", 16); }
TEST_CASE("session turns match the engine on official-geometry", "[session][golden]") {
  CheckModel("official-geometry", 16);
}

TEST_CASE("reply envelopes match the engine's official entries (24 tokens)", "[session][golden]") {
  for (const char* model : {"tiny", "small"}) {
    const json golden =
        json::parse(std::ifstream(DataPath(std::string("golden/") + model + "/golden.json")));
    const format::CactFile file = format::CactFile::Open(ModelPath(std::string(model) + ".cact"));
    for (size_t i = 0; i < golden["official"].size(); ++i) {
      // small entry 4: step 2 of the call ranks "]" 1.1320 above "{" 0.9960 in f32; the engine
      // took "{" (int8 path). Not asserted.
      if (std::string(model) == "small" && i == 4) continue;
      const json& o = golden["official"][i];
      session::Session s(file, {}, o["system"].get<std::string>(),
                         o["tools_text"].get<std::string>());
      json ours = json::parse(s.Respond(o["query"].get<std::string>(), 24).EnvelopeJson());
      json theirs = o["envelope"];
      INFO(model << " official entry " << i);
      CHECK(ours.size() == theirs.size());
      for (const char* k : {"prefill_tps", "decode_tps", "peak_ram_mb", "confidence"}) {
        ours.erase(k);
        theirs.erase(k);
      }
      CHECK(ours == theirs);
    }
  }
}

TEST_CASE("envelope keys come in the engine's order", "[session]") {
  const json golden =
      json::parse(std::ifstream(DataPath("golden/session/small-crafted-0.5.session.json")));
  const format::CactFile file = format::CactFile::Open(ModelPath("small-crafted-0.5.cact"));
  const json& c = golden["cases"][0];
  session::Session s(file, {}, "", c["tools_text"].get<std::string>());
  const session::Reply r = s.Respond(c["steps"][1]["input"].get<std::string>(), 40);
  const std::string text = r.EnvelopeJson();
  const std::string engine = c["steps"][1]["reply_text"];
  // Same text up to the timing fields (the engine's reply is a byte string we can compare).
  const size_t cut = engine.find(",\"confidence\":");
  REQUIRE(cut != std::string::npos);
  CHECK(text.substr(0, cut) == engine.substr(0, cut));
  CHECK(text.find(",\"prefill_tps\":") != std::string::npos);
}
