// ParseRequest: the JSONL request schema, checked key by key.
#include "session/request.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <nlohmann/json.hpp>
#include <vector>

#include "base/error.h"
#include "text/json_text.h"

namespace needle::session {

namespace {

nlohmann::json ParseValue(std::string_view text) {
  return nlohmann::json::parse(text.begin(), text.end());
}

}  // namespace

Request ParseRequest(std::string_view line, bool with_expected) {
  nlohmann::json doc;
  try {
    doc = ParseValue(line);
  } catch (const nlohmann::json::exception& e) {
    Fail<InvalidInput>("invalid JSON: {}", e.what());
  }
  if (!doc.is_object())
    Fail<InvalidInput>("expected a JSON object, got a JSON {}", doc.type_name());
  const std::string minified = text::StripJsonWhitespace(line);
  const std::vector<text::JsonMember> members = text::ObjectMembers(minified, "request");
  const std::array<std::string_view, 5> known = {"query", "tools", "system", "max_tokens",
                                                 "expected"};
  Request r;
  bool has_query = false;
  std::vector<std::string_view> seen;
  for (const text::JsonMember& m : members) {
    const bool is_known = std::find(known.begin(), known.end(), m.key) != known.end() &&
                          (with_expected || m.key != "expected");
    if (!is_known)
      Fail<InvalidInput>("unknown key \"{}\" (known: query, tools, system, max_tokens{})", m.key,
                         with_expected ? ", expected" : "");
    if (std::find(seen.begin(), seen.end(), m.key) != seen.end())
      Fail<InvalidInput>("duplicate key \"{}\"", m.key);
    seen.push_back(m.key);
    const nlohmann::json v = ParseValue(m.value);
    if (m.key == "query") {
      if (!v.is_string())
        Fail<InvalidInput>("\"query\" is a JSON {}, expected a string", v.type_name());
      r.query = v.get<std::string>();
      has_query = true;
    } else if (m.key == "system") {
      if (!v.is_string())
        Fail<InvalidInput>("\"system\" is a JSON {}, expected a string", v.type_name());
      r.system = v.get<std::string>();
    } else if (m.key == "tools") {
      if (!v.is_array())
        Fail<InvalidInput>("\"tools\" is a JSON {}, expected an array of tool objects",
                           v.type_name());
      r.tools = std::string(m.value);
    } else if (m.key == "expected") {
      if (!v.is_array())
        Fail<InvalidInput>(
            "\"expected\" is a JSON {}, expected an array of calls {{name, arguments}}",
            v.type_name());
      r.expected = std::string(m.value);
    } else {  // max_tokens
      if (!v.is_number_integer())
        Fail<InvalidInput>("\"max_tokens\" is {}, expected a whole number >= 0",
                           std::string(m.value));
      if (v.is_number_unsigned()) {
        const uint64_t n = v.get<uint64_t>();
        if (n > static_cast<uint64_t>(INT64_MAX))
          Fail<InvalidInput>("\"max_tokens\" {} is too large", n);
        r.max_tokens = static_cast<int64_t>(n);
      } else {
        r.max_tokens = v.get<int64_t>();
      }
      if (*r.max_tokens < 0)
        Fail<InvalidInput>("\"max_tokens\" must be >= 0 (got {})", *r.max_tokens);
    }
  }
  if (!has_query) Fail<InvalidInput>("missing \"query\" (a string)");
  if (with_expected && !r.expected) Fail<InvalidInput>("missing \"expected\" (an array of calls)");
  return r;
}

}  // namespace needle::session
