// CactFile: parsing and validation of .cact v2 files. Every offset and size is checked with
// overflow-safe arithmetic before any tensor byte is touched; errors name the tensor.
#include "format/cact.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "base/error.h"
#include "base/fp16.h"
#include "format/sha256.h"

namespace needle::format {

uint64_t TensorInfo::elements() const {
  if (ndim == 0) return 0;
  uint64_t n = 1;
  for (uint32_t i = 0; i < ndim; ++i) n *= shape[i];
  return n;
}

uint64_t TensorInfo::cols() const {
  uint64_t n = 1;
  for (uint32_t i = 1; i < ndim; ++i) n *= shape[i];
  return n;
}

std::string TensorInfo::shape_str() const {
  std::string s = "[";
  for (uint32_t i = 0; i < ndim; ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

uint64_t CqBlobBytes(uint64_t rows, uint64_t cols, uint32_t group, uint32_t record_bits) {
  const uint64_t in_pad = (cols + group - 1) / group * group;
  return rows * (in_pad * CodeBits(record_bits) / 8) + rows * (in_pad / group) * 2;
}

uint16_t CqView::norm_bits(uint64_t r, uint64_t g) const {
  return LoadLE<uint16_t>(norms + 2 * (r * groups_per_row + g));
}
float CqView::norm(uint64_t r, uint64_t g) const { return F16ToF32(norm_bits(r, g)); }

CactFile::CactFile(std::shared_ptr<MappedFile> file) : file_(std::move(file)) {}

CactFile CactFile::Open(const std::string& path, LoadMode mode) {
  CactFile f(std::make_shared<MappedFile>(path, mode));
  f.Parse();
  return f;
}

CactFile CactFile::FromBytes(std::vector<uint8_t> bytes, const std::string& label) {
  CactFile f(std::make_shared<MappedFile>(std::move(bytes), label));
  f.Parse();
  return f;
}

std::span<const float> CactFile::codebook(uint32_t bits) const {
  switch (bits) {
    case 2:
      return std::span<const float>(codebooks_).subspan(0, 4);
    case 3:
      return std::span<const float>(codebooks_).subspan(4, 8);
    case 4:
      return std::span<const float>(codebooks_).subspan(12, 16);
  }
  Fail<FormatError>("{}: no codebook for {}-bit codes", path(), bits);
}

const TensorInfo* CactFile::find(std::string_view name) const {
  const auto it = std::lower_bound(
      by_name_.begin(), by_name_.end(), name,
      [this](uint32_t i, std::string_view n) { return std::string_view(tensors_[i].name) < n; });
  return it != by_name_.end() && tensors_[*it].name == name ? &tensors_[*it] : nullptr;
}

const TensorInfo& CactFile::tensor(std::string_view name) const {
  const TensorInfo* t = find(name);
  if (!t) Fail<FormatError>("{}: no tensor named '{}'", path(), name);
  return *t;
}

std::span<const uint8_t> CactFile::data(const TensorInfo& t) const {
  return bytes().subspan(t.offset, t.nbytes);
}

CqView CactFile::cq(const TensorInfo& t) const {
  if (t.dtype != DType::kCQ)
    Fail<FormatError>("{}: tensor '{}' is {}, not CQ", path(), t.name, DTypeName(t.dtype));
  CqView v;
  v.rows = t.rows();
  v.cols = t.cols();
  v.group = t.group;
  v.record_bits = t.bits;
  v.in_pad = (v.cols + t.group - 1) / t.group * t.group;
  v.row_bytes = v.in_pad * CodeBits(t.bits) / 8;
  v.groups_per_row = v.in_pad / t.group;
  v.codes = bytes().data() + t.offset;
  v.norms = v.codes + v.rows * v.row_bytes;
  return v;
}

std::vector<float> CactFile::floats(const TensorInfo& t) const {
  const FloatView v = float_view(t);
  std::vector<float> out(v.size);
  v.Read(0, v.size, out.data());
  return out;
}

FloatView CactFile::float_view(const TensorInfo& t) const {
  if (t.dtype != DType::kF16 && t.dtype != DType::kF32)
    Fail<FormatError>("{}: tensor '{}' is {}, expected FP16 or FP32", path(), t.name,
                      DTypeName(t.dtype));
  return FloatView{data(t).data(), t.dtype, t.elements()};
}

void FloatView::Read(uint64_t first, uint64_t count, float* out) const {
  if (dtype == DType::kF16)
    F16ToF32Span(data + 2 * first, count, out);
  else
    std::memcpy(out, data + 4 * first, 4 * count);  // little-endian file and host
}

void CactFile::Evict(const TensorInfo& t) const {
  const auto d = data(t);
  file_->Evict(static_cast<size_t>(d.data() - bytes().data()), d.size());
}

void CactFile::EvictBytes(const uint8_t* p, size_t n) const {
  const uint8_t* begin = bytes().data();
  if (p < begin || p + n > begin + bytes().size()) return;  // not in the file's bytes
  file_->Evict(static_cast<size_t>(p - begin), n);
}

std::string CactFile::Sha256Hex() const {
  Sha256 hash;
  std::vector<uint8_t> block(size_t{1} << 16);
  const auto all = bytes();
  for (size_t at = 0; at < all.size(); at += block.size()) {
    const std::span<uint8_t> part(block.data(), std::min(block.size(), all.size() - at));
    file_->ReadAt(at, part);
    hash.Update(part);
  }
  return hash.HexDigest();
}

void CactFile::ReadAt(const uint8_t* p, std::span<uint8_t> out) const {
  const auto all = bytes();
  const auto at = reinterpret_cast<uintptr_t>(p), base = reinterpret_cast<uintptr_t>(all.data());
  if (at < base || at - base > all.size())
    Fail<IoError>("{}: ReadAt of a pointer outside the file", path());
  file_->ReadAt(at - base, out);
}

namespace {

// a * b, or throws naming the tensor if the product does not fit in 64 bits.
uint64_t CheckedMul(uint64_t a, uint64_t b, const std::string& label, const TensorInfo& t) {
  uint64_t r = 0;
  if (__builtin_mul_overflow(a, b, &r))
    Fail<FormatError>("{}: tensor #{} '{}': shape {} is too large (size overflows 64 bits)", label,
                      t.index, t.name, t.shape_str());
  return r;
}

// Expected blob size of a record, or throws naming the tensor.
uint64_t ExpectedBytes(const std::string& label, const TensorInfo& t) {
  uint64_t elements = t.ndim == 0 ? 0 : 1;
  for (uint32_t k = 0; k < t.ndim; ++k) elements = CheckedMul(elements, t.shape[k], label, t);
  switch (t.dtype) {
    case DType::kF16:
      return CheckedMul(elements, 2, label, t);
    case DType::kF32:
      return CheckedMul(elements, 4, label, t);
    case DType::kRaw:
      return t.nbytes;
    case DType::kCQ: {
      if (t.ndim != 2)
        Fail<FormatError>("{}: tensor #{} '{}': CQ tensor must be 2-D, has ndim {}", label, t.index,
                          t.name, t.ndim);
      if (t.bits != 2 && t.bits != 3 && t.bits != 4 && t.bits != kTernaryBits)
        Fail<FormatError>(
            "{}: tensor #{} '{}': unknown CQ bits {} (expected 2, 3, 4 or 5 = "
            "ternary)",
            label, t.index, t.name, t.bits);
      if (t.group == 0 || (t.group & (t.group - 1)) != 0 || t.group > 65536)
        Fail<FormatError>("{}: tensor #{} '{}': CQ group {} is not a power of two <= 65536", label,
                          t.index, t.name, t.group);
      if (CodeBits(t.bits) * t.group % 8 != 0)
        Fail<FormatError>(
            "{}: tensor #{} '{}': group {} x {} bits is not a whole number of "
            "bytes",
            label, t.index, t.name, t.group, CodeBits(t.bits));
      // shape[1] < 2^32 and group <= 2^16: in_pad and a row's bytes fit; rows * row may not.
      const uint64_t in_pad = (t.cols() + t.group - 1) / t.group * t.group;
      const uint64_t row = in_pad * CodeBits(t.bits) / 8 + in_pad / t.group * 2;
      return CheckedMul(t.rows(), row, label, t);
    }
  }
  return 0;
}

// Index of the first FP16 value (little-endian, at p) that is NaN or infinite, or n. One pass
// over the high bytes that the compiler vectorizes, then a search only if one was found.
uint64_t FirstNonFiniteF16(const uint8_t* p, uint64_t n) {
  uint8_t any = 0;
  for (uint64_t i = 0; i < n; ++i) any |= static_cast<uint8_t>((p[2 * i + 1] & 0x7C) == 0x7C);
  if (!any) return n;
  for (uint64_t i = 0; i < n; ++i)
    if ((p[2 * i + 1] & 0x7C) == 0x7C) return i;
  return n;
}

uint64_t FirstNonFiniteF32(const uint8_t* p, uint64_t n) {
  for (uint64_t i = 0; i < n; ++i) {
    uint32_t v;
    std::memcpy(&v, p + 4 * i, 4);
    if ((v & 0x7F800000u) == 0x7F800000u) return i;
  }
  return n;
}

// First non-zero byte in [begin, end), or end.
uint64_t FirstNonZero(const uint8_t* b, uint64_t begin, uint64_t end) {
  for (uint64_t i = begin; i < end; ++i)
    if (b[i] != 0) return i;
  return end;
}

}  // namespace

void CactFile::Parse() {
  const std::string& label = file_->label();
  const auto b = bytes();
  const uint64_t size = b.size();
  if (size < sizeof(Header))
    Fail<FormatError>("{}: truncated file: {} bytes, a .cact header alone is {} bytes", label, size,
                      sizeof(Header));
  std::memcpy(&header_, b.data(), sizeof(Header));
  const Header& h = header_;
  if (h.tag != kTagNeedle2) {
    if (h.tag == kTagNeedle3)
      Fail<FormatError>(
          "{}: this is a Needle 3 file (tag 0x{:08X}); needle reads Needle 2 "
          "(.cact v2, tag 0x{:08X})",
          label, h.tag, kTagNeedle2);
    Fail<FormatError>("{}: not a Needle 2 .cact file (tag 0x{:08X}, expected 0x{:08X})", label,
                      h.tag, kTagNeedle2);
  }
  if (h.codebook_len != kCodebookLen)
    Fail<FormatError>("{}: header field codebook_len = {}, expected {} (cb2[4] | cb3[8] | cb4[16])",
                      label, h.codebook_len, kCodebookLen);
  geometry_ = Geometry::FromHeader(h, label);

  const std::vector<Slot> core = CoreLayout(geometry_);
  const uint64_t n_core = core.size();
  if (h.num_tensors < n_core + 1)
    Fail<FormatError>(
        "{}: header says {} tensors, but this geometry needs at least {} ({} through "
        "final_norm + tokenizer)",
        label, h.num_tensors, n_core + 1, n_core);
  const uint64_t extra = h.num_tensors - n_core - 1;  // probe-head tensors
  if (extra != 0 && (extra < 4 || (extra - 1) % 3 != 0))
    Fail<FormatError>(
        "{}: header says {} tensors: {} beyond final_norm and the tokenizer, which "
        "is not 1 manifest + 3 per probe head",
        label, h.num_tensors, extra);
  const uint64_t n_heads = extra == 0 ? 0 : (extra - 1) / 3;

  const uint64_t cb_end = sizeof(Header) + 4ull * h.codebook_len;
  const uint64_t dir_end = cb_end + uint64_t{sizeof(DirRecord)} * h.num_tensors;
  if (dir_end > size)
    Fail<FormatError>(
        "{}: truncated file: directory of {} tensors ends at byte {}, file has {} "
        "bytes",
        label, h.num_tensors, dir_end, size);
  codebooks_.resize(h.codebook_len);
  std::memcpy(codebooks_.data(), b.data() + sizeof(Header), 4ull * h.codebook_len);
  for (uint32_t i = 0; i < h.codebook_len; ++i)
    if (!std::isfinite(codebooks_[i]))
      Fail<FormatError>("{}: codebook value #{} is not finite", label, i);

  // Decode directory records and assign names by position.
  tensors_.resize(h.num_tensors);
  uint64_t expect_offset = Align64(dir_end);
  for (uint32_t i = 0; i < h.num_tensors; ++i) {
    DirRecord r;
    std::memcpy(&r, b.data() + cb_end + uint64_t{sizeof(DirRecord)} * i, sizeof(DirRecord));
    TensorInfo& t = tensors_[i];
    t.index = i;
    if (i < n_core) {
      t.name = core[i].name;
    } else if (i + 1 == h.num_tensors) {
      t.name = "tokenizer";
    } else if (i == n_core) {
      t.name = "heads.manifest";
    } else {
      const uint64_t k = (i - n_core - 1) / 3, part = (i - n_core - 1) % 3;
      t.name = fmt::format("head{}.{}", k, part == 0 ? "probes" : part == 1 ? "proj" : "bias");
    }
    if (r.dtype < 1 || r.dtype > 4)
      Fail<FormatError>(
          "{}: tensor #{} '{}': unknown dtype {} (expected 1 FP16, 2 FP32, 3 CQ, "
          "4 RAW)",
          label, i, t.name, r.dtype);
    t.dtype = static_cast<DType>(r.dtype);
    if (r.ndim > 4) Fail<FormatError>("{}: tensor #{} '{}': ndim {} > 4", label, i, t.name, r.ndim);
    t.ndim = r.ndim;
    if (r.pad != 0)
      Fail<FormatError>("{}: tensor #{} '{}': directory pad field is {} (must be 0)", label, i,
                        t.name, r.pad);
    for (int k = 0; k < 4; ++k) {
      t.shape[k] = r.shape[k];
      if (k < (int)r.ndim && r.shape[k] == 0)
        Fail<FormatError>("{}: tensor #{} '{}': dimension {} is 0", label, i, t.name, k);
      if (k >= (int)r.ndim && r.shape[k] != 0)
        Fail<FormatError>("{}: tensor #{} '{}': unused shape[{}] = {} (ndim {}; must be 0)", label,
                          i, t.name, k, r.shape[k], r.ndim);
    }
    t.offset = r.offset;
    t.nbytes = r.nbytes;
    t.group = r.group;
    t.bits = r.bits;
    if (t.dtype != DType::kCQ && (t.group != 0 || t.bits != 0))
      Fail<FormatError>("{}: tensor #{} '{}': {} record with group {} / bits {} (must be 0)", label,
                        i, t.name, DTypeName(t.dtype), t.group, t.bits);
    if (t.dtype == DType::kRaw && t.ndim != 0)
      Fail<FormatError>("{}: tensor #{} '{}': RAW record with ndim {} (must be 0)", label, i,
                        t.name, t.ndim);
    if (t.dtype != DType::kRaw && t.ndim == 0)
      Fail<FormatError>("{}: tensor #{} '{}': {} record with ndim 0", label, i, t.name,
                        DTypeName(t.dtype));
    const uint64_t want = ExpectedBytes(label, t);
    if (t.nbytes != want)
      Fail<FormatError>(
          "{}: tensor #{} '{}': nbytes {} inconsistent with {} {} (group {}, bits {}): "
          "expected {}",
          label, i, t.name, t.nbytes, DTypeName(t.dtype), t.shape_str(), t.group, t.bits, want);
    if (t.offset % kBlobAlign != 0)
      Fail<FormatError>("{}: tensor #{} '{}': offset {} is not a multiple of {}", label, i, t.name,
                        t.offset, kBlobAlign);
    if (t.offset < dir_end)
      Fail<FormatError>("{}: tensor #{} '{}': offset {} overlaps the header/directory (ends at {})",
                        label, i, t.name, t.offset, dir_end);
    if (t.offset > size || t.nbytes > size - t.offset)
      Fail<FormatError>(
          "{}: truncated or corrupt: tensor #{} '{}' data at offset {} (+{} bytes) "
          "is not within the file ({} bytes)",
          label, i, t.name, t.offset, t.nbytes, size);
    if (t.offset < expect_offset)
      Fail<FormatError>(
          "{}: tensor #{} '{}': offset {} overlaps the previous tensor (which ends at "
          "{})",
          label, i, t.name, t.offset, expect_offset);
    expect_offset = Align64(t.offset + t.nbytes);
  }

  // Shapes and dtypes against the canonical order.
  auto expect = [&](const TensorInfo& t, SlotKind kind, uint32_t ndim,
                    const std::array<uint64_t, 4>& shape) {
    bool ok_dtype = kind == SlotKind::kRaw ? t.dtype == DType::kRaw
                    : kind == SlotKind::kMatrix
                        ? t.dtype != DType::kRaw
                        : (t.dtype == DType::kF16 || t.dtype == DType::kF32);
    if (!ok_dtype)
      Fail<FormatError>("{}: tensor #{} '{}' has dtype {}, which this position does not allow",
                        label, t.index, t.name, DTypeName(t.dtype));
    bool ok = t.ndim == ndim;
    for (uint32_t k = 0; ok && k < ndim; ++k) ok = shape[k] == 0 || shape[k] == t.shape[k];
    if (!ok) {
      TensorInfo want;
      want.ndim = ndim;
      want.shape = shape;
      Fail<FormatError>("{}: tensor #{} '{}' has shape {}, expected {} for this geometry", label,
                        t.index, t.name, t.shape_str(), want.shape_str());
    }
  };
  if (tensors_.back().dtype != DType::kRaw)
    Fail<FormatError>(
        "{}: header says {} tensors, but tensor #{} (the last, which must be the RAW "
        "tokenizer) is {}: the tensor count does not match the directory",
        label, h.num_tensors, h.num_tensors - 1, DTypeName(tensors_.back().dtype));
  for (uint64_t i = 0; i < n_core; ++i)
    expect(tensors_[i], core[i].kind, core[i].ndim, core[i].shape);

  // Probe heads: manifest [H] of head codes, then per head probes [P, d], proj [out, P*d], bias
  // [out].
  heads_.clear();
  if (n_heads > 0) {
    TensorInfo& man = tensors_[n_core];
    expect(man, SlotKind::kVector, 1, {n_heads, 0, 0, 0});
    const std::vector<float> codes = floats(man);
    for (uint64_t k = 0; k < n_heads; ++k) {
      const float c = codes[k];
      if (c != 1.f && c != 2.f)
        Fail<FormatError>(
            "{}: heads.manifest[{}] = {} is not a known head code (1 contrastive, "
            "2 confidence)",
            label, k, c);
      const HeadKind kind = c == 1.f ? HeadKind::kContrastive : HeadKind::kConfidence;
      for (const auto& prev : heads_)
        if (prev.kind == kind)
          Fail<FormatError>("{}: heads.manifest lists {} twice", label, HeadName(kind));
      const uint32_t ip = static_cast<uint32_t>(n_core + 1 + 3 * k);
      TensorInfo* pr = &tensors_[ip];
      TensorInfo* pj = pr + 1;
      TensorInfo* bi = pr + 2;
      const std::string base = HeadName(kind);
      pr->name = base + ".probes";
      pj->name = base + ".proj";
      bi->name = base + ".bias";
      expect(*pr, SlotKind::kMatrix, 2, {0, geometry_.d_model, 0, 0});
      const uint64_t P = pr->shape[0];
      expect(*pj, SlotKind::kMatrix, 2, {0, P * geometry_.d_model, 0, 0});
      const uint64_t out = pj->shape[0];
      expect(*bi, SlotKind::kVector, 1, {out, 0, 0, 0});
      heads_.push_back(
          {kind, static_cast<uint32_t>(P), static_cast<uint32_t>(out), ip, ip + 1, ip + 2});
    }
  }

  by_name_.resize(tensors_.size());
  for (uint32_t i = 0; i < by_name_.size(); ++i) by_name_[i] = i;
  std::sort(by_name_.begin(), by_name_.end(),
            [this](uint32_t a, uint32_t b) { return tensors_[a].name < tensors_[b].name; });

  // The exact layout (FORMAT.md), checked once the structure is known so that a wrong count or
  // shape is reported as such: each blob at align64(end of the previous), zero gap bytes, no
  // bytes after the last blob.
  uint64_t prev_end = dir_end;  // end of the directory, then of the previous blob
  for (const TensorInfo& t : tensors_) {
    if (t.offset != Align64(prev_end))
      Fail<FormatError>(
          "{}: tensor #{} '{}': offset {} leaves a gap: blobs follow each other at 64-byte "
          "alignment, expected offset {}",
          label, t.index, t.name, t.offset, Align64(prev_end));
    if (const uint64_t nz = FirstNonZero(b.data(), prev_end, t.offset); nz != t.offset)
      Fail<FormatError>(
          "{}: padding byte {} before tensor #{} '{}' is 0x{:02X} (padding must be zero bytes)",
          label, nz, t.index, t.name, b[nz]);
    prev_end = t.offset + t.nbytes;
  }
  if (prev_end != size)
    Fail<FormatError>(
        "{}: {} trailing bytes after the last tensor (it ends at byte {}, the file has {} bytes)",
        label, size - prev_end, prev_end, size);

  // Every FP16/FP32 value and every CQ norm must be finite (a NaN or Inf weight poisons every
  // output). About 0.7 M FP16 values in the official file: a fraction of a millisecond.
  for (const TensorInfo& t : tensors_) {
    const uint8_t* p = b.data() + t.offset;
    uint64_t n = 0, bad = 0;
    const char* what = "value";
    if (t.dtype == DType::kF16) {
      n = t.nbytes / 2;
      bad = FirstNonFiniteF16(p, n);
    } else if (t.dtype == DType::kF32) {
      n = t.nbytes / 4;
      bad = FirstNonFiniteF32(p, n);
    } else if (t.dtype == DType::kCQ) {
      const CqView v = cq(t);
      n = v.rows * v.groups_per_row;
      bad = FirstNonFiniteF16(v.norms, n);
      what = "norm";
    }
    if (bad != n) {
      const float value = t.dtype == DType::kF32 ? LoadLE<float>(p + 4 * bad)
                          : t.dtype == DType::kCQ
                              ? F16ToF32(LoadLE<uint16_t>(cq(t).norms + 2 * bad))
                              : F16ToF32(LoadLE<uint16_t>(p + 2 * bad));
      Fail<FormatError>("{}: tensor #{} '{}': {} {} is {} (must be finite)", label, t.index, t.name,
                        what, bad, value);
    }
  }

  tokenizer_ = std::make_shared<const TokenizerBlob>(ParseTokenizerBlob(tokenizer_blob(), label));
  Evict(tokenizer_tensor());  // parsed: the raw bytes are not read again
  if (tokenizer_->pieces.size() != h.vocab)
    Fail<FormatError>("{}: tokenizer has {} pieces but header field vocab = {}", label,
                      tokenizer_->pieces.size(), h.vocab);
}

}  // namespace needle::format
