// Parsing, validation and serialization of the RAW tokenizer blob (layout in tokenizer_blob.h).
#include "format/tokenizer_blob.h"

#include <fmt/format.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <string_view>
#include <vector>

#include "base/error.h"
#include "base/fp16.h"
#include "base/utf8.h"

namespace needle::format {

namespace {

int HexDigit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace

std::string_view PieceTypeName(PieceType t) {
  switch (t) {
    case PieceType::kNormal:
      return "NORMAL";
    case PieceType::kUnknown:
      return "UNKNOWN";
    case PieceType::kControl:
      return "CONTROL";
    case PieceType::kUserDefined:
      return "USER_DEFINED";
    case PieceType::kByte:
      return "BYTE";
  }
  return "?";
}

TokenizerBlob ParseTokenizerBlob(std::span<const uint8_t> blob, const std::string& label) {
  if (blob.size() < sizeof(TokenizerBlobHeader)) {
    Fail<FormatError>("{}: tokenizer blob has {} bytes, less than its {}-byte header", label,
                      blob.size(), sizeof(TokenizerBlobHeader));
  }
  TokenizerBlobHeader h;
  std::memcpy(&h, blob.data(), sizeof(h));
  if (h.n_pieces == 0) Fail<FormatError>("{}: tokenizer blob declares 0 pieces", label);
  // Each record takes at least 7 bytes: reject absurd counts before allocating.
  const uint64_t body = blob.size() - sizeof(h);
  if (uint64_t{h.n_pieces} * kPieceRecordFixedBytes > body) {
    Fail<FormatError>(
        "{}: tokenizer blob declares {} pieces but its {} record bytes hold at most {}", label,
        h.n_pieces, body, body / kPieceRecordFixedBytes);
  }
  if (h.add_dummy_prefix > 1 || h.byte_fallback > 1) {
    Fail<FormatError>(
        "{}: tokenizer blob flags add_dummy_prefix={} byte_fallback={} (must be 0 or 1)", label,
        h.add_dummy_prefix, h.byte_fallback);
  }
  if (h.pad != 0)
    Fail<FormatError>("{}: tokenizer blob header pad is {} (must be 0)", label, h.pad);

  TokenizerBlob out;
  out.pad_id = h.pad_id;
  out.eos_id = h.eos_id;
  out.bos_id = h.bos_id;
  out.unk_id = h.unk_id;
  out.add_dummy_prefix = h.add_dummy_prefix != 0;
  out.byte_fallback = h.byte_fallback != 0;
  out.pieces.resize(h.n_pieces);

  size_t pos = sizeof(h);
  for (uint32_t i = 0; i < h.n_pieces; ++i) {
    if (blob.size() - pos < kPieceRecordFixedBytes) {
      Fail<FormatError>("{}: tokenizer piece {}: record header truncated at byte {} of {}", label,
                        i, pos, blob.size());
    }
    TokenizerPiece& p = out.pieces[i];
    p.score = LoadLE<float>(blob.data() + pos);
    const uint8_t type = blob[pos + 4];
    const uint16_t len = LoadLE<uint16_t>(blob.data() + pos + 5);
    pos += kPieceRecordFixedBytes;
    if (!std::isfinite(p.score)) {
      Fail<FormatError>("{}: tokenizer piece {}: score is {} (must be finite)", label, i, p.score);
    }
    if (type > kMaxPieceType) {
      Fail<FormatError>("{}: tokenizer piece {}: type {} is not a piece type (0..{})", label, i,
                        type, kMaxPieceType);
    }
    p.type = static_cast<PieceType>(type);
    if (len == 0) Fail<FormatError>("{}: tokenizer piece {}: text length is 0", label, i);
    if (blob.size() - pos < len) {
      Fail<FormatError>("{}: tokenizer piece {}: text of {} bytes runs past the blob end ({} left)",
                        label, i, len, blob.size() - pos);
    }
    p.text.assign(reinterpret_cast<const char*>(blob.data() + pos), len);
    pos += len;
    if (const size_t bad = FirstInvalidUtf8(p.text); bad != std::string_view::npos) {
      Fail<FormatError>("{}: tokenizer piece {}: text is not valid UTF-8 (byte {} of {})", label, i,
                        bad, len);
    }
    if (p.type == PieceType::kByte) {
      const std::string& t = p.text;
      if (t.size() != 6 || t.compare(0, 3, "<0x") != 0 || t[5] != '>' || HexDigit(t[3]) < 0 ||
          HexDigit(t[4]) < 0) {
        Fail<FormatError>("{}: tokenizer piece {}: BYTE piece text '{}' is not of the form <0xHH>",
                          label, i, t);
      }
    }
  }
  // Duplicate check after all strings are in place: an open-addressing table of piece indices
  // (a power of two >= 2 n slots, linear probing; no allocation per piece, this runs on every
  // load).
  {
    size_t slots = 16;
    while (slots < 2 * size_t{h.n_pieces}) slots *= 2;
    constexpr uint32_t kEmpty = UINT32_MAX;
    std::vector<uint32_t> table(slots, kEmpty);
    const std::hash<std::string_view> hash;
    for (uint32_t i = 0; i < h.n_pieces; ++i) {
      const std::string_view text = out.pieces[i].text;
      for (size_t k = hash(text) & (slots - 1);; k = (k + 1) & (slots - 1)) {
        if (table[k] == kEmpty) {
          table[k] = i;
          break;
        }
        if (out.pieces[table[k]].text == text) {
          Fail<FormatError>("{}: tokenizer piece {}: text '{}' duplicates piece {}", label, i, text,
                            table[k]);
        }
      }
    }
  }
  for (size_t k = pos; k < blob.size(); ++k) {
    if (blob[k] != 0) {
      Fail<FormatError>(
          "{}: tokenizer blob has non-zero byte 0x{:02X} at offset {} after the last "
          "piece (ends at {})",
          label, blob[k], k, pos);
    }
  }

  struct Special {
    const char* field;
    uint32_t id;
  };
  for (const Special& s : {Special{"pad_id", h.pad_id}, Special{"eos_id", h.eos_id},
                           Special{"bos_id", h.bos_id}, Special{"unk_id", h.unk_id}}) {
    if (s.id >= h.n_pieces) {
      Fail<FormatError>("{}: tokenizer header {} = {} is out of range (vocab {})", label, s.field,
                        s.id, h.n_pieces);
    }
  }
  if (out.pieces[h.unk_id].type != PieceType::kUnknown) {
    Fail<FormatError>(
        "{}: tokenizer header unk_id = {} names piece '{}' of type {} (must be UNKNOWN)", label,
        h.unk_id, out.pieces[h.unk_id].text, PieceTypeName(out.pieces[h.unk_id].type));
  }
  for (uint32_t i = 0; i < h.n_pieces; ++i) {
    if (out.pieces[i].type == PieceType::kUnknown && i != h.unk_id) {
      Fail<FormatError>("{}: tokenizer piece {}: second UNKNOWN piece (unk_id is {})", label, i,
                        h.unk_id);
    }
  }
  return out;
}

std::vector<uint8_t> SerializeTokenizerBlob(const TokenizerBlob& blob) {
  TokenizerBlobHeader h{};
  h.n_pieces = static_cast<uint32_t>(blob.pieces.size());
  h.pad_id = blob.pad_id;
  h.eos_id = blob.eos_id;
  h.bos_id = blob.bos_id;
  h.unk_id = blob.unk_id;
  h.add_dummy_prefix = blob.add_dummy_prefix ? 1 : 0;
  h.byte_fallback = blob.byte_fallback ? 1 : 0;
  std::vector<uint8_t> out(sizeof(h));
  std::memcpy(out.data(), &h, sizeof(h));
  for (const TokenizerPiece& p : blob.pieces) {
    uint8_t rec[kPieceRecordFixedBytes];
    const uint16_t len = static_cast<uint16_t>(p.text.size());
    std::memcpy(rec, &p.score, 4);
    rec[4] = static_cast<uint8_t>(p.type);
    std::memcpy(rec + 5, &len, 2);
    out.insert(out.end(), rec, rec + sizeof(rec));
    out.insert(out.end(), p.text.begin(), p.text.begin() + len);
  }
  return out;
}

}  // namespace needle::format
