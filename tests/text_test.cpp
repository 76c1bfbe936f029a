// Tokenizer blob, tokenizer, prompt renderer and response parser against the fixtures: every
// encode.jsonl row, every golden prefix/turn, and SentencePiece's own outputs for edge cases.
#include <algorithm>
#include <array>
#include <bit>
#include <catch2/catch.hpp>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <functional>
#include <iterator>
#include <limits>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "base/error.h"
#include "format/cact.h"
#include "format/tokenizer_blob.h"
#include "text/json_text.h"
#include "text/prompt.h"
#include "text/response.h"
#include "text/tokenizer.h"

namespace {

using needle::FormatError;
using needle::InvalidInput;
using needle::format::PieceType;
using needle::format::TokenizerBlob;
using needle::text::PromptRenderer;
using needle::text::Tokenizer;
using Ids = std::vector<int32_t>;
using nlohmann::json;

const std::string kData = NEEDLE_TEST_DATA;

std::string ReadText(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  REQUIRE(in.good());
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

json ReadJson(const std::string& path) { return json::parse(ReadText(path)); }

const needle::format::CactFile& TinyModel() {
  static const auto file = needle::format::CactFile::Open(kData + "/models/tiny.cact");
  return file;
}

const Tokenizer& FixtureTokenizer() {
  static const Tokenizer tok = Tokenizer::FromCact(TinyModel());
  return tok;
}

std::vector<uint8_t> TinyBlob() {
  auto b = TinyModel().tokenizer_blob();
  return std::vector<uint8_t>(b.begin(), b.end());
}

Ids IdsOf(const json& j) { return j.get<Ids>(); }

Ids Concat(Ids a, const Ids& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// Message of the FormatError thrown by parsing `blob`, or "" if it parsed.
std::string ParseError(const std::vector<uint8_t>& blob) {
  try {
    (void)needle::format::ParseTokenizerBlob(blob, "test.cact");
  } catch (const FormatError& e) {
    return e.what();
  }
  return "";
}

// Runs a shell command, returns (exit status, stdout).
std::pair<int, std::string> RunShell(const std::string& cmd) {
  std::string out;
  FILE* p = popen(cmd.c_str(), "r");
  REQUIRE(p != nullptr);
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), p)) > 0) out.append(buf, n);
  const int status = pclose(p);
  return {WEXITSTATUS(status), out};
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Tokenizer blob

TEST_CASE("tokenizer blob: fixture models parse with the documented header", "[text][blob]") {
  const auto blob = needle::format::ParseTokenizerBlob(TinyModel().tokenizer_blob(), "tiny");
  CHECK(blob.pieces.size() == 8192);
  CHECK(blob.pad_id == 0);
  CHECK(blob.eos_id == 1);
  CHECK(blob.bos_id == 2);
  CHECK(blob.unk_id == 3);
  CHECK(blob.add_dummy_prefix);
  CHECK(blob.byte_fallback);
  CHECK(blob.pieces[4].text == "<|im_start|>");
  CHECK(blob.pieces[4].type == PieceType::kUserDefined);
  CHECK(blob.pieces[14].text == "<0x00>");
  CHECK(blob.pieces[14].type == PieceType::kByte);
  // The .vocab file (SentencePiece's own dump) lists the same pieces and scores in id order.
  std::istringstream vocab(ReadText(kData + "/tokenizer/fixture8k.vocab"));
  std::string line;
  size_t id = 0;
  while (std::getline(vocab, line)) {
    const size_t tab = line.rfind('\t');
    REQUIRE(tab != std::string::npos);
    REQUIRE(id < blob.pieces.size());
    CHECK(blob.pieces[id].text == line.substr(0, tab));
    CHECK(blob.pieces[id].score == std::stof(line.substr(tab + 1)));
    ++id;
  }
  CHECK(id == 8192);
  // Every fixture model carries the same tokenizer.
  for (const char* m : {"small", "official-geometry", "small-crafted-0.5", "small-crafted-0.8"}) {
    const auto f = needle::format::CactFile::Open(kData + "/models/" + m + ".cact");
    const auto b = f.tokenizer_blob();
    const auto t = TinyModel().tokenizer_blob();
    CHECK(std::equal(b.begin(), b.end(), t.begin(), t.end()));
  }
}

TEST_CASE("tokenizer blob: serialize is the exact inverse of parse", "[text][blob]") {
  const auto bytes = TinyBlob();
  const auto blob = needle::format::ParseTokenizerBlob(bytes, "tiny");
  CHECK(needle::format::SerializeTokenizerBlob(blob) == bytes);
}

TEST_CASE("tokenizer blob: every truncation is a FormatError, never a crash", "[text][blob]") {
  const auto bytes = TinyBlob();
  std::vector<size_t> lengths;
  for (size_t n = 0; n < 400; ++n) lengths.push_back(n);
  for (size_t n = 400; n < bytes.size(); n += 997) lengths.push_back(n);
  lengths.push_back(bytes.size() - 1);
  for (size_t n : lengths) {
    const std::vector<uint8_t> cut(bytes.begin(), bytes.begin() + n);
    const std::string msg = ParseError(cut);
    INFO("length " << n);
    CHECK(!msg.empty());
  }
  // A cut inside the records names the piece (piece 0 "<pad>" takes 7 + 5 bytes).
  std::vector<uint8_t> cut(bytes.begin(), bytes.begin() + 24 + 12 + 3);
  cut.resize(24 + 8192 * 7, 0);  // enough bytes for the count check; piece 1 reads zeros
  const std::string msg = ParseError(cut);
  CHECK(msg.find("test.cact") != std::string::npos);
  CHECK(msg.find("tokenizer piece 1:") != std::string::npos);
}

TEST_CASE("tokenizer blob: invalid fields are named in the error", "[text][blob]") {
  const auto good = needle::format::ParseTokenizerBlob(TinyBlob(), "tiny");
  auto expect = [&](std::function<void(TokenizerBlob&)> edit, std::vector<std::string> parts) {
    TokenizerBlob b = good;
    edit(b);
    const std::string msg = ParseError(needle::format::SerializeTokenizerBlob(b));
    INFO(msg);
    REQUIRE(!msg.empty());
    for (const auto& p : parts) CHECK(msg.find(p) != std::string::npos);
  };
  expect([](TokenizerBlob& b) { b.pieces[500].type = static_cast<PieceType>(9); },
         {"piece 500", "type 9"});
  expect([](TokenizerBlob& b) { b.pieces[600].text = b.pieces[601].text; },
         {"piece 601", "duplicates piece 600"});
  expect([](TokenizerBlob& b) { b.unk_id = 9000; }, {"unk_id", "9000", "8192"});
  expect([](TokenizerBlob& b) { b.eos_id = 8192; }, {"eos_id", "8192"});
  expect([](TokenizerBlob& b) { b.unk_id = 2; }, {"unk_id", "UNKNOWN"});
  expect([](TokenizerBlob& b) { b.pieces[700].score = std::numeric_limits<float>::quiet_NaN(); },
         {"piece 700", "score"});
  expect([](TokenizerBlob& b) { b.pieces[800].text = "a\xff"; }, {"piece 800", "UTF-8"});
  expect([](TokenizerBlob& b) { b.pieces[20].text = "<0xZZ>"; }, {"piece 20", "<0xHH>"});
  expect([](TokenizerBlob& b) { b.pieces[900].text.clear(); }, {"piece 900", "length is 0"});

  auto bytes = TinyBlob();
  bytes.push_back(0);
  bytes.push_back(0);
  CHECK(ParseError(bytes).empty());  // zero padding is accepted
  bytes.push_back(7);
  CHECK(ParseError(bytes).find("non-zero byte") != std::string::npos);

  auto huge = TinyBlob();
  huge[0] = huge[1] = huge[2] = huge[3] = 0xFF;  // n_pieces = 4294967295
  CHECK(ParseError(huge).find("4294967295 pieces") != std::string::npos);
  auto flags = TinyBlob();
  flags[20] = 2;  // add_dummy_prefix
  CHECK(ParseError(flags).find("add_dummy_prefix=2") != std::string::npos);
}

// ---------------------------------------------------------------------------------------------
// Tokenizer

TEST_CASE("tokenizer: FromCact shares the model file's parsed pieces (no copy)", "[text]") {
  const Tokenizer& tok = FixtureTokenizer();
  const auto& pieces = TinyModel().tokenizer().pieces;
  REQUIRE(tok.vocab_size() == static_cast<int32_t>(pieces.size()));
  for (const int32_t id : {0, 5, tok.vocab_size() - 1}) CHECK(&tok.piece(id) == &pieces[id].text);
  // A tokenizer from a blob owns its pieces: same text, another copy.
  const Tokenizer own = Tokenizer::FromBlob(TinyBlob(), "tiny");
  CHECK(own.piece(5) == tok.piece(5));
  CHECK(&own.piece(5) != &tok.piece(5));
}

TEST_CASE("tokenizer: every encode.jsonl row (ids, ids_no_dummy_prefix, decoded)", "[text]") {
  const Tokenizer& tok = FixtureTokenizer();
  std::istringstream rows(ReadText(kData + "/tokenizer/encode.jsonl"));
  std::string line;
  int n = 0;
  while (std::getline(rows, line)) {
    if (line.empty()) continue;
    const json row = json::parse(line);
    const std::string text = row["text"];
    INFO("row " << n << ": " << text);
    CHECK(tok.Encode(text, true) == IdsOf(row["ids"]));
    CHECK(tok.Encode(text) == IdsOf(row["ids"]));
    CHECK(tok.Encode(text, false) == IdsOf(row["ids_no_dummy_prefix"]));
    CHECK(tok.Decode(IdsOf(row["ids"])) == row["decoded"].get<std::string>());
    ++n;
  }
  CHECK(n >= 30);
}

TEST_CASE("tokenizer: SentencePiece edge cases (expected ids from python3-sentencepiece)",
          "[text]") {
  const Tokenizer& tok = FixtureTokenizer();
  // Invalid UTF-8: each bad byte becomes U+FFFD (bytes EF BF BD = ids 253 205 203).
  CHECK(tok.Encode("\xff abc") == Ids{8085, 253, 205, 203, 1299, 8096});
  CHECK(tok.Encode("a\xe6\x97"
                   "b") == Ids{286, 253, 205, 203, 253, 205, 203, 8108});
  CHECK(tok.Encode("\xed\xa0\x80x") ==
        Ids{8085, 253, 205, 203, 253, 205, 203, 253, 205, 203, 8130});
  CHECK(tok.Encode(std::string("a\0b", 3)) == Ids{286, 14, 8108});
  // Markers match anywhere, also next to each other and after spaces; U+2581 acts as a space.
  CHECK(tok.Encode("<|im_start|><|im_end|>x<think>") == Ids{8085, 4, 5, 8130, 6});
  CHECK(tok.Encode(" <|im_start|> hi") == Ids{8085, 8085, 4, 504, 8088});
  CHECK(tok.Encode("\xE2\x96\x81x") == Ids{8085, 1139});
  // split_digits: the vocabulary has no multi-digit pieces.
  CHECK(tok.Encode("12345 abc123") ==
        Ids{8085, 8111, 8117, 8123, 8127, 8124, 1299, 8096, 8111, 8117, 8123});
}

TEST_CASE("tokenizer: decode rules (expected text from python3-sentencepiece)", "[text]") {
  const Tokenizer& tok = FixtureTokenizer();
  auto ids = [&](std::initializer_list<const char*> pieces) {
    Ids out;
    for (const char* p : pieces) {
      const int32_t id = tok.PieceToId(p);
      REQUIRE(id >= 0);
      out.push_back(id);
    }
    return out;
  };
  CHECK(tok.Decode(ids({"<0x41>", "\xE2\x96\x81leading"})) == "A leading");
  CHECK(tok.Decode(ids({"<s>", "\xE2\x96\x81leading"})) == "leading");
  CHECK(tok.Decode(ids({"\xE2\x96\x81", "\xE2\x96\x81leading"})) == " leading");
  CHECK(tok.Decode(ids({"<|im_start|>", "\xE2\x96\x81leading"})) == "<|im_start|> leading");
  CHECK(tok.Decode(ids({"<0x20>", "\xE2\x96\x81leading"})) == "  leading");
  CHECK(tok.Decode(ids({"<0xE6>", "<0x97>", "\xE2\x96\x81leading", "<0xFF>", "<0xE6>", "<0x97>",
                        "<0xA5>"})) == "\xEF\xBF\xBD\xEF\xBF\xBD leading\xEF\xBF\xBD\xE6\x97\xA5");
  // Unknown pieces are skipped (SentencePiece would print " \u2047 ").
  CHECK(tok.Decode(Ids{tok.unk_id(), tok.PieceToId("\xE2\x96\x81leading")}) == "leading");
  CHECK_THROWS_AS(tok.Decode(Ids{8192}), InvalidInput);
  CHECK_THROWS_WITH(tok.Decode(Ids{5, -1}), Catch::Contains("-1") && Catch::Contains("8192"));
  CHECK(tok.TokenBytes(tok.PieceToId("<0x0A>")) == "\n");
  CHECK(tok.TokenBytes(tok.bos_id()).empty());
  CHECK(tok.TokenBytes(tok.PieceToId("\xE2\x96\x81leading")) == " leading");
}

TEST_CASE("tokenizer: long inputs encode in O(n log n) and round-trip", "[text]") {
  const Tokenizer& tok = FixtureTokenizer();
  // 1 MB with no spaces (one symbol run) and 1 MB of words: quadratic merging would take minutes.
  std::string words, glued;
  const char* vocab[] = {"timer ", "minutes ", "kitchen ",          "light ",
                         "Priya ", "42 ",      "\xC3\xA9t\xC3\xA9 "};
  // A quadratic encoder would take hours on 1 MiB; the sanitizer build runs 10-20x slower.
#ifdef NEEDLE_SANITIZED
  constexpr double kLongEncodeSeconds = 60.0;
#else
  constexpr double kLongEncodeSeconds = 5.0;
#endif
  for (size_t i = 0; words.size() < (1 << 20); ++i) words += vocab[(i * 7 + i / 3) % 7];
  for (char c : words) glued += c == ' ' ? 'x' : c;
  for (const std::string* text : {&words, &glued}) {
    const auto t0 = std::chrono::steady_clock::now();
    const Ids ids = tok.Encode(*text);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    CHECK(s < kLongEncodeSeconds);
    CHECK(tok.Decode(ids) == *text);
  }
}

// ---------------------------------------------------------------------------------------------
// JSON text helpers

TEST_CASE("json text: whitespace outside strings is deleted, nothing else changes", "[text]") {
  using needle::text::StripJsonWhitespace;
  CHECK(StripJsonWhitespace(" [ {\"a b\" :\t1.0 ,\r\n \"c\": \"x \\\" y\\\\\" } ] ") ==
        "[{\"a b\":1.0,\"c\":\"x \\\" y\\\\\"}]");
  CHECK(StripJsonWhitespace("{\"k\": \"\\u00e9 \\/\", \"n\": -0, \"e\": 1e3}") ==
        "{\"k\":\"\\u00e9 \\/\",\"n\":-0,\"e\":1e3}");
  CHECK(StripJsonWhitespace("\"caf\xC3\xA9  \"  ") == "\"caf\xC3\xA9  \"");
  CHECK(StripJsonWhitespace("  \n\t ").empty());
  CHECK_THROWS_WITH(needle::text::ValidateJson("[{\"a\": }]", "tools"),
                    Catch::StartsWith("tools: invalid JSON"));
  CHECK_THROWS_AS(needle::text::RenderToolsText("[{\"name\": \"x\",}]"), InvalidInput);
  CHECK(needle::text::RenderToolsText(" [ ] ") == "[]");
  CHECK(needle::text::RenderToolsText(" ").empty());
  const auto tools = needle::text::ToolInventory(
      "[{\"name\":\"a\",\"x\":[1,{\"y\":\"],\"}]}, "
      "{\"type\":\"function\",\"function\":{\"name\":\"b\"}},"
      " {\"name\": \"c\"}]",
      "tools");
  REQUIRE(tools.size() == 2);
  CHECK(tools[0] == "{\"name\":\"a\",\"x\":[1,{\"y\":\"],\"}]}");
  CHECK(tools[1] == "{\"name\":\"c\"}");
  // An element that is not an object, or a name that is not a string, could never be called:
  // an error, not a silently smaller inventory.
  CHECK_THROWS_WITH(needle::text::ToolInventory("[{\"name\":\"c\"},3]", "tools"),
                    Catch::Contains("tools: tool #1 is a JSON number (3), expected an object"));
  CHECK_THROWS_WITH(needle::text::ToolInventory("[{\"name\":[\"c\"]}]", "tools"),
                    Catch::Contains("tool #0: \"name\" is a JSON array"));
}

// ---------------------------------------------------------------------------------------------
// Prompt rendering against the official engine's ids

TEST_CASE("prompt: golden prefix_ids and turn_ids of every model", "[text][golden]") {
  const PromptRenderer renderer(FixtureTokenizer());
  int checked = 0;
  for (const char* model : {"official", "small", "tiny"}) {
    const json golden = ReadJson(kData + "/golden/" + model + "/golden.json");
    for (const json& e : golden["official"]) {
      INFO(model << ": " << e["query"].get<std::string>());
      const std::string tools = needle::text::RenderToolsText(e["tools_text"].get<std::string>());
      CHECK(renderer.PrefixIds(e["system"].get<std::string>(), tools) == IdsOf(e["prefix_ids"]));
      CHECK(renderer.FirstTurnIds(e["query"].get<std::string>()) == IdsOf(e["turn_ids"]));
      ++checked;
    }
  }
  CHECK(checked >= 18);
}

TEST_CASE("prompt: session goldens (first, later user turns, retrieval re-renders)",
          "[text][golden]") {
  const PromptRenderer renderer(FixtureTokenizer());
  const int32_t bos = FixtureTokenizer().bos_id();
  int exact = 0, partial = 0;
  for (const char* model :
       {"official-geometry", "small", "tiny", "small-crafted-0.5", "small-crafted-0.8"}) {
    const json session = ReadJson(kData + "/golden/session/" + model + ".session.json");
    for (const json& c : session["cases"]) {
      const std::string tools_json = c["tools_text"];
      const std::string system = c["system"];
      const bool conversation = c["conversation"];
      const auto inventory = needle::text::ToolInventory(tools_json, "tools");
      REQUIRE(inventory.size() == c["tools"].size());
      const auto& steps = c["steps"];
      INFO(model << ", " << inventory.size() << " tools, conversation " << conversation);
      if (inventory.size() <= needle::text::kMaxRenderedTools) {
        const Ids prefix = renderer.PrefixIds(system, needle::text::RenderToolsText(tools_json));
        for (const json& p : c["prefix_ids"]) CHECK(IdsOf(p) == prefix);
        bool last_had_calls = false;
        for (size_t i = 0; i < steps.size(); ++i) {
          const std::string input = steps[i]["input"];
          INFO("step " << i << ": " << input);
          Ids want;
          if (!conversation || i == 0) {
            want = renderer.FirstTurnIds(input);
          } else if (last_had_calls) {
            want = renderer.ToolResultTurnIds(input, inventory.size());
          } else {
            want = renderer.UserTurnIds(input);
          }
          CHECK(IdsOf(steps[i]["turn_ids"]) == want);
          ++exact;
          last_had_calls = !steps[i]["reply"]["function_calls"].empty();
        }
        continue;
      }
      // More than 5 tools: the prefix is BOS alone; each turn re-renders the context with the 5
      // tools retrieval picked (the model decides which: try every 5-subset, in declaration order).
      for (const json& p : c["prefix_ids"]) CHECK(IdsOf(p) == Ids{bos});
      std::vector<Ids> heads;
      const size_t n = inventory.size();
      for (uint32_t mask = 0; mask < (1u << n); ++mask) {
        if (std::popcount(mask) != static_cast<int>(needle::text::kMaxRenderedTools)) continue;
        std::vector<std::string_view> picked;
        for (size_t t = 0; t < n; ++t) {
          if (mask & (1u << t)) picked.push_back(inventory[t]);
        }
        Ids head = renderer.PrefixIds(system, needle::text::JoinToolsText(picked));
        head.erase(head.begin());  // BOS is the prefix
        heads.push_back(std::move(head));
      }
      const Ids first = renderer.FirstTurnIds(steps[0]["input"].get<std::string>());
      for (size_t i = 0; i < steps.size(); ++i) {
        const Ids got = IdsOf(steps[i]["turn_ids"]);
        INFO("step " << i << ": " << steps[i]["input"].get<std::string>());
        if (!conversation || i == 0) {
          const Ids this_first = renderer.FirstTurnIds(steps[i]["input"].get<std::string>());
          const bool found = std::any_of(heads.begin(), heads.end(), [&](const Ids& h) {
            return Concat(h, this_first) == got;
          });
          CHECK(found);
          ++exact;
        } else if (got == renderer.UserTurnIds(steps[i]["input"].get<std::string>())) {
          ++exact;  // retrieval picked the same tools as before: no rebuild, a plain user turn
        } else {
          // Rebuilt conversation: head + first turn + (generated tokens, not reproducible without
          // the model) + ... + this user turn.
          const bool head_found = std::any_of(heads.begin(), heads.end(), [&](const Ids& h) {
            const Ids start = Concat(h, first);
            return got.size() >= start.size() &&
                   std::equal(start.begin(), start.end(), got.begin());
          });
          CHECK(head_found);
          const Ids tail = renderer.UserTurnIds(steps[i]["input"].get<std::string>());
          CHECK((got.size() >= tail.size() &&
                 std::equal(tail.begin(), tail.end(), got.end() - tail.size())));
          ++partial;
        }
      }
    }
  }
  // 120 turns in 5 files: 112 reproduced exactly, 8 rebuilt contexts checked at both ends.
  CHECK(exact == 112);
  CHECK(partial == 8);
}

TEST_CASE("prompt: text forms follow PROTOCOL.md section 1", "[text]") {
  using namespace needle::text;
  CHECK(PrefixText("", "") == "<|im_start|>user");
  CHECK(PrefixText(" ", "[]") ==
        "<|im_start|>system\n <|im_end|>\n<|im_start|>user\n<tools>[]</tools>");
  CHECK(FirstTurnText("hi") == "\nhi<|im_end|>\n<|im_start|>assistant\n");
  CHECK(UserTurnText("hi") == "\n<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n");
  CHECK(ToolResultPayload(" {\"ok\": true, \"s\": \"a b\"} ", 2) ==
        "[{\"ok\":true,\"s\":\"a b\"}]");
  CHECK(ToolResultPayload("[1, 2]", 5) == "[1,2]");
  CHECK(ToolResultPayload("not json {", 1) == "notjson{");
  CHECK(ToolResultPayload(" {\"ok\": true} ", 6) == " {\"ok\": true} ");
  CHECK(ToolResultTurnText("{\"a\": 1}", 2) ==
        "\n<|im_start|>tool\n<tool_result>[{\"a\":1}]</tool_result><|im_end|>\n<|im_start|>"
        "assistant\n");
  const PromptRenderer renderer(FixtureTokenizer());
  const auto& t = renderer.tokens();
  CHECK(t.im_start == 4);
  CHECK(t.tool_result_end == 13);
  // A turn's ids are the no-dummy encoding of its text; markers are single ids.
  const Ids ids = renderer.ToolResultTurnIds("{\"a\": 1}", 2);
  CHECK(ids == FixtureTokenizer().Encode(ToolResultTurnText("{\"a\": 1}", 2), false));
  CHECK(std::count(ids.begin(), ids.end(), t.tool_result) == 1);
  CHECK(std::count(ids.begin(), ids.end(), t.im_start) == 2);
  // Empty tools text: [BOS] + encode_dummy("<|im_start|>user") = 2 8085 4 438 (golden ids).
  CHECK(renderer.PrefixIds("", "") == Ids{2, 8085, 4, 438});
}

// ---------------------------------------------------------------------------------------------
// Response parsing

TEST_CASE("response: think, calls, free text, malformed", "[text]") {
  using needle::text::ParseResponse;
  auto r = ParseResponse(
      "<think> plan </think>\n<tool_call>[{\"name\":\"set_timer\",\"arguments\":{\"minutes\":5}}]"
      "</tool_call><|im_end|>");
  CHECK(r.think_closed);
  CHECK(r.reasoning() == std::optional<std::string>("plan"));
  CHECK(r.call_closed);
  CHECK(r.ended);
  REQUIRE(r.calls.size() == 1);
  CHECK(r.calls[0]["arguments"]["minutes"] == 5);
  CHECK(r.calls_text == "[{\"name\":\"set_timer\",\"arguments\":{\"minutes\":5}}]");

  r = ParseResponse("<tool_call>[]</tool_call><|im_end|>");
  CHECK(r.has_tool_call);
  CHECK(r.calls.empty());
  CHECK(!r.reasoning());

  r = ParseResponse("  Sure, done.  <|im_end|>");
  CHECK(!r.has_tool_call);
  CHECK(r.reasoning() == std::optional<std::string>("Sure, done."));

  r = ParseResponse("<think>still thinking");
  CHECK(!r.think_closed);
  CHECK(!r.ended);
  CHECK(r.reasoning() == std::optional<std::string>("still thinking"));

  r = ParseResponse("<tool_call>[{\"name\":\"a\",\"argu");
  CHECK(r.has_tool_call);
  CHECK(!r.call_closed);
  CHECK(r.calls.is_null());

  CHECK_THROWS_AS(ParseResponse("<tool_call>[{\"name\":\"a\",}]</tool_call>"), InvalidInput);
  CHECK_THROWS_AS(ParseResponse("<tool_call>{\"name\":\"a\"}</tool_call>"), InvalidInput);
  CHECK_THROWS_WITH(ParseResponse("<tool_call>[{\"name\":1,\"arguments\":{}}]</tool_call>"),
                    Catch::Contains("call 0"));
  CHECK_THROWS_AS(ParseResponse("<tool_call>[\"\xff\"]</tool_call>"), InvalidInput);
  // Arbitrary bytes never crash.
  std::string noise;
  for (int i = 0; i < 2000; ++i) noise += static_cast<char>((i * 131 + 7) % 256);
  for (size_t cut = 0; cut < noise.size(); cut += 97) {
    try {
      (void)ParseResponse("<think>" + noise.substr(0, cut) + "</think><tool_call>" + noise);
    } catch (const InvalidInput&) {
    }
  }
}

// ---------------------------------------------------------------------------------------------
// CLI

TEST_CASE("cli: tokenize --json and detokenize", "[text][cli]") {
  const std::string bin = NEEDLE_BINARY;
  const std::string model = kData + "/models/tiny.cact";
  auto [rc, out] = RunShell(bin + " tokenize --json " + model + " 'Set a timer for 5 minutes.'");
  REQUIRE(rc == 0);
  const json j = json::parse(out);
  CHECK(IdsOf(j["ids"]) == Ids{795, 286, 585, 394, 8085, 8124, 647, 8107});  // encode.jsonl row 0
  CHECK(j["pieces"][0] == "\xE2\x96\x81Set");
  std::tie(rc, out) = RunShell(bin + " tokenize --json --no-dummy-prefix " + model +
                               " 'Set a timer for 5 minutes.'");
  CHECK(IdsOf(json::parse(out)["ids"]) == Ids{407, 286, 585, 394, 8085, 8124, 647, 8107});
  std::tie(rc, out) = RunShell("printf 'a\\nb b\\n' | " + bin + " tokenize --batch " + model);
  CHECK(rc == 0);
  CHECK(out == "[286]\n[360,360]\n");  // == Encode("a"), Encode("b b") in SentencePiece
  std::tie(rc, out) =
      RunShell(bin + " detokenize " + model + " 795 286 585,394 8085 8124 647 8107");
  CHECK(rc == 0);
  CHECK(out == "Set a timer for 5 minutes.\n");
  std::tie(rc, out) = RunShell(bin + " detokenize " + model + " 5 9000 2>&1");
  CHECK(rc == static_cast<int>(needle::ErrorKind::kInvalid));
  CHECK(out.find("token id 9000") != std::string::npos);
  CHECK(out.find("8192") != std::string::npos);
  std::tie(rc, out) = RunShell(bin + " detokenize " + model + " 5 x1 2>&1");
  CHECK(rc == static_cast<int>(needle::ErrorKind::kUsage));
  CHECK(out.find("'x1'") != std::string::npos);
}

TEST_CASE("tokenizer: merge order, '▁' inside pieces and unk runs on a hand-made vocabulary",
          "[text]") {
  // Expected ids derived by hand from SentencePiece's rules (see tokenizer.h).
  TokenizerBlob blob;
  blob.pad_id = blob.eos_id = blob.bos_id = 1;
  blob.unk_id = 0;
  blob.byte_fallback = false;
  auto add = [&](const char* text, float score, PieceType type = PieceType::kNormal) {
    blob.pieces.push_back({text, score, type});
    return static_cast<int32_t>(blob.pieces.size() - 1);
  };
  const int32_t unk = add("<unk>", 0, PieceType::kUnknown);
  add("<s>", 0, PieceType::kControl);
  const int32_t sp = add("\xE2\x96\x81", -3);
  const int32_t a = add("a", -4);
  const int32_t b = add("b", -5);
  const int32_t c = add("c", -6);
  const int32_t spsp = add("\xE2\x96\x81\xE2\x96\x81", -1);  // "▁▁": a piece spanning a space
  add("\xE2\x96\x81"
      "b",
      -2);
  const int32_t ab = add("ab", -1.5f);
  add("bc", -1.5f);
  const int32_t marker = add("<m>", 0, PieceType::kUserDefined);
  const Tokenizer tok(blob, "hand-made");
  // "▁a▁▁b": "▁▁" (-1) beats "▁b" (-2); afterwards nothing merges across it.
  CHECK(tok.Encode("a  b", true) == Ids{sp, a, spsp, b});
  // Equal scores: the leftmost pair merges first.
  CHECK(tok.Encode("abc", false) == Ids{ab, c});
  // No byte fallback: a run of unknown characters is one unk.
  CHECK(tok.Encode("xyz", true) == Ids{sp, unk});
  CHECK(tok.Encode("xa<m>y", false) == Ids{unk, a, marker, unk});
  CHECK(tok.Decode(Ids{sp, a, spsp, b}) == "a  b");
}

TEST_CASE("tokenizer blob: random corruption parses or throws FormatError", "[text][blob]") {
  const auto good = TinyBlob();
  uint64_t state = 0x9E3779B97F4A7C15ull;  // fixed seed: deterministic
  auto next = [&] {
    state ^= state << 13, state ^= state >> 7, state ^= state << 17;
    return state;
  };
  int rejected = 0;
  for (int round = 0; round < 300; ++round) {
    auto bytes = good;
    const int flips = 1 + static_cast<int>(next() % 4);
    for (int f = 0; f < flips; ++f) {
      // Mostly the header and the first records, where lengths and types live.
      const size_t at = next() % (round % 2 ? 600 : bytes.size());
      bytes[at] = static_cast<uint8_t>(next());
    }
    if (round % 5 == 0) bytes.resize(next() % bytes.size());
    try {
      const auto blob = needle::format::ParseTokenizerBlob(bytes, "fuzz");
      const Tokenizer tok(blob, "fuzz");
      (void)tok.Encode("Set a timer for 5 minutes. <|im_end|> \xff");
    } catch (const FormatError&) {
      ++rejected;
    }
  }
  CHECK(rejected > 100);
}
