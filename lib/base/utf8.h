// UTF-8 validation helpers with SentencePiece's rules (overlong forms, surrogates and code points
// above U+10FFFF are invalid).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace needle {

inline constexpr std::string_view kReplacementChar = "\xEF\xBF\xBD";  // U+FFFD

// Length (1..4) of the valid UTF-8 sequence at s[0..n), n >= 1, or 0 if it is invalid.
inline size_t Utf8SequenceLength(const uint8_t* s, size_t n) {
  const uint8_t c = s[0];
  if (c < 0x80) return 1;
  size_t len;
  uint32_t cp;
  if ((c & 0xE0) == 0xC0) {
    len = 2, cp = c & 0x1F;
  } else if ((c & 0xF0) == 0xE0) {
    len = 3, cp = c & 0x0F;
  } else if ((c & 0xF8) == 0xF0) {
    len = 4, cp = c & 0x07;
  } else {
    return 0;
  }
  if (n < len) return 0;
  for (size_t i = 1; i < len; ++i) {
    if ((s[i] & 0xC0) != 0x80) return 0;
    cp = (cp << 6) | (s[i] & 0x3F);
  }
  constexpr uint32_t kMinForLength[5] = {0, 0, 0x80, 0x800, 0x10000};
  if (cp < kMinForLength[len] || cp > 0x10FFFF || (cp >= 0xD800 && cp < 0xE000)) return 0;
  return len;
}

// Offset of the first invalid UTF-8 byte in `text`, or npos.
inline size_t FirstInvalidUtf8(std::string_view text) {
  const auto* s = reinterpret_cast<const uint8_t*>(text.data());
  size_t i = 0;
  while (i < text.size()) {
    const size_t len = Utf8SequenceLength(s + i, text.size() - i);
    if (len == 0) return i;
    i += len;
  }
  return std::string_view::npos;
}

// Appends `bytes` to `out` with every byte that does not start a valid sequence replaced by
// U+FFFD (one replacement per invalid byte, as SentencePiece does).
inline void AppendUtf8Sanitized(std::string_view bytes, std::string* out) {
  const auto* s = reinterpret_cast<const uint8_t*>(bytes.data());
  size_t i = 0;
  while (i < bytes.size()) {
    const size_t len = Utf8SequenceLength(s + i, bytes.size() - i);
    if (len == 0) {
      out->append(kReplacementChar);
      ++i;
    } else {
      out->append(bytes.substr(i, len));
      i += len;
    }
  }
}

}  // namespace needle
