// Turn-protocol rules of the official engine that are pinned without a model: the branch stop
// rule (grammar level), the validation block and the negation phrases (docs/PROTOCOL-NOTES.md).
#include <catch2/catch.hpp>
#include <string>

#include "grammar/call_grammar.h"
#include "grammar/schema.h"
#include "session/validation.h"
#include "text/json_text.h"

using namespace needle;

namespace {

const char* kAlarm =
    R"({"name":"set_alarm","parameters":{"type":"object","properties":{"hour":{"type":"integer"},"room":{"type":"string"},"note":{"type":"string"},"unit":{"type":"string","enum":["celsius","fahrenheit"]},"level":{"type":"number"},"on":{"type":"boolean"}},"required":["hour"]}})";

}  // namespace

TEST_CASE("a branch ends at the byte that leaves its value, not at a number's delimiter",
          "[protocol]") {
  // Measured on the engine (docs/PROTOCOL-NOTES.md item 2): small-crafted-0.5, TYPES tools, an
  // integer enum `minute` whose branch winner `0` runs on through `,"hour":` into the digits of
  // `hour` (24 tokens, 23 of them uncharged: returned = max_tokens + 23 from -n 45 on, where a
  // separate branch at `hour` would need 6 more tokens of budget).
  const grammar::CallGrammar g(grammar::BuildCallSchema({kAlarm}));
  grammar::GrammarState s = g.Start();
  REQUIRE(g.Feed(s, R"([{"name":"set_alarm","arguments":{"room":)"));
  REQUIRE(g.ArgumentValueStart(s) >= 0);
  grammar::GrammarState copy;
  grammar::CallGrammar::CopyState(s, &copy);
  CHECK_FALSE(g.FeedClosesArgumentValue(s, "\"kit"));
  CHECK(g.FeedClosesArgumentValue(copy, "\"kitchen\""));  // the closing quote alone: done
  // `","` closes the string and opens the next key: the value was closed inside the token.
  CHECK(g.FeedClosesArgumentValue(s, "\",\""));
  CHECK(s.depth > 3);
  REQUIRE(g.Feed(s, R"(hour":)"));
  CHECK_FALSE(g.FeedClosesArgumentValue(s, "7"));  // a number stays open until a delimiter
  // ... and its `,` goes straight on to the next key: the branch goes on.
  CHECK_FALSE(g.FeedClosesArgumentValue(s, ",\""));
  REQUIRE(g.Feed(s, R"(on":)"));
  CHECK(g.FeedClosesArgumentValue(s, "true"));
  CHECK(g.FeedClosesArgumentValue(s, "x"));  // rejected bytes end the branch too
  // A number closed by the object's `}`: done (the arguments object is closed).
  s = g.Start();
  REQUIRE(g.Feed(s, R"([{"name":"set_alarm","arguments":{"hour":)"));
  CHECK_FALSE(g.FeedClosesArgumentValue(s, "12"));
  CHECK(g.FeedClosesArgumentValue(s, "}"));
  // An integer enum literal: complete after `0` for the grammar, still open for the engine.
  const grammar::CallGrammar ge(grammar::BuildCallSchema(
      {R"({"name":"set_alarm","parameters":{"type":"object","properties":{"minute":{"type":"integer","enum":[0,15,30,45]},"hour":{"type":"integer"}},"required":["minute"]}})"}));
  s = ge.Start();
  REQUIRE(ge.Feed(s, R"([{"name":"set_alarm","arguments":{"minute":)"));
  REQUIRE(ge.ArgumentValueStart(s) >= 0);
  CHECK_FALSE(ge.FeedClosesArgumentValue(s, "0"));
  CHECK_FALSE(ge.FeedClosesArgumentValue(s, ","));
}

TEST_CASE("an object or array value's branch ends at its closing byte only as a token's last",
          "[protocol]") {
  // Measured on the engine (docs/PROTOCOL-NOTES.md item 2): the demo model, `send_message` with a
  // nested `state` object: the branch at `"state":` runs through `},` and `"unit":"fahrenheit`
  // and ends at the quote closing that string (16 tokens, 15 uncharged); a string closing inside
  // the nested object does not end it.
  const grammar::CallGrammar g(grammar::BuildCallSchema(
      {R"({"name":"send_message","parameters":{"type":"object","properties":{"state":{"type":"object","properties":{"city":{"type":"string"},"country":{"type":"string"}}},"zones":{"type":"array","items":{"type":"string"}},"unit":{"type":"string"}}}})"}));
  const std::string head = R"([{"name":"send_message","arguments":{)";
  grammar::GrammarState s = g.Start();
  REQUIRE(g.Feed(s, head + R"("state":)"));
  REQUIRE(g.ArgumentValueStart(s) >= 0);
  CHECK_FALSE(g.FeedClosesArgumentValue(s, "{\"city\":\"Lagos\",\""));  // nested string closed
  CHECK_FALSE(g.FeedClosesArgumentValue(s, "country\":\"NG"));
  CHECK_FALSE(g.FeedClosesArgumentValue(s, "\"},\""));  // the object's `}` with more bytes
  CHECK_FALSE(g.FeedClosesArgumentValue(s, "unit\":\"f"));
  CHECK(g.FeedClosesArgumentValue(s, "\""));
  // The object's `}` as the token's last byte ends the branch; `}}` closes the arguments too.
  for (const char* close : {"}", "}}"}) {
    s = g.Start();
    REQUIRE(g.Feed(s, head + R"("state":{"city":"x")"));
    CHECK(g.FeedClosesArgumentValue(s, close));
  }
  // The same for an array value.
  s = g.Start();
  REQUIRE(g.Feed(s, head + R"("zones":["a")"));
  grammar::GrammarState copy;
  grammar::CallGrammar::CopyState(s, &copy);
  CHECK_FALSE(g.FeedClosesArgumentValue(s, "],"));
  CHECK(g.FeedClosesArgumentValue(copy, "]"));
}

TEST_CASE("a nested object's value starts and ends like a top-level one, an array's does not",
          "[protocol]") {
  // Measured on the engine (docs/PROTOCOL-NOTES.md item 18): the demo model branches at the
  // nested `city` value of `"state":{"city":`, and that branch ends where the value leaves the
  // nested object.
  const grammar::CallGrammar g(grammar::BuildCallSchema(
      {R"({"name":"send_message","parameters":{"type":"object","properties":{"state":{"type":"object","properties":{"city":{"type":"string"},"n":{"type":"integer"}}},"zones":{"type":"array","items":{"type":"object","properties":{"city":{"type":"string"}}}}}}})"}));
  const std::string head = R"([{"name":"send_message","arguments":{)";
  grammar::GrammarState s = g.Start();
  REQUIRE(g.Feed(s, head + R"("state":{"city":)"));
  REQUIRE(g.ArgumentValueStart(s) >= 0);
  const int object_depth = s.depth;
  CHECK(object_depth == 4);
  grammar::GrammarState top_rule;
  grammar::CallGrammar::CopyState(s, &top_rule);
  CHECK_FALSE(g.FeedClosesArgumentValue(s, "\"Par", object_depth));
  CHECK(g.FeedClosesArgumentValue(s, "is\",\"", object_depth));  // left the nested value
  // Judged at the arguments object's depth the same bytes are still inside its `state` value.
  CHECK_FALSE(g.FeedClosesArgumentValue(top_rule, "\"Paris\",\"", 3));
  // A number in the nested object is closed by the object's `}` (last byte) as at the top.
  s = g.Start();
  REQUIRE(g.Feed(s, head + R"("state":{"n":)"));
  REQUIRE(g.ArgumentValueStart(s) >= 0);
  CHECK_FALSE(g.FeedClosesArgumentValue(s, "12", 4));
  CHECK(g.FeedClosesArgumentValue(s, "}", 4));
  // Inside an array (an object item): no value start.
  s = g.Start();
  REQUIRE(g.Feed(s, head + R"("zones":[{"city":)"));
  CHECK(g.ArgumentValueStart(s) == -1);
  CHECK(grammar::CallGrammar::ObjectChainDepth(s, s.depth) == -1);
}

TEST_CASE("validation: engine grounding form, length floors, generation order, enums skipped",
          "[protocol]") {
  const grammar::CallSchema schema = grammar::BuildCallSchema({kAlarm});
  CHECK(session::GroundingForm("Living-Room_A b") == "livingroomab");
  // Generation order (not alphabetical): room before hour before note.
  const auto v = session::Validate(
      R"([{"name":"set_alarm","arguments":{"room":"garage","hour":9,"note":"xyz","unit":"fahrenheit","on":true}}])",
      "Wake me at 7 in the kitchen", "Wake me at 7 in the kitchen", schema);
  CHECK(v.ungrounded ==
        std::vector<std::string>{"set_alarm.room", "set_alarm.hour", "set_alarm.note"});
  // Strings shorter than 3 characters (after normalization) are never flagged; numbers are.
  const auto short_values = session::Validate(
      R"([{"name":"set_alarm","arguments":{"room":"ab","note":"a-b ","hour":5}}])", "hello",
      "hello", schema);
  CHECK(short_values.ungrounded == std::vector<std::string>{"set_alarm.hour"});
  // Normalization on both sides: ' ', '-', '_' deleted, ASCII lower-cased; numbers canonical.
  const auto grounded = session::Validate(
      R"([{"name":"set_alarm","arguments":{"room":"Living Room","hour":7,"level":2.50}}])",
      "turn the living-room to level 2.5 at 7", "turn the living-room to level 2.5 at 7", schema);
  CHECK(grounded.ungrounded.empty());
  // Grounding searches everything said since the reset; negation only this turn's input.
  const auto later = session::Validate(
      R"([{"name":"set_alarm","arguments":{"room":"garage","hour":7}}])",
      "don't wake me at 7 in the garage\n{\"ok\": true}\n", "{\"ok\": true}", schema);
  CHECK(later.ungrounded.empty());
  CHECK_FALSE(later.negation);
  const auto this_turn =
      session::Validate(R"([{"name":"set_alarm","arguments":{"room":"garage","hour":7}}])",
                        "wake me at 7\n", "don't wake me in the garage", schema);
  CHECK(this_turn.ungrounded == std::vector<std::string>{"set_alarm.room"});
  CHECK(this_turn.negation);
}

TEST_CASE("negation: the engine's phrases and exemptions", "[protocol]") {
  CHECK(session::QueryNegates("Don't call mom"));
  CHECK_FALSE(session::QueryNegates("never mind the rain"));  // "mind" after a phrase exempts
  CHECK(session::QueryNegates("I never said that"));
  CHECK_FALSE(session::QueryNegates("do not forget the milk"));
  CHECK_FALSE(session::QueryNegates("don't worry, set a timer"));
  CHECK_FALSE(session::QueryNegates("dont"));  // "dont " needs its space
  CHECK(session::QueryNegates("you must not be late"));
  CHECK(session::QueryNegates("make sure not to wake me"));
  CHECK_FALSE(session::QueryNegates("do not mindful"));  // prefix match: "mindful" exempts
  CHECK(session::QueryNegates("no longer needed"));
}

TEST_CASE("the engine's own JSON check of a finished call (text::ParseEngineJson)", "[protocol]") {
  using Kind = text::EngineJsonValue::Kind;
  // Read from the engine (fn 120): numbers are `-`? then any run of 0-9 + - . e E.
  for (const char* ok : {R"([{"name":"f","arguments":{"level":011}}])", "[ 1 , -, 3e+-. ]\n",
                         R"({"a":"x\qy","b":[true,false,null],"c":{}})", R"("\"")", "[]"}) {
    INFO(ok);
    CHECK(text::ParseEngineJson(ok).has_value());
  }
  for (const char* bad :
       {"", "[1,]", R"({"a":1,})", R"({"a" 1})", "[1] x", "tru", R"("abc)", "[", "x"}) {
    INFO(bad);
    CHECK_FALSE(text::ParseEngineJson(bad).has_value());
  }
  // Any value not starting with [ { " t f n is read as a number: `+` is one byte of it.
  CHECK(text::ParseEngineJson("[+]").has_value());
  const auto v = text::ParseEngineJson(R"([{"name":"f","arguments":{"k\u0041":"a\"b","n":1.50}}])");
  REQUIRE(v);
  REQUIRE(v->kind == Kind::kArray);
  const auto& args = v->items.at(0).members.at(1).value;
  REQUIRE(args.members.size() == 2);
  CHECK(text::DecodeJsonString(args.members[0].key) == "kA");
  CHECK(text::DecodeJsonString(args.members[0].value.text) == "a\"b");
  CHECK(args.members[1].value.kind == Kind::kNumber);
  CHECK(args.members[1].value.text == "1.50");
  // Nesting beyond 256 is refused, not a stack overflow.
  CHECK_FALSE(text::ParseEngineJson(std::string(100000, '[') + std::string(100000, ']')));
  CHECK(text::ParseEngineJson(std::string(200, '[') + std::string(200, ']')));
}
