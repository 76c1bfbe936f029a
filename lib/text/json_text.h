// JSON handled as text, the way the engine renders it: whitespace outside strings deleted, never
// parsed and re-serialized (escapes, key order and number spellings stay as written).
#pragma once

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

}  // namespace needle::text
