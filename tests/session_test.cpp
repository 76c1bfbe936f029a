// Whole turns against the official engine's session goldens (tests/data/golden/session): reply
// envelope (timing fields aside), call text as generated, think text, the engine's return value
// (generated tokens) and turn ids, for fresh turns and conversations with <= 5 tools.
#include "session/session.h"

#include <fmt/format.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cmath>
#include <filesystem>
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

// Turns still differing with the official numerics (logits bit-exact, so no near ties). The list
// can only shrink: each entry must still differ. None left: the five string-branch turns of
// small-crafted-0.8 were the grammar's `}`-in-string rule (docs/PROTOCOL-NOTES.md item 10).
const std::set<std::pair<int, int>>& OpenTurns(const std::string& /*model*/) {
  static const std::set<std::pair<int, int>> none;
  return none;
}

// Turns whose confidence (printed %.4f) still differs from the engine's; every other turn must
// agree to the fourth decimal, and every listed turn must still differ (the lists only shrink).
// None left (docs/PROTOCOL-NOTES.md items 4a-4c: candidate-list logits, the after-quote enum
// branch, the probe cache and its re-forward).
const std::set<std::pair<int, int>>& OpenConfidence(const std::string& /*model*/) {
  static const std::set<std::pair<int, int>> none;
  return none;
}

void CheckModel(const std::string& model, int expected_matches) {
  const json golden =
      json::parse(std::ifstream(DataPath("golden/session/" + model + ".session.json")));
  const format::CactFile file = format::CactFile::Open(ModelPath(model + ".cact"));
  int matches = 0, checked = 0, confidence_equal = 0;
  for (size_t ci = 0; ci < golden["cases"].size(); ci += testing::kSanitizerCaseStride) {
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
      const std::string conf_ours = fmt::format("{:.4f}", ours.value("confidence", -1.0));
      const std::string conf_theirs = fmt::format("{:.4f}", theirs.value("confidence", -1.0));
      for (const char* k : {"prefill_tps", "decode_tps", "peak_ram_mb", "confidence"}) {
        CHECK(ours.contains(k) == theirs.contains(k));
        ours.erase(k);
        theirs.erase(k);
      }
      const std::string calls = step["debug_calls"].is_null() ? "" : step["debug_calls"];
      const std::string think = step["debug_think"].is_null() ? "" : step["debug_think"];
      const bool same = ours == theirs && r.calls_text == calls && r.think_text == think &&
                        r.counted_tokens == step["returned"] && r.turn.turn_ids == step["turn_ids"];
      INFO(model << " case " << ci << " step " << si << "\n ours:   " << r.calls_text
                 << "\n engine: " << calls);
      // Turn rendering never depends on logits.
      CHECK(r.turn.turn_ids == step["turn_ids"].get<std::vector<int32_t>>());
      if (OpenTurns(model).count({static_cast<int>(ci), static_cast<int>(si)})) {
        CHECK_FALSE(same);
      } else {
        CHECK(ours == theirs);
        CHECK(r.calls_text == calls);
        CHECK(r.think_text == think);
        CHECK(r.counted_tokens == step["returned"].get<int>());
      }
      {
        INFO("confidence: ours " << conf_ours << ", engine " << conf_theirs);
        CHECK((conf_ours == conf_theirs) !=
              (OpenConfidence(model).count({static_cast<int>(ci), static_cast<int>(si)}) > 0));
      }
      confidence_equal += conf_ours == conf_theirs;
      if (c["tools"].empty()) CHECK(r.confidence.value_or(-1) == 1.0);
      matches += same;
      ++checked;
    }
  }
  WARN(model << ": " << matches << " / " << checked << " turns identical to the engine, "
             << confidence_equal << " with the same confidence (%.4f)");
  if (testing::kSanitizerCaseStride == 1) {
    CHECK(matches >= expected_matches);
  } else {  // a subset: every turn of it must match (no turn is open)
    CHECK(checked > 0);
    CHECK(matches == checked);
  }
}

}  // namespace

TEST_CASE("session turns match the engine on small-crafted-0.5", "[session][golden]") {
  CheckModel("small-crafted-0.5", 17);
}
TEST_CASE("session turns match the engine on small-crafted-0.8", "[session][golden]") {
  CheckModel("small-crafted-0.8", 17);
}
TEST_CASE("session turns match the engine on small", "[session][golden]") {
  CheckModel("small", 17);
}
TEST_CASE("session turns match the engine on tiny", "[session][golden]") { CheckModel("tiny", 17); }
TEST_CASE("session turns match the engine on official-geometry", "[session][golden]") {
  CheckModel("official-geometry", 17);
}

TEST_CASE("reply envelopes match the engine's official entries (24 tokens)", "[session][golden]") {
  for (const char* model : {"tiny", "small"}) {
    const json golden =
        json::parse(std::ifstream(DataPath(std::string("golden/") + model + "/golden.json")));
    const format::CactFile file = format::CactFile::Open(ModelPath(std::string(model) + ".cact"));
    for (size_t i = 0; i < golden["official"].size(); ++i) {
      const json& o = golden["official"][i];
      session::Session s(file, {}, o["system"].get<std::string>(),
                         o["tools_text"].get<std::string>());
      json ours = json::parse(s.Respond(o["query"].get<std::string>(), 24).EnvelopeJson());
      json theirs = o["envelope"];
      INFO(model << " official entry " << i);
      CHECK(ours.size() == theirs.size());
      CHECK(fmt::format("{:.4f}", ours.value("confidence", -1.0)) ==
            fmt::format("{:.4f}", theirs.value("confidence", -1.0)));
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

TEST_CASE("sessions of one model share its tokenizer, sessions of two models do not", "[session]") {
  const format::CactFile file = format::CactFile::Open(ModelPath("tiny.cact"));
  const auto model = std::make_shared<const model::Model>(file);
  const session::SessionConfig cfg;
  session::Session a(file, model, cfg, "", "[]");
  session::Session b(file, model, cfg, "", "[]");
  CHECK(&a.tokenizer() == &b.tokenizer());    // built once, by the first session
  session::Session own(file, cfg, "", "[]");  // a model of its own
  CHECK(&own.tokenizer() != &a.tokenizer());
  const std::string query = "set a timer for 5 minutes";
  CHECK(a.Respond(query, 16).calls_text == own.Respond(query, 16).calls_text);
  CHECK(a.tokenizer().Encode(query) == own.tokenizer().Encode(query));
}

TEST_CASE("prefix cache: a second session restores the prefix and answers identically",
          "[session][cache]") {
  const json golden =
      json::parse(std::ifstream(DataPath("golden/session/small-crafted-0.8.session.json")));
  const json& c = golden["cases"][0];
  const format::CactFile file = format::CactFile::Open(ModelPath("small-crafted-0.8.cact"));
  const std::string dir = std::filesystem::temp_directory_path() /
                          ("needle-prefix-cache-" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  session::SessionConfig cfg;
  cfg.prefix_cache_dir = dir;
  const std::string query = c["steps"][0]["input"];
  session::Session plain(file, {}, "", c["tools_text"].get<std::string>());
  const std::string expect = plain.Respond(query, 96).calls_text;
  session::Session first(file, cfg, "", c["tools_text"].get<std::string>());
  CHECK_FALSE(first.prefix_from_cache());
  session::Session second(file, cfg, "", c["tools_text"].get<std::string>());
  CHECK(second.prefix_from_cache());
  CHECK(second.Respond(query, 96).calls_text == expect);
  CHECK(first.Respond(query, 96).calls_text == expect);
  // Other tools: another key, a miss.
  session::Session other(file, cfg, "", "[]");
  CHECK_FALSE(other.prefix_from_cache());
  // A damaged file is a miss, never an error.
  for (const auto& e : std::filesystem::directory_iterator(dir))
    std::filesystem::resize_file(e.path(), 100);
  session::Session damaged(file, cfg, "", c["tools_text"].get<std::string>());
  CHECK_FALSE(damaged.prefix_from_cache());
  CHECK(damaged.Respond(query, 96).calls_text == expect);
  // No kept snapshot: Reset() reads the prefix from the cache's file again.
  cfg.keep_prefix_state = false;
  session::Session once(file, cfg, "", c["tools_text"].get<std::string>());
  CHECK(once.prefix_from_cache());
  CHECK(once.Respond(query, 96).calls_text == expect);
  once.Reset();
  CHECK(once.prefix_from_cache());
  CHECK(once.Respond(query, 96).calls_text == expect);
  std::filesystem::remove_all(dir);
}
