// Tool JSON schema -> SchemaNode tree (only the keywords the call grammar enforces).
#include "grammar/schema.h"

#include <cmath>
#include <nlohmann/json.hpp>
#include <optional>

#include "base/error.h"

namespace needle::grammar {

namespace {

using Json = nlohmann::json;

uint8_t TypeBitOf(const std::string& t) {
  if (t == "string") return kTypeString;
  if (t == "integer") return kTypeInteger;
  if (t == "number") return kTypeNumber;
  if (t == "boolean") return kTypeBoolean;
  if (t == "null") return kTypeNull;
  if (t == "object") return kTypeObject;
  if (t == "array") return kTypeArray;
  return 0;
}

// A length/count keyword (maxLength, minItems, maxItems): absent or not a number -> fallback;
// otherwise it must be a whole number in [0, kMaxSchemaLimit] (InvalidInput naming the tool and
// the property path).
int64_t LimitOr(const Json& j, const char* key, int64_t fallback, const std::string& where) {
  auto it = j.find(key);
  if (it == j.end() || !it->is_number()) return fallback;
  const bool ok = it->is_number_unsigned() ? it->get<uint64_t>() <= kMaxSchemaLimit
                  : it->is_number_integer()
                      ? false
                      : std::isfinite(it->get<double>()) && it->get<double>() >= 0 &&
                            it->get<double>() <= double(kMaxSchemaLimit) &&
                            std::floor(it->get<double>()) == it->get<double>();
  if (!ok)
    Fail<InvalidInput>("{}: \"{}\": {} is not a whole number in [0, {}]", where, key, it->dump(),
                       kMaxSchemaLimit);
  return it->is_number_unsigned() ? static_cast<int64_t>(it->get<uint64_t>())
                                  : static_cast<int64_t>(it->get<double>());
}

// minimum / maximum / exclusiveMinimum / exclusiveMaximum: a number sets the bound (a numeric
// exclusive one, draft 6+, makes it strict; the tighter bound wins), `true` (draft 4) makes
// minimum / maximum strict. Values that are not finite numbers are ignored.
void ReadRange(const Json& j, SchemaNode* n) {
  auto number = [&](const char* key, double* out) {
    auto it = j.find(key);
    if (it == j.end() || !it->is_number() || !std::isfinite(it->get<double>())) return false;
    *out = it->get<double>();
    return true;
  };
  auto flag = [&](const char* key) {
    auto it = j.find(key);
    return it != j.end() && it->is_boolean() && it->get<bool>();
  };
  double v;
  if (number("minimum", &v)) n->minimum = v, n->exclusive_minimum = flag("exclusiveMinimum");
  if (number("maximum", &v)) n->maximum = v, n->exclusive_maximum = flag("exclusiveMaximum");
  if (number("exclusiveMinimum", &v) && v >= n->minimum)
    n->minimum = v, n->exclusive_minimum = true;
  if (number("exclusiveMaximum", &v) && v <= n->maximum)
    n->maximum = v, n->exclusive_maximum = true;
  n->has_range = std::isfinite(n->minimum) || std::isfinite(n->maximum);
  if (number("multipleOf", &v) && v > 0) n->multiple_of = v;
}

// The engine's implied ranges (its schema compiler, fn 102): an integer or number property with
// neither minimum nor maximum gets [0, 100] when its name contains "level", "brightness" or
// "percent" or is "volume", [1, 5] when it is "rating", and a minimum of 0 when it contains
// "minutes", "seconds", "hours", "duration" or "count" (names compared as written).
void ImplyRange(std::string_view name, SchemaNode* n) {
  if ((n->types != kTypeInteger && n->types != kTypeNumber) || std::isfinite(n->minimum) ||
      std::isfinite(n->maximum))
    return;
  auto has = [&](std::string_view w) { return name.find(w) != std::string_view::npos; };
  if (has("level") || has("brightness") || has("percent") || name == "volume") {
    n->minimum = 0, n->maximum = 100;
  } else if (name == "rating") {
    n->minimum = 1, n->maximum = 5;
  } else if (has("minutes") || has("seconds") || has("hours") || has("duration") || has("count")) {
    n->minimum = 0;
  } else {
    return;
  }
  n->exclusive_minimum = n->exclusive_maximum = false;
  n->has_range = true;
}

// The official engine's expression for a string `format` (its schema compiler's table, read from
// the wasm's data), checked when the value closes; empty = a format it does not check.
std::string_view EngineFormatRegex(std::string_view format) {
  static constexpr std::pair<std::string_view, std::string_view> kTable[] = {
      {"ipv4", R"(^[0-9]{1,3}([.][0-9]{1,3}){3}$)"},
      {"date", R"(^[0-9]{4}-[0-9]{2}-[0-9]{2}$)"},
      {"uuid", R"(^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$)"},
      {"time", R"(^[0-9]{2}:[0-9]{2}:[0-9]{2}([.][0-9]+)?([Zz]|[+-][0-9]{2}:[0-9]{2})?$)"},
      {"email", R"(^[^@ ]+@[^@ ]+[.][^@ ]+$)"},
      {"ipv6", R"(^[0-9A-Fa-f.]*:[0-9A-Fa-f.:]*$)"},
      {"hostname",
       R"(^[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?([.][A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*$)"},
      {"date-time",
       R"(^[0-9]{4}-[0-9]{2}-[0-9]{2}[Tt][0-9]{2}:[0-9]{2}:[0-9]{2}([.][0-9]+)?([Zz]|[+-][0-9]{2}:[0-9]{2})$)"},
      {"duration",
       R"(^P([0-9]+W|([0-9]+Y)?([0-9]+M)?([0-9]+D)?(T([0-9]+H)?([0-9]+M)?([0-9]+([.][0-9]+)?S)?)?)$)"},
  };
  for (const auto& [name, regex] : kTable)
    if (name == format) return regex;
  return {};
}

class Builder {
 public:
  explicit Builder(CallSchema* out) : out_(out) {}

  // `pattern` (a string), else a regular `format`: compiled into out_->patterns; unsupported
  // expressions are left unpruned.
  void ReadPattern(const Json& j, SchemaNode* n) {
    auto add = [&](std::optional<Pattern> p) {
      if (!p) return int32_t{-1};
      out_->patterns.push_back(std::move(*p));
      return static_cast<int32_t>(out_->patterns.size() - 1);
    };
    if (auto it = j.find("pattern"); it != j.end() && it->is_string()) {
      n->pattern = n->close_pattern = add(Pattern::Compile(it->get<std::string>()));
    } else if (auto f = j.find("format"); f != j.end() && f->is_string()) {
      n->pattern = add(Pattern::ForFormat(f->get<std::string>()));
      const std::string_view engine = EngineFormatRegex(f->get<std::string>());
      if (!engine.empty()) n->close_pattern = add(Pattern::Compile(engine));
    }
  }

  // Appends the node for schema `j` (and its children); returns its index.
  // `where` names the node in errors: "tool 'set_timer' property 'minutes'".
  // `name`: the property's key (empty for tool arguments and array items).
  int32_t Add(const Json& j, int depth, const std::string& where, std::string_view name = {}) {
    const int32_t index = static_cast<int32_t>(out_->nodes.size());
    out_->nodes.emplace_back();
    if (!j.is_object() || depth > 32) return index;
    SchemaNode n;
    if (auto t = j.find("type"); t != j.end()) {
      if (t->is_string()) n.types = TypeBitOf(t->get<std::string>());
      if (t->is_array())
        for (const Json& e : *t)
          if (e.is_string()) n.types |= TypeBitOf(e.get<std::string>());
    }
    const Json* values = nullptr;
    Json const_holder;
    if (auto e = j.find("enum"); e != j.end() && e->is_array() && !e->empty()) values = &*e;
    if (auto c = j.find("const"); c != j.end()) {
      const_holder = Json::array({*c});
      values = &const_holder;
    }
    if (values) {
      n.has_enum = true;
      for (const Json& v : *values) {
        // Keep only values the declared type allows.
        uint8_t bit = v.is_string()           ? kTypeString
                      : v.is_number_integer() ? kTypeInteger | kTypeNumber
                      : v.is_number()         ? kTypeNumber
                      : v.is_boolean()        ? kTypeBoolean
                      : v.is_null()           ? kTypeNull
                                              : 0;
        if (n.types && !(n.types & bit)) continue;
        if (bit) n.enum_literals.push_back(v.dump());
      }
      if (n.enum_literals.size() > kMaxKeys)
        Fail<InvalidInput>("{}: {} enum values, the call grammar supports at most {}", where,
                           n.enum_literals.size(), kMaxKeys);
    }
    n.max_length = LimitOr(j, "maxLength", -1, where);
    n.min_length = LimitOr(j, "minLength", 0, where);
    ReadRange(j, &n);
    if (!name.empty()) ImplyRange(name, &n);
    ReadPattern(j, &n);
    if (auto p = j.find("properties"); p != j.end() && p->is_object() && !p->empty()) {
      if (!n.types) n.types = kTypeObject;
      n.open_object = false;
      if (p->size() > kMaxKeys)
        Fail<InvalidInput>("{}: {} properties, the call grammar supports at most {}", where,
                           p->size(), kMaxKeys);
      for (auto it = p->begin(); it != p->end(); ++it) {
        n.keys.push_back(it.key());
        n.key_nodes.push_back(-1);  // filled below (children are appended after this node)
      }
      if (auto r = j.find("required"); r != j.end() && r->is_array())
        for (const Json& k : *r)
          if (k.is_string())
            for (size_t i = 0; i < n.keys.size(); ++i)
              if (n.keys[i] == k.get<std::string>()) n.required |= uint64_t{1} << i;
    }
    if (auto items = j.find("items"); items != j.end() && items->is_object()) n.items = -2;
    n.min_items = LimitOr(j, "minItems", 0, where);
    n.max_items = LimitOr(j, "maxItems", -1, where);
    out_->nodes[index] = n;
    // Children (indices stay valid: nodes are addressed by index, never by pointer).
    if (!out_->nodes[index].open_object) {
      const Json& props = j["properties"];
      for (size_t i = 0; i < out_->nodes[index].keys.size(); ++i) {
        const std::string& key = out_->nodes[index].keys[i];
        std::string child_where = where;
        child_where.append(" property '").append(key).append("'");
        const int32_t child = Add(props[key], depth + 1, child_where, key);
        out_->nodes[index].key_nodes[i] = child;
      }
    }
    if (out_->nodes[index].items == -2) {
      const int32_t child = Add(j["items"], depth + 1, where + " items");
      out_->nodes[index].items = child;
    }
    return index;
  }

 private:
  CallSchema* out_;
};

}  // namespace

CallSchema BuildCallSchema(const std::vector<std::string>& tool_objects) {
  CallSchema s;
  s.nodes.emplace_back();  // 0: any value
  Builder b(&s);
  if (tool_objects.size() > kMaxKeys)
    Fail<InvalidInput>("{} tools, the call grammar supports at most {}", tool_objects.size(),
                       kMaxKeys);
  for (const std::string& text : tool_objects) {
    const Json tool = Json::parse(text, nullptr, /*allow_exceptions=*/false);
    if (!tool.is_object() || !tool.contains("name") || !tool["name"].is_string()) continue;
    ToolSchema t;
    t.name = tool["name"].get<std::string>();
    auto params = tool.find("parameters");
    t.arguments = b.Add(params != tool.end() ? *params : Json::object(), 0,
                        "tool '" + t.name + "' parameters");
    // The arguments are always an object, even when the schema says nothing.
    s.nodes[t.arguments].types = kTypeObject;
    s.tools.push_back(std::move(t));
  }
  return s;
}

std::vector<std::string> StringEnumValues(const SchemaNode& node) {
  std::vector<std::string> out;
  if (!node.has_enum) return out;
  for (const std::string& lit : node.enum_literals) {
    const Json v = Json::parse(lit, nullptr, false);
    if (v.is_string()) out.push_back(v.get<std::string>());
  }
  return out;
}

}  // namespace needle::grammar
