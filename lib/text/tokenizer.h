// SentencePiece BPE tokenizer built from a .cact tokenizer blob; ids identical to SentencePiece.
//
// Encoding, as SentencePiece 0.1.x does it for a BPE model with identity normalization:
//   1. normalize: user-defined pieces are copied verbatim; every ' ' becomes U+2581 ("▁");
//      each byte of invalid UTF-8 becomes U+FFFD; "▁" is prepended to non-empty text when the
//      dummy prefix is on. Nothing else changes (no whitespace folding, tabs/newlines kept).
//   2. split into symbols: at each position the longest user-defined piece (frozen, never merged)
//      or else one UTF-8 character.
//   3. merge: repeatedly join the adjacent pair whose concatenation is a piece with the highest
//      score (ties: the leftmost pair), using a priority queue: O(n log n).
//   4. map: each symbol to its id; a symbol that is no piece becomes its UTF-8 bytes as <0xNN>
//      pieces (byte_fallback) or unk (consecutive unknown symbols collapse into one unk).
// Thread-safety: const methods may be called concurrently.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "format/tokenizer_blob.h"

namespace needle::format {
class CactFile;
}

namespace needle::text {

class Tokenizer {
 public:
  // Validates semantic facts the blob parser cannot (e.g. BYTE pieces map to distinct bytes).
  explicit Tokenizer(format::TokenizerBlob blob, const std::string& label = "<tokenizer>");
  // Shares a parsed blob (a model file's: its pieces are not copied).
  explicit Tokenizer(std::shared_ptr<const format::TokenizerBlob> blob,
                     const std::string& label = "<tokenizer>");
  // Parses the RAW blob (throws FormatError naming `label`).
  static Tokenizer FromBlob(std::span<const uint8_t> blob, const std::string& label);
  // The tokenizer stored as the last tensor of a model file.
  static Tokenizer FromCact(const format::CactFile& file);

  // Token ids of `text`. `dummy_prefix` prepends "▁" to non-empty text (SentencePiece's default
  // is the model's add_dummy_prefix(); the engine encodes turns without it).
  std::vector<int32_t> Encode(std::string_view text, bool dummy_prefix) const;
  void EncodeAppend(std::string_view text, bool dummy_prefix, std::vector<int32_t>* out) const;
  // With the model's own add_dummy_prefix setting (what SentencePiece's Encode does).
  std::vector<int32_t> Encode(std::string_view text) const {
    return Encode(text, add_dummy_prefix());
  }

  // Text of `ids`: runs of byte pieces are reassembled as UTF-8 (each invalid byte becomes
  // U+FFFD), control and unknown pieces are skipped, "▁" becomes a space, and the leading "▁" of
  // the first visible piece is dropped when the model adds a dummy prefix. Throws InvalidInput
  // for an id outside [0, vocab_size()).
  std::string Decode(std::span<const int32_t> ids) const;

  // Bytes a token adds to generated text (no dummy-prefix stripping): the byte of a BYTE piece,
  // nothing for CONTROL/UNKNOWN, else the piece text with "▁" as space. Id must be in range.
  std::string_view TokenBytes(int32_t id) const {
    return std::string_view(surface_bytes_)
        .substr(surface_start_[id], surface_start_[id + 1] - surface_start_[id]);
  }

  int32_t vocab_size() const { return static_cast<int32_t>(blob_->pieces.size()); }
  bool valid_id(int64_t id) const { return id >= 0 && id < vocab_size(); }
  const std::string& piece(int32_t id) const { return blob_->pieces[id].text; }
  format::PieceType type(int32_t id) const { return blob_->pieces[id].type; }
  float score(int32_t id) const { return blob_->pieces[id].score; }
  // Id of the piece spelled exactly `text` (any type), or -1.
  int32_t PieceToId(std::string_view text) const;

  int32_t pad_id() const { return static_cast<int32_t>(blob_->pad_id); }
  int32_t eos_id() const { return static_cast<int32_t>(blob_->eos_id); }
  int32_t bos_id() const { return static_cast<int32_t>(blob_->bos_id); }
  int32_t unk_id() const { return static_cast<int32_t>(blob_->unk_id); }
  bool add_dummy_prefix() const { return blob_->add_dummy_prefix; }
  bool byte_fallback() const { return blob_->byte_fallback; }
  // Id of the <0xNN> piece for byte b, or -1 when the vocabulary has none.
  int32_t byte_id(uint8_t b) const { return byte_ids_[b]; }
  // Longest piece in bytes (merges producing longer strings are never looked up).
  size_t max_piece_bytes() const { return max_piece_bytes_; }

 private:
  // Length of the longest user-defined piece starting at text[0], or 0.
  size_t MatchUserDefined(std::string_view text) const;
  // Appends the SentencePiece-normalized form of `text` to `out`.
  void Normalize(std::string_view text, bool dummy_prefix, std::string* out) const;
  struct Symbol;
  struct Scratch;  // per-call work buffers
  // BPE over text between frozen symbols; appends ids.
  void EncodeSegment(std::string_view segment, Scratch& scratch, std::vector<int32_t>* out,
                     bool* prev_unk) const;
  // BPE over one word (a run no merge can cross); appends ids.
  void EncodeWord(std::string_view word, Scratch& scratch, std::vector<int32_t>* out,
                  bool* prev_unk) const;
  // Id of the mergeable piece spelled by two adjacent symbols of `word`, or -1.
  int32_t PairPiece(std::string_view word, const Symbol& left, const Symbol& right) const;
  // Maps a final symbol to ids (piece, byte fallback or unk).
  void EmitSymbol(std::string_view symbol, std::vector<int32_t>* out, bool* prev_unk) const;

  // Open-addressing map from piece text to id; stores ids only, so moving the Tokenizer is safe.
  class PieceTable {
   public:
    void Build(const std::vector<format::TokenizerPiece>& pieces, bool reserved);
    int32_t Find(const std::vector<format::TokenizerPiece>& pieces, std::string_view text) const;

   private:
    struct Slot {
      uint32_t tag;  // high hash bits: most mismatches are rejected without touching the text
      int32_t id;    // -1 = empty
    };
    std::vector<Slot> slots_;  // size is a power of two, load <= 1/4
    uint64_t mask_ = 0;
  };

  std::shared_ptr<const format::TokenizerBlob> blob_;  // never null
  // SentencePiece keeps two maps: mergeable pieces (NORMAL, USER_DEFINED) and reserved ones
  // (CONTROL, UNKNOWN, BYTE); final symbols are looked up in the reserved map first.
  PieceTable mergeable_;
  PieceTable reserved_;
  // User-defined piece ids by first byte, longest first.
  std::array<std::vector<int32_t>, 256> user_by_first_byte_;
  std::array<int32_t, 256> byte_ids_{};
  std::string surface_bytes_;            // every id's TokenBytes, in id order
  std::vector<uint32_t> surface_start_;  // [vocab + 1] offsets into surface_bytes_
  size_t max_piece_bytes_ = 0;
  bool split_at_space_ = false;  // no mergeable piece has "▁" after its first character
  bool has_user_defined_ = false;
};

}  // namespace needle::text
