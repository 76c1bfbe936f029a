// The .cact v2 container (Needle 2): header, codebooks, directory and tensor views over a mapped
// file.
//
// Layout (little-endian, spec: FORMAT.md):
//   [Header 120 B][codebooks codebook_len x f32][directory num_tensors x 44 B][pad]
//   [blob][pad][blob]...   every blob starts at a multiple of 64; gaps are zero bytes;
//   the first blob starts at align64(120 + 4*codebook_len + 44*num_tensors); no trailing padding.
// The file carries no tensor names: names come from the position in the canonical order
// (see layout.h), which the header's geometry fully determines (plus the optional probe heads).
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "format/layout.h"
#include "format/mapped_file.h"
#include "format/tokenizer_blob.h"

namespace needle::format {

inline constexpr uint32_t kTagNeedle2 = 0x05E12A83;
inline constexpr uint32_t kTagNeedle3 = 0x05E12A84;
inline constexpr uint64_t kBlobAlign = 64;
inline constexpr uint32_t kCodebookLen = 28;  // cb2[4] | cb3[8] | cb4[16]
inline constexpr uint32_t kTernaryBits = 5;   // record bits value meaning ternary (2-bit crumbs)

// struct '<29If': 29 x u32 then f32 rope_theta.
struct Header {
  uint32_t tag;
  uint32_t num_tensors;
  uint32_t codebook_len;
  uint32_t kv_window;  // 0 = size from budget
  uint32_t kv_bits;
  uint32_t vocab;
  uint32_t d_model;
  uint32_t num_heads;
  uint32_t num_kv_heads;
  uint32_t num_layers;
  uint32_t head_dim;
  uint32_t max_seq_len;
  uint32_t hada_n;  // smallest power of two >= d_model
  uint32_t mhc_lanes;
  uint32_t engram_slots;
  uint32_t engram_sub_dim;
  uint32_t num_engram_tables;  // num_engram_orders * engram heads per order
  uint32_t engram_conv_taps;
  uint32_t engram_conv_dilation;
  uint32_t num_engram_orders;
  uint32_t engram_orders[4];
  uint32_t num_engram_sites;
  uint32_t engram_sites[4];  // zero-based layer indices
  float rope_theta;
};
static_assert(sizeof(Header) == 120, "Header must match struct '<29If'");

// struct '<BBHIIIIQQII': one directory record per tensor.
#pragma pack(push, 1)
struct DirRecord {
  uint8_t dtype;  // DType
  uint8_t ndim;
  uint16_t pad;       // 0
  uint32_t shape[4];  // unused dims 0
  uint64_t offset;    // absolute file offset of the blob (multiple of 64)
  uint64_t nbytes;    // blob size
  uint32_t group;     // CQ only, else 0
  uint32_t bits;      // CQ only: 2, 3, 4 or 5 (ternary), else 0
};
#pragma pack(pop)
static_assert(sizeof(DirRecord) == 44, "DirRecord must match struct '<BBHIIIIQQII'");

inline uint64_t Align64(uint64_t x) { return (x + kBlobAlign - 1) / kBlobAlign * kBlobAlign; }

// One tensor of the file: its directory record decoded and named.
struct TensorInfo {
  uint32_t index = 0;
  std::string name;  // canonical name, e.g. "layer03.q_proj"
  DType dtype = DType::kF16;
  uint32_t ndim = 0;
  std::array<uint64_t, 4> shape{};
  uint64_t offset = 0;
  uint64_t nbytes = 0;
  uint32_t group = 0;
  uint32_t bits = 0;  // record bits (5 = ternary)

  uint64_t elements() const;  // product of shape (0 for RAW)
  uint64_t rows() const { return shape[0]; }
  uint64_t cols() const;          // product of shape[1..ndim)
  std::string shape_str() const;  // "[512, 128]"
};

// Bits stored per code (ternary codes use 2-bit crumbs).
inline uint32_t CodeBits(uint32_t record_bits) {
  return record_bits == kTernaryBits ? 2 : record_bits;
}

// Byte size of a CQ blob for an [rows, cols] matrix; in_pad = ceil(cols / group) * group.
uint64_t CqBlobBytes(uint64_t rows, uint64_t cols, uint32_t group, uint32_t record_bits);

// A CQ tensor's two regions: codes (rows x row_bytes, LSB-first bit streams), then f16 norms
// (rows x groups_per_row, row-major). Pointers into the mapped file; `norms` may be unaligned.
struct CqView {
  uint64_t rows = 0, cols = 0, in_pad = 0;
  uint32_t group = 0, record_bits = 0;
  uint64_t row_bytes = 0;       // in_pad * CodeBits / 8
  uint64_t groups_per_row = 0;  // in_pad / group
  const uint8_t* codes = nullptr;
  const uint8_t* norms = nullptr;  // f16 little-endian, read with LoadLE<uint16_t>

  const uint8_t* row_codes(uint64_t r) const { return codes + r * row_bytes; }
  uint16_t norm_bits(uint64_t r, uint64_t g) const;
  float norm(uint64_t r, uint64_t g) const;
};

// An FP16 or FP32 tensor left in the file and widened when read: for a large table read rarely
// (a probe head's projection), so that it costs no heap. Points into the file's bytes.
struct FloatView {
  const uint8_t* data = nullptr;
  DType dtype = DType::kF32;
  uint64_t size = 0;  // elements

  // Values [first, first + count) as f32 (the same values CactFile::floats gives).
  void Read(uint64_t first, uint64_t count, float* out) const;
};

// Probe head present in the file (MODEL.md "Probe heads").
struct HeadInfo {
  HeadKind kind;
  uint32_t num_probes;  // P
  uint32_t out_dim;     // out
  uint32_t probes;      // tensor index: [P, d]
  uint32_t proj;        // tensor index: [out, P*d]
  uint32_t bias;        // tensor index: [out]
};

// A validated, read-only .cact file. Tensor data stays in the mapping; nothing is copied.
// Thread-safe for concurrent reads once constructed.
class CactFile {
 public:
  // Opens and validates; throws IoError / FormatError naming the file and the problem.
  static CactFile Open(const std::string& path, LoadMode mode = LoadMode::kMmap);
  // Validates bytes already in memory (tests, synthesized models). `label` names it in errors.
  static CactFile FromBytes(std::vector<uint8_t> bytes, const std::string& label = "<memory>");

  const std::string& path() const { return file_->label(); }
  std::span<const uint8_t> bytes() const { return file_->bytes(); }
  bool is_mapped() const { return file_->is_mapped(); }

  const Header& header() const { return header_; }
  const Geometry& geometry() const { return geometry_; }
  std::span<const float> codebooks() const { return codebooks_; }
  // Codebook for 2/3/4-bit codes (already divided by sqrt(group) by the exporter).
  std::span<const float> codebook(uint32_t bits) const;

  const std::vector<TensorInfo>& tensors() const { return tensors_; }
  const TensorInfo* find(std::string_view name) const;
  const TensorInfo& tensor(std::string_view name) const;  // throws FormatError if absent

  std::span<const uint8_t> data(const TensorInfo& t) const;
  CqView cq(const TensorInfo& t) const;  // throws if t is not CQ
  // FP16/FP32 tensor widened to f32 (allocates: for vectors and small tables).
  std::vector<float> floats(const TensorInfo& t) const;
  FloatView float_view(const TensorInfo& t) const;  // throws if t is not FP16 / FP32
  // Drops the whole pages inside the tensor's bytes from this process's resident set, for data
  // read once at load (widened vectors, the tokenizer blob, derived rows): a mapped file reads
  // them again from the page cache if they are touched later. No effect on a heap copy.
  void Evict(const TensorInfo& t) const;
  // The same for `n` bytes at `p` (a pointer into bytes()): part of a tensor.
  void EvictBytes(const uint8_t* p, size_t n) const;
  // Copies out.size() bytes starting at `p` (a pointer into bytes()) without touching the
  // mapping (MappedFile::ReadAt): for rows of an evicted tensor. Throws IoError.
  void ReadAt(const uint8_t* p, std::span<uint8_t> out) const;
  // SHA-256 of the whole file, read in blocks with ReadAt: hashing through the mapping would make
  // the pages of evicted tensors resident again for the rest of the process.
  std::string Sha256Hex() const;

  const std::vector<HeadInfo>& heads() const { return heads_; }
  const TensorInfo& tokenizer_tensor() const { return tensors_.back(); }
  std::span<const uint8_t> tokenizer_blob() const { return data(tokenizer_tensor()); }
  // The tokenizer blob, parsed and validated on open (pieces == vocab).
  const TokenizerBlob& tokenizer() const { return *tokenizer_; }
  std::shared_ptr<const TokenizerBlob> shared_tokenizer() const { return tokenizer_; }

 private:
  explicit CactFile(std::shared_ptr<MappedFile> file);
  void Parse();

  std::shared_ptr<MappedFile> file_;
  Header header_{};
  Geometry geometry_;
  std::vector<float> codebooks_;
  std::vector<TensorInfo> tensors_;
  // Indices of tensors_ sorted by name: find() is a binary search (a model's weights look up ~400
  // names at load; a linear scan of string compares was ~9% of the load).
  std::vector<uint32_t> by_name_;
  std::vector<HeadInfo> heads_;
  std::shared_ptr<const TokenizerBlob> tokenizer_;
};

}  // namespace needle::format
