// JSON-as-text helpers: whitespace stripping outside strings, validation, array splitting.
#include "text/json_text.h"

#include <algorithm>
#include <nlohmann/json.hpp>

#include "base/error.h"

namespace needle::text {

std::string StripJsonWhitespace(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      out.push_back(c);
      if (c == '\\' && i + 1 < text.size()) {
        out.push_back(text[++i]);  // the escaped character never closes the string
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
      out.push_back(c);
    } else if (c != ' ' && c != '\t' && c != '\r' && c != '\n') {
      out.push_back(c);
    }
  }
  return out;
}

void ValidateJson(std::string_view text, std::string_view what) {
  try {
    const auto value = nlohmann::json::parse(text.begin(), text.end());
    (void)value;
  } catch (const nlohmann::json::exception& e) {
    Fail<InvalidInput>("{}: invalid JSON: {}", what, e.what());
  }
}

namespace {
// In a minified array or object s (its closing bracket last): the index of the first ',' at or
// after `from` that is outside strings and nested values, or s.size() - 1 if there is none.
size_t NextTopLevelComma(std::string_view s, size_t from) {
  int depth = 0;
  bool in_string = false;
  size_t i = from;
  for (; i + 1 < s.size(); ++i) {
    const char c = s[i];
    if (in_string) {
      if (c == '\\') {
        ++i;
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '{' || c == '[') {
      ++depth;
    } else if (c == '}' || c == ']') {
      --depth;
    } else if (c == ',' && depth == 0) {
      return i;
    }
  }
  return i;
}
}  // namespace

std::vector<std::string_view> TopLevelArrayElements(std::string_view s, std::string_view what) {
  if (s.size() < 2 || s.front() != '[' || s.back() != ']') {
    Fail<InvalidInput>("{}: expected a JSON array of tools, got '{}'", what,
                       s.substr(0, std::min<size_t>(s.size(), 40)));
  }
  std::vector<std::string_view> out;
  size_t begin = 1;
  for (size_t i = NextTopLevelComma(s, 1); i + 1 < s.size(); i = NextTopLevelComma(s, begin)) {
    out.push_back(s.substr(begin, i - begin));
    begin = i + 1;
  }
  if (s.size() - 1 > begin) out.push_back(s.substr(begin, s.size() - 1 - begin));
  return out;
}

std::vector<JsonMember> ObjectMembers(std::string_view s, std::string_view what) {
  if (s.size() < 2 || s.front() != '{' || s.back() != '}') {
    Fail<InvalidInput>("{}: expected a JSON object, got '{}'", what,
                       s.substr(0, std::min<size_t>(s.size(), 40)));
  }
  std::vector<JsonMember> out;
  size_t i = 1;
  while (i + 1 < s.size()) {
    // "key":value, with the key a string (valid JSON: it starts here and ends at its quote).
    if (s[i] != '"') Fail<InvalidInput>("{}: expected a key at byte {}", what, i);
    size_t end = i + 1;
    while (end < s.size() && s[end] != '"') end += s[end] == '\\' ? 2 : 1;
    if (end + 1 >= s.size() || s[end + 1] != ':')
      Fail<InvalidInput>("{}: expected ':' after the key at byte {}", what, i);
    const std::string_view raw_key = s.substr(i, end + 1 - i);
    std::string key;
    try {
      key = nlohmann::json::parse(raw_key.begin(), raw_key.end()).get<std::string>();
    } catch (const nlohmann::json::exception& e) {
      Fail<InvalidInput>("{}: invalid key {}: {}", what, raw_key, e.what());
    }
    // The value runs to the next ',' at depth 0 or to the closing brace.
    const size_t begin = end + 2;
    const size_t j = NextTopLevelComma(s, begin);
    out.push_back({std::move(key), s.substr(begin, j - begin)});
    i = j + 1;
  }
  return out;
}

std::vector<std::string> ToolInventory(std::string_view tools_text, std::string_view what) {
  const std::string minified = StripJsonWhitespace(tools_text);
  if (minified.empty()) return {};
  ValidateJson(tools_text, what);
  std::vector<std::string> tools;
  size_t index = 0;
  for (std::string_view element : TopLevelArrayElements(minified, what)) {
    const auto j = nlohmann::json::parse(element.begin(), element.end());
    if (!j.is_object())
      Fail<InvalidInput>("{}: tool #{} is a JSON {} ({}), expected an object", what, index,
                         j.type_name(), element.substr(0, std::min<size_t>(element.size(), 40)));
    if (const auto name = j.find("name"); name != j.end()) {
      if (!name->is_string())
        Fail<InvalidInput>("{}: tool #{}: \"name\" is a JSON {} ({}), expected a string", what,
                           index, name->type_name(),
                           name->dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
      tools.emplace_back(element);
    }
    ++index;
  }
  return tools;
}

std::string JoinToolsText(const std::vector<std::string_view>& tools) {
  std::string out = "[";
  for (size_t i = 0; i < tools.size(); ++i) {
    if (i) out += ',';
    out += tools[i];
  }
  return out + "]";
}

}  // namespace needle::text
