// The tool-call grammar (PROTOCOL.md section 3) as a byte-level pushdown automaton, and the token
// constraint built on it: a token is allowed iff the grammar accepts its ENTIRE byte string.
//
// Accepted language: `[` then `]`, or `{"name":"<tool>","arguments":{...}}` objects joined by `,`,
// then `]`; no whitespace outside strings; arguments follow the tool's schema (keys from
// properties, each at most once, `}` only when the required keys are present, typed values,
// enums, maxLength, array item counts). Two behaviours of the official engine are reproduced on
// purpose (CompatOptions), because its answers depend on them:
//  - a call identical to an earlier call of the same turn cannot be closed (its arguments' `}`
//    is refused), and
//  - after `,` inside an object, `}` is accepted (when the required keys are present), which
//    yields the engine's "malformed" replies, and
//  - a `}` inside a string value is refused while the object holding it lacks required keys.
// Argument keys accept JSON escapes; an escape is matched against the declared keys once it is
// complete (the engine does the same, so a half-written `\u` escape can dead-end a key). Tool
// names are matched literally (no escapes), as the engine does.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "grammar/pattern.h"
#include "grammar/schema.h"

namespace needle::grammar {

struct CompatOptions {
  bool refuse_duplicate_calls = true;
  bool allow_comma_close = true;  // `,}` in objects (engine behaviour; yields malformed JSON)
  // `}` inside a string value refused while its object lacks required keys (engine behaviour,
  // measured: docs/PROTOCOL-NOTES.md item 10).
  bool refuse_brace_in_string = true;
  // Not the engine: also prune values that cannot satisfy the schema's minimum / maximum /
  // exclusive bounds, minLength, pattern and the regular formats (grammar/pattern.h) (the engine
  // checks none of them while generating: measured, its integers leave the range). Off = the
  // engine's answers; on = every emitted value satisfies them.
  bool enforce_value_limits = false;
  // The engine's own check (measured: a golden turn where it writes "hour":9023... past a
  // maximum of 23 because the closing `,` is refused): a number outside minimum / maximum /
  // exclusive* and a string shorter than minLength cannot close; nothing is pruned before, so
  // such a value can run on until the budget ends.
  bool check_limits_at_close = true;
  // The engine's number syntax (read from its byte scanner, measured on the demo model: it writes
  // `"temperature":339ee2...`): after the first byte (`-` or a digit) any run of digits and
  // `+ - . e E`, for an integer any run of digits ("011"); the value checked at the close is the
  // longest prefix strtod reads ("339ee2" -> 339, "-" -> 0). Such text is not JSON, but the
  // engine's own check passes it (text::ParseEngineJson). Off (and always under
  // enforce_value_limits): JSON numbers, integers without fraction or exponent.
  bool lax_numbers = true;
};

// Literal sets of Frame::literal_set.
inline constexpr uint8_t kLiteralsEnum = 0, kLiteralsBool = 1, kLiteralsNull = 2;

enum class FrameKind : uint8_t { kTop, kCall, kObject, kArray, kKey, kString, kNumber, kLiteral };

// A number value read so far (for schema ranges): sign, the decimal digits (saturating at 18
// digits), the power of ten they are scaled by (minus the fraction digits, plus integer digits
// beyond 18) and the exponent.
struct NumberState {
  uint64_t digits = 0;
  int32_t scale = 0, exponent = 0;
  bool negative = false, exp_negative = false;
  bool mantissa_digit = false;  // lax numbers: a digit before the exponent (strtod needs one)
};

// One level of the pushdown stack. Plain data: states are copied per candidate token.
struct Frame {
  FrameKind kind = FrameKind::kTop;
  uint8_t phase = 0;
  uint8_t literal_set = 0;  // kLiteral: which candidate list (see call_grammar.cpp)
  bool integer_only = false;
  int32_t node = 0;      // schema node (kKey: object node, or -1 = tool names)
  uint64_t mask = 0;     // kObject: keys used; kKey/kLiteral: candidates alive
  int32_t count = 0;     // kArray: items; kString: chars; kKey/kLiteral/kCall: byte offset
  int32_t pending = -1;  // kObject: key just read; kCall: chosen tool
  uint32_t hex = 0;      // kKey: \u accumulator
  uint8_t hex_digits = 0;
  uint16_t surrogate = 0;  // kKey/kLiteral/kString: a `\u` high surrogate awaiting its low half
};

inline constexpr int kMaxDepth = 24;
inline constexpr int kMaxRememberedCalls = 16;

struct GrammarState {
  std::array<Frame, kMaxDepth> frames{};
  int depth = 0;           // frames[0 .. depth-1] are live; 0 = dead
  uint64_t call_hash = 0;  // FNV-1a of the current call's bytes (from its `{`)
  int calls_done = 0;
  std::array<uint64_t, kMaxRememberedCalls> done_hashes{};
  bool require_call = false;  // `[]` refused (tool-result turns)
  // The value being read when the top frame is a number (its value so far) or a string with a
  // schema pattern / format (the automaton's states). Values never nest, so the state holds one
  // of each instead of every frame (frames are copied per candidate token).
  NumberState number;
  PatternSet pattern;

  bool dead() const { return depth == 0; }
  const Frame& top() const { return frames[depth - 1]; }
  // The whole call array was closed (`]`).
  bool complete() const { return depth == 1 && frames[0].phase == 4; }
};

class CallGrammar {
 public:
  CallGrammar(CallSchema schema, CompatOptions compat = {});

  const CallSchema& schema() const { return schema_; }
  GrammarState Start(bool require_call = false) const;

  // Feeds one byte; false = rejected (the state is then unspecified: feed copies).
  bool Feed(GrammarState& s, uint8_t byte) const;
  bool Feed(GrammarState& s, std::string_view bytes) const {
    for (char c : bytes)
      if (!Feed(s, static_cast<uint8_t>(c))) return false;
    return true;
  }
  // Copies the live part of `from` into `to` (cheaper than assignment of the whole array).
  static void CopyState(const GrammarState& from, GrammarState* to);

  // Argument-value start: the top frame is a property of the arguments object, or of an object
  // nested in it through object values only (no arrays), waiting for its value. Returns the
  // value's schema node, or -1 if not at such a point.
  int32_t ArgumentValueStart(const GrammarState& s) const;
  // `depth` if frames[2 .. depth-1] of `s` are the arguments object and objects nested in it
  // through object values only (frames[1] the call), else -1.
  static int ObjectChainDepth(const GrammarState& s, int depth);

  // Feeds the bytes of one token to a state inside (or at the start of) a value of the object
  // whose frame is at `object_depth` (3: the top-level arguments object; the state's depth at
  // the value start). True if a byte of the token left the object right after the value (or
  // closed the object), even when a later byte opens the next key (`","`), or if a byte was
  // rejected. A number closed by `,` goes straight on to the next key and does not count, nor does
  // the last digit of an integer enum literal; an object or array value's own `}` / `]` counts
  // only as the token's last byte (`},` goes on to the next key). The engine's stop test for
  // value-start branch extensions (docs/PROTOCOL-NOTES.md item 2).
  bool FeedClosesArgumentValue(GrammarState& s, std::string_view bytes, int object_depth = 3) const;

 private:
  enum class Result { kAccept, kReject, kPopAndRefeed };
  Result Step(GrammarState& s, uint8_t c) const;
  // Pushes the frame for a value of `node` starting with byte c (c is consumed by the new frame).
  Result StartValue(GrammarState& s, int32_t node, uint8_t c) const;
  Result KeyByte(GrammarState& s, Frame& f, uint8_t c) const;
  bool KeyCompare(Frame& f, uint8_t byte) const;       // narrows candidates by one decoded byte
  bool KeyEmit(Frame& f, uint8_t byte) const;          // a decoded byte, after a waiting surrogate
  bool KeyEmitCodePoint(Frame& f, uint32_t cp) const;  // an escape's code point, as UTF-8
  bool LiteralMatchCodePoint(GrammarState& s, Frame& f, uint32_t cp) const;
  bool LiteralFlushSurrogate(GrammarState& s, Frame& f) const;
  bool CloseObject(GrammarState& s, const Frame& f) const;
  Result LiteralByte(GrammarState& s, Frame& f, uint8_t c) const;
  Result LiteralMatch(GrammarState& s, Frame& f, uint8_t c, bool decoded) const;
  std::string_view KeyCandidate(const Frame& f, size_t i) const;
  size_t KeyCandidates(const Frame& f) const;
  const std::vector<std::string>& LiteralList(const Frame& f) const;

  CallSchema schema_;
  CompatOptions compat_;
  std::vector<std::string> bool_literals_, null_literals_, bool_null_literals_;
};

// Per-token byte strings of a vocabulary with a first-byte index, and the masking step.
class TokenConstraint {
 public:
  // `bytes[id]` = the token's surface bytes (views that must outlive the constraint, e.g. a
  // tokenizer's TokenBytes); `text_token[id]` = 0 for special tokens that are never part of call
  // text (control and chat markers).
  TokenConstraint(std::vector<std::string_view> bytes, const std::vector<uint8_t>& text_token);

  size_t vocab() const { return bytes_.size(); }
  std::string_view bytes(int32_t id) const { return bytes_[id]; }

  // allowed[id] = 1 iff the grammar accepts the token's entire byte string from `s`.
  // Only tokens whose first byte the grammar accepts are tested. Returns the count.
  size_t Mask(const CallGrammar& g, const GrammarState& s, std::span<uint8_t> allowed);
  // The state after feeding token `id` (the caller checked it is allowed).
  bool Advance(const CallGrammar& g, GrammarState& s, int32_t id) const {
    return g.Feed(s, bytes_[id]);
  }

 private:
  std::vector<std::string_view> bytes_;
  std::array<std::vector<int32_t>, 256> by_first_byte_;
  GrammarState scratch_, first_;
};

}  // namespace needle::grammar
