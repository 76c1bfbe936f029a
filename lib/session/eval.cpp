// ParseCalls / SameCalls: the calls schema and the order-free exact comparison.
#include "session/eval.h"

#include <fmt/format.h>

#include "base/error.h"

namespace needle::session {

std::vector<Call> ParseCalls(std::string_view text, std::string_view what) {
  nlohmann::json doc;
  try {
    doc = nlohmann::json::parse(text.begin(), text.end());
  } catch (const nlohmann::json::exception& e) {
    Fail<InvalidInput>("{}: invalid JSON: {}", what, e.what());
  }
  if (!doc.is_array())
    Fail<InvalidInput>("{}: a JSON {}, expected an array of calls {{name, arguments}}", what,
                       doc.type_name());
  std::vector<Call> calls;
  for (size_t i = 0; i < doc.size(); ++i) {
    const nlohmann::json& c = doc[i];
    if (!c.is_object())
      Fail<InvalidInput>("{}: call #{} is a JSON {}, expected an object {{name, arguments}}", what,
                         i, c.type_name());
    Call call;
    bool named = false;
    for (const auto& [key, value] : c.items()) {
      if (key == "name") {
        if (!value.is_string())
          Fail<InvalidInput>("{}: call #{}: \"name\" is a JSON {}, expected a string", what, i,
                             value.type_name());
        call.name = value.get<std::string>();
        named = true;
      } else if (key == "arguments") {
        if (!value.is_object())
          Fail<InvalidInput>("{}: call #{}: \"arguments\" is a JSON {}, expected an object", what,
                             i, value.type_name());
        call.arguments = value;
      } else {
        Fail<InvalidInput>("{}: call #{}: unknown key \"{}\" (known: name, arguments)", what, i,
                           key);
      }
    }
    if (!named) Fail<InvalidInput>("{}: call #{} has no \"name\"", what, i);
    calls.push_back(std::move(call));
  }
  return calls;
}

bool SameCalls(const std::vector<Call>& a, const std::vector<Call>& b) {
  if (a.size() != b.size()) return false;
  // Each call of `a` takes the first equal call of `b` not taken yet (equality is an
  // equivalence, so greedy matching finds a pairing whenever one exists).
  std::vector<bool> taken(b.size(), false);
  for (const Call& x : a) {
    bool found = false;
    for (size_t j = 0; j < b.size() && !found; ++j) {
      if (!taken[j] && b[j].name == x.name && b[j].arguments == x.arguments) {
        taken[j] = true;
        found = true;
      }
    }
    if (!found) return false;
  }
  return true;
}

nlohmann::ordered_json CallsJson(const std::vector<Call>& calls) {
  nlohmann::ordered_json out = nlohmann::ordered_json::array();
  for (const Call& c : calls) {
    nlohmann::ordered_json call;
    call["name"] = c.name;
    call["arguments"] = nlohmann::ordered_json::parse(c.arguments.dump());
    out.push_back(std::move(call));
  }
  return out;
}

}  // namespace needle::session
