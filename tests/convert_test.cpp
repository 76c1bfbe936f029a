// dequant / requant / synth: byte-identical round trips on every fixture model, edits that touch
// only their own blob, clear errors with nothing written, safetensors validation, bits maps,
// and synth accounting against the official-geometry fixture.
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <tuple>

#include "base/error.h"
#include "base/fp16.h"
#include "convert/bits_map.h"
#include "convert/dequant.h"
#include "convert/requant.h"
#include "convert/synth.h"
#include "format/cact.h"
#include "format/mapped_file.h"
#include "format/safetensors.h"
#include "model/decoder.h"
#include "report/progress.h"
#include "test_util.h"

namespace fs = std::filesystem;
using namespace needle;

namespace {

// A fresh folder under the system temp dir, removed at scope exit.
struct ScratchDir {
  fs::path path;
  ScratchDir() {
    std::string tmpl = (fs::temp_directory_path() / "needle-convert-XXXXXX").string();
    REQUIRE(::mkdtemp(tmpl.data()) != nullptr);
    path = tmpl;
  }
  ~ScratchDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
  std::string operator/(const std::string& name) const { return (path / name).string(); }
};

convert::DequantOptions Quiet() {
  convert::DequantOptions o;
  o.progress = false;
  return o;
}

convert::RequantOptions QuietRequant() {
  convert::RequantOptions o;
  o.progress = false;
  return o;
}

struct Entry {
  std::string name;
  format::StDType dtype;
  std::vector<uint64_t> shape;
  std::vector<uint8_t> bytes;
};

std::vector<Entry> ReadEntries(const std::string& path) {
  const auto st = format::SafetensorsFile::Open(path);
  std::vector<Entry> out;
  for (const auto& t : st.tensors()) {
    const auto d = st.data(t);
    out.push_back({t.name, t.dtype, t.shape, std::vector<uint8_t>(d.begin(), d.end())});
  }
  return out;
}

void WriteEntries(const std::string& path, const std::vector<Entry>& entries) {
  format::SafetensorsWriter w(path, /*overwrite=*/true);
  for (const auto& e : entries) w.Declare(e.name, e.dtype, e.shape);
  for (const auto& e : entries) w.Write(e.bytes);
  w.Commit();
}

// Rewrites DIR/weights.safetensors through `edit`.
void EditWeights(const std::string& dir, const std::function<void(std::vector<Entry>&)>& edit) {
  const std::string path = dir + "/" + convert::kWeightsFile;
  auto entries = ReadEntries(path);
  edit(entries);
  WriteEntries(path, entries);
}

Entry& Find(std::vector<Entry>& entries, const std::string& name) {
  for (auto& e : entries)
    if (e.name == name) return e;
  FAIL("no entry " << name);
  throw std::logic_error("unreachable");
}

void SetFloat(Entry& e, size_t i, float v) { std::memcpy(e.bytes.data() + 4 * i, &v, 4); }
float GetFloat(const Entry& e, size_t i) { return LoadLE<float>(e.bytes.data() + 4 * i); }

std::vector<uint8_t> FileBytes(const std::string& path) { return format::ReadFileBytes(path); }

// Byte equality of two files (a bool, so a failure does not print megabytes).
bool SameFile(const std::string& a, const std::string& b) { return FileBytes(a) == FileBytes(b); }

// Runs a shell command, returns its exit status (-1 if it did not exit normally).
int RunStatus(const std::string& cmd) {
  const int rc = std::system(cmd.c_str());
  return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

}  // namespace

// ---------------------------------------------------------------- safetensors

TEST_CASE("safetensors: writer output is read back with names and shapes and bytes", "[convert]") {
  ScratchDir dir;
  const std::string path = dir / "t.safetensors";
  std::vector<Entry> entries = {
      {"b", format::StDType::kF32, {2, 3}, std::vector<uint8_t>(24)},
      {"a", format::StDType::kF16, {3}, {1, 2, 3, 4, 5, 6}},
      {"scalar", format::StDType::kF32, {}, {0, 0, 128, 63}},
  };
  for (size_t i = 0; i < 24; ++i) entries[0].bytes[i] = static_cast<uint8_t>(i);
  {
    format::SafetensorsWriter w(path, true);
    for (const auto& e : entries) w.Declare(e.name, e.dtype, e.shape);
    w.SetMetadata("format", "pt");
    for (const auto& e : entries) w.Write(e.bytes);
    w.Commit();
  }
  const auto bytes = FileBytes(path);
  const uint64_t header_len = LoadLE<uint64_t>(bytes.data());
  CHECK((8 + header_len) % 8 == 0);
  const auto st = format::SafetensorsFile::Open(path);
  REQUIRE(st.tensors().size() == 3);
  CHECK(st.metadata().at("format") == "pt");
  for (const auto& e : entries) {
    const auto* t = st.find(e.name);
    REQUIRE(t != nullptr);
    CHECK(t->dtype == e.dtype);
    CHECK(t->shape == e.shape);
    const auto d = st.data(*t);
    CHECK(std::vector<uint8_t>(d.begin(), d.end()) == e.bytes);
  }
  CHECK(LoadLE<float>(st.data(*st.find("scalar")).data()) == 1.0f);
}

TEST_CASE("safetensors: corrupt files are rejected with a message naming the problem",
          "[convert]") {
  auto make = [](const std::string& json, size_t data_bytes, int64_t len_delta = 0) {
    std::vector<uint8_t> b(8 + json.size() + data_bytes, 0);
    const uint64_t n = json.size() + len_delta;
    std::memcpy(b.data(), &n, 8);
    std::memcpy(b.data() + 8, json.data(), json.size());
    return b;
  };
  auto error_of = [](std::vector<uint8_t> bytes) -> std::string {
    try {
      format::SafetensorsFile::FromBytes(std::move(bytes), "x.safetensors");
    } catch (const FormatError& e) {
      return e.what();
    }
    return "(no error)";
  };
  const std::string good = R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
  CHECK_NOTHROW(format::SafetensorsFile::FromBytes(make(good, 8), "ok"));
  CHECK_THAT(error_of({1, 2, 3}), Catch::Contains("less than the 8-byte header length"));
  CHECK_THAT(error_of(make(good, 8, 1000)), Catch::Contains("beyond the end of the file"));
  CHECK_THAT(error_of(make(R"({"w":{"dtype":"F32",)", 8)), Catch::Contains("not valid JSON"));
  CHECK_THAT(error_of(make("[1,2]", 0)), Catch::Contains("not an object"));
  CHECK_THAT(error_of(make(R"({"w":{"dtype":"Q4","shape":[2],"data_offsets":[0,8]}})", 8)),
             Catch::Contains("'w': unknown dtype \"Q4\""));
  CHECK_THAT(error_of(make(R"({"w":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", 8)),
             Catch::Contains("'w': 8 bytes for F32 [3] (expected 12 bytes)"));
  CHECK_THAT(error_of(make(R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[8,16]}})", 8)),
             Catch::Contains("'w': data_offsets [8, 16] are out of range"));
  CHECK_THAT(error_of(make(R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[8,0]}})", 8)),
             Catch::Contains("end before they begin"));
  CHECK_THAT(error_of(make(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                           R"("b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
                           12)),
             Catch::Contains("'a' [0, 8] and 'b' [4, 12] overlap"));
  CHECK_THAT(error_of(make(R"({"w":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})", 8)),
             Catch::Contains("not a non-negative integer"));
  CHECK_THAT(error_of(make(R"({"w":{"dtype":"F32","shape":[2]}})", 8)),
             Catch::Contains("\"data_offsets\" must be two non-negative integers"));
  CHECK_THAT(error_of(make(R"({"__metadata__":{"k":1}})", 0)), Catch::Contains("not a string"));
}

// ---------------------------------------------------------------- bits map

TEST_CASE("bits map: longest prefix on canonical names and upstream spellings - errors",
          "[convert]") {
  const auto m = convert::BitsMap::Parse(convert::kDefaultScheme);
  CHECK(m.BitsFor("embedding") == 4);
  CHECK(m.BitsFor("mhc_phi_res") == 4);
  CHECK(m.BitsFor("layer00.q_proj") == 2);
  CHECK(m.BitsFor("engram1.tables") == 2);

  const auto m2 = convert::BitsMap::Parse(
      " default=2, layer=3 ,layer01=4, layer01.q=1.58, attn.out_proj=4, engram=ternary");
  CHECK(m2.BitsFor("layer00.k_proj") == 3);    // "layer"
  CHECK(m2.BitsFor("layer01.k_proj") == 4);    // "layer01" is longer
  CHECK(m2.BitsFor("layer01.q_proj") == 5);    // "layer01.q" longer still (ternary)
  CHECK(m2.BitsFor("layer05.out_proj") == 4);  // upstream "attn.out_proj" (13) beats "layer" (5)
  CHECK(m2.BitsFor("engram0.key_proj") == 5);
  CHECK(m2.BitsFor("embedding") == 2);  // default

  CHECK_THROWS_AS(convert::BitsMap::Parse("embedding=4"), UsageError);  // no default
  CHECK_THROWS_WITH(convert::BitsMap::Parse("default=8"), Catch::Contains("width '8'"));
  CHECK_THROWS_WITH(convert::BitsMap::Parse("default=2,embedding"),
                    Catch::Contains("'embedding' is not <name>=<bits>"));
  CHECK_THROWS_WITH(convert::BitsMap::Parse("default=2,=4"), Catch::Contains("has no name"));
}

// ---------------------------------------------------------------- progress

TEST_CASE("progress: bar text - silence when disabled", "[convert]") {
  CHECK(report::Progress::Render("dequant", 5, 10, 10) == "dequant [#####.....]  50% 5/10");
  CHECK(report::Progress::Render("x", 12, 10, 4) == "x [####] 100% 10/10");
  CHECK(report::Progress::Render("x", 0, 0, 4) == "x [####] 100% 0/0");
  report::Progress p("quiet", 3, false);
  CHECK_FALSE(p.enabled());
}

// ---------------------------------------------------------------- dequant / requant

TEST_CASE("dequant then requant reproduces every fixture model byte for byte", "[convert]") {
  for (const char* name : {"tiny.cact", "small.cact", "small-crafted-0.5.cact",
                           "small-crafted-0.8.cact", "official-geometry.cact"}) {
    INFO(name);
    ScratchDir dir;
    const auto s = convert::Dequant(testing::ModelPath(name), dir / "d", Quiet());
    const auto src = format::CactFile::Open(testing::ModelPath(name));
    CHECK(s.tensors == src.tensors().size() - 1);  // all but the tokenizer
    CHECK(SameFile(dir / "d/source.cact", testing::ModelPath(name)));
    const auto r = convert::Requant(dir / "d", dir / "out.cact", QuietRequant());
    CHECK(r.reencoded.empty());
    CHECK(r.kept == src.tensors().size());
    CHECK(SameFile(dir / "out.cact", testing::ModelPath(name)));
  }
}

TEST_CASE("dequant: safetensors holds canonical names and .cact shapes and the dequantized values",
          "[convert]") {
  ScratchDir dir;
  convert::Dequant(testing::ModelPath("small.cact"), dir / "d", Quiet());
  const auto src = format::CactFile::Open(testing::ModelPath("small.cact"));
  const auto st = format::SafetensorsFile::Open(dir / "d/weights.safetensors");
  CHECK(st.tensors().size() == src.tensors().size() - 1);
  for (const auto& t : src.tensors()) {
    const auto* s = st.find(t.name);
    if (t.dtype == format::DType::kRaw) {
      CHECK(s == nullptr);
      continue;
    }
    REQUIRE(s != nullptr);
    CHECK(s->dtype == format::StDType::kF32);
    CHECK(s->shape == std::vector<uint64_t>(t.shape.begin(), t.shape.begin() + t.ndim));
    if (t.dtype == format::DType::kF16) {  // widening is exact: compare with the raw halves
      const auto blob = src.data(t);
      const auto vals = st.data(*s);
      uint64_t mismatches = 0;
      for (uint64_t i = 0; i < t.elements(); ++i)
        mismatches +=
            LoadLE<float>(vals.data() + 4 * i) != F16ToF32(LoadLE<uint16_t>(blob.data() + 2 * i));
      CHECK(mismatches == 0);
    }
  }
  for (const char* name :
       {"embedding", "layer00.q_proj", "mhc_phi_res", "engram1.tables", "final_norm",
        "heads.manifest", "contrastive_head.probes", "confidence_head.bias"})
    CHECK(st.find(name) != nullptr);
  // config.json: geometry, kv, per-tensor bits/group and SHA-256s.
  const auto cfg = nlohmann::json::parse(FileBytes(dir / "d/config.json"));
  CHECK(cfg["geometry"]["d_model"] == 256);
  CHECK(cfg["kv"]["window"] == src.header().kv_window);
  CHECK(cfg["source"]["sha256"].get<std::string>().size() == 64);
  CHECK(cfg["tensors"].size() == src.tensors().size());
  CHECK(cfg["tensors"][0]["name"] == "embedding");
  CHECK(cfg["tensors"][0]["bits"] == 4);
  CHECK(cfg["tensors"][0]["group"] == 128);
}

TEST_CASE("dequant refuses an existing folder without --force and replaces it with it",
          "[convert]") {
  ScratchDir dir;
  fs::create_directory(dir / "d");
  { std::ofstream(dir / "d/keep") << "x"; }
  CHECK_THROWS_WITH(convert::Dequant(testing::ModelPath("tiny.cact"), dir / "d", Quiet()),
                    Catch::Contains("already exists (use --force"));
  CHECK(fs::exists(dir / "d/keep"));
  auto o = Quiet();
  o.force = true;
  convert::Dequant(testing::ModelPath("tiny.cact"), dir / "d", o);
  CHECK_FALSE(fs::exists(dir / "d/keep"));
  CHECK(fs::exists(dir / "d/weights.safetensors"));
  // Nothing left behind besides the output folder (no temporaries).
  size_t entries = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(dir.path)) ++entries;
  CHECK(entries == 1);
  // A bad model writes nothing.
  CHECK_THROWS_AS(convert::Dequant(dir / "d/config.json", dir / "e", Quiet()), FormatError);
  CHECK_FALSE(fs::exists(dir / "e"));
}

TEST_CASE("requant: an edited tensor changes only its own blob", "[convert]") {
  const auto orig = format::CactFile::Open(testing::ModelPath("small.cact"));
  for (const std::string target : {"layer02.v_proj", "layer01.norm_in", "engram0.tables"}) {
    INFO(target);
    ScratchDir dir;
    convert::Dequant(testing::ModelPath("small.cact"), dir / "d", Quiet());
    std::vector<float> edited;
    EditWeights(dir / "d", [&](std::vector<Entry>& es) {
      Entry& e = Find(es, target);
      const size_t n = e.bytes.size() / 4;
      for (size_t i = 0; i < n; ++i) SetFloat(e, i, GetFloat(e, i) * -0.75f + 0.001f * (i % 7));
      for (size_t i = 0; i < n; ++i) edited.push_back(GetFloat(e, i));
    });
    const auto r = convert::Requant(dir / "d", dir / "out.cact", QuietRequant());
    REQUIRE(r.reencoded == std::vector<std::string>{target});
    const auto out = format::CactFile::Open(dir / "out.cact");
    REQUIRE(out.tensors().size() == orig.tensors().size());
    CHECK(std::memcmp(&out.header(), &orig.header(), sizeof(format::Header)) == 0);
    for (const auto& t : orig.tensors()) {
      const auto& u = out.tensors()[t.index];
      CHECK(u.offset == t.offset);
      CHECK(u.nbytes == t.nbytes);
      const auto a = orig.data(t), b = out.data(u);
      const bool same = std::equal(a.begin(), a.end(), b.begin(), b.end());
      if (t.name == target) {
        CHECK_FALSE(same);
        if (t.dtype == format::DType::kF16) {  // FP16: the edited values, rounded to half
          size_t mismatches = 0;
          for (size_t i = 0; i < edited.size(); ++i)
            mismatches += LoadLE<uint16_t>(b.data() + 2 * i) != F32ToF16(edited[i]);
          CHECK(mismatches == 0);
        }
      } else {
        CHECK(same);
      }
    }
    // Outside the edited blob the files are identical (padding, directory, codebooks).
    const auto fa = FileBytes(testing::ModelPath("small.cact")), fb = FileBytes(dir / "out.cact");
    REQUIRE(fa.size() == fb.size());
    const auto& t = orig.tensor(target);
    size_t outside = 0;
    for (size_t i = 0; i < fa.size(); ++i)
      outside += (i < t.offset || i >= t.offset + t.nbytes) && fa[i] != fb[i];
    CHECK(outside == 0);
  }
}

TEST_CASE("requant --bits-map re-encodes exactly the tensors whose width changes", "[convert]") {
  ScratchDir dir;
  convert::Dequant(testing::ModelPath("tiny.cact"), dir / "d", Quiet());
  auto o = QuietRequant();
  o.bits_map = convert::BitsMap::Parse("embedding=4,mhc=4,layer01.q_proj=3,default=2");
  const auto r = convert::Requant(dir / "d", dir / "out.cact", o);
  CHECK(r.reencoded == std::vector<std::string>{"layer01.q_proj"});
  const auto out = format::CactFile::Open(dir / "out.cact");
  const auto orig = format::CactFile::Open(testing::ModelPath("tiny.cact"));
  CHECK(out.tensor("layer01.q_proj").bits == 3);
  CHECK(out.tensor("layer01.q_proj").nbytes < orig.tensor("layer01.q_proj").nbytes * 2);
  for (const auto& t : orig.tensors()) {
    if (t.name == "layer01.q_proj") continue;
    const auto a = orig.data(t), b = out.data(out.tensors()[t.index]);
    CHECK(std::equal(a.begin(), a.end(), b.begin(), b.end()));
  }
}

TEST_CASE("requant: bad input gives an error naming the tensor and writes nothing", "[convert]") {
  using Edit = std::function<void(std::vector<Entry>&)>;
  const std::vector<std::tuple<std::string, Edit, std::string>> cases = {
      {"shape",
       [](auto& es) {
         Find(es, "layer00.k_proj").shape = {32, 256};
       },
       "tensor 'layer00.k_proj' has shape [32, 256], expected [64, 128]"},
      {"dtype",
       [](auto& es) {
         Entry& e = Find(es, "final_norm");
         e.dtype = format::StDType::kF16;
         e.bytes.resize(e.bytes.size() / 2);
       },
       "tensor 'final_norm' has dtype F16, expected F32"},
      {"name", [](auto& es) { Find(es, "layer02.d1").name = "layer02.dd1"; },
       "tensor 'layer02.dd1' is not a tensor of this model"},
      {"missing",
       [](auto& es) {
         es.erase(std::remove_if(es.begin(), es.end(),
                                 [](const Entry& e) { return e.name == "mhc_b_res"; }),
                  es.end());
       },
       "tensor 'mhc_b_res' is missing"},
      {"nan", [](auto& es) { SetFloat(Find(es, "embedding"), 77, std::nanf("")); },
       "tensor 'embedding' has a non-finite value (nan) at flat index 77"},
      {"inf", [](auto& es) { SetFloat(Find(es, "layer01.attn_gate"), 0, INFINITY); },
       "tensor 'layer01.attn_gate' has a non-finite value (inf) at flat index 0"},
      {"f16 overflow", [](auto& es) { SetFloat(Find(es, "layer01.d3"), 5, 1e6f); },
       "tensor 'layer01.d3' value 1000000 at flat index 5 overflows FP16"},
  };
  ScratchDir pristine;
  convert::Dequant(testing::ModelPath("tiny.cact"), pristine / "d", Quiet());
  for (const auto& [label, edit, message] : cases) {
    INFO(label);
    ScratchDir dir;
    fs::copy(pristine / "d", dir / "d");
    EditWeights(dir / "d", edit);
    CHECK_THROWS_WITH(convert::Requant(dir / "d", dir / "out.cact", QuietRequant()),
                      Catch::Contains(message));
    CHECK_FALSE(fs::exists(dir / "out.cact"));
    size_t entries = 0;
    for ([[maybe_unused]] const auto& e : fs::directory_iterator(dir.path)) ++entries;
    CHECK(entries == 1);  // no temporary left beside the output
  }
}

TEST_CASE("requant: broken folders give a clear error and write nothing", "[convert]") {
  ScratchDir dir;
  convert::Dequant(testing::ModelPath("tiny.cact"), dir / "d", Quiet());
  SECTION("corrupt safetensors header") {
    auto b = FileBytes(dir / "d/weights.safetensors");
    b[8] = '[';
    format::WriteFileAtomic(dir / "d/weights.safetensors", b);
    CHECK_THROWS_AS(convert::Requant(dir / "d", dir / "out.cact", QuietRequant()), FormatError);
    CHECK_FALSE(fs::exists(dir / "out.cact"));
  }
  SECTION("truncated safetensors") {
    fs::resize_file(dir / "d/weights.safetensors", 1000);
    CHECK_THROWS_WITH(convert::Requant(dir / "d", dir / "out.cact", QuietRequant()),
                      Catch::Contains("weights.safetensors"));
    CHECK_FALSE(fs::exists(dir / "out.cact"));
  }
  SECTION("missing config.json") {
    fs::remove(dir / "d/config.json");
    CHECK_THROWS_WITH(convert::Requant(dir / "d", dir / "out.cact", QuietRequant()),
                      Catch::Contains("config.json: missing"));
    CHECK_FALSE(fs::exists(dir / "out.cact"));
  }
  SECTION("replaced source.cact") {
    fs::copy_file(testing::ModelPath("small.cact"), dir / "d/source.cact",
                  fs::copy_options::overwrite_existing);
    CHECK_THROWS_WITH(convert::Requant(dir / "d", dir / "out.cact", QuietRequant()),
                      Catch::Contains("source.cact must be the original model"));
    CHECK_FALSE(fs::exists(dir / "out.cact"));
  }
  SECTION("existing output without --force") {
    { std::ofstream(dir / "out.cact") << "x"; }
    CHECK_THROWS_WITH(convert::Requant(dir / "d", dir / "out.cact", QuietRequant()),
                      Catch::Contains("already exists (use --force"));
    CHECK(fs::file_size(dir / "out.cact") == 1);
    auto o = QuietRequant();
    o.force = true;
    convert::Requant(dir / "d", dir / "out.cact", o);
    CHECK(SameFile(dir / "out.cact", testing::ModelPath("tiny.cact")));
  }
}

// ---------------------------------------------------------------- synth

namespace {
struct ClassStats {
  uint64_t count = 0, elements = 0, bytes = 0;
  bool operator==(const ClassStats&) const = default;
};
// Accounting per class: "CQ2", "CQ4", "FP16", "RAW", ... (what `inspect` reports).
std::map<std::string, ClassStats> Accounting(const format::CactFile& f) {
  std::map<std::string, ClassStats> out;
  for (const auto& t : f.tensors()) {
    std::string cls = format::DTypeName(t.dtype);
    if (t.dtype == format::DType::kCQ) cls += std::to_string(t.bits);
    auto& s = out[cls];
    ++s.count;
    s.elements += t.elements();
    s.bytes += t.nbytes;
  }
  return out;
}
}  // namespace

TEST_CASE("synth --geometry official is accounted exactly like the official-geometry fixture",
          "[convert]") {
  ScratchDir dir;
  convert::SynthOptions o;
  o.like = testing::ModelPath("official-geometry.cact");
  o.geometry = convert::OfficialGeometry();
  o.progress = false;
  convert::Synth(dir / "s.cact", o);
  const auto s = format::CactFile::Open(dir / "s.cact");
  const auto ref = format::CactFile::Open(testing::ModelPath("official-geometry.cact"));
  const auto a = Accounting(s), b = Accounting(ref);
  REQUIRE(a.size() == b.size());
  for (const auto& [cls, stats] : b) {
    INFO(cls);
    REQUIRE(a.count(cls) == 1);
    CHECK(a.at(cls).count == stats.count);
    CHECK(a.at(cls).elements == stats.elements);
    CHECK(a.at(cls).bytes == stats.bytes);
  }
  CHECK(s.bytes().size() == ref.bytes().size());
  CHECK(std::memcmp(&s.header(), &ref.header(), sizeof(format::Header)) == 0);
  for (const auto& t : ref.tensors()) {  // same layout record by record
    const auto& u = s.tensors()[t.index];
    CHECK(u.name == t.name);
    CHECK(u.dtype == t.dtype);
    CHECK(u.bits == t.bits);
    CHECK(u.offset == t.offset);
  }
  CHECK(s.heads().size() == 2);
  // The regenerated codebooks equal the exporter's.
  CHECK(std::equal(s.codebooks().begin(), s.codebooks().end(), ref.codebooks().begin()));
}

TEST_CASE("synth: deterministic per seed - overrides honoured - no tensor at a trivial value",
          "[convert]") {
  ScratchDir dir;
  convert::SynthOptions o;
  o.like = testing::ModelPath("tiny.cact");
  o.progress = false;
  o.geometry = convert::OfficialGeometry();
  o.geometry.d_model = 96;  // not a power of two: hada_n 128, CQ rows padded to the group
  o.geometry.num_heads = 3;
  o.geometry.num_kv_heads = 1;
  o.geometry.head_dim = 32;
  o.geometry.num_layers = 4;
  o.geometry.engram_sites = {1};
  o.geometry.engram_slots = 512;
  o.seed = 7;
  convert::Synth(dir / "a.cact", o);
  convert::Synth(dir / "a.cact", [&] {
    auto c = o;
    c.force = true;
    return c;
  }());  // same seed
  o.force = false;
  convert::Synth(dir / "b.cact", o);
  o.seed = 8;
  convert::Synth(dir / "c.cact", o);
  CHECK(SameFile(dir / "a.cact", dir / "b.cact"));
  CHECK_FALSE(SameFile(dir / "a.cact", dir / "c.cact"));
  CHECK_THROWS_WITH(convert::Synth(dir / "a.cact", o), Catch::Contains("already exists"));

  const auto f = format::CactFile::Open(dir / "a.cact");
  const auto& g = f.geometry();
  CHECK(g.d_model == 96);
  CHECK(g.hada_n == 128);
  CHECK(g.num_heads == 3);
  CHECK(g.num_kv_heads == 1);
  CHECK(g.num_layers == 4);
  CHECK(g.engram_sites == std::vector<uint32_t>{1});
  CHECK(g.vocab == 8192);
  const auto tiny = format::CactFile::Open(testing::ModelPath("tiny.cact"));
  const auto tb = f.tokenizer_blob(), ta = tiny.tokenizer_blob();
  CHECK(std::equal(ta.begin(), ta.end(), tb.begin(), tb.end()));
  // Default scheme: embedding and mHC at 4 bits, everything else 2.
  for (const auto& t : f.tensors())
    if (t.dtype == format::DType::kCQ)
      CHECK(t.bits == ((t.name == "embedding" || t.name.rfind("mhc", 0) == 0) ? 4u : 2u));
  // Every FP16 tensor with more than one value varies (no all-zero gains, all-one diagonals),
  // and every single-value one (attn gates) is non-zero; only the contrastive bias is zero.
  for (const auto& t : f.tensors()) {
    if (t.dtype != format::DType::kF16 || t.name == "heads.manifest") continue;
    INFO(t.name);
    const auto v = f.floats(t);
    if (t.name == "contrastive_head.bias") {
      CHECK(std::all_of(v.begin(), v.end(), [](float x) { return x == 0.f; }));
    } else if (v.size() == 1) {
      CHECK(v[0] != 0.f);
    } else {
      CHECK(*std::min_element(v.begin(), v.end()) < *std::max_element(v.begin(), v.end()));
    }
  }
}

TEST_CASE("synth: impossible geometry is a usage error", "[convert]") {
  ScratchDir dir;
  convert::SynthOptions o;
  o.like = testing::ModelPath("tiny.cact");
  o.progress = false;
  o.geometry = convert::OfficialGeometry();
  o.geometry.num_layers = 10;  // site 15 is no longer a layer
  CHECK_THROWS_WITH(convert::Synth(dir / "x.cact", o), Catch::Contains("engram_sites"));
  o.geometry = convert::OfficialGeometry();
  o.geometry.num_kv_heads = 3;  // 8 heads not a multiple of 3
  CHECK_THROWS_AS(convert::Synth(dir / "x.cact", o), UsageError);
  CHECK_FALSE(fs::exists(dir / "x.cact"));
}

// ---------------------------------------------------------------- CLI and numpy

TEST_CASE("CLI: dequant/requant/synth run - bad input gives one error line", "[convert]") {
  ScratchDir dir;
  const std::string bin = NEEDLE_BINARY;
  const std::string err = dir / "err.txt";
  REQUIRE(RunStatus(bin + " dequant " + testing::ModelPath("tiny.cact") + " " + (dir / "d") +
                    " > /dev/null") == 0);
  REQUIRE(RunStatus(bin + " requant " + (dir / "d") + " " + (dir / "r.cact") + " > /dev/null") ==
          0);
  CHECK(SameFile(dir / "r.cact", testing::ModelPath("tiny.cact")));
  CHECK(RunStatus(bin + " dequant " + testing::ModelPath("tiny.cact") + " " + (dir / "d") + " 2> " +
                  err) != 0);
  CHECK(RunStatus(bin + " dequant " + testing::ModelPath("tiny.cact") + " " + (dir / "d") +
                  " --force >/dev/null") == 0);
  CHECK(RunStatus(bin + " synth " + (dir / "s.cact") + " --like " +
                  testing::ModelPath("tiny.cact") +
                  " --d-model 64 --heads 2 --kv-heads 1 --head-dim 32 --layers 2 --engram-sites 0,1"
                  " --engram-slots 256 --seed 3 > /dev/null") == 0);
  CHECK(format::CactFile::Open(dir / "s.cact").geometry().d_model == 64);

  // A usage error (exit 2) adds one line: the hint naming the subcommand's --help.
  auto one_error_line = [&](const std::string& args, const std::string& needle,
                            const std::string& usage_hint = "") {
    INFO(args);
    CHECK(RunStatus(bin + " " + args + " > /dev/null 2> " + err) != 0);
    const auto b = FileBytes(err);
    const std::string text(b.begin(), b.end());
    CHECK(text.rfind("needle: error: ", 0) == 0);
    const std::string first = text.substr(0, text.find('\n') + 1);
    CHECK(std::count(first.begin(), first.end(), '\n') == 1);
    CHECK(text.substr(first.size()) == (usage_hint.empty() ? "" : usage_hint + "\n"));
    CHECK_THAT(first, Catch::Contains(needle));
  };
  one_error_line("dequant " + (dir / "nope.cact") + " " + (dir / "x"), "nope.cact: cannot open");
  one_error_line("requant " + (dir / "nothere") + " " + (dir / "x.cact"), "not a folder");
  one_error_line("requant " + (dir / "d") + " " + (dir / "x.cact") + " --bits-map embedding=4",
                 "needs a default", "Run 'needle requant --help' for more information.");
  auto b = FileBytes(dir / "d/weights.safetensors");
  const uint64_t huge = 1ull << 40;
  std::memcpy(b.data(), &huge, 8);
  format::WriteFileAtomic(dir / "d/weights.safetensors", b);
  one_error_line("requant " + (dir / "d") + " " + (dir / "x.cact"),
                 "header length 1099511627776 goes beyond the end of the file");
  CHECK_FALSE(fs::exists(dir / "x.cact"));
}

TEST_CASE("numpy: an independent reader loads the safetensors - a numpy edit touches one blob",
          "[convert][numpy]") {
  const std::string tool = std::string(NEEDLE_TEST_DATA) + "/../safetensors_tool.py";
  std::string python;
  for (const char* candidate : {"python3", "/usr/bin/python3"})
    if (RunStatus(std::string(candidate) + " -c 'import numpy' > /dev/null 2>&1") == 0) {
      python = candidate;
      break;
    }
  if (python.empty()) {
    WARN("SKIP: python3 with numpy not found (install python3-numpy); numpy checks not run");
    return;
  }
  ScratchDir dir;
  const std::string bin = NEEDLE_BINARY;
  for (const char* model : {"tiny.cact", "official-geometry.cact"}) {
    INFO(model);
    const std::string d = dir / (std::string(model) + ".d");
    REQUIRE(RunStatus(bin + " dequant " + testing::ModelPath(model) + " " + d + " > /dev/null") ==
            0);
    CHECK(RunStatus(python + " " + tool + " check " + d) == 0);
  }
  const std::string d = dir / "tiny.cact.d";
  REQUIRE(RunStatus(python + " " + tool + " edit " + d + " layer01.gate_proj > /dev/null") == 0);
  CHECK(RunStatus(python + " " + tool + " check " + d + " > /dev/null") != 0);  // SHA now differs
  REQUIRE(RunStatus(bin + " requant " + d + " " + (dir / "e.cact") + " > /dev/null") == 0);
  const auto orig = format::CactFile::Open(testing::ModelPath("tiny.cact"));
  const auto out = format::CactFile::Open(dir / "e.cact");
  for (const auto& t : orig.tensors()) {
    const auto a = orig.data(t), b = out.data(out.tensors()[t.index]);
    INFO(t.name);
    CHECK(std::equal(a.begin(), a.end(), b.begin(), b.end()) == (t.name != "layer01.gate_proj"));
  }
}

TEST_CASE("synth: perturbing any tensor moves the logits or the probe-head outputs", "[convert]") {
  // Scales must keep every part of the network live: no saturated gate, no zero branch (a zero
  // d3 would hide d1/d2), no mixing that ignores a lane. Perturb each tensor alone and require
  // a visible change of the f32 forward pass after a short sequence.
  ScratchDir dir;
  convert::SynthOptions o;
  o.like = testing::ModelPath("tiny.cact");
  o.progress = false;
  o.geometry = convert::OfficialGeometry();
  o.geometry.d_model = 64;
  o.geometry.num_heads = 2;
  o.geometry.num_kv_heads = 1;
  o.geometry.head_dim = 32;
  o.geometry.num_layers = 3;
  o.geometry.engram_sites = {0, 2};
  o.geometry.engram_slots = 64;  // few slots: the fed n-grams hit rows that exist for sure
  o.seed = 11;
  convert::Synth(dir / "m.cact", o);
  const auto base_bytes = FileBytes(dir / "m.cact");

  const std::vector<int32_t> ids = {2, 300, 301, 302, 300, 301, 302, 4000, 17, 900, 300, 301};
  struct Out {
    std::vector<float> logits, heads;
  };
  auto run = [&](std::vector<uint8_t> bytes) {
    const auto file = format::CactFile::FromBytes(std::move(bytes), "perturbed");
    const model::Model m(file);
    model::DecoderConfig cfg;
    cfg.path = model::NumericPath::kF32;  // head_dim 32: the official path needs 64 or 128
    cfg.pool_heads = true;
    model::Decoder dec(m, cfg);
    Out out;
    out.logits.resize(dec.vocab());
    dec.Prefill(ids, out.logits);
    for (size_t h = 0; h < m.weights().heads.size(); ++h) {
      std::vector<float> v(m.weights().heads[h].out_dim);
      dec.HeadOutput(h, v);
      out.heads.insert(out.heads.end(), v.begin(), v.end());
    }
    return out;
  };
  auto max_abs = [](const std::vector<float>& v) {
    float m = 0;
    for (float x : v) m = std::max(m, std::fabs(x));
    return m;
  };
  auto max_diff = [](const std::vector<float>& a, const std::vector<float>& b) {
    float m = 0;
    for (size_t i = 0; i < a.size(); ++i) m = std::max(m, std::fabs(a[i] - b[i]));
    return m;
  };
  const Out base = run(base_bytes);
  const float logit_scale = max_abs(base.logits), head_scale = max_abs(base.heads);
  REQUIRE(logit_scale > 0);
  REQUIRE(head_scale > 0);

  const auto file = format::CactFile::FromBytes(base_bytes, "base");
  for (const auto& t : file.tensors()) {
    if (t.dtype == format::DType::kRaw || t.name == "heads.manifest") continue;
    INFO(t.name);
    auto bytes = base_bytes;
    uint8_t* p = bytes.data() + t.offset;
    if (t.dtype == format::DType::kF16) {  // v -> v + 0.25 (1 + |v|): no fixed point
      for (uint64_t i = 0; i < t.elements(); ++i) {
        const float v = F16ToF32(LoadLE<uint16_t>(p + 2 * i));
        const uint16_t h = F32ToF16(v + 0.25f * (1.f + std::fabs(v)));
        std::memcpy(p + 2 * i, &h, 2);
      }
    } else {  // CQ: flip code bits (norms unchanged; scale-invariant paths still see it)
      const auto v = file.cq(t);
      for (uint64_t i = 0; i < v.rows * v.row_bytes; ++i) p[i] ^= 0x5A;
    }
    const Out out = run(std::move(bytes));
    const bool is_head = t.name.find("_head.") != std::string::npos;
    if (is_head) {
      CHECK(max_diff(out.heads, base.heads) > 1e-3f * head_scale);
    } else {
      CHECK(max_diff(out.logits, base.logits) > 1e-3f * logit_scale);
    }
  }
}
