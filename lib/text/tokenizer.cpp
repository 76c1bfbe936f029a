// SentencePiece-compatible BPE encoding and decoding (algorithm in tokenizer.h).
#include "text/tokenizer.h"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <cstring>

#include "base/error.h"
#include "base/utf8.h"
#include "format/cact.h"

namespace needle::text {

namespace {

constexpr std::string_view kSpaceSymbol = "\xE2\x96\x81";  // U+2581

uint64_t HashBytes(std::string_view s) {
  uint64_t h = 0xcbf29ce484222325ull;  // FNV-1a 64
  for (unsigned char c : s) h = (h ^ c) * 0x100000001b3ull;
  return h ^ (h >> 29);
}

bool IsReservedType(format::PieceType t) {
  return t == format::PieceType::kControl || t == format::PieceType::kUnknown ||
         t == format::PieceType::kByte;
}

// Length of the UTF-8 character starting with byte c (SentencePiece's OneCharLen table).
inline size_t OneCharLen(uint8_t c) {
  static constexpr uint8_t kLen[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
  return kLen[c >> 4];
}

// Words of at most this many characters are merged by scanning instead of a priority queue.
constexpr int32_t kSmallWordSymbols = 32;

}  // namespace

// Types of Tokenizer::Scratch's fields: named, not anonymous, since a class with external linkage
// holds them.
namespace bpe {
// A candidate merge of the adjacent symbols `left` and `right` into a piece of `bytes` bytes.
struct MergeCandidate {
  float score;
  int32_t left;
  int32_t right;
  uint32_t bytes;
};
// Priority: higher score first; equal scores, leftmost first.
struct MergeOrder {
  bool operator()(const MergeCandidate& a, const MergeCandidate& b) const {
    return a.score < b.score || (a.score == b.score && a.left > b.left);
  }
};
}  // namespace bpe
using bpe::MergeCandidate;
using bpe::MergeOrder;

struct Tokenizer::Symbol {
  uint32_t begin;  // byte offset in the segment
  uint32_t bytes;  // 0 once merged into its left neighbour
  int32_t prev;    // -1 at the segment start
  int32_t next;    // -1 at the segment end
};

void Tokenizer::PieceTable::Build(const std::vector<format::TokenizerPiece>& pieces,
                                  bool reserved) {
  size_t count = 0;
  for (const auto& p : pieces) count += IsReservedType(p.type) == reserved;
  const size_t capacity = std::bit_ceil(std::max<size_t>(16, count * 4));
  slots_.assign(capacity, Slot{0, -1});
  mask_ = capacity - 1;
  for (size_t id = 0; id < pieces.size(); ++id) {
    if (IsReservedType(pieces[id].type) != reserved) continue;
    const uint64_t h = HashBytes(pieces[id].text);
    uint64_t slot = h & mask_;
    while (slots_[slot].id >= 0) slot = (slot + 1) & mask_;
    slots_[slot] = Slot{static_cast<uint32_t>(h >> 32), static_cast<int32_t>(id)};
  }
}

int32_t Tokenizer::PieceTable::Find(const std::vector<format::TokenizerPiece>& pieces,
                                    std::string_view text) const {
  const uint64_t h = HashBytes(text);
  const auto tag = static_cast<uint32_t>(h >> 32);
  for (uint64_t slot = h & mask_;; slot = (slot + 1) & mask_) {
    const Slot s = slots_[slot];
    if (s.id < 0) return -1;
    if (s.tag == tag && pieces[s.id].text == text) return s.id;
  }
}

Tokenizer::Tokenizer(format::TokenizerBlob blob, const std::string& label)
    : Tokenizer(std::make_shared<const format::TokenizerBlob>(std::move(blob)), label) {}

Tokenizer::Tokenizer(std::shared_ptr<const format::TokenizerBlob> blob, const std::string& label)
    : blob_(std::move(blob)) {
  const auto& pieces = blob_->pieces;
  if (pieces.empty()) Fail<FormatError>("{}: tokenizer has no pieces", label);
  mergeable_.Build(pieces, false);
  reserved_.Build(pieces, true);
  byte_ids_.fill(-1);
  std::vector<std::string> surfaces(pieces.size());
  for (size_t id = 0; id < pieces.size(); ++id) {
    const auto& p = pieces[id];
    max_piece_bytes_ = std::max(max_piece_bytes_, p.text.size());
    switch (p.type) {
      case format::PieceType::kByte: {
        const uint8_t b = static_cast<uint8_t>(std::stoi(p.text.substr(3, 2), nullptr, 16));
        if (byte_ids_[b] >= 0) {
          Fail<FormatError>("{}: tokenizer piece {}: byte piece '{}' repeats piece {}", label, id,
                            p.text, byte_ids_[b]);
        }
        byte_ids_[b] = static_cast<int32_t>(id);
        surfaces[id] = std::string(1, static_cast<char>(b));
        break;
      }
      case format::PieceType::kControl:
      case format::PieceType::kUnknown:
        break;
      case format::PieceType::kUserDefined:
        user_by_first_byte_[static_cast<uint8_t>(p.text[0])].push_back(static_cast<int32_t>(id));
        [[fallthrough]];
      case format::PieceType::kNormal: {
        std::string s;
        for (size_t i = 0; i < p.text.size();) {
          if (p.text.compare(i, kSpaceSymbol.size(), kSpaceSymbol) == 0) {
            s += ' ';
            i += kSpaceSymbol.size();
          } else {
            s += p.text[i++];
          }
        }
        surfaces[id] = std::move(s);
        break;
      }
    }
  }
  // Packed: one buffer and the offsets (a string per id cost 32 bytes of header each).
  surface_start_.reserve(pieces.size() + 1);
  for (const std::string& s : surfaces) {
    surface_start_.push_back(static_cast<uint32_t>(surface_bytes_.size()));
    surface_bytes_ += s;
  }
  surface_start_.push_back(static_cast<uint32_t>(surface_bytes_.size()));
  split_at_space_ = true;
  for (const auto& p : pieces) {
    if (IsReservedType(p.type)) continue;
    if (p.text.find(kSpaceSymbol, 1) != std::string::npos) split_at_space_ = false;
    if (p.type == format::PieceType::kUserDefined) has_user_defined_ = true;
  }
  for (auto& ids : user_by_first_byte_) {
    std::stable_sort(ids.begin(), ids.end(), [&](int32_t a, int32_t b) {
      return pieces[a].text.size() > pieces[b].text.size();
    });
  }
}

Tokenizer Tokenizer::FromBlob(std::span<const uint8_t> blob, const std::string& label) {
  return Tokenizer(format::ParseTokenizerBlob(blob, label), label);
}

Tokenizer Tokenizer::FromCact(const format::CactFile& file) {
  return Tokenizer(file.shared_tokenizer(), file.path());  // parsed and validated on open
}

int32_t Tokenizer::PieceToId(std::string_view text) const {
  const int32_t id = reserved_.Find(blob_->pieces, text);
  return id >= 0 ? id : mergeable_.Find(blob_->pieces, text);
}

size_t Tokenizer::MatchUserDefined(std::string_view text) const {
  for (int32_t id : user_by_first_byte_[static_cast<uint8_t>(text[0])]) {
    const std::string& p = blob_->pieces[id].text;
    if (text.size() >= p.size() && std::memcmp(text.data(), p.data(), p.size()) == 0) {
      return p.size();
    }
  }
  return 0;
}

void Tokenizer::Normalize(std::string_view text, bool dummy_prefix, std::string* out) const {
  if (text.empty()) return;
  out->reserve(out->size() + text.size() + text.size() / 4 + 3);
  if (dummy_prefix) out->append(kSpaceSymbol);
  const auto* s = reinterpret_cast<const uint8_t*>(text.data());
  size_t i = 0;
  while (i < text.size()) {
    if (const size_t user = MatchUserDefined(text.substr(i)); user > 0) {
      out->append(text.substr(i, user));
      i += user;
    } else if (s[i] == ' ') {
      out->append(kSpaceSymbol);
      ++i;
    } else if (s[i] < 0x80) {
      out->push_back(static_cast<char>(s[i]));
      ++i;
    } else if (const size_t len = Utf8SequenceLength(s + i, text.size() - i); len > 0) {
      out->append(text.substr(i, len));
      i += len;
    } else {
      out->append(kReplacementChar);
      ++i;
    }
  }
}

void Tokenizer::EmitSymbol(std::string_view symbol, std::vector<int32_t>* out,
                           bool* prev_unk) const {
  int32_t id = reserved_.Find(blob_->pieces, symbol);
  if (id < 0) id = mergeable_.Find(blob_->pieces, symbol);
  if (id >= 0) {
    out->push_back(id);
    *prev_unk = false;
    return;
  }
  if (blob_->byte_fallback) {
    for (unsigned char b : symbol) out->push_back(byte_ids_[b] >= 0 ? byte_ids_[b] : unk_id());
    *prev_unk = true;  // no merging of unknown runs with byte fallback: bytes were emitted
    return;
  }
  if (!*prev_unk) out->push_back(unk_id());
  *prev_unk = true;
}

struct Tokenizer::Scratch {
  std::vector<Symbol> symbols;
  std::vector<MergeCandidate> heap;  // binary max-heap under MergeOrder
  std::vector<int32_t> pair_id;      // small words: piece id of symbol i + its next, or -1
};

int32_t Tokenizer::PairPiece(std::string_view word, const Symbol& left, const Symbol& right) const {
  const uint32_t bytes = left.bytes + right.bytes;
  if (bytes > max_piece_bytes_) return -1;
  return mergeable_.Find(blob_->pieces, word.substr(left.begin, bytes));
}

void Tokenizer::EncodeWord(std::string_view word, Scratch& scratch, std::vector<int32_t>* out,
                           bool* prev_unk) const {
  auto& symbols = scratch.symbols;
  symbols.clear();
  for (size_t i = 0; i < word.size();) {
    const size_t len = std::min(OneCharLen(static_cast<uint8_t>(word[i])), word.size() - i);
    const auto n = static_cast<int32_t>(symbols.size());
    symbols.push_back({static_cast<uint32_t>(i), static_cast<uint32_t>(len), n - 1, n + 1});
    i += len;
  }
  symbols.back().next = -1;
  const auto n = static_cast<int32_t>(symbols.size());

  if (n <= kSmallWordSymbols) {
    // Few symbols: scan for the best pair each round (highest score, leftmost on ties). This is
    // the order the priority queue below produces, without its allocation and stale entries.
    auto& pair_id = scratch.pair_id;
    pair_id.assign(n, -1);
    for (int32_t i = 0; i + 1 < n; ++i) pair_id[i] = PairPiece(word, symbols[i], symbols[i + 1]);
    for (;;) {
      int32_t best = -1;
      float best_score = 0;
      for (int32_t i = 0; i >= 0; i = symbols[i].next) {
        const int32_t id = pair_id[i];
        if (id >= 0 && (best < 0 || blob_->pieces[id].score > best_score)) {
          best = i;
          best_score = blob_->pieces[id].score;
        }
      }
      if (best < 0) break;
      Symbol& left = symbols[best];
      Symbol& right = symbols[left.next];
      left.bytes += right.bytes;
      left.next = right.next;
      if (right.next >= 0) symbols[right.next].prev = best;
      right.bytes = 0;
      pair_id[best] = left.next >= 0 ? PairPiece(word, left, symbols[left.next]) : -1;
      if (left.prev >= 0) pair_id[left.prev] = PairPiece(word, symbols[left.prev], left);
    }
  } else {
    auto& heap = scratch.heap;
    heap.clear();
    auto maybe_add = [&](int32_t left, int32_t right) {
      if (left < 0 || right < 0) return;
      const int32_t id = PairPiece(word, symbols[left], symbols[right]);
      if (id < 0) return;
      heap.push_back(
          {blob_->pieces[id].score, left, right, symbols[left].bytes + symbols[right].bytes});
      std::push_heap(heap.begin(), heap.end(), MergeOrder{});
    };
    for (int32_t i = 1; i < n; ++i) maybe_add(i - 1, i);
    while (!heap.empty()) {
      std::pop_heap(heap.begin(), heap.end(), MergeOrder{});
      const MergeCandidate top = heap.back();
      heap.pop_back();
      Symbol& left = symbols[top.left];
      Symbol& right = symbols[top.right];
      // Stale: one side was merged away or grew since this candidate was queued.
      if (left.bytes == 0 || right.bytes == 0 || left.bytes + right.bytes != top.bytes) continue;
      left.bytes = top.bytes;
      left.next = right.next;
      if (right.next >= 0) symbols[right.next].prev = top.left;
      right.bytes = 0;
      maybe_add(left.prev, top.left);
      maybe_add(top.left, left.next);
    }
  }
  for (int32_t i = 0; i >= 0; i = symbols[i].next) {
    EmitSymbol(word.substr(symbols[i].begin, symbols[i].bytes), out, prev_unk);
  }
}

void Tokenizer::EncodeSegment(std::string_view seg, Scratch& scratch, std::vector<int32_t>* out,
                              bool* prev_unk) const {
  if (seg.empty()) return;
  if (!split_at_space_) {
    EncodeWord(seg, scratch, out, prev_unk);
    return;
  }
  // No piece has "▁" past its first character, so no merge crosses the start of a "▁": each
  // "▁"-initial word is merged on its own (same result, shorter queues).
  size_t begin = 0;
  while (begin < seg.size()) {
    size_t end = seg.find(kSpaceSymbol, begin + 1);
    if (end == std::string_view::npos) end = seg.size();
    EncodeWord(seg.substr(begin, end - begin), scratch, out, prev_unk);
    begin = end;
  }
}

void Tokenizer::EncodeAppend(std::string_view text, bool dummy_prefix,
                             std::vector<int32_t>* out) const {
  std::string norm;
  Normalize(text, dummy_prefix, &norm);
  const std::string_view view(norm);
  Scratch scratch;
  // Frozen (user-defined) symbols never merge, so the text between them is encoded separately.
  bool prev_unk = false;
  size_t seg_begin = 0;
  for (size_t i = 0; i < view.size();) {
    const size_t user = has_user_defined_ ? MatchUserDefined(view.substr(i)) : 0;
    if (user == 0) {
      i += std::min(OneCharLen(static_cast<uint8_t>(view[i])), view.size() - i);
      continue;
    }
    EncodeSegment(view.substr(seg_begin, i - seg_begin), scratch, out, &prev_unk);
    EmitSymbol(view.substr(i, user), out, &prev_unk);
    i += user;
    seg_begin = i;
  }
  EncodeSegment(view.substr(seg_begin), scratch, out, &prev_unk);
}

std::vector<int32_t> Tokenizer::Encode(std::string_view text, bool dummy_prefix) const {
  std::vector<int32_t> ids;
  EncodeAppend(text, dummy_prefix, &ids);
  return ids;
}

std::string Tokenizer::Decode(std::span<const int32_t> ids) const {
  std::string out;
  std::string bytes;     // pending run of BYTE pieces
  bool at_start = true;  // no visible piece yet: its leading "▁" is the dummy prefix
  auto flush_bytes = [&] {
    if (bytes.empty()) return;
    AppendUtf8Sanitized(bytes, &out);
    bytes.clear();
    at_start = false;
  };
  for (size_t k = 0; k < ids.size(); ++k) {
    const int32_t id = ids[k];
    if (!valid_id(id)) {
      Fail<InvalidInput>("token id {} (position {}) is out of range: vocab has {} pieces (0..{})",
                         id, k, vocab_size(), vocab_size() - 1);
    }
    const auto t = type(id);
    if (t == format::PieceType::kByte) {
      bytes += TokenBytes(id);
      continue;
    }
    flush_bytes();
    if (t == format::PieceType::kControl || t == format::PieceType::kUnknown) continue;
    std::string_view s = TokenBytes(id);
    if (at_start && blob_->add_dummy_prefix && piece(id).starts_with(kSpaceSymbol))
      s.remove_prefix(1);
    out.append(s);
    at_start = false;
  }
  flush_bytes();
  return out;
}

}  // namespace needle::text
