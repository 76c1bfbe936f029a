// .cact reader/writer: byte-identical round trips on the fixtures, and one assertion per
// validation error on corrupted copies (each message must name the problem).
#include <catch2/catch.hpp>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <string>

#include "base/error.h"
#include "base/fp16.h"
#include "format/accounting.h"
#include "format/cact.h"
#include "format/cact_writer.h"
#include "format/sha256.h"
#include "test_util.h"

using namespace needle;
using format::CactFile;
using testing::GetAt;
using testing::ModelPath;
using testing::PutAt;
using testing::ReadBytes;
using testing::ResidentKbOfMapping;
using testing::TouchPages;

namespace {

constexpr size_t kDirOffset = 120 + 4 * 28;  // directory of files with codebook_len 28
constexpr size_t kRecord = 44;

// Expects parsing `bytes` to throw FormatError whose message contains every fragment.
void ExpectFormatError(std::vector<uint8_t> bytes, std::initializer_list<const char*> fragments) {
  try {
    CactFile::FromBytes(std::move(bytes), "bad.cact");
    FAIL("expected a FormatError");
  } catch (const FormatError& e) {
    const std::string msg = e.what();
    INFO(msg);
    CHECK(msg.rfind("bad.cact: ", 0) == 0);
    for (const char* f : fragments) CHECK(msg.find(f) != std::string::npos);
  }
}

}  // namespace

TEST_CASE("FP16 tensors: the branch-free span conversion equals F16ToF32 on all 65,536 halves",
          "[format]") {
  std::vector<uint8_t> src(2 * 65536 + 2);
  for (uint32_t h = 0; h < 65536; ++h) PutAt(&src, 2 + 2 * h, static_cast<uint16_t>(h));
  std::vector<float> out(65536);
  F16ToF32Span(src.data() + 2, out.size(), out.data());  // unaligned source, as in a mapped file
  size_t mismatches = 0;
  for (uint32_t h = 0; h < 65536; ++h) {
    const float ref = F16ToF32(static_cast<uint16_t>(h));
    mismatches += std::memcmp(&ref, &out[h], 4) != 0;
  }
  CHECK(mismatches == 0);
  // The cases that need care, by value: the smallest subnormal, the largest normal, a NaN payload.
  CHECK(out[0x0001] == 0x1p-24f);
  CHECK(out[0x7bff] == 65504.f);
  CHECK(GetAt<uint32_t>(std::vector<uint8_t>(reinterpret_cast<uint8_t*>(&out[0xfe01]),
                                             reinterpret_cast<uint8_t*>(&out[0xfe01]) + 4),
                        0) == 0xffc02000u);
}

TEST_CASE("round trip is byte-identical on every fixture model", "[format]") {
  for (const char* name :
       {"tiny.cact", "small.cact", "official-geometry.cact", "small-crafted-0.8.cact"}) {
    INFO(name);
    const std::vector<uint8_t> original = ReadBytes(ModelPath(name));
    const CactFile f = CactFile::Open(ModelPath(name));
    REQUIRE(f.is_mapped());
    std::vector<format::TensorRecord> recs;
    for (const auto& t : f.tensors()) recs.push_back(format::RecordOf(f, t));
    const std::vector<uint8_t> written = format::SerializeCact(f.header(), f.codebooks(), recs);
    CHECK(written.size() == original.size());
    CHECK(format::Sha256Hex(written) == format::Sha256Hex(original));
    CHECK(written == original);
  }
}

TEST_CASE("read fallback gives the same view as mmap", "[format]") {
  const CactFile a = CactFile::Open(ModelPath("tiny.cact"), format::LoadMode::kMmap);
  const CactFile b = CactFile::Open(ModelPath("tiny.cact"), format::LoadMode::kRead);
  CHECK(a.is_mapped());
  CHECK_FALSE(b.is_mapped());
  REQUIRE(a.tensors().size() == b.tensors().size());
  for (size_t i = 0; i < a.tensors().size(); ++i) {
    CHECK(a.tensors()[i].name == b.tensors()[i].name);
    CHECK(a.tensors()[i].offset == b.tensors()[i].offset);
  }
  CHECK(std::equal(a.bytes().begin(), a.bytes().end(), b.bytes().begin(), b.bytes().end()));
}

namespace {

// The official-geometry fixture opened twice: memory-mapped and as a heap copy.
struct MappedAndCopy {
  std::string path = ModelPath("official-geometry.cact");
  CactFile mapped = CactFile::Open(path, format::LoadMode::kMmap);
  CactFile copy = CactFile::Open(path, format::LoadMode::kRead);
};

}  // namespace

TEST_CASE("float views widen like floats(), and Evict keeps the bytes and drops resident pages",
          "[format]") {
  const MappedAndCopy files;
  const CactFile& mapped = files.mapped;
  const CactFile& copy = files.copy;
  REQUIRE(mapped.is_mapped());
  const format::TensorInfo& proj = mapped.tensor("contrastive_head.proj");
  const std::vector<float> all = mapped.floats(proj);
  const format::FloatView view = mapped.float_view(proj);
  REQUIRE(view.size == all.size());
  for (const uint64_t first : {uint64_t{0}, uint64_t{1}, uint64_t{2047}, all.size() - 3}) {
    std::vector<float> part(3);
    view.Read(first, part.size(), part.data());
    for (size_t i = 0; i < part.size(); ++i) CHECK(part[i] == all[first + i]);
  }
  CHECK_THROWS_AS(mapped.float_view(mapped.tensor("embedding")), needle::FormatError);

  // The embedding (2.1 MB of CQ codes): evicted, then read again from the file, unchanged.
  const format::TensorInfo& emb = mapped.tensor("embedding");
  (void)TouchPages(mapped.data(emb));  // resident first: what Evict must drop
  const long before = ResidentKbOfMapping(mapped.bytes().data());
  mapped.Evict(emb);
#if defined(NEEDLE_X86)  // native Linux; qemu-user (the aarch64 job) ignores MADV_DONTNEED
  const long after = ResidentKbOfMapping(mapped.bytes().data());
  INFO("resident " << before << " KB -> " << after << " KB");
  REQUIRE(before > 0);
  CHECK(before - after >= static_cast<long>(emb.nbytes / 1024) - 8);
#else
  (void)before;
#endif
  copy.Evict(emb);  // a heap copy: no effect
  CHECK(std::equal(mapped.bytes().begin(), mapped.bytes().end(), copy.bytes().begin(),
                   copy.bytes().end()));
}

TEST_CASE("ReadAt copies the file's bytes without the mapping, Sha256Hex hashes them so",
          "[format]") {
  const MappedAndCopy files;
  const CactFile& mapped = files.mapped;
  const CactFile& copy = files.copy;
  const std::string& path = files.path;
  REQUIRE(mapped.is_mapped());
  REQUIRE(!copy.is_mapped());
  const size_t size = mapped.bytes().size();
  for (const CactFile* f : {&mapped, &copy}) {
    const uint8_t* base = f->bytes().data();
    for (const size_t at : {size_t{0}, size_t{1}, size_t{4095}, size_t{4096}, size - 10}) {
      std::vector<uint8_t> got(10, 0xAA);
      f->ReadAt(base + at, got);
      INFO("offset " << at << (f->is_mapped() ? " (mapped)" : " (heap copy)"));
      CHECK(std::equal(got.begin(), got.end(), base + at));
    }
    std::vector<uint8_t> past(11);
    try {
      f->ReadAt(base + size - 10, past);
      FAIL("a read past the end did not throw");
    } catch (const IoError& e) {
      CHECK_THAT(e.what(), Catch::Contains(path) && Catch::Contains("past the end"));
    }
    CHECK(f->Sha256Hex() == format::Sha256Hex(f->bytes()));
  }
  // Hashing reads the file, not the mapping: an evicted tensor stays out of the resident set.
  const format::TensorInfo& emb = mapped.tensor("embedding");
  mapped.Evict(emb);
  const long evicted = ResidentKbOfMapping(mapped.bytes().data());
  (void)mapped.Sha256Hex();
#if defined(NEEDLE_X86)  // native Linux; qemu-user (the aarch64 job) ignores MADV_DONTNEED
  const long after = ResidentKbOfMapping(mapped.bytes().data());
  INFO("resident " << evicted << " KB after Evict, " << after << " KB after Sha256Hex");
  CHECK(after - evicted < static_cast<long>(emb.nbytes / 1024) / 4);
#else
  (void)evicted;
#endif
}

TEST_CASE("canonical names and shapes by position", "[format]") {
  const CactFile f = CactFile::Open(ModelPath("small.cact"));
  const auto& g = f.geometry();
  CHECK(g.d_model == 256);
  CHECK(g.num_layers == 5);
  CHECK(f.tensors().front().name == "embedding");
  CHECK(f.tensor("layer04.out_proj").shape[0] == 256);
  CHECK(f.tensor("layer04.out_proj").shape[1] == g.attn_dim());
  CHECK(f.tensor("engram1.tables").rows() == uint64_t{g.num_engram_tables} * g.engram_slots);
  CHECK(f.tensor("mhc_phi_res").rows() == uint64_t{g.num_layers} * g.lanes * g.lanes);
  REQUIRE(f.heads().size() == 2);
  CHECK(f.heads()[0].kind == format::HeadKind::kContrastive);
  CHECK(f.heads()[1].kind == format::HeadKind::kConfidence);
  CHECK(f.tensor("confidence_head.proj").shape[1] == 8ull * g.d_model);
  CHECK(f.tensors().back().name == "tokenizer");
  CHECK(f.find("layer05.q_proj") == nullptr);
  CHECK_THROWS_AS(f.tensor("nope"), FormatError);
}

TEST_CASE("accounting of the official geometry equals the published figures", "[format]") {
  const CactFile f = CactFile::Open(ModelPath("official-geometry.cact"));
  const format::Accounting a = format::Account(f);
  std::map<std::string, format::ClassTotals> by;
  for (const auto& c : a.classes) by[c.name] = c;
  REQUIRE(by.size() == 4);
  CHECK(by["CQ2"].tensors == 141);
  CHECK(by["CQ2"].elements == 37748736);
  CHECK(by["CQ2"].blob_bytes == 10027008);
  CHECK(by["CQ4"].tensors == 4);
  CHECK(by["CQ4"].elements == 5521408);
  CHECK(by["CQ4"].blob_bytes == 2846976);
  CHECK(by["FP16"].tensors == 259);
  CHECK(by["FP16"].elements == 364279);
  CHECK(by["FP16"].blob_bytes == 728558);
  CHECK(by["RAW"].tensors == 1);
  CHECK(a.numeric_params == 43634423);
  CHECK(a.weighted_code_width == Approx(2.255206).margin(5e-7));
  CHECK(a.norm_bytes == 676096);
  CHECK(a.payload_bits_per_param == Approx(2.493910).margin(5e-7));
  // The whole-file figure differs from the official file only through the tokenizer's RAW bytes.
  const uint64_t official_raw = 115215, official_file = 13737807;
  CHECK(a.file_bytes - by["RAW"].blob_bytes == official_file - official_raw);
}

TEST_CASE("validation: header problems", "[format][validation]") {
  const std::vector<uint8_t> good = ReadBytes(ModelPath("tiny.cact"));
  {
    auto b = good;
    PutAt<uint32_t>(&b, 0, format::kTagNeedle3);
    ExpectFormatError(b, {"Needle 3 file", "0x05E12A84"});
  }
  {
    auto b = good;
    PutAt<uint32_t>(&b, 0, 0x12345678);
    ExpectFormatError(b, {"not a Needle 2 .cact file", "0x12345678"});
  }
  ExpectFormatError(std::vector<uint8_t>(good.begin(), good.begin() + 60),
                    {"truncated file", "60 bytes"});
  ExpectFormatError(std::vector<uint8_t>(good.begin(), good.begin() + 1000),
                    {"truncated file", "directory of 69 tensors"});
  {
    auto b = good;
    PutAt<uint32_t>(&b, 4 * 8, 3);  // num_kv_heads 3 does not divide num_heads 2
    ExpectFormatError(b, {"num_kv_heads = 3"});
  }
  {
    auto b = good;
    PutAt<uint32_t>(&b, 4 * 12, 100);  // hada_n not a power of two
    ExpectFormatError(b, {"hada_n 100"});
  }
  {
    auto b = good;
    PutAt<uint32_t>(&b, 4 * 25, 7);  // engram site beyond the 3 layers
    ExpectFormatError(b, {"engram_sites[0] = 7"});
  }
  {
    auto b = good;
    PutAt<uint32_t>(&b, 4 * 1, 67);  // tensor count not matching geometry + heads
    ExpectFormatError(b, {"67 tensors", "not 1 manifest + 3 per probe head"});
  }
  {
    auto b = good;
    PutAt<uint32_t>(&b, 4 * 1,
                    66);  // a count the geometry allows (one head), but not this directory
    ExpectFormatError(b, {"66 tensors", "tensor #65", "RAW tokenizer", "does not match"});
  }
  {
    auto b = good;
    PutAt<uint32_t>(&b, 4 * 1, 20);  // fewer tensors than the geometry needs
    ExpectFormatError(b, {"20 tensors", "needs at least"});
  }
  {
    auto b = good;
    PutAt<uint32_t>(&b, 4 * 2, 27);
    ExpectFormatError(b, {"codebook_len = 27"});
  }
}

TEST_CASE("validation: directory problems name the tensor", "[format][validation]") {
  const std::vector<uint8_t> good = ReadBytes(ModelPath("tiny.cact"));
  const size_t q0 = kDirOffset + kRecord * 2;     // tensor #2 = layer00.q_proj (CQ)
  const size_t last = kDirOffset + kRecord * 68;  // tokenizer
  {
    auto b = good;
    b[q0] = 9;
    ExpectFormatError(b, {"tensor #2 'layer00.q_proj'", "unknown dtype 9"});
  }
  {
    auto b = good;
    PutAt<uint32_t>(&b, q0 + 40, 7);
    ExpectFormatError(b, {"'layer00.q_proj'", "unknown CQ bits 7"});
  }
  {
    auto b = good;
    PutAt<uint64_t>(&b, q0 + 28, GetAt<uint64_t>(b, q0 + 28) + 2);
    ExpectFormatError(b, {"'layer00.q_proj'", "nbytes", "inconsistent"});
  }
  {
    auto b = good;
    PutAt<uint64_t>(&b, q0 + 20, GetAt<uint64_t>(b, q0 + 20) + 8);
    ExpectFormatError(b, {"'layer00.q_proj'", "not a multiple of 64"});
  }
  {
    auto b = good;
    PutAt<uint64_t>(&b, last + 20, ~uint64_t{0} - 63);  // offset + nbytes overflows u64
    ExpectFormatError(b, {"'tokenizer'", "not within the file"});
  }
  {
    auto b = good;
    b.resize(b.size() - 1);
    ExpectFormatError(b, {"truncated or corrupt", "'tokenizer'", "not within the file"});
  }
  {
    auto b = good;
    PutAt<uint32_t>(&b, q0 + 4, 64);  // q_proj rows 128 -> 64 (nbytes adjusted to stay consistent)
    PutAt<uint64_t>(&b, q0 + 28, format::CqBlobBytes(64, 128, 128, 2));
    ExpectFormatError(b, {"'layer00.q_proj' has shape [64, 128], expected [128, 128]"});
  }
  {
    auto b = good;
    b[kDirOffset + kRecord * 1] = 3;  // layer00.norm_in (vector) claims CQ
    ExpectFormatError(b, {"'layer00.norm_in'"});
  }
  {
    auto b = good;
    // Move tensor #3 onto tensor #2's blob: overlapping data.
    PutAt<uint64_t>(&b, q0 + kRecord + 20, GetAt<uint64_t>(b, q0 + 20));
    ExpectFormatError(b, {"'layer00.k_proj'", "overlaps"});
  }
}

TEST_CASE("writer validates before writing and never leaves partial files", "[format]") {
  testing::TempDir dir;
  const CactFile f = CactFile::Open(ModelPath("tiny.cact"));
  std::vector<format::TensorRecord> recs;
  for (const auto& t : f.tensors()) recs.push_back(format::RecordOf(f, t));
  recs.pop_back();  // drop the tokenizer: the layout becomes invalid
  const std::string out = dir / "out.cact";
  CHECK_THROWS_AS(format::WriteCact(out, f.header(), f.codebooks(), recs), FormatError);
  CHECK_FALSE(std::filesystem::exists(out));
  CHECK(std::distance(std::filesystem::directory_iterator(dir.path()),
                      std::filesystem::directory_iterator()) == 0);
}

TEST_CASE("validation: malformed tokenizer blob", "[format][validation]") {
  const std::vector<uint8_t> good = ReadBytes(ModelPath("tiny.cact"));
  const size_t tok = GetAt<uint64_t>(good, kDirOffset + kRecord * 68 + 20);  // blob offset
  {
    auto b = good;
    b[tok + 24 + 4] = 9;  // piece 0: type byte
    ExpectFormatError(b, {"piece 0", "type 9"});
  }
  {
    auto b = good;
    PutAt<uint32_t>(&b, tok, 9000000);  // n_pieces beyond what the blob can hold
    ExpectFormatError(b, {"9000000"});
  }
  {
    auto b = good;
    PutAt<uint16_t>(&b, tok + 24 + 5, 60000);  // piece 0's text length runs past the blob
    ExpectFormatError(b, {"piece 0"});
  }
}
