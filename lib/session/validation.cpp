// Validation block of the reply envelope: grounding of argument values and query negation.
#include "session/validation.h"

#include "text/json_text.h"

namespace needle::session {

namespace {

char LowerAscii(char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; }

// Number text as the engine canonicalizes it: with a '.', trailing '0's and then a trailing '.'
// are dropped ("2.50" -> "2.5", "3.0" -> "3").
std::string CanonicalNumber(std::string s) {
  if (s.find('.') != std::string::npos) {
    while (!s.empty() && s.back() == '0') s.pop_back();
    if (!s.empty() && s.back() == '.') s.pop_back();
  }
  return s;
}

// The arguments node of tool `name`, or -1.
int32_t ArgumentsNode(const grammar::CallSchema& schema, std::string_view name) {
  for (const auto& t : schema.tools)
    if (t.name == name) return t.arguments;
  return -1;
}

bool EnumArgument(const grammar::CallSchema& schema, int32_t args_node, std::string_view key) {
  if (args_node < 0) return false;
  const grammar::SchemaNode& n = schema.nodes[args_node];
  for (size_t i = 0; i < n.keys.size(); ++i)
    if (n.keys[i] == key) return schema.nodes[n.key_nodes[i]].has_enum;
  return false;
}

}  // namespace

std::string GroundingForm(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s)
    if (c != ' ' && c != '-' && c != '_') out += LowerAscii(c);
  return out;
}

Validation Validate(std::string_view calls_json, std::string_view said, std::string_view query,
                    const grammar::CallSchema& schema) {
  using Kind = text::EngineJsonValue::Kind;
  Validation v;
  const std::string q = GroundingForm(said);
  // Read as the engine reads the call (its number and string syntax is looser than JSON); values
  // keep their spelling, members their generation order.
  const auto calls = text::ParseEngineJson(calls_json);
  if (calls && calls->kind == Kind::kArray) {
    for (const auto& call : calls->items) {
      if (call.kind != Kind::kObject) continue;
      std::string name;
      const text::EngineJsonValue* args = nullptr;
      for (const auto& [key, value] : call.members) {
        const std::string k = text::DecodeJsonString(key);
        if (k == "name" && value.kind == Kind::kString) name = text::DecodeJsonString(value.text);
        if (k == "arguments") args = &value;
      }
      if (!args || args->kind != Kind::kObject) continue;
      const int32_t node = ArgumentsNode(schema, name);
      for (const auto& [written_key, value] : args->members) {
        const std::string key = text::DecodeJsonString(written_key);
        if (EnumArgument(schema, node, key)) continue;
        std::string form;
        size_t min_length = 1;
        if (value.kind == Kind::kString) {
          form = GroundingForm(text::DecodeJsonString(value.text));
          min_length = 3;
        } else if (value.kind == Kind::kNumber) {
          form = GroundingForm(CanonicalNumber(std::string(value.text)));
        } else {
          continue;
        }
        if (form.size() < min_length) continue;
        if (q.find(form) == std::string::npos) {
          std::string entry = name;
          entry.append(".").append(key);
          v.ungrounded.push_back(std::move(entry));
        }
      }
    }
  }
  v.negation = QueryNegates(query);
  return v;
}

bool QueryNegates(std::string_view query) {
  std::string q(query);
  for (char& c : q) c = LowerAscii(c);
  static constexpr std::string_view kPhrases[] = {
      "don't",    "dont ",   "do not",    "never",      "no longer",
      "must not", "mustn't", "shouldn't", "should not", "make sure not"};
  static constexpr std::string_view kExempt[] = {"worry", "hesitate", "forget", "mind"};
  for (std::string_view phrase : kPhrases) {
    for (size_t at = q.find(phrase); at != std::string::npos; at = q.find(phrase, at + 1)) {
      size_t rest = at + phrase.size();
      while (rest < q.size() && q[rest] == ' ') ++rest;
      bool exempt = false;
      for (std::string_view w : kExempt) exempt = exempt || q.compare(rest, w.size(), w) == 0;
      if (!exempt) return true;
    }
  }
  return false;
}

}  // namespace needle::session
