// Whole turns against the session goldens made by scripts/official/make-session-goldens.sh
// (tests/data/golden/session-v2): turn ids always (rendering, turn tail cut, the tools retrieved
// for more than 5 tools and the rebuilt context), and the reply
// envelope (timing aside; confidence to the fourth decimal), call text, think text and the engine's
// return value, except for the explicit lists below, each with its reason; they must shrink to zero
// (near ties with the official numerics, NumericPath::kOfficial; the rest by protocol fixes).
#include <fmt/format.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <utility>

#include "format/cact.h"
#include "session/session.h"
#include "test_util.h"

using namespace needle;
using namespace needle::testing;
using nlohmann::json;

namespace {

using Steps = std::set<std::pair<int, int>>;  // (case, step)

// Differences still open with the official numerics (the default), per model, each with its
// reason. Every entry must still differ (the test fails when one is fixed, so the lists only
// shrink); near ties of the f32 path are gone with bit-exact numerics. None is left: every turn
// of the four fixture models equals the engine's (the TYPES cases 3-8 and 11 on the crafted
// models came with the number-delimiter branch stop rule, tiny case 11 with conversation-wide
// enum grounding; docs/PROTOCOL-NOTES.md items 2 and 11).
// None is left on the trained demo model either (its key-escape turn, case 11 step 2, came with
// the engine's key decoder: an unfinished escape or a waiting high surrogate is not checked);
// four confidence-only differences of the model trained on 2026-12-03 are listed below.
const std::map<std::string, Steps>& Open() {
  static const std::map<std::string, Steps> m = {{"tiny", {}},
                                                 {"small", {}},
                                                 {"small-crafted-0.5", {}},
                                                 {"small-crafted-0.8", {}},
                                                 {"demo", {}}};
  return m;
}

// An envelope as text with the timings cut out. Envelopes are compared as text: they may not be
// JSON (the engine writes a call's numbers as the model wrote them: "temperature":010).
std::string UntimedText(std::string e) {
  const size_t at = e.find(",\"prefill_tps\":");
  const size_t end = e.find(",\"peak_ram_mb\":", at);
  if (at != std::string::npos && end != std::string::npos) {
    const size_t stop = e.find_first_of(",}", end + 1);
    e.erase(at, stop - at);
  }
  return e;
}

// The envelope's confidence as printed (%.4f), or "-" when it has none.
std::string ConfidenceText(const std::string& e) {
  const std::string key = "\"confidence\":";
  const size_t at = e.find(key);
  if (at == std::string::npos) return "-";
  const size_t start = at + key.size();
  return e.substr(start, e.find_first_of(",}", start) - start);
}

// `path`: the model file (default: the fixture tests/data/models/<model>.cact).
void CheckModel(const std::string& model, const std::string& path = "",
                const session::SessionConfig& config = {}) {
  const json golden =
      json::parse(std::ifstream(DataPath("golden/session-v2/" + model + ".session.json")));
  const format::CactFile file =
      format::CactFile::Open(path.empty() ? ModelPath(model + ".cact") : path);
  const Steps& open = Open().at(model);
  int matches = 0, checked = 0, confidence_equal = 0;
  std::string mismatched;
  for (size_t ci = 0; ci < golden["cases"].size(); ci += testing::kSanitizerCaseStride) {
    const json& c = golden["cases"][ci];
    session::Session s(file, config, c["system"].get<std::string>(),
                       c["tools_text"].get<std::string>());
    bool history_same = true;
    for (size_t si = 0; si < c["steps"].size(); ++si) {
      const json& step = c["steps"][si];
      if (!c["conversation"].get<bool>()) s.Reset();
      const session::Reply r = s.Respond(step["input"].get<std::string>(), c["max_tokens"]);
      const std::string envelope = r.EnvelopeJson(), golden_envelope = step["reply_text"];
      const std::string conf_ours = ConfidenceText(envelope);
      const std::string conf_theirs = ConfidenceText(golden_envelope);
      for (const char* k : {"\"prefill_tps\":", "\"decode_tps\":", "\"peak_ram_mb\":"})
        CHECK((envelope.find(k) != std::string::npos) ==
              (golden_envelope.find(k) != std::string::npos));
      // Confidence apart (its own list below): the rest of the envelope.
      auto rest = [&](const std::string& e, const std::string& conf) {
        std::string text = UntimedText(e);
        const size_t at = text.find("\"confidence\":" + conf);
        if (at != std::string::npos) text.erase(at, 13 + conf.size());
        return text;
      };
      const std::string ours = rest(envelope, conf_ours);
      const std::string theirs = rest(golden_envelope, conf_theirs);
      const std::string calls = step["debug_calls"].is_null() ? "" : step["debug_calls"];
      const std::string think = step["debug_think"].is_null() ? "" : step["debug_think"];
      INFO(model << " case " << ci << " step " << si << "\n ours:   " << r.calls_text
                 << "\n engine: " << calls);
      // Turn ids depend on the earlier turns' output: checked while those equal the engine's.
      if (!step["turn_ids"].is_null() && history_same) {
        const std::vector<int32_t>& ids = r.turn.turn_ids;
        // A rebuilt context (retrieval) is the whole prompt after the BOS, <tools> included.
        const auto golden_ids = step["turn_ids"].get<std::vector<int32_t>>();
        const int32_t tools_id = s.renderer().tokens().tools;
        CHECK(r.turn.context_rebuilt ==
              (std::find(golden_ids.begin(), golden_ids.end(), tools_id) != golden_ids.end()));
        const auto want = step["turn_ids"].get<std::vector<int32_t>>();
        size_t first_diff = 0;
        while (first_diff < std::min(ids.size(), want.size()) &&
               ids[first_diff] == want[first_diff])
          ++first_diff;
        INFO("turn ids: ours " << ids.size() << ", engine " << want.size()
                               << ", first difference at " << first_diff);
        CHECK(ids == want);
      }
      const bool same = ours == theirs && r.calls_text == calls && r.think_text == think &&
                        r.counted_tokens == step["returned"].get<int>();
      if (!same) mismatched += fmt::format(" {{{}, {}}},", ci, si);
      history_same = history_same && (same || !c["conversation"].get<bool>());
      INFO("case " << ci << " step " << si);
      CHECK(same != (open.count({static_cast<int>(ci), static_cast<int>(si)}) > 0));
      {
        INFO("confidence: ours " << conf_ours << ", engine " << conf_theirs);
        CHECK((conf_ours == conf_theirs) !=
              (open.count({static_cast<int>(ci), static_cast<int>(si)}) > 0));
      }
      confidence_equal += conf_ours == conf_theirs;
      matches += same;
      ++checked;
    }
  }
  WARN(model << ": " << matches << " / " << checked << " turns identical, " << confidence_equal
             << " with the same confidence (%.4f); differing:" << mismatched);
}

}  // namespace

TEST_CASE("session-v2 goldens: tiny", "[session][golden]") { CheckModel("tiny"); }
TEST_CASE("session-v2 goldens: small", "[session][golden]") { CheckModel("small"); }
TEST_CASE("session-v2 goldens: small-crafted-0.5", "[session][golden]") {
  CheckModel("small-crafted-0.5");
}
TEST_CASE("session-v2 goldens: small-crafted-0.8", "[session][golden]") {
  CheckModel("small-crafted-0.8");
}

// The trained demo model (examples/demo.cact), the only model here that emits real calls.
TEST_CASE("session-v2 goldens: demo", "[session][golden]") {
  CheckModel("demo", std::string(NEEDLE_EXAMPLES_DIR) + "/demo.cact");
}

// Without a kept prefix snapshot every Reset() computes the tools prefix again: the same replies
// (the cases that are not conversations reset before each step; retrieval cases included).
TEST_CASE("session-v2 goldens without a kept prefix state: small-crafted-0.5, demo",
          "[session][golden]") {
  session::SessionConfig config;
  config.keep_prefix_state = false;
  CheckModel("small-crafted-0.5", "", config);
  CheckModel("demo", std::string(NEEDLE_EXAMPLES_DIR) + "/demo.cact", config);
}

// The held-out sets check every kHeldoutStride-th reply or conversation: all of them, except in
// the sanitizer build (10-15x slower), which checks every twelfth: the same code paths over a
// twelfth of the lines (scripts/test-sanitizers.sh; the GCC build checks them all).
#ifdef NEEDLE_SANITIZED
constexpr size_t kHeldoutStride = 12;
#else
constexpr size_t kHeldoutStride = 1;
#endif

// Every line of the demo model's held-out set as a fresh turn, against the engine's replies
// (scripts/official/make-heldout-goldens.sh): the whole envelope (timing aside; confidence to
// the fourth decimal), the return value and the call text, with no exception.
void CheckHeldout(const std::string& name) {
  const json golden = json::parse(std::ifstream(DataPath("golden/heldout/" + name)));
  const std::string examples = NEEDLE_EXAMPLES_DIR;
  const format::CactFile file = format::CactFile::Open(examples + "/demo.cact");
  std::ifstream in(examples + "/" + golden["heldout"].get<std::string>());
  std::vector<nlohmann::ordered_json> lines;
  for (std::string line; std::getline(in, line);)
    lines.push_back(nlohmann::ordered_json::parse(line));
  REQUIRE(lines.size() == golden["replies"].size());
  const int max_tokens = golden["max_tokens"].get<int>();
  int identical = 0, checked = 0;
  for (size_t i = 0; i < golden["replies"].size(); i += kHeldoutStride) {
    const json& g = golden["replies"][i];
    const auto& line = lines.at(g["line"].get<size_t>());
    // The tools as the engine got them (key order kept; the spacing does not matter).
    session::Session s(file, {}, "", line["tools"].dump());
    const session::Reply r = s.Respond(line["query"].get<std::string>(), max_tokens);
    const std::string ours = UntimedText(r.EnvelopeJson());
    const std::string theirs = UntimedText(g["reply_text"].get<std::string>());
    const std::string conf_ours = ConfidenceText(ours), conf_theirs = ConfidenceText(theirs);
    const std::string calls = g["debug_calls"].is_null() ? "" : g["debug_calls"];
    INFO("line " << g["line"] << ": " << line["query"] << "\n ours:   " << r.calls_text
                 << "\n engine: " << calls << "\n confidence: ours " << conf_ours << ", engine "
                 << conf_theirs);
    const bool same = ours == theirs && conf_ours == conf_theirs && r.calls_text == calls &&
                      r.counted_tokens == g["returned"].get<int>();
    CHECK(same);
    identical += same;
    ++checked;
  }
  REQUIRE(checked > 0);
  WARN(name << ": " << identical << " / " << checked
            << " replies identical to the engine's (budget " << max_tokens << ")");
}

// The eval's budget (256).
TEST_CASE("held-out goldens: demo, every reply identical to the engine's", "[session][golden]") {
  CheckHeldout("demo.heldout.json");
}

// Short budgets: truncated calls, the 4-token close rule, a </tool_call> on the budget's last
// token (24), the grounding floor (40), the branch floor (56).
TEST_CASE("held-out goldens: demo at budgets 24, 40 and 56, every reply identical to the engine's",
          "[session][golden]") {
  for (const char* name : {"demo.heldout-24.json", "demo.heldout-40.json", "demo.heldout-56.json"})
    CheckHeldout(name);
}

// Three-turn conversations of the demo model built from held-out lines (a query, a tool result,
// another query; the union of both lines' tools, often more than 5: retrieval), against the
// engine's replies (scripts/official/make-heldout-goldens.sh). Open: the turns below, each of
// which must still differ (the list only shrinks).
void CheckConversations(const std::string& name, const Steps& open) {
  const json golden = json::parse(std::ifstream(DataPath("golden/heldout/" + name)));
  const std::string examples = NEEDLE_EXAMPLES_DIR;
  const format::CactFile file = format::CactFile::Open(examples + "/demo.cact");
  std::map<std::string, nlohmann::ordered_json> tools;
  std::ifstream in(examples + "/" + golden["heldout"].get<std::string>());
  for (std::string line; std::getline(in, line);) {
    const auto row = nlohmann::ordered_json::parse(line);
    for (const auto& t : row["tools"]) tools.emplace(t["name"].get<std::string>(), t);
  }
  int identical = 0, turns = 0;
  std::string differing;
  for (size_t ci = 0; ci < golden["conversations"].size(); ci += kHeldoutStride) {
    const json& c = golden["conversations"][ci];
    nlohmann::ordered_json list = nlohmann::ordered_json::array();
    for (const auto& name : c["tools"]) list.push_back(tools.at(name.get<std::string>()));
    session::Session s(file, {}, "", list.dump());
    for (size_t si = 0; si < c["inputs"].size(); ++si) {
      const json& g = c["replies"][si];
      const session::Reply r = s.Respond(c["inputs"][si].get<std::string>(), c["max_tokens"]);
      const std::string ours = UntimedText(r.EnvelopeJson());
      const std::string theirs = UntimedText(g["reply_text"].get<std::string>());
      const std::string calls = g["debug_calls"].is_null() ? "" : g["debug_calls"];
      INFO("conversation " << ci << " turn " << si << "\n ours:   " << ours
                           << "\n engine: " << theirs);
      const bool same =
          ours == theirs && r.calls_text == calls && r.counted_tokens == g["returned"].get<int>();
      CHECK(same != (open.count({static_cast<int>(ci), static_cast<int>(si)}) > 0));
      if (!same) differing += fmt::format(" {{{}, {}}},", ci, si);
      identical += same;
      ++turns;
    }
  }
  REQUIRE(turns > 0);
  WARN(name << ": " << identical << " / " << turns
            << " turns identical to the engine's; differing:" << differing);
}

// The head confidence's cached features after retrieval (docs/PROTOCOL-NOTES.md item 4c, measured
// on the engine with dump_state.mjs): a user turn that retrieves the tools already shown keeps the
// context, and the query's embedding forward leaves the cache invalid, so the turn re-forwards; a
// turn that rebuilds starts a fresh pool and uses it.
// The rule does not depend on the model; the model must retrieve other tools for another query:
// the random-weight fixture `small` does, with the demo's 14 tools (the demo model trained on
// 2026-12-03 retrieves the same five for every query of this test after a tool result: its
// contrastive head was not trained while the layers under it were).
TEST_CASE("retrieval: a turn that keeps the context re-forwards the head features", "[session]") {
  const std::string examples = NEEDLE_EXAMPLES_DIR;
  const format::CactFile file = format::CactFile::Open(ModelPath("small.cact"));
  std::map<std::string, nlohmann::ordered_json> tools;
  std::ifstream in(examples + "/demo-heldout.jsonl");
  for (std::string line; std::getline(in, line);) {
    const auto row = nlohmann::ordered_json::parse(line);
    for (const auto& t : row["tools"]) tools.emplace(t["name"].get<std::string>(), t);
  }
  nlohmann::ordered_json list = nlohmann::ordered_json::array();
  for (const auto& [name, t] : tools) list.push_back(t);
  REQUIRE(list.size() > 5);
  session::Session s(file, {}, "", list.dump());
  const session::Reply first = s.Respond("Will it rain in Lagos today?", 64);
  CHECK(first.turn.context_rebuilt);
  CHECK_FALSE(first.head_rescored);
  // The same query again (after the tool result if it called): the same tools, no rebuild.
  if (!first.function_calls.empty() && first.function_calls != "[]")
    (void)s.Respond(R"({"ok": true})", 64);
  const session::Reply again = s.Respond("Will it rain in Lagos today?", 64);
  CHECK_FALSE(again.turn.context_rebuilt);
  CHECK(again.head_rescored);
  // Other tools: a rebuild, a fresh pool.
  const session::Reply other = s.Respond("Translate good night into French", 64);
  CHECK(other.turn.context_rebuilt);
  CHECK_FALSE(other.head_rescored);
}

// Conversation 99 turn 2 (budget 64, truncated; the model wrote the key `"day"` and `:` apart)
// pins enum grounding before the opening quote (docs/PROTOCOL-NOTES.md item 17).
TEST_CASE("held-out goldens: demo conversations", "[session][golden]") {
  CheckConversations("demo.conversations.json", {});
}

// A second, larger set (seed 2). With the previous demo model it held user turns that retrieve the
// tools already rendered in a context longer than sinks + window (the re-forward rule, now pinned
// by the retrieval test above); with the one before this, grounded enum pairs (PROTOCOL-NOTES
// item 16); with the model trained on 2026-12-03, conversation 165 turn 2 (0.8347 against the
// engine's 0.8345: the <tool_call> row's mass in the confidence walk's sum, item 4d).
TEST_CASE("held-out goldens: demo conversations, seed 2", "[session][golden]") {
  CheckConversations("demo.conversations-seed2.json", {});
}

TEST_CASE("held-out goldens: demo conversations, seed 3", "[session][golden]") {
  CheckConversations("demo.conversations-seed3.json", {});
}

// Conversations at budgets 20, 24 and 28 (seed 4): turns that end at the budget, then go on.
TEST_CASE("held-out goldens: demo conversations at short budgets", "[session][golden]") {
  CheckConversations("demo.conversations-short.json", {});
}
