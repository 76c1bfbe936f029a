// The tool-call grammar against the language PROTOCOL.md section 3 specifies, and the first-byte
// token index against a brute-force check of every token.
#include <catch2/catch.hpp>
#include <random>
#include <string>
#include <vector>

#include "grammar/call_grammar.h"
#include "grammar/schema.h"

using namespace needle::grammar;

namespace {

const char* kTimer =
    R"({"name":"set_timer","parameters":{"type":"object","properties":{"minutes":{"type":"integer"}},"required":["minutes"]}})";
const char* kLights =
    R"({"name":"set_lights","parameters":{"type":"object","properties":{"room":{"type":"string","maxLength":5},"state":{"type":"string","enum":["on","off"]}},"required":["room","state"]}})";
const char* kMisc =
    R"({"name":"misc","parameters":{"type":"object","properties":{"t":{"type":"number"},"b":{"type":"boolean"},"n":{"type":["string","null"]},"a":{"type":"array","items":{"type":"integer"},"minItems":1,"maxItems":2},"o":{"type":"object","properties":{"x":{"type":"integer"}},"required":["x"]}}}})";
const char* kFree = R"({"name":"free","description":"no parameters"})";

CallGrammar MakeGrammar(CompatOptions compat = {}) {
  return CallGrammar(BuildCallSchema({kTimer, kLights, kMisc, kFree}), compat);
}

bool Accepts(const CallGrammar& g, std::string_view text, bool require_call = false) {
  GrammarState s = g.Start(require_call);
  return g.Feed(s, text);
}

bool Complete(const CallGrammar& g, std::string_view text) {
  GrammarState s = g.Start();
  return g.Feed(s, text) && s.complete();
}

}  // namespace

TEST_CASE("call grammar accepts well-formed calls", "[grammar]") {
  const CallGrammar g = MakeGrammar();
  CHECK(Complete(g, "[]"));
  CHECK(Complete(g, R"([{"name":"set_timer","arguments":{"minutes":5}}])"));
  CHECK(Complete(g, R"([{"name":"set_timer","arguments":{"minutes":007}}])"));  // leading zeros
  CHECK(Complete(g, R"([{"name":"set_timer","arguments":{"minutes":-3}}])"));
  CHECK(Complete(g, R"([{"name":"set_lights","arguments":{"state":"off","room":"hall"}}])"));
  CHECK(Complete(g, R"([{"name":"set_timer","arguments":{"minutes":1}},)"
                    R"({"name":"set_timer","arguments":{"minutes":2}}])"));
  CHECK(Complete(g, R"([{"name":"misc","arguments":{}}])"));
  CHECK(Complete(g, R"([{"name":"misc","arguments":{"t":1.5e-3,"b":true,"n":null}}])"));
  CHECK(Complete(g, R"([{"name":"misc","arguments":{"n":"x\"\u00e9\n","a":[1,2],"o":{"x":1}}}])"));
  CHECK(Complete(g, R"([{"name":"free","arguments":{"any":[1,{"k":"v"}],"z":null}}])"));
  // Escaped argument keys are matched once decoded.
  CHECK(Complete(g, R"([{"name":"set_timer","arguments":{"minu\u0074es":5}}])"));
}

TEST_CASE("call grammar refuses what the protocol forbids", "[grammar]") {
  const CallGrammar g = MakeGrammar();
  CHECK_FALSE(Accepts(g, " []"));                                      // whitespace
  CHECK_FALSE(Accepts(g, R"([{ "name")"));                             // whitespace
  CHECK_FALSE(Accepts(g, R"([{"arguments")"));                         // key order
  CHECK_FALSE(Accepts(g, R"([{"name":"set_alarm")"));                  // undeclared tool
  CHECK_FALSE(Accepts(g, R"([{"name":"set_\u0074imer")"));             // names are literal
  CHECK_FALSE(Accepts(g, R"([{"name":"set_timer","arguments":{}})"));  // required key missing
  CHECK_FALSE(Accepts(g, R"([{"name":"set_timer","arguments":{"minutes":1,"minutes")"));
  CHECK_FALSE(Accepts(g, R"([{"name":"set_timer","arguments":{"seconds")"));      // unknown key
  CHECK_FALSE(Accepts(g, R"([{"name":"set_timer","arguments":{"minutes":1.5)"));  // integer
  CHECK_FALSE(Accepts(g, R"([{"name":"set_timer","arguments":{"minutes":"5")"));
  CHECK_FALSE(Accepts(g, R"([{"name":"set_timer","arguments":{"minutes":null)"));
  CHECK_FALSE(Accepts(g, R"([{"name":"set_lights","arguments":{"state":"onn")"));
  CHECK_FALSE(Accepts(g, R"([{"name":"set_lights","arguments":{"room":"kitche")"));  // maxLength 5
  CHECK(Accepts(g, R"([{"name":"set_lights","arguments":{"room":"kitch")"));
  CHECK_FALSE(Accepts(g, R"([{"name":"misc","arguments":{"b":True)"));
  CHECK_FALSE(Accepts(g, R"([{"name":"misc","arguments":{"a":[])"));      // minItems 1
  CHECK_FALSE(Accepts(g, R"([{"name":"misc","arguments":{"a":[1,2,3)"));  // maxItems 2
  CHECK_FALSE(Accepts(g, R"([{"name":"misc","arguments":{"o":{}})"));     // nested required
  CHECK_FALSE(Accepts(g, R"([{"name":"misc","arguments":{"t":1.)"
                         "}"));  // fraction digits
  CHECK_FALSE(Accepts(g, R"([{"name":"misc","arguments":{"n":"a)"
                         "\x01"));  // raw control
  CHECK_FALSE(Accepts(g, "[]", /*require_call=*/true));
  CHECK(Accepts(g, R"([{"name")", /*require_call=*/true));
  // A key escape that cannot match any key dead-ends (as in the engine).
  CHECK(Accepts(g, R"([{"name":"set_timer","arguments":{"minu\udf)"));
  CHECK_FALSE(Accepts(g, R"([{"name":"set_timer","arguments":{"minu\udfe0)"));
  GrammarState done = g.Start();
  REQUIRE(g.Feed(done, "[]"));
  CHECK(done.complete());
  CHECK_FALSE(g.Feed(done, ","));
}

TEST_CASE("call grammar reproduces the engine's duplicate-call, ',}' and '}' in string behaviour",
          "[grammar]") {
  const std::string call = R"({"name":"set_timer","arguments":{"minutes":5}})";
  {
    const CallGrammar g = MakeGrammar();
    // The same call twice cannot be closed; a different one can.
    CHECK_FALSE(Accepts(g, "[" + call + "," + call));
    CHECK(Accepts(g, "[" + call + R"(,{"name":"set_timer","arguments":{"minutes":6}})"));
    // `,` needs a key left; then `}` is accepted after it (engine behaviour).
    CHECK(Accepts(g, R"([{"name":"set_lights","arguments":{"room":"a","state":"on")"));
    CHECK_FALSE(Accepts(g, R"([{"name":"set_lights","arguments":{"room":"a","state":"on",)"));
    CHECK(Complete(g, R"([{"name":"misc","arguments":{"b":true,}}])"));
    // `}` inside a string value: refused while the object lacks required keys (engine, measured:
    // PROTOCOL-NOTES item 10), accepted once they are present; `]` and `{` are not affected.
    CHECK_FALSE(Accepts(g, R"([{"name":"set_lights","arguments":{"room":"}")"));
    CHECK_FALSE(Accepts(g, R"([{"name":"set_lights","arguments":{"room":"]}")"));
    CHECK(Accepts(g, R"([{"name":"set_lights","arguments":{"room":"]{,")"));
    CHECK(Accepts(g, R"([{"name":"set_lights","arguments":{"state":"on","room":"]}},")"));
    CHECK(Accepts(g, R"([{"name":"misc","arguments":{"n":"}")"));
  }
  {
    CompatOptions strict;
    strict.refuse_duplicate_calls = false;
    strict.allow_comma_close = false;
    strict.refuse_brace_in_string = false;
    const CallGrammar g = MakeGrammar(strict);
    CHECK(Complete(g, "[" + call + "," + call + "]"));
    CHECK_FALSE(Accepts(g, R"([{"name":"misc","arguments":{"b":true,})"));
    CHECK(Accepts(g, R"([{"name":"set_lights","arguments":{"room":"}")"));
  }
}

TEST_CASE("token mask equals a brute-force check of every token", "[grammar]") {
  const CallGrammar g = MakeGrammar();
  // A vocabulary of JSON-ish fragments, single bytes and random multi-byte strings.
  std::vector<std::string> vocab = {
      "[",     "]",   "[{\"",      "[]",    "{\"",  "name",  "\":\"",  "\":",     "\"",
      ",",     ",\"", "arguments", "set",   "_",    "timer", "lights", "minutes", "}",
      "}}",    "}}]", "5",         "-",     "0",    "\\",    "u",      "\":{\"",  "room",
      "state", "on",  "off\"",     "\",\"", "\"}}", " ",     "true",   "null"};
  std::mt19937 rng(7);
  const std::string alphabet = "[]{}\",:\\0123456789aeimnorstu_-.";
  for (int i = 0; i < 300; ++i) {
    std::string t;
    const int len = 1 + static_cast<int>(rng() % 4);
    for (int k = 0; k < len; ++k) t += alphabet[rng() % alphabet.size()];
    vocab.push_back(t);
  }
  std::vector<uint8_t> text(vocab.size(), 1);
  TokenConstraint tc(vocab, text);
  const std::string path =
      R"([{"name":"set_lights","arguments":{"state":"off","room":"ab"}},{"name":"set_timer","arguments":{"minutes":-12}}])";
  GrammarState s = g.Start();
  std::vector<uint8_t> mask(vocab.size());
  size_t checked = 0;
  for (size_t pos = 0; pos <= path.size(); ++pos) {
    const size_t n = tc.Mask(g, s, mask);
    size_t brute = 0;
    for (size_t id = 0; id < vocab.size(); ++id) {
      GrammarState copy = s;
      const bool ok = g.Feed(copy, vocab[id]);
      brute += ok;
      INFO("position " << pos << " token '" << vocab[id] << "'");
      CHECK(static_cast<bool>(mask[id]) == ok);
      ++checked;
    }
    CHECK(n == brute);
    if (pos < path.size()) REQUIRE(g.Feed(s, path.substr(pos, 1)));
  }
  CHECK(s.complete());
  CHECK(checked > 10000);
}
