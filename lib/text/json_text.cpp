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

namespace {

// The engine's validator (fn 120) as a recursive-descent reader over [p, end).
class EngineJsonReader {
 public:
  explicit EngineJsonReader(std::string_view t) : p_(t.data()), end_(t.data() + t.size()) {}

  bool Value(EngineJsonValue* v, int depth) {
    SkipSpace();
    if (p_ >= end_ || depth > 256) return false;
    const char* start = p_;
    switch (*p_) {
      case '{':
        v->kind = EngineJsonValue::Kind::kObject;
        return Elements(v, start, '}', [&] {
          SkipSpace();
          std::string_view key;
          if (!String(&key)) return false;
          SkipSpace();
          if (p_ >= end_ || *p_ != ':') return false;
          ++p_;
          EngineJsonValue member;
          if (!Value(&member, depth + 1)) return false;
          v->members.push_back({key, std::move(member)});
          return true;
        });
      case '[':
        v->kind = EngineJsonValue::Kind::kArray;
        return Elements(v, start, ']', [&] {
          EngineJsonValue item;
          if (!Value(&item, depth + 1)) return false;
          v->items.push_back(std::move(item));
          return true;
        });
      case '"':
        v->kind = EngineJsonValue::Kind::kString;
        return String(&v->text);
      case 't':
        return Literal("true", EngineJsonValue::Kind::kTrue, v);
      case 'f':
        return Literal("false", EngineJsonValue::Kind::kFalse, v);
      case 'n':
        return Literal("null", EngineJsonValue::Kind::kNull, v);
      default: {
        v->kind = EngineJsonValue::Kind::kNumber;
        if (*p_ == '-') ++p_;
        while (p_ < end_ && NumberByte(*p_)) ++p_;
        v->text = std::string_view(start, static_cast<size_t>(p_ - start));
        return p_ > start;
      }
    }
  }

  bool AtEnd() {
    SkipSpace();
    return p_ == end_;
  }

 private:
  static bool NumberByte(char c) {
    return (c >= '0' && c <= '9') || c == '+' || c == '-' || c == '.' || c == 'e' || c == 'E';
  }
  void SkipSpace() {
    while (p_ < end_ && (*p_ == ' ' || *p_ == '\t' || *p_ == '\n' || *p_ == '\r')) ++p_;
  }
  bool String(std::string_view* text) {
    if (p_ >= end_ || *p_ != '"') return false;
    const char* start = ++p_;
    while (p_ < end_) {
      if (*p_ == '\\') {
        if (p_ + 1 >= end_) return false;
        p_ += 2;
      } else if (*p_ == '"') {
        *text = std::string_view(start, static_cast<size_t>(p_ - start));
        ++p_;
        return true;
      } else {
        ++p_;
      }
    }
    return false;
  }
  bool Literal(std::string_view word, EngineJsonValue::Kind kind, EngineJsonValue* v) {
    if (static_cast<size_t>(end_ - p_) < word.size() || std::string_view(p_, word.size()) != word)
      return false;
    v->kind = kind;
    v->text = std::string_view(p_, word.size());
    p_ += word.size();
    return true;
  }
  // An object or array from its opening byte at p_: empty, or elements (element() reads one)
  // separated by ',' up to `close`.
  template <class Element>
  bool Elements(EngineJsonValue* v, const char* start, char close, const Element& element) {
    ++p_;
    SkipSpace();
    if (p_ < end_ && *p_ == close) return Close(v, start);
    for (;;) {
      if (!element()) return false;
      SkipSpace();
      if (p_ >= end_) return false;
      if (*p_ == close) return Close(v, start);
      if (*p_ != ',') return false;
      ++p_;
    }
  }
  bool Close(EngineJsonValue* v, const char* start) {
    ++p_;
    v->text = std::string_view(start, static_cast<size_t>(p_ - start));
    return true;
  }

  const char* p_;
  const char* end_;
};

}  // namespace

std::optional<EngineJsonValue> ParseEngineJson(std::string_view text) {
  EngineJsonReader r(text);
  EngineJsonValue v;
  if (!r.Value(&v, 0) || !r.AtEnd()) return std::nullopt;
  return v;
}

std::string DecodeJsonString(std::string_view written) {
  if (written.find('\\') == std::string_view::npos) return std::string(written);
  std::string quoted;
  quoted.reserve(written.size() + 2);
  quoted.push_back('"');
  quoted.append(written);
  quoted.push_back('"');
  const auto j = nlohmann::json::parse(quoted, nullptr, false);
  return j.is_string() ? j.get<std::string>() : std::string(written);
}

}  // namespace needle::text
