// The RAW tokenizer blob stored as the last tensor of a .cact file: a SentencePiece BPE model dump.
//
// Layout (little-endian, spec: FORMAT.md "Tokenizer blob"):
//   header  struct '<IIIIIBBH' (24 B): n_pieces, pad_id, eos_id, bos_id, unk_id,
//           add_dummy_prefix (u8), byte_fallback (u8), pad (u16)
//   then n_pieces records in id order, each struct '<fBH' (7 B) + text:
//           f32 score, u8 type (PieceType), u16 byte length, then that many UTF-8 bytes.
// Bytes after the last record must be zero (padding); anything else is an error.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace needle::format {

// SentencePiece's piece types, as stored in the blob (ModelProto.SentencePiece.Type - 1).
enum class PieceType : uint8_t {
  kNormal = 0,
  kUnknown = 1,
  kControl = 2,      // <s>, </s>, <pad>: no surface text
  kUserDefined = 3,  // matched verbatim anywhere in the text, never split (chat markers)
  kByte = 4,         // <0x00> .. <0xFF>: byte fallback
};
inline constexpr uint8_t kMaxPieceType = 4;

std::string_view PieceTypeName(PieceType t);

#pragma pack(push, 1)
struct TokenizerBlobHeader {
  uint32_t n_pieces;
  uint32_t pad_id;
  uint32_t eos_id;
  uint32_t bos_id;
  uint32_t unk_id;
  uint8_t add_dummy_prefix;  // 0 or 1
  uint8_t byte_fallback;     // 0 or 1
  uint16_t pad;
};
#pragma pack(pop)
static_assert(sizeof(TokenizerBlobHeader) == 24, "must match struct '<IIIIIBBH'");
inline constexpr size_t kPieceRecordFixedBytes = 7;  // struct '<fBH' before the text

struct TokenizerPiece {
  std::string text;  // UTF-8 bytes as stored (U+2581 stands for a space)
  float score = 0;   // BPE merge priority: higher merges first
  PieceType type = PieceType::kNormal;
};

// The decoded blob. Ids are indices into `pieces`.
struct TokenizerBlob {
  uint32_t pad_id = 0, eos_id = 1, bos_id = 2, unk_id = 3;
  bool add_dummy_prefix = true;
  bool byte_fallback = true;
  std::vector<TokenizerPiece> pieces;
};

// Parses and validates a blob. Throws FormatError naming `label`, the piece index and the field
// (truncated record, unknown type, non-finite score, invalid UTF-8, special id out of range or of
// the wrong type, duplicate piece text, malformed byte piece, non-zero trailing bytes).
// Never reads outside `blob`.
TokenizerBlob ParseTokenizerBlob(std::span<const uint8_t> blob, const std::string& label);

// The inverse of ParseTokenizerBlob (no padding). Used by tests and model writers.
std::vector<uint8_t> SerializeTokenizerBlob(const TokenizerBlob& blob);

}  // namespace needle::format
