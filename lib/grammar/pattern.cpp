// Regular expressions -> Thompson NFA (see pattern.h).
#include "grammar/pattern.h"

#include <map>
#include <memory>
#include <string>

namespace needle::grammar {

namespace {

using CharSet = std::bitset<kOtherChar + 1>;

// The parsed expression.
struct Node {
  enum Kind { kSet, kConcat, kAlt, kRepeat } kind = kConcat;
  CharSet set;
  std::vector<std::unique_ptr<Node>> kids;
  int min = 1, max = 1;  // kRepeat: max -1 = unbounded
};
using NodePtr = std::unique_ptr<Node>;

CharSet Range(uint32_t lo, uint32_t hi) {
  CharSet s;
  for (uint32_t c = lo; c <= hi; ++c) s.set(c);
  return s;
}
CharSet Digits() { return Range('0', '9'); }
CharSet Word() { return Digits() | Range('a', 'z') | Range('A', 'Z') | Range('_', '_'); }
CharSet Space() {
  CharSet s = Range('\t', '\r');
  s.set(' ');
  s.set(kOtherChar);  // Unicode spaces (U+00A0, U+2028, ...) are non-ASCII: may be one
  return s;
}
// The only character of a one-character set (portable: libc++ has no bitset::_Find_first).
int OnlyChar(const CharSet& s) {
  for (size_t c = 0; c < s.size(); ++c)
    if (s.test(c)) return static_cast<int>(c);
  return -1;
}
CharSet NotOf(const CharSet& s) {
  CharSet all;
  all.set();
  return all & ~s;
}

class Parser {
 public:
  explicit Parser(std::string_view text) : t_(text) {}
  // nullptr: unsupported or malformed.
  NodePtr Parse() {
    NodePtr n = Alternation();
    if (!ok_ || i_ != t_.size()) return nullptr;
    return n;
  }
  bool anchored_start = false, anchored_end = false;

 private:
  bool More() const { return i_ < t_.size(); }
  char Peek() const { return t_[i_]; }

  NodePtr Alternation() {
    auto alt = std::make_unique<Node>();
    alt->kind = Node::kAlt;
    alt->kids.push_back(Sequence());
    while (ok_ && More() && Peek() == '|') {
      ++i_;
      alt->kids.push_back(Sequence());
    }
    if (alt->kids.size() == 1) return std::move(alt->kids[0]);
    return alt;
  }

  NodePtr Sequence() {
    auto seq = std::make_unique<Node>();
    seq->kind = Node::kConcat;
    while (ok_ && More() && Peek() != '|' && Peek() != ')') {
      if (Peek() == '^') {  // only as the pattern's first character
        if (i_ != 0) return Fail();
        anchored_start = true;
        ++i_;
        continue;
      }
      if (Peek() == '$') {  // only as the last one
        if (i_ + 1 != t_.size()) return Fail();
        anchored_end = true;
        ++i_;
        continue;
      }
      NodePtr atom = Atom();
      if (!ok_) return nullptr;
      seq->kids.push_back(Quantified(std::move(atom)));
    }
    return seq;
  }

  NodePtr Quantified(NodePtr atom) {
    while (ok_ && More()) {
      int lo, hi;
      const char c = Peek();
      if (c == '*') {
        lo = 0, hi = -1, ++i_;
      } else if (c == '+') {
        lo = 1, hi = -1, ++i_;
      } else if (c == '?') {
        lo = 0, hi = 1, ++i_;
      } else if (c == '{') {
        const size_t save = i_++;
        if (!Number(&lo)) {  // a literal '{' (ECMA's Annex B reading)
          i_ = save;
          return atom;
        }
        hi = lo;
        if (More() && Peek() == ',') {
          ++i_;
          hi = -1;
          if (More() && Peek() != '}' && !Number(&hi)) return Fail();
        }
        if (!More() || Peek() != '}' || (hi >= 0 && hi < lo) || lo > 64 || hi > 64) return Fail();
        ++i_;
      } else {
        return atom;
      }
      if (More() && Peek() == '?') ++i_;  // lazy: the same strings
      auto rep = std::make_unique<Node>();
      rep->kind = Node::kRepeat;
      rep->min = lo;
      rep->max = hi;
      rep->kids.push_back(std::move(atom));
      atom = std::move(rep);
    }
    return atom;
  }

  bool Number(int* out) {
    if (!More() || Peek() < '0' || Peek() > '9') return false;
    int v = 0;
    while (More() && Peek() >= '0' && Peek() <= '9' && v < 1000) v = v * 10 + (t_[i_++] - '0');
    *out = v;
    return true;
  }

  NodePtr SetNode(const CharSet& s) {
    auto n = std::make_unique<Node>();
    n->kind = Node::kSet;
    n->set = s;
    return n;
  }

  NodePtr Atom() {
    const char c = t_[i_++];
    if (static_cast<unsigned char>(c) >= 0x80) return Fail();  // non-ASCII literal
    switch (c) {
      case '.':
        return SetNode(NotOf(Range('\n', '\n') | Range('\r', '\r')));
      case '(': {
        // Nesting is recursion here: a bound keeps a hostile pattern from exhausting the stack.
        if (++depth_ > kMaxNesting) return Fail();
        if (More() && Peek() == '?') {
          if (i_ + 1 < t_.size() && t_[i_ + 1] == ':') {
            i_ += 2;
          } else {
            return Fail();  // lookaround, named groups
          }
        }
        NodePtr inner = Alternation();
        if (!ok_ || !More() || Peek() != ')') return Fail();
        ++i_;
        --depth_;
        return inner;
      }
      case '[':
        return Class();
      case '\\': {
        CharSet s;
        if (!Escape(&s, false)) return Fail();
        return SetNode(s);
      }
      case '*':
      case '+':
      case '?':
      case ')':
        return Fail();
      default:
        return SetNode(Range(static_cast<uint8_t>(c), static_cast<uint8_t>(c)));
    }
  }

  // After a backslash: a class escape or an escaped character.
  bool Escape(CharSet* s, bool in_class) {
    if (!More()) return false;
    const char c = t_[i_++];
    switch (c) {
      case 'd':
        *s = Digits();
        return true;
      case 'D':
        *s = NotOf(Digits());
        return true;
      case 'w':
        *s = Word();
        return true;
      case 'W':
        *s = NotOf(Word());
        return true;
      case 's':
        *s = Space();
        return true;
      case 'S':
        *s = NotOf(Space());
        return true;
      case 'n':
        *s = Range('\n', '\n');
        return true;
      case 'r':
        *s = Range('\r', '\r');
        return true;
      case 't':
        *s = Range('\t', '\t');
        return true;
      case 'f':
        *s = Range('\f', '\f');
        return true;
      case 'v':
        *s = Range('\v', '\v');
        return true;
      case 'b':
        if (!in_class) return false;  // word boundary
        *s = Range('\b', '\b');
        return true;
      default:
        // Escaped punctuation stands for itself; letters and digits (backreferences, \p, \u,
        // \x, ...) are not supported.
        if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
            static_cast<unsigned char>(c) >= 0x80)
          return false;
        *s = Range(static_cast<uint8_t>(c), static_cast<uint8_t>(c));
        return true;
    }
  }

  NodePtr Class() {
    bool negate = false;
    if (More() && Peek() == '^') negate = true, ++i_;
    CharSet s;
    bool first = true;
    while (More() && (Peek() != ']' || first)) {
      first = false;
      CharSet item;
      int lo = -1;
      const char c = t_[i_++];
      if (static_cast<unsigned char>(c) >= 0x80) return Fail();
      if (c == '\\') {
        if (!Escape(&item, true)) return Fail();
        if (item.count() == 1) lo = OnlyChar(item);
      } else {
        item = Range(static_cast<uint8_t>(c), static_cast<uint8_t>(c));
        lo = static_cast<uint8_t>(c);
      }
      // A range a-b (a '-' first, last or after a class escape is literal).
      if (lo >= 0 && i_ + 1 < t_.size() && Peek() == '-' && t_[i_ + 1] != ']') {
        ++i_;
        int hi;
        const char d = t_[i_++];
        if (static_cast<unsigned char>(d) >= 0x80) return Fail();
        if (d == '\\') {
          CharSet e;
          if (!Escape(&e, true) || e.count() != 1) return Fail();
          hi = OnlyChar(e);
        } else {
          hi = static_cast<uint8_t>(d);
        }
        if (hi < lo) return Fail();
        item = Range(static_cast<uint32_t>(lo), static_cast<uint32_t>(hi));
      }
      s |= item;
    }
    if (!More()) return Fail();
    ++i_;  // ']'
    return SetNode(negate ? NotOf(s) : s);
  }

  NodePtr Fail() {
    ok_ = false;
    return nullptr;
  }

  static constexpr int kMaxNesting = 32;
  std::string_view t_;
  size_t i_ = 0;
  int depth_ = 0;
  bool ok_ = true;
};

}  // namespace

// Builds the NFA backwards: Build(node, next) returns the start of `node` followed by `next`.
class PatternBuilder {
 public:
  explicit PatternBuilder(Pattern* p) : p_(p) {
    p_->states_.push_back({});  // 0: match
  }
  bool ok() const { return ok_; }

  int Build(const Node& n, int next) {
    if (!ok_) return next;
    switch (n.kind) {
      case Node::kSet: {
        const int set = static_cast<int>(p_->sets_.size());
        p_->sets_.push_back(n.set);
        return Add(static_cast<int16_t>(set), next);
      }
      case Node::kConcat:
        for (size_t k = n.kids.size(); k-- > 0;) next = Build(*n.kids[k], next);
        return next;
      case Node::kAlt: {
        int start = Build(*n.kids.back(), next);
        for (size_t k = n.kids.size() - 1; k-- > 0;) start = Split(Build(*n.kids[k], next), start);
        return start;
      }
      case Node::kRepeat: {
        const Node& x = *n.kids[0];
        int tail = next;
        if (n.max < 0) {  // x*: a split that loops through x
          const int loop = Split(-1, next);
          const int body = Build(x, loop);
          splits_[loop].first = body;
          tail = loop;
        } else {
          for (int k = n.min; k < n.max; ++k) tail = Split(Build(x, tail), next);
        }
        for (int k = 0; k < n.min; ++k) tail = Build(x, tail);
        return tail;
      }
    }
    return next;
  }

  // Epsilon closures, the start set.
  void Finish(int start) {
    const size_t n = p_->states_.size();
    p_->closure_.assign(n, PatternSet{});
    for (size_t i = 0; i < n; ++i) {
      std::vector<int> stack{static_cast<int>(i)};
      PatternSet& c = p_->closure_[i];
      while (!stack.empty()) {
        const int s = stack.back();
        stack.pop_back();
        uint64_t& word = c.bits[static_cast<size_t>(s) / 64];
        const uint64_t bit = uint64_t{1} << (static_cast<size_t>(s) % 64);
        if (word & bit) continue;
        word |= bit;
        if (auto it = splits_.find(s); it != splits_.end()) {
          stack.push_back(it->second.first);
          stack.push_back(it->second.second);
        }
      }
    }
    p_->start_ = p_->closure_[static_cast<size_t>(start)];
  }

 private:
  int Add(int16_t set, int out) {
    if (p_->states_.size() >= kMaxPatternStates) {
      ok_ = false;
      return 0;
    }
    p_->states_.push_back({set, static_cast<int16_t>(out)});
    return static_cast<int>(p_->states_.size() - 1);
  }
  int Split(int a, int b) {
    const int s = Add(-1, -1);
    if (ok_) splits_[s] = {a, b};
    return s;
  }

  Pattern* p_;
  bool ok_ = true;
  std::map<int, std::pair<int, int>> splits_;
};

std::optional<Pattern> Pattern::Compile(std::string_view regex) {
  Parser parser(regex);
  NodePtr root = parser.Parse();
  if (!root) return std::nullopt;
  // Search semantics: any text may come before / after unless anchored.
  auto any = [] {
    auto rep = std::make_unique<Node>();
    rep->kind = Node::kRepeat;
    rep->min = 0;
    rep->max = -1;
    auto set = std::make_unique<Node>();
    set->kind = Node::kSet;
    set->set.set();
    rep->kids.push_back(std::move(set));
    return rep;
  };
  auto whole = std::make_unique<Node>();
  whole->kind = Node::kConcat;
  if (!parser.anchored_start) whole->kids.push_back(any());
  whole->kids.push_back(std::move(root));
  if (!parser.anchored_end) whole->kids.push_back(any());
  Pattern p;
  PatternBuilder b(&p);
  const int start = b.Build(*whole, 0);
  if (!b.ok()) return std::nullopt;
  b.Finish(start);
  return p;
}

std::optional<Pattern> Pattern::ForFormat(std::string_view format) {
  // Days per month; February 29 only in leap years (divisible by 4, centuries by 400).
  const std::string date =
      R"((\d{4}-((0[13578]|1[02])-(0[1-9]|[12]\d|3[01])|(0[469]|11)-(0[1-9]|[12]\d|30)|)"
      R"(02-(0[1-9]|1\d|2[0-8]))|(\d\d(0[48]|[2468][048]|[13579][26])|([02468][048]|)"
      R"([13579][26])00)-02-29))";
  const std::string time =
      R"(([01]\d|2[0-3]):[0-5]\d:([0-5]\d|60)(\.\d+)?([Zz]|[+-]([01]\d|2[0-3]):[0-5]\d))";
  const std::string octet = R"((25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d))";
  if (format == "date") return Compile("^" + date + "$");
  if (format == "time") return Compile("^" + time + "$");
  if (format == "date-time") return Compile("^" + date + "[Tt]" + time + "$");
  if (format == "email") return Compile(R"(^[^@\s]+@[^@\s]+$)");
  if (format == "uuid") return Compile(R"(^[0-9a-fA-F]{8}(-[0-9a-fA-F]{4}){3}-[0-9a-fA-F]{12}$)");
  if (format == "ipv4") return Compile("^(" + octet + R"(\.){3})" + octet + "$");
  return std::nullopt;
}

bool Pattern::Step(PatternSet& s, uint32_t c) const {
  if (c > kOtherChar) c = kOtherChar;
  PatternSet next;
  for (size_t w = 0; w < s.bits.size(); ++w) {
    for (uint64_t b = s.bits[w]; b; b &= b - 1) {
      const size_t i = w * 64 + static_cast<size_t>(__builtin_ctzll(b));
      const State& st = states_[i];
      if (st.set < 0 || !sets_[static_cast<size_t>(st.set)].test(c)) continue;
      const PatternSet& add = closure_[static_cast<size_t>(st.out)];
      for (size_t k = 0; k < next.bits.size(); ++k) next.bits[k] |= add.bits[k];
    }
  }
  s = next;
  return !s.empty();
}

}  // namespace needle::grammar
