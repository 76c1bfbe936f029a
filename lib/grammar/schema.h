// Tool schemas reduced to what the call grammar enforces (PROTOCOL.md section 3): per node the
// allowed JSON types, enum literals, string lengths, numeric ranges, object keys/required keys and
// array items (ranges, minLength, pattern and format only on request: CompatOptions).
#pragma once

#include <cmath>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "grammar/pattern.h"

namespace needle::grammar {

// Bits of SchemaNode::types. 0 means "any JSON value".
enum TypeBit : uint8_t {
  kTypeString = 1,
  kTypeInteger = 2,
  kTypeNumber = 4,  // integer or number with fraction/exponent
  kTypeBoolean = 8,
  kTypeNull = 16,
  kTypeObject = 32,
  kTypeArray = 64,
};

// Tools, properties per object and enum values per node the grammar tracks (bit masks); more is
// an error (BuildCallSchema), never a silent cut.
inline constexpr size_t kMaxKeys = 64;
// Largest maxLength / minLength / minItems / maxItems accepted.
inline constexpr uint64_t kMaxSchemaLimit = 0x7FFFFFFF;

struct SchemaNode {
  uint8_t types = 0;
  // enum / const: the allowed values as minified JSON literals (strings keep their quotes).
  bool has_enum = false;
  std::vector<std::string> enum_literals;
  int64_t max_length = -1;  // strings: characters; -1 = unbounded
  int64_t min_length = 0;   // strings: the closing quote is refused before this many characters
  // Numbers: minimum / maximum (exclusive when the flag is set; draft 4's boolean
  // exclusiveMinimum/Maximum and draft 6's numeric ones both read). Used, with min_length, only
  // under CompatOptions::enforce_value_limits: integers pruned digit by digit (no prefix that
  // cannot end in range), other numbers checked when they close.
  // Also set by the engine's implied ranges for some property names (schema.cpp ImplyRange).
  bool has_range = false;
  double minimum = -HUGE_VAL, maximum = HUGE_VAL;
  bool exclusive_minimum = false, exclusive_maximum = false;
  // Numbers: multipleOf (0 = none), checked when the value closes like the range: the quotient
  // must be within 1e-9 of an integer (the engine's test).
  double multiple_of = 0;
  // Strings: index into CallSchema::patterns of the node's `pattern` (or, without one, of its
  // `format` when that has a regular shape); -1 = none or not supported (then not pruned).
  int32_t pattern = -1;
  // The same for the engine's check when the string closes (CompatOptions::check_limits_at_close):
  // the `pattern`, or, without one, the engine's own expression for the `format` (its table:
  // date, time, date-time, duration, email, hostname, ipv4, ipv6, uuid); -1 = none.
  int32_t close_pattern = -1;
  // Objects: declared properties (first kMaxKeys), their schema nodes, required mask.
  // `open_object`: no properties declared, so any object is accepted.
  std::vector<std::string> keys;
  std::vector<int32_t> key_nodes;
  uint64_t required = 0;
  bool open_object = true;
  // Arrays.
  int32_t items = -1;  // -1 = any value
  int64_t min_items = 0, max_items = -1;
};

struct ToolSchema {
  std::string name;
  int32_t arguments = 0;  // node index of the arguments object
};

// All tools of one tools text; nodes[0] is the "any value" node.
struct CallSchema {
  std::vector<SchemaNode> nodes;
  std::vector<Pattern> patterns;
  std::vector<ToolSchema> tools;
};

// Builds the schema from the tool inventory (minified tool objects, text::ToolInventory). Tools
// without a usable "parameters.properties" object are schemaless (any arguments object).
// Throws InvalidInput naming the tool and property: more than kMaxKeys tools, properties or enum
// values; a length or item limit that is negative, fractional or above kMaxSchemaLimit.
CallSchema BuildCallSchema(const std::vector<std::string>& tool_objects);

// The enum values of a string-enum node as plain strings (unquoted); empty if none.
std::vector<std::string> StringEnumValues(const SchemaNode& node);

}  // namespace needle::grammar
