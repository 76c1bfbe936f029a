// Byte-level pushdown automaton for tool calls and the per-token constraint built on it.
#include "grammar/call_grammar.h"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace needle::grammar {

namespace {

constexpr uint64_t kFnvOffset = 1469598103934665603ull;
constexpr uint64_t kFnvPrime = 1099511628211ull;
uint64_t Fnv(uint64_t h, uint8_t c) { return (h ^ c) * kFnvPrime; }

constexpr std::string_view kNamePrefix = "\"name\":\"";        // after the call's `{`
constexpr std::string_view kArgumentsKey = ",\"arguments\":";  // after the name's `"`

bool IsDigit(uint8_t c) { return c >= '0' && c <= '9'; }

// Number frames track their value (Frame::digits, scale, exponent) for schema ranges.
constexpr uint64_t kDigitCap = 100000000000000000ULL;  // 1e17: one more digit still fits

void AddDigit(NumberState& num, uint8_t c, bool fraction) {
  if (num.digits < kDigitCap) {
    num.digits = num.digits * 10 + (c - '0');
    if (fraction) --num.scale;
  } else if (!fraction) {
    ++num.scale;  // beyond 18 digits only the magnitude is kept
  }
}

void AddExponentDigit(NumberState& num, uint8_t c) {
  if (num.exponent < 100000) num.exponent = num.exponent * 10 + (c - '0');
}

double NumberValue(const NumberState& num) {
  const int e = num.scale + (num.exp_negative ? -num.exponent : num.exponent);
  if (num.digits == 0) return num.negative ? -0.0 : 0.0;  // 0e99999 is 0 (0 * inf would be NaN)
  const double m = static_cast<double>(num.digits);
  // Dividing by an exact power of ten rounds correctly where multiplying by 10^-k would not.
  const double v = e >= 0 ? m * std::pow(10.0, e) : m / std::pow(10.0, -e);
  return num.negative ? -v : v;
}

bool InRange(const SchemaNode& n, double v) {
  if (v < n.minimum || (n.exclusive_minimum && v == n.minimum)) return false;
  if (v > n.maximum || (n.exclusive_maximum && v == n.maximum)) return false;
  if (n.multiple_of > 0) {
    const double q = v / n.multiple_of;
    if (std::fabs(q - std::round(q)) > 1e-9) return false;
  }
  return true;
}

// Whether an integer whose sign and leading digits are fixed can still end in the node's range:
// digits m can become m itself or m * 10^k + r (0 <= r < 10^k; leading zeros are accepted).
bool IntegerViable(const SchemaNode& n, const NumberState& num, bool has_digit) {
  if (!n.has_range || num.digits >= kDigitCap) return true;  // untracked: checked when it closes
  const long double lo = n.exclusive_minimum ? std::floor(static_cast<long double>(n.minimum)) + 1
                                             : std::ceil(static_cast<long double>(n.minimum));
  const long double hi = n.exclusive_maximum ? std::ceil(static_cast<long double>(n.maximum)) - 1
                                             : std::floor(static_cast<long double>(n.maximum));
  if (lo > hi) return false;
  auto meets = [&](long double a, long double b) {  // magnitudes [a, b], then the sign
    const long double x = num.negative ? -b : a, y = num.negative ? -a : b;
    return x <= hi && y >= lo;
  };
  const auto m = static_cast<long double>(num.digits);
  if (has_digit && meets(m, m)) return true;
  long double p = 10;
  for (int k = 1; k <= 19; ++k, p *= 10)
    if (meets(m * p, m * p + p - 1)) return true;
  return false;
}

// A number frame's sign: whether a value <= 0 can still satisfy the node (numbers can reach any
// magnitude through a fraction or an exponent; integers are checked digit by digit).
bool NegativeViable(const SchemaNode& n, const Frame& f, const NumberState& num) {
  if (f.integer_only) return IntegerViable(n, num, false);
  return !n.has_range || n.minimum < 0 || (n.minimum == 0 && !n.exclusive_minimum);
}
// The engine's number byte after the first: digits and `+ - . e E` continue the number (false:
// the byte ends it). The value is tracked as strtod reads the text's longest numeric prefix;
// phases: 1 sign, 2 integer digits, 3 point, 4 fraction digits, 5 `e`, 6 exponent sign,
// 7 exponent digits, 8 past the prefix (the rest is not read).
bool LaxNumberByte(NumberState& num, uint8_t& phase, uint8_t c) {
  const bool digit = IsDigit(c);
  if (!digit && c != '+' && c != '-' && c != '.' && c != 'e' && c != 'E') return false;
  const bool exp = c == 'e' || c == 'E';
  // A digit before the exponent: integer (phase 2) or fraction (phase 4).
  auto mantissa_digit = [&](bool fraction) {
    AddDigit(num, c, fraction);
    num.mantissa_digit = true;
    phase = fraction ? 4 : 2;
  };
  switch (phase) {
    case 0:  // the first byte (a value starts a number only with `-` or a digit)
      if (c == '-') {
        num.negative = true;
        phase = 1;
      } else {
        mantissa_digit(false);
      }
      break;
    case 1:
    case 2:
      if (digit)
        mantissa_digit(false);
      else
        phase = c == '.' ? 3 : exp && phase == 2 ? 5 : 8;
      break;
    case 3:
    case 4:
      if (digit)
        mantissa_digit(true);
      else
        phase = exp && num.mantissa_digit ? 5 : 8;
      break;
    case 5:
      if (digit) {
        AddExponentDigit(num, c);
        phase = 7;
      } else if (c == '+' || c == '-') {
        num.exp_negative = c == '-';
        phase = 6;
      } else {
        phase = 8;
      }
      break;
    case 6:
    case 7:
      if (digit) {
        AddExponentDigit(num, c);
        phase = 7;
      } else {
        phase = 8;
      }
      break;
    default:
      break;
  }
  return true;
}

bool IsHex(uint8_t c) { return IsDigit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); }
int HexValue(uint8_t c) {
  if (IsDigit(c)) return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return c - 'A' + 10;
}
uint64_t AllBits(size_t n) { return n >= 64 ? ~uint64_t{0} : (uint64_t{1} << n) - 1; }

bool IsHighSurrogate(uint32_t cp) { return cp >= 0xD800 && cp <= 0xDBFF; }
bool IsLowSurrogate(uint32_t cp) { return cp >= 0xDC00 && cp <= 0xDFFF; }

// UTF-8 encoding of a code point from `\u` escapes, as the engine's decoder writes it: a lone
// surrogate as its own three bytes (never a valid property name's bytes).
int EncodeUtf8(uint32_t cp, char* out) {
  if (cp >= 0x10000) {
    out[0] = static_cast<char>(0xF0 | (cp >> 18));
    out[1] = static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out[2] = static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out[3] = static_cast<char>(0x80 | (cp & 0x3F));
    return 4;
  }
  if (cp < 0x80) {
    out[0] = static_cast<char>(cp);
    return 1;
  }
  if (cp < 0x800) {
    out[0] = static_cast<char>(0xC0 | (cp >> 6));
    out[1] = static_cast<char>(0x80 | (cp & 0x3F));
    return 2;
  }
  out[0] = static_cast<char>(0xE0 | (cp >> 12));
  out[1] = static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
  out[2] = static_cast<char>(0x80 | (cp & 0x3F));
  return 3;
}

// Escape letter -> the byte it stands for (0 = not a one-letter escape).
uint8_t SimpleEscape(uint8_t c) {
  switch (c) {
    case '"':
      return '"';
    case '\\':
      return '\\';
    case '/':
      return '/';
    case 'b':
      return 0x08;
    case 'f':
      return 0x0C;
    case 'n':
      return 0x0A;
    case 'r':
      return 0x0D;
    case 't':
      return 0x09;
  }
  return 0;
}

// After a value frame was popped: the parent moves past the value.
void ValueDone(GrammarState& s) {
  Frame& p = s.frames[s.depth - 1];
  switch (p.kind) {
    case FrameKind::kObject:
      p.phase = 3;
      break;
    case FrameKind::kArray:
      p.phase = 1;
      break;
    case FrameKind::kCall:
      p.phase = 3;
      break;
    default:
      break;
  }
}

}  // namespace

CallGrammar::CallGrammar(CallSchema schema, CompatOptions compat)
    : schema_(std::move(schema)),
      compat_(compat),
      bool_literals_{"true", "false"},
      null_literals_{"null"} {
  if (schema_.nodes.empty()) schema_.nodes.emplace_back();
}

GrammarState CallGrammar::Start(bool require_call) const {
  GrammarState s;
  s.depth = 1;
  s.frames[0] = Frame{};
  s.frames[0].kind = FrameKind::kTop;
  s.require_call = require_call;
  return s;
}

void CallGrammar::CopyState(const GrammarState& from, GrammarState* to) {
  to->depth = from.depth;
  std::copy(from.frames.begin(), from.frames.begin() + from.depth, to->frames.begin());
  to->call_hash = from.call_hash;
  to->calls_done = from.calls_done;
  std::copy(from.done_hashes.begin(), from.done_hashes.begin() + from.calls_done,
            to->done_hashes.begin());
  to->require_call = from.require_call;
  to->number = from.number;
  to->pattern = from.pattern;
}

bool CallGrammar::Feed(GrammarState& s, uint8_t c) const {
  for (;;) {
    if (s.depth == 0) return false;
    const Result r = Step(s, c);
    if (r == Result::kAccept) {
      if (s.depth >= 2 && s.frames[1].kind == FrameKind::kCall) s.call_hash = Fnv(s.call_hash, c);
      return true;
    }
    if (r == Result::kReject) {
      s.depth = 0;
      return false;
    }
  }
}

int CallGrammar::ObjectChainDepth(const GrammarState& s, int depth) {
  // frames[0] top, [1] call, [2] arguments object, then nested object values only.
  if (depth < 3 || s.frames[1].kind != FrameKind::kCall) return -1;
  for (int i = 2; i < depth; ++i)
    if (s.frames[i].kind != FrameKind::kObject) return -1;
  return depth;
}

int32_t CallGrammar::ArgumentValueStart(const GrammarState& s) const {
  if (ObjectChainDepth(s, s.depth) < 0) return -1;
  const Frame& f = s.top();
  if (f.phase != 2 || f.pending < 0) return -1;
  const SchemaNode& n = schema_.nodes[f.node];
  if (n.open_object) return -1;
  return n.key_nodes[f.pending];
}

bool CallGrammar::FeedClosesArgumentValue(GrammarState& s, std::string_view bytes,
                                          int object_depth) const {
  // Frames: top, call, arguments object (nested objects), value. The value counts as done at a
  // byte that leaves its object right after a value (phase 3) or closes it, even when a later
  // byte of the token opens the next key (`","`). A number is closed by the delimiter after it,
  // which goes straight on (`,` waits for a key): a branch running through `0,"hour":` continues
  // (measured on the engine: docs/PROTOCOL-NOTES.md item 2). Our integer enum literal is complete
  // at its last digit; the engine's number is still open there, so a digit never ends it.
  // A container value's closing byte followed by more bytes of the same token (`},"unit"`) goes
  // straight on, like a number's delimiter (measured on the engine: an object branch runs through
  // `},` into the next key and its value).
  const int d = object_depth;
  bool done = false;
  for (size_t i = 0; i < bytes.size(); ++i) {
    const char c = bytes[i];
    const int depth_before = s.depth;
    if (!Feed(s, static_cast<uint8_t>(c))) return true;
    const bool container_closed = (c == '}' || c == ']') && depth_before > d && s.depth == d;
    const bool last = i + 1 == bytes.size();
    done = done || s.depth < d ||
           (s.depth == d && s.frames[d - 1].phase == 3 && !(c >= '0' && c <= '9') &&
            (!container_closed || last));
  }
  return done;
}

std::string_view CallGrammar::KeyCandidate(const Frame& f, size_t i) const {
  if (f.node < 0) return schema_.tools[i].name;
  return schema_.nodes[f.node].keys[i];
}

size_t CallGrammar::KeyCandidates(const Frame& f) const {
  if (f.node < 0) return std::min(schema_.tools.size(), kMaxKeys);
  return schema_.nodes[f.node].keys.size();
}

const std::vector<std::string>& CallGrammar::LiteralList(const Frame& f) const {
  if (f.literal_set == kLiteralsBool) return bool_literals_;
  if (f.literal_set == kLiteralsNull) return null_literals_;
  return schema_.nodes[f.node].enum_literals;
}

bool CallGrammar::KeyCompare(Frame& f, uint8_t byte) const {
  const bool open = f.node >= 0 && schema_.nodes[f.node].open_object;
  if (!open) {
    uint64_t alive = 0;
    for (size_t i = 0; i < KeyCandidates(f); ++i) {
      if (!(f.mask >> i & 1)) continue;
      const std::string_view k = KeyCandidate(f, i);
      if (static_cast<size_t>(f.count) < k.size() && static_cast<uint8_t>(k[f.count]) == byte)
        alive |= uint64_t{1} << i;
    }
    f.mask = alive;
    if (!alive) return false;
  }
  ++f.count;
  return true;
}

// A decoded key character: a high surrogate still waiting is written first (alone).
bool CallGrammar::KeyEmit(Frame& f, uint8_t byte) const {
  if (f.surrogate != 0) {
    const uint16_t lone = f.surrogate;
    f.surrogate = 0;
    if (!KeyEmitCodePoint(f, lone)) return false;
  }
  return KeyCompare(f, byte);
}

bool CallGrammar::KeyEmitCodePoint(Frame& f, uint32_t cp) const {
  if (f.surrogate != 0) {
    const uint16_t lone = f.surrogate;
    f.surrogate = 0;
    if (!KeyEmitCodePoint(f, lone)) return false;
  }
  char buf[4];
  const int n = EncodeUtf8(cp, buf);
  for (int i = 0; i < n; ++i)
    if (!KeyCompare(f, static_cast<uint8_t>(buf[i]))) return false;
  return true;
}

CallGrammar::Result CallGrammar::KeyByte(GrammarState& s, Frame& f, uint8_t c) const {
  switch (f.phase) {
    case 0:
      if (c == '"') {
        // Close: the candidate spelled exactly.
        const bool open = f.node >= 0 && schema_.nodes[f.node].open_object;
        int32_t chosen = -1;
        if (!open) {
          for (size_t i = 0; i < KeyCandidates(f); ++i)
            if ((f.mask >> i & 1) && KeyCandidate(f, i).size() == static_cast<size_t>(f.count))
              chosen = static_cast<int32_t>(i);
          if (chosen < 0) return Result::kReject;
        }
        --s.depth;
        Frame& parent = s.frames[s.depth - 1];
        parent.pending = chosen;
        parent.phase = 1;
        parent.count = 0;
        if (parent.kind == FrameKind::kObject && chosen >= 0) parent.mask |= uint64_t{1} << chosen;
        return Result::kAccept;
      }
      if (c == '\\') {
        if (f.node < 0) return Result::kReject;  // tool names are matched literally
        f.phase = 1;
        return Result::kAccept;
      }
      if (c < 0x20) return Result::kReject;
      return KeyEmit(f, c) ? Result::kAccept : Result::kReject;
    case 1:
      if (c == 'u') {
        f.phase = 2;
        f.hex = 0;
        f.hex_digits = 0;
        return Result::kAccept;
      }
      if (const uint8_t b = SimpleEscape(c)) {
        f.phase = 0;
        return KeyEmit(f, b) ? Result::kAccept : Result::kReject;
      }
      return Result::kReject;
    default: {
      // The engine checks a key against the property names only when a character is complete:
      // the bytes of an unfinished escape, and a high surrogate waiting for its low half, pass
      // unchecked (the demo model's `"mi\udace\uff5` runs into the dead end only at the fourth
      // digit of the second escape).
      if (!IsHex(c)) return Result::kReject;
      f.hex = f.hex * 16 + HexValue(c);
      if (++f.hex_digits < 4) return Result::kAccept;
      f.phase = 0;
      uint32_t cp = f.hex;
      if (IsHighSurrogate(cp)) {
        const bool ok = f.surrogate == 0 || KeyEmitCodePoint(f, f.surrogate);
        f.surrogate = static_cast<uint16_t>(cp);
        return ok ? Result::kAccept : Result::kReject;
      }
      if (IsLowSurrogate(cp) && f.surrogate != 0) {
        cp = 0x10000 + ((uint32_t{f.surrogate} - 0xD800) << 10) + (cp - 0xDC00);
        f.surrogate = 0;
      }
      return KeyEmitCodePoint(f, cp) ? Result::kAccept : Result::kReject;
    }
  }
}

bool CallGrammar::CloseObject(GrammarState& s, const Frame& f) const {
  const SchemaNode& n = schema_.nodes[f.node];
  if (!n.open_object && (f.mask & n.required) != n.required) return false;
  const bool arguments = s.depth == 3 && s.frames[1].kind == FrameKind::kCall;
  if (arguments && compat_.refuse_duplicate_calls) {
    const uint64_t h = Fnv(s.call_hash, '}');
    for (int i = 0; i < s.calls_done; ++i)
      if (s.done_hashes[i] == h) return false;
    if (s.calls_done < kMaxRememberedCalls) s.done_hashes[s.calls_done++] = h;
  }
  return true;
}

CallGrammar::Result CallGrammar::StartValue(GrammarState& s, int32_t node, uint8_t c) const {
  if (s.depth >= kMaxDepth) return Result::kReject;
  const SchemaNode& n = schema_.nodes[node];
  const uint8_t t = n.types;
  auto allows = [t](uint8_t bits) { return t == 0 || (t & bits) != 0; };
  Frame f;
  f.node = node;
  if (n.has_enum) {
    f.kind = FrameKind::kLiteral;
    f.literal_set = kLiteralsEnum;
    f.mask = AllBits(std::min(n.enum_literals.size(), kMaxKeys));
  } else if (c == '"' && allows(kTypeString)) {
    f.kind = FrameKind::kString;
    const int32_t pi = compat_.enforce_value_limits    ? n.pattern
                       : compat_.check_limits_at_close ? n.close_pattern
                                                       : -1;
    if (pi >= 0) s.pattern = schema_.patterns[static_cast<size_t>(pi)].Start();
    s.frames[s.depth++] = f;
    return Result::kAccept;
  } else if ((c == '-' || IsDigit(c)) && allows(kTypeInteger | kTypeNumber)) {
    f.kind = FrameKind::kNumber;
    f.integer_only = !allows(kTypeNumber);
    s.number = NumberState{};
  } else if ((c == 't' || c == 'f') && allows(kTypeBoolean)) {
    f.kind = FrameKind::kLiteral;
    f.literal_set = kLiteralsBool;
    f.mask = 3;
  } else if (c == 'n' && allows(kTypeNull)) {
    f.kind = FrameKind::kLiteral;
    f.literal_set = kLiteralsNull;
    f.mask = 1;
  } else if (c == '{' && allows(kTypeObject)) {
    f.kind = FrameKind::kObject;
    s.frames[s.depth++] = f;
    return Result::kAccept;
  } else if (c == '[' && allows(kTypeArray)) {
    f.kind = FrameKind::kArray;
    s.frames[s.depth++] = f;
    return Result::kAccept;
  } else {
    return Result::kReject;
  }
  s.frames[s.depth++] = f;
  const Result r = Step(s, c);
  return r == Result::kPopAndRefeed ? Result::kReject : r;
}

CallGrammar::Result CallGrammar::Step(GrammarState& s, uint8_t c) const {
  Frame& f = s.frames[s.depth - 1];
  switch (f.kind) {
    case FrameKind::kTop:
      switch (f.phase) {
        case 0:
          if (c != '[') return Result::kReject;
          f.phase = 1;
          return Result::kAccept;
        case 1:
        case 3:
          if (c == ']' && f.phase == 1 && !s.require_call) {
            f.phase = 4;
            return Result::kAccept;
          }
          if (c != '{' || schema_.tools.empty()) return Result::kReject;
          s.frames[s.depth++] = Frame{FrameKind::kCall};
          s.call_hash = kFnvOffset;  // the `{` is hashed by Feed
          return Result::kAccept;
        case 2:
          if (c == ',')
            f.phase = 3;
          else if (c == ']')
            f.phase = 4;
          else
            return Result::kReject;
          return Result::kAccept;
        default:
          return Result::kReject;
      }
    case FrameKind::kCall:
      switch (f.phase) {
        case 0:  // "name":"
          if (c != static_cast<uint8_t>(kNamePrefix[f.count])) return Result::kReject;
          if (++f.count == static_cast<int32_t>(kNamePrefix.size())) {
            Frame key{FrameKind::kKey};
            key.node = -1;
            key.mask = AllBits(KeyCandidates(key));
            key.count = 0;
            s.frames[s.depth++] = key;
          }
          return Result::kAccept;
        case 1:  // ,"arguments":
          if (c != static_cast<uint8_t>(kArgumentsKey[f.count])) return Result::kReject;
          if (++f.count == static_cast<int32_t>(kArgumentsKey.size())) f.phase = 2;
          return Result::kAccept;
        case 2:
          if (c != '{') return Result::kReject;
          {
            Frame obj{FrameKind::kObject};
            obj.node = schema_.tools[f.pending].arguments;
            s.frames[s.depth++] = obj;
          }
          return Result::kAccept;
        default:
          if (c != '}') return Result::kReject;
          --s.depth;
          s.frames[s.depth - 1].phase = 2;
          return Result::kAccept;
      }
    case FrameKind::kObject: {
      const SchemaNode& n = schema_.nodes[f.node];
      const uint64_t unused = n.open_object ? 1 : AllBits(n.keys.size()) & ~f.mask;
      auto push_key = [&] {
        Frame key{FrameKind::kKey};
        key.node = f.node;
        key.mask = unused;
        s.frames[s.depth++] = key;
        return Result::kAccept;
      };
      auto close = [&] {
        if (!CloseObject(s, f)) return Result::kReject;
        --s.depth;
        ValueDone(s);
        return Result::kAccept;
      };
      switch (f.phase) {
        case 0:
          if (c == '"' && unused) return push_key();
          if (c == '}') return close();
          return Result::kReject;
        case 1:
          if (c != ':') return Result::kReject;
          f.phase = 2;
          return Result::kAccept;
        case 2:
          return StartValue(s, n.open_object ? 0 : n.key_nodes[f.pending], c);
        case 3:
          if (c == ',' && unused) {
            f.phase = 4;
            return Result::kAccept;
          }
          if (c == '}') return close();
          return Result::kReject;
        default:
          if (c == '"') return push_key();
          if (c == '}' && compat_.allow_comma_close) return close();
          return Result::kReject;
      }
    }
    case FrameKind::kArray: {
      const SchemaNode& n = schema_.nodes[f.node];
      const int32_t items = n.items >= 0 ? n.items : 0;
      auto close = [&] {
        if (f.count < n.min_items) return Result::kReject;
        --s.depth;
        ValueDone(s);
        return Result::kAccept;
      };
      switch (f.phase) {
        case 0:
        case 2:
          if (c == ']' && f.phase == 0) return close();
          if (n.max_items >= 0 && f.count >= n.max_items) return Result::kReject;
          ++f.count;
          return StartValue(s, items, c);
        default:
          if (c == ']') return close();
          if (c != ',') return Result::kReject;
          f.phase = 2;
          return Result::kAccept;
      }
    }
    case FrameKind::kKey:
      return KeyByte(s, f, c);
    case FrameKind::kString: {
      const SchemaNode& n = schema_.nodes[f.node];
      // A character of the value (`ch`: its code point, or kOtherChar for any non-ASCII one):
      // counted against maxLength and, with a pattern, fed to its automaton.
      // --enforce-schema prunes by the pattern (or our format expressions); the engine only
      // checks at the closing quote (its own format expressions), so its automaton runs without
      // refusing anything before.
      const int32_t pi = compat_.enforce_value_limits    ? n.pattern
                         : compat_.check_limits_at_close ? n.close_pattern
                                                         : -1;
      const Pattern* pattern = pi >= 0 ? &schema_.patterns[static_cast<size_t>(pi)] : nullptr;
      const bool prune = compat_.enforce_value_limits;
      auto count_char = [&](uint32_t ch) {
        ++f.count;
        if (n.max_length >= 0 && f.count > n.max_length) return false;
        if (pattern == nullptr) return true;
        return pattern->Step(s.pattern, ch) || !prune;
      };
      // A `\u` high surrogate waits for its low half before it counts (the engine counts the
      // characters it has decoded; a pair is one); alone it counts when the next one completes.
      auto flush = [&] {
        if (f.surrogate == 0) return true;
        f.surrogate = 0;
        return count_char(kOtherChar);
      };
      if (f.surrogate != 0 && f.phase == 0 && c == '"') f.surrogate = 0;
      switch (f.phase) {
        case 0:
          if (c == '"') {
            if ((compat_.enforce_value_limits || compat_.check_limits_at_close) &&
                f.count < n.min_length)
              return Result::kReject;  // minLength: not yet
            if (pattern && !pattern->Accepts(s.pattern)) return Result::kReject;
            --s.depth;
            ValueDone(s);
            return Result::kAccept;
          }
          if (c == '\\') {
            f.phase = 1;
            return Result::kAccept;
          }
          if (c < 0x20) return Result::kReject;
          if ((c & 0xC0) == 0x80) return Result::kAccept;  // UTF-8 continuation
          if (c == '}' && compat_.refuse_brace_in_string && s.depth >= 2) {
            // Engine quirk: a `}` inside a string value is refused while the object holding the
            // value still lacks required keys (it would not be allowed to close there).
            const Frame& p = s.frames[s.depth - 2];
            if (p.kind == FrameKind::kObject) {
              const SchemaNode& pn = schema_.nodes[p.node];
              if (!pn.open_object && (p.mask & pn.required) != pn.required) return Result::kReject;
            }
          }
          if (!flush()) return Result::kReject;
          return count_char(c < 0x80 ? c : kOtherChar) ? Result::kAccept : Result::kReject;
        case 1: {
          if (c == 'u') {
            f.phase = 2;
            f.hex = 0;
            f.hex_digits = 0;
            return Result::kAccept;
          }
          const uint8_t decoded = SimpleEscape(c);
          if (!decoded) return Result::kReject;
          f.phase = 0;
          if (!flush()) return Result::kReject;
          return count_char(decoded) ? Result::kAccept : Result::kReject;
        }
        default: {
          if (!IsHex(c)) return Result::kReject;
          f.hex = f.hex * 16 + HexValue(c);
          if (++f.hex_digits < 4) return Result::kAccept;
          f.phase = 0;
          if (IsHighSurrogate(f.hex)) {
            if (!flush()) return Result::kReject;
            f.surrogate = static_cast<uint16_t>(f.hex);
            return Result::kAccept;
          }
          if (IsLowSurrogate(f.hex) && f.surrogate != 0) {
            f.surrogate = 0;  // the pair: one character
            return count_char(kOtherChar) ? Result::kAccept : Result::kReject;
          }
          if (!flush()) return Result::kReject;
          return count_char(f.hex < 0x80 ? f.hex : kOtherChar) ? Result::kAccept : Result::kReject;
        }
      }
    }
    case FrameKind::kNumber: {
      const SchemaNode& n = schema_.nodes[f.node];
      // `ranges`: the value is tracked and checked when it closes (the engine's rule);
      // `prune`: also refuse digits once no completion can end in range (--enforce-schema).
      const bool ranges = (n.has_range || n.multiple_of > 0) &&
                          (compat_.enforce_value_limits || compat_.check_limits_at_close);
      const bool prune = ranges && compat_.enforce_value_limits;
      auto end = [&] {
        // A value outside the schema's range cannot end here (it may still go on).
        if (ranges && !InRange(n, NumberValue(s.number))) return Result::kReject;
        --s.depth;
        ValueDone(s);
        return Result::kPopAndRefeed;
      };
      // An integer digit: kept only while the value can still end in range.
      auto integer_digit = [&] {
        if (!ranges) return Result::kAccept;
        AddDigit(s.number, c, false);
        return !prune || !f.integer_only || IntegerViable(n, s.number, true) ? Result::kAccept
                                                                             : Result::kReject;
      };
      const bool digit = IsDigit(c);
      if (compat_.lax_numbers && !compat_.enforce_value_limits) {
        // An integer takes digits only after its first byte (the engine refuses + - . e E there).
        const bool lax_byte = !f.integer_only || f.phase == 0 || digit;
        if (lax_byte && LaxNumberByte(s.number, f.phase, c)) return Result::kAccept;
        if (f.phase == 0) return Result::kReject;
        if (!lax_byte && (c == '+' || c == '-' || c == '.' || c == 'e' || c == 'E'))
          return Result::kReject;
        return end();
      }
      switch (f.phase) {
        case 0:
          if (c == '-') {
            f.phase = 1;
            s.number.negative = true;
            return !prune || NegativeViable(n, f, s.number) ? Result::kAccept : Result::kReject;
          }
          if (!digit) return Result::kReject;
          f.phase = 2;
          return integer_digit();
        case 1:
          if (!digit) return Result::kReject;
          f.phase = 2;
          return integer_digit();
        case 3:
          if (!digit) return Result::kReject;
          f.phase = 4;
          if (ranges) AddDigit(s.number, c, true);
          return Result::kAccept;
        case 6:
          if (!digit) return Result::kReject;
          f.phase = 7;
          if (ranges) AddExponentDigit(s.number, c);
          return Result::kAccept;
        case 2:
          if (digit) return integer_digit();
          if (!f.integer_only && c == '.') {
            f.phase = 3;
            return Result::kAccept;
          }
          if (!f.integer_only && (c == 'e' || c == 'E')) {
            f.phase = 5;
            return Result::kAccept;
          }
          return end();
        case 4:
          if (digit) {
            if (ranges) AddDigit(s.number, c, true);
            return Result::kAccept;
          }
          if (c == 'e' || c == 'E') {
            f.phase = 5;
            return Result::kAccept;
          }
          return end();
        case 5:
          if (c == '+' || c == '-') {
            f.phase = 6;
            s.number.exp_negative = c == '-';
          } else if (digit) {
            f.phase = 7;
            if (ranges) AddExponentDigit(s.number, c);
          } else {
            return Result::kReject;
          }
          return Result::kAccept;
        default:
          if (digit) {
            if (ranges) AddExponentDigit(s.number, c);
            return Result::kAccept;
          }
          return end();
      }
    }
    case FrameKind::kLiteral:
      return LiteralByte(s, f, c);
  }
  return Result::kReject;
}

CallGrammar::Result CallGrammar::LiteralMatch(GrammarState& s, Frame& f, uint8_t c,
                                              bool decoded) const {
  const std::vector<std::string>& lits = LiteralList(f);
  const size_t n = std::min(lits.size(), kMaxKeys);
  uint64_t next = 0;
  bool ended = false;  // an alive candidate is complete before c
  for (size_t i = 0; i < n; ++i) {
    if (!(f.mask >> i & 1)) continue;
    const std::string& lit = lits[i];
    const size_t at = static_cast<size_t>(f.count);
    if (at == lit.size()) ended = true;
    // A decoded escape never stands for a string literal's closing quote.
    else if (static_cast<uint8_t>(lit[at]) == c && !(decoded && at + 1 == lit.size()))
      next |= uint64_t{1} << i;
  }
  if (!next) {
    if (!ended || decoded) return Result::kReject;
    --s.depth;
    ValueDone(s);
    return Result::kPopAndRefeed;
  }
  f.mask = next;
  ++f.count;
  // Close at once when every remaining candidate is complete (e.g. after a string's `"`).
  bool longer = false;
  for (size_t i = 0; i < n; ++i)
    if ((next >> i & 1) && lits[i].size() > static_cast<size_t>(f.count)) longer = true;
  if (!longer) {
    --s.depth;
    ValueDone(s);
  }
  return Result::kAccept;
}

bool CallGrammar::LiteralMatchCodePoint(GrammarState& s, Frame& f, uint32_t cp) const {
  char buf[4];
  const int n = EncodeUtf8(cp, buf);
  for (int i = 0; i < n; ++i)
    if (LiteralMatch(s, f, static_cast<uint8_t>(buf[i]), true) != Result::kAccept) return false;
  return true;
}

// A high surrogate still waiting is matched alone (its three bytes: no literal has them).
bool CallGrammar::LiteralFlushSurrogate(GrammarState& s, Frame& f) const {
  if (f.surrogate == 0) return true;
  const uint16_t lone = f.surrogate;
  f.surrogate = 0;
  return LiteralMatchCodePoint(s, f, lone);
}

// Enum strings accept escapes inside the quotes (as the engine does); a decoded escape is matched
// against the literals like a plain byte, a half-written `\u` escape is not checked yet.
CallGrammar::Result CallGrammar::LiteralByte(GrammarState& s, Frame& f, uint8_t c) const {
  switch (f.phase) {
    case 1:
      if (c == 'u') {
        f.phase = 2;
        f.hex = 0;
        f.hex_digits = 0;
        return Result::kAccept;
      }
      if (const uint8_t b = SimpleEscape(c)) {
        f.phase = 0;
        if (!LiteralFlushSurrogate(s, f)) return Result::kReject;
        return LiteralMatch(s, f, b, true);
      }
      return Result::kReject;
    case 2: {
      // As for keys (KeyByte): the engine checks an enum string when a character is complete, so
      // a high surrogate waits for its low half unchecked.
      if (!IsHex(c)) return Result::kReject;
      f.hex = f.hex * 16 + HexValue(c);
      if (++f.hex_digits < 4) return Result::kAccept;
      f.phase = 0;
      uint32_t cp = f.hex;
      if (IsHighSurrogate(cp)) {
        if (!LiteralFlushSurrogate(s, f)) return Result::kReject;
        f.surrogate = static_cast<uint16_t>(cp);
        return Result::kAccept;
      }
      if (IsLowSurrogate(cp) && f.surrogate != 0) {
        cp = 0x10000 + ((uint32_t{f.surrogate} - 0xD800) << 10) + (cp - 0xDC00);
        f.surrogate = 0;
      }
      if (!LiteralFlushSurrogate(s, f)) return Result::kReject;
      return LiteralMatchCodePoint(s, f, cp) ? Result::kAccept : Result::kReject;
    }
    default:
      break;
  }
  if (f.surrogate != 0 && c != '\\') {
    // The closing quote compares what was decoded, without the waiting half; any other byte
    // writes it first.
    if (c == '"')
      f.surrogate = 0;
    else if (!LiteralFlushSurrogate(s, f))
      return Result::kReject;
  }
  if (c == '\\' && f.literal_set == kLiteralsEnum && f.count >= 1) {
    // Only inside string literals (every alive candidate starts with a quote).
    const std::vector<std::string>& lits = LiteralList(f);
    bool strings = true;
    for (size_t i = 0; i < std::min(lits.size(), kMaxKeys); ++i)
      if ((f.mask >> i & 1) && lits[i][0] != '"') strings = false;
    if (strings) {
      f.phase = 1;
      return Result::kAccept;
    }
  }
  return LiteralMatch(s, f, c, false);
}

TokenConstraint::TokenConstraint(std::vector<std::string_view> bytes,
                                 const std::vector<uint8_t>& text_token)
    : bytes_(std::move(bytes)) {
  for (size_t id = 0; id < bytes_.size(); ++id)
    if (!bytes_[id].empty() && text_token[id])
      by_first_byte_[static_cast<uint8_t>(bytes_[id][0])].push_back(static_cast<int32_t>(id));
}

size_t TokenConstraint::Mask(const CallGrammar& g, const GrammarState& s,
                             std::span<uint8_t> allowed) {
  std::fill(allowed.begin(), allowed.end(), uint8_t{0});
  size_t count = 0;
  if (s.dead()) return 0;
  for (int b = 0; b < 256; ++b) {
    const auto& bucket = by_first_byte_[b];
    if (bucket.empty()) continue;
    CallGrammar::CopyState(s, &first_);
    if (!g.Feed(first_, static_cast<uint8_t>(b))) continue;
    for (int32_t id : bucket) {
      const std::string_view t = bytes_[id];
      if (t.size() == 1) {
        allowed[id] = 1;
        ++count;
        continue;
      }
      CallGrammar::CopyState(first_, &scratch_);
      if (g.Feed(scratch_, std::string_view(t).substr(1))) {
        allowed[id] = 1;
        ++count;
      }
    }
  }
  return count;
}

}  // namespace needle::grammar
