// JSON handled as text, the way the engine renders it: whitespace outside strings deleted, never
// parsed and re-serialized (escapes, key order and number spellings stay as written).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace needle::text {

// `text` with every space, tab, CR and LF outside JSON strings deleted. String contents
// (including escapes such as \" and \\) are copied unchanged. Works on any text: no validation.
std::string StripJsonWhitespace(std::string_view text);

// Throws InvalidInput "<what>: invalid JSON: <parser message>" if `text` is not one JSON value.
void ValidateJson(std::string_view text, std::string_view what);

// The elements of a top-level JSON array, as views into `minified` (output of
// StripJsonWhitespace). Throws InvalidInput naming `what` if `minified` is not an array.
std::vector<std::string_view> TopLevelArrayElements(std::string_view minified,
                                                    std::string_view what);

// One member of a JSON object: its key (escapes decoded) and its value's text, a view into the
// minified object it came from.
struct JsonMember {
  std::string key;
  std::string_view value;
};

// The members of a top-level JSON object, in order (duplicates kept), as views into `minified`
// (output of StripJsonWhitespace on valid JSON: the caller validates). Throws InvalidInput naming
// `what` if `minified` is not an object. Values keep their spelling (nothing is re-serialized).
std::vector<JsonMember> ObjectMembers(std::string_view minified, std::string_view what);

// The tool inventory (PROTOCOL.md section 1): the elements of the top-level array that are
// objects with a "name" key, minified, in declaration order. `{"type":"function",...}` wrappers
// are no tools. Validates the JSON (InvalidInput naming `what`): an element that is not an
// object, or a "name" that is not a string, is an error (it could never be called). Empty text
// -> no tools.
std::vector<std::string> ToolInventory(std::string_view tools_text, std::string_view what);

// "[" + the given minified tool objects joined by "," + "]": the tools text rendered after
// retrieval picked a subset (in declaration order).
std::string JoinToolsText(const std::vector<std::string_view>& tools);

// A value as the official engine's own JSON check reads it (its validator, fn 120, which decides
// whether a finished call is "malformed"): whitespace (tab, LF, CR, space) between tokens; a
// string ends at the first unescaped quote (a backslash takes the next byte, whatever it is); a
// number is an optional '-' then any run of digits and + - . e E, at least one byte in all
// ("011", "339ee2" and "-" pass); objects, arrays, true, false and null as in JSON.
struct EngineJsonMember;
struct EngineJsonValue {
  enum class Kind : uint8_t { kObject, kArray, kString, kNumber, kTrue, kFalse, kNull };
  Kind kind = Kind::kNull;
  std::string_view text;  // the value's text; a string's without its quotes (escapes as written)
  std::vector<EngineJsonMember> members;  // objects, in order
  std::vector<EngineJsonValue> items;     // arrays
};
struct EngineJsonMember {
  std::string_view key;  // as written
  EngineJsonValue value;
};

// One value and nothing after it but whitespace, or nullopt where the engine reports a malformed
// call (nesting deeper than 256 is refused too).
std::optional<EngineJsonValue> ParseEngineJson(std::string_view text);

// A string's text as written (EngineJsonValue::text) with its JSON escapes decoded; the text
// unchanged if they do not decode.
std::string DecodeJsonString(std::string_view written);

}  // namespace needle::text
