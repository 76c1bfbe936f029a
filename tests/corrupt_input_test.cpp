// Corrupt-input corpus against the built `needle` binary: damaged models (every header field,
// every directory field, truncations, padding, non-finite values), hostile tools files, JSON
// numbers out of range, pipes, FIFOs and devices, bad -n values. Each case must end with the
// right exit code and one line `needle: error: ...` holding a stable substring: never a crash,
// a hang, std::bad_alloc or an internal error (exit 70).
#include <sys/stat.h>

#include <catch2/catch.hpp>
#include <cstring>
#include <nlohmann/json.hpp>
#include <regex>
#include <string>
#include <vector>

#include "test_util.h"

using namespace needle::testing;

namespace {

// .cact v2 byte positions (FORMAT.md): header 30 x 4 bytes, codebooks 28 x f32, then 44-byte
// directory records.
constexpr size_t kDirStart = 120 + 4 * 28;
constexpr size_t kRecordBytes = 44;
// Field offsets inside a directory record ('<BBHIIIIQQII').
constexpr size_t kRecDtype = 0, kRecNdim = 1, kRecPad = 2, kRecShape = 4, kRecOffset = 20,
                 kRecNbytes = 28, kRecGroup = 36, kRecBits = 40;

size_t Record(size_t i) { return kDirStart + kRecordBytes * i; }
uint32_t NumTensors(const std::vector<uint8_t>& b) { return GetAt<uint32_t>(b, 4); }
uint64_t BlobOffset(const std::vector<uint8_t>& b, size_t i) {
  return GetAt<uint64_t>(b, Record(i) + kRecOffset);
}

std::vector<uint8_t> Tiny() { return ReadBytes(ModelPath("tiny.cact")); }

// Runs a shell command line (bash), capturing stdout and stderr; `timeout` guards against hangs.
CliResult RunShell(const std::string& command, const TempDir& dir) {
  const std::string out = dir / "shell.out", err = dir / "shell.err";
  const std::string cmd =
      "timeout 60 bash -c '" + command + "' </dev/null >'" + out + "' 2>'" + err + "'";
  return RunCaptured(cmd, out, err);
}

// The error contract: exit code, nothing on stdout, one line on stderr starting with
// "needle: error: ", containing `needle` (and the file name when given); a usage error (2) adds
// one line, the hint "Run 'needle <subcommand> --help' for more information.".
void CheckError(const CliResult& r, int code, const std::string& needle_text,
                const std::string& file = "") {
  INFO("stderr: " << r.err);
  CHECK(r.exit_code == code);
  CHECK(r.out.empty());
  CHECK(std::count(r.err.begin(), r.err.end(), '\n') == (code == 2 ? 2 : 1));
  if (code == 2) {
    const std::vector<std::string> lines = Lines(r.err);
    REQUIRE(!lines.empty());
    CHECK(std::regex_match(lines.back(),
                           std::regex("Run 'needle [a-z]+ --help' for more information\\.")));
  }
  CHECK(r.err.rfind("needle: error: ", 0) == 0);
  CHECK(r.err.find(needle_text) != std::string::npos);
  if (!file.empty()) CHECK(r.err.find(file) != std::string::npos);
}

// Writes `bytes` as a model and runs `inspect` (which validates the whole file) on it.
void CheckModel(const std::vector<uint8_t>& bytes, const std::string& needle_text,
                const std::string& subcommand = "inspect") {
  TempDir dir;
  const std::string path = dir / "bad.cact";
  WriteBytes(path, bytes);
  const CliResult r =
      subcommand == "run" ? RunCli({"run", path, "-n", "4", "hello"}) : RunCli({"inspect", path});
  CheckError(r, 4, needle_text, path);
}

// Runs `run --print-prompt` (tools are validated before the model runs) with a tools file.
CliResult RunTools(const std::string& tools_text, const TempDir& dir) {
  const std::string path = dir / "tools.json";
  WriteBytes(path, std::vector<uint8_t>(tools_text.begin(), tools_text.end()));
  return RunCli({"run", ModelPath("tiny.cact"), "--tools", path, "--print-prompt", "hi"});
}

// `count` comma-separated items, item(i) each.
template <class F>
std::string Joined(int count, F item) {
  std::string out;
  for (int i = 0; i < count; ++i) {
    if (i) out += ',';
    out += item(i);
  }
  return out;
}

std::string ToolWithProperty(const std::string& property_schema) {
  return R"([{"name":"set_timer","description":"d","parameters":{"type":"object",)"
         R"("properties":{"label":)" +
         property_schema + "}}}]";
}

}  // namespace

TEST_CASE("corrupt: the unmodified fixture passes (control)", "[cli][corrupt]") {
  TempDir dir;
  WriteBytes(dir / "ok.cact", Tiny());
  const CliResult r = RunCli({"inspect", dir / "ok.cact"});
  CHECK(r.exit_code == 0);
  CHECK(r.err.empty());
}

TEST_CASE("corrupt: header fields that size memory are bounded", "[cli][corrupt]") {
  auto b = Tiny();
  SECTION("kv_window 10,000,000 (run)") {
    PutAt<uint32_t>(&b, 4 * 3, 10'000'000);
    CheckModel(b, "header field kv_window = 10000000 is out of range [0, 2048]", "run");
  }
  SECTION("kv_window 2^32-1 (run)") {
    PutAt<uint32_t>(&b, 4 * 3, 0xFFFFFFFFu);
    CheckModel(b, "header field kv_window = 4294967295 is out of range", "run");
  }
  SECTION("max_seq_len 0") {
    PutAt<uint32_t>(&b, 4 * 11, 0);
    CheckModel(b, "header field max_seq_len = 0 is out of range [1, 65536]");
  }
  SECTION("max_seq_len above the limit") {
    PutAt<uint32_t>(&b, 4 * 11, 1'000'000);
    CheckModel(b, "header field max_seq_len = 1000000 is out of range");
  }
  SECTION("kv_bits 0") {
    PutAt<uint32_t>(&b, 4 * 4, 0);
    CheckModel(b, "header field kv_bits = 0 is not supported");
  }
  SECTION("kv_bits 99") {
    PutAt<uint32_t>(&b, 4 * 4, 99);
    CheckModel(b, "header field kv_bits = 99 is not supported");
  }
  SECTION("rope_theta NaN") {
    PutAt<uint32_t>(&b, 4 * 29, 0x7FC00000u);
    CheckModel(b, "header field rope_theta = nan must be finite and >= 1");
  }
  SECTION("rope_theta 0") {
    PutAt<float>(&b, 4 * 29, 0.f);
    CheckModel(b, "header field rope_theta = 0 must be finite and >= 1");
  }
  SECTION("rope_theta inf") {
    PutAt<uint32_t>(&b, 4 * 29, 0x7F800000u);
    CheckModel(b, "header field rope_theta = inf must be finite");
  }
  SECTION("K/V cache over the limit") {
    PutAt<uint32_t>(&b, 4 * 9, 4000);  // num_layers
    CheckModel(b, "needs a K/V cache of");
  }
  SECTION("engram order huge") {
    PutAt<uint32_t>(&b, 4 * 20, 0x80000000u);
    CheckModel(b, "engram_orders[0] = 2147483648 is out of range [1, 64]");
  }
  SECTION("unused engram order not zero") {
    PutAt<uint32_t>(&b, 4 * 22, 5);
    CheckModel(b, "engram_orders[2] = 5 is unused");
  }
  SECTION("vocab above the limit") {
    PutAt<uint32_t>(&b, 4 * 5, (1u << 24) + 1);
    CheckModel(b, "header field vocab = 16777217 is out of range");
  }
  SECTION("num_tensors 2^32-1") {
    PutAt<uint32_t>(&b, 4 * 1, 0xFFFFFFFFu);
    CheckModel(b, "truncated file: directory of 4294967295 tensors");
  }
}

TEST_CASE("corrupt: bit 30 flipped in every header field", "[cli][corrupt]") {
  const auto base = Tiny();
  for (size_t field = 0; field < 30; ++field) {
    auto b = base;
    PutAt<uint32_t>(&b, 4 * field, GetAt<uint32_t>(b, 4 * field) ^ (1u << 30));
    INFO("header field #" << field);
    CheckModel(b, ".cact");  // the path ends in .cact; the message is field-specific
  }
}

TEST_CASE("corrupt: header, codebooks and identity", "[cli][corrupt]") {
  auto b = Tiny();
  SECTION("wrong tag") {
    PutAt<uint32_t>(&b, 0, 0x12345678u);
    CheckModel(b, "not a Needle 2 .cact file (tag 0x12345678");
  }
  SECTION("Needle 3 tag") {
    PutAt<uint32_t>(&b, 0, 0x05E12A84u);
    CheckModel(b, "this is a Needle 3 file");
  }
  SECTION("codebook_len 27") {
    PutAt<uint32_t>(&b, 4 * 2, 27);
    CheckModel(b, "header field codebook_len = 27");
  }
  SECTION("codebook value NaN") {
    PutAt<uint32_t>(&b, 120 + 4 * 5, 0x7FC00000u);
    CheckModel(b, "codebook value #5 is not finite");
  }
}

TEST_CASE("corrupt: truncations at each structure", "[cli][corrupt]") {
  const auto base = Tiny();
  const uint32_t n = NumTensors(base);
  struct Cut {
    size_t size;
    const char* message;
  };
  const Cut cuts[] = {
      {0, "truncated file: 0 bytes"},
      {100, "truncated file: 100 bytes"},               // inside the header
      {200, "truncated file: directory of"},            // inside the codebooks
      {Record(3) + 7, "truncated file: directory of"},  // inside the directory
      {static_cast<size_t>(BlobOffset(base, 0)) + 10, "is not within the file"},  // first blob
      {static_cast<size_t>(BlobOffset(base, n / 2)) + 1, "is not within the file"},
      {base.size() - 1, "'tokenizer' data"},  // the last byte of the last blob
  };
  for (const Cut& c : cuts) {
    auto b = base;
    b.resize(c.size);
    INFO("cut at " << c.size);
    CheckModel(b, c.message);
  }
}

TEST_CASE("corrupt: directory records", "[cli][corrupt]") {
  auto b = Tiny();
  const size_t r1 = Record(1);  // layer00.norm_in: FP16 [d_model]
  const size_t r0 = Record(0);  // embedding: CQ
  SECTION("unknown dtype") {
    b[r1 + kRecDtype] = 9;
    CheckModel(b, "tensor #1 'layer00.norm_in': unknown dtype 9");
  }
  SECTION("ndim 7") {
    b[r1 + kRecNdim] = 7;
    CheckModel(b, "tensor #1 'layer00.norm_in': ndim 7 > 4");
  }
  SECTION("pad not zero") {
    PutAt<uint16_t>(&b, r1 + kRecPad, 1);
    CheckModel(b, "tensor #1 'layer00.norm_in': directory pad field is 1 (must be 0)");
  }
  SECTION("unused shape dimension not zero") {
    PutAt<uint32_t>(&b, r1 + kRecShape + 4 * 2, 5);
    CheckModel(b, "tensor #1 'layer00.norm_in': unused shape[2] = 5 (ndim 1; must be 0)");
  }
  SECTION("shape product overflows") {
    b[r1 + kRecNdim] = 4;
    for (int k = 0; k < 4; ++k) PutAt<uint32_t>(&b, r1 + kRecShape + 4 * k, 0xFFFFFFFFu);
    CheckModel(b, "is too large (size overflows 64 bits)");
  }
  SECTION("offset leaves a gap") {
    // The tokenizer moved 64 bytes on (file grown to match): a 64-byte hole of zeros.
    const uint32_t n = NumTensors(b);
    const uint64_t at = BlobOffset(b, n - 1);
    PutAt<uint64_t>(&b, Record(n - 1) + kRecOffset, at + 64);
    b.insert(b.begin() + static_cast<std::ptrdiff_t>(at), 64, 0);
    CheckModel(b, "tensor #" + std::to_string(n - 1) + " 'tokenizer': offset " +
                      std::to_string(at + 64) + " leaves a gap");
  }
  SECTION("offset past the previous blob's end overlaps the next") {
    PutAt<uint64_t>(&b, r1 + kRecOffset, BlobOffset(b, 1) + 64);
    CheckModel(b, "tensor #2 'layer00.q_proj': offset");
  }
  SECTION("offset not aligned") {
    PutAt<uint64_t>(&b, r1 + kRecOffset, BlobOffset(b, 1) + 1);
    CheckModel(b, "is not a multiple of 64");
  }
  SECTION("offset overlaps the previous blob") {
    PutAt<uint64_t>(&b, r1 + kRecOffset, BlobOffset(b, 0));
    CheckModel(b, "overlaps the previous tensor");
  }
  SECTION("nbytes off by one") {
    PutAt<uint64_t>(&b, r1 + kRecNbytes, GetAt<uint64_t>(b, r1 + kRecNbytes) + 1);
    CheckModel(b, "tensor #1 'layer00.norm_in': nbytes");
  }
  SECTION("FP16 record with a group") {
    PutAt<uint32_t>(&b, r1 + kRecGroup, 128);
    CheckModel(b, "FP16 record with group 128");
  }
  SECTION("CQ bits 7") {
    PutAt<uint32_t>(&b, r0 + kRecBits, 7);
    CheckModel(b, "tensor #0 'embedding': unknown CQ bits 7");
  }
  SECTION("CQ group 3") {
    PutAt<uint32_t>(&b, r0 + kRecGroup, 3);
    CheckModel(b, "tensor #0 'embedding': CQ group 3 is not a power of two");
  }
  SECTION("wrong shape for the geometry") {
    // q_norm [head_dim = 64] as [32, 2]: same bytes, wrong shape.
    const size_t r5 = Record(5);
    b[r5 + kRecNdim] = 2;
    PutAt<uint32_t>(&b, r5 + kRecShape, 32);
    PutAt<uint32_t>(&b, r5 + kRecShape + 4, 2);
    CheckModel(b, "tensor #5 'layer00.q_norm' has shape [32, 2], expected [64]");
  }
}

TEST_CASE("corrupt: bit 30 flipped in every directory field", "[cli][corrupt]") {
  const auto base = Tiny();
  const uint32_t n = NumTensors(base);
  for (const size_t rec : {size_t{0}, size_t{1}, size_t{n - 1}}) {
    // byte fields: dtype, ndim; then the u16 pad; then u32/u64 words.
    const size_t r = Record(rec);
    for (const size_t at : {kRecDtype, kRecNdim}) {
      auto b = base;
      b[r + at] ^= 0x40;
      INFO("record " << rec << " byte " << at);
      CheckModel(b, "tensor #" + std::to_string(rec));
    }
    // The most significant byte of pad (u16), shape[0..3], offset's low word, nbytes' low word,
    // group and bits: bit 30 of each word (bit 14 of pad).
    for (const size_t at :
         {kRecPad + 1, kRecShape + 3, kRecShape + 7, kRecShape + 11, kRecShape + 15, kRecOffset + 3,
          kRecNbytes + 3, kRecGroup + 3, kRecBits + 3}) {
      auto b = base;
      b[r + at] ^= 0x40;
      INFO("record " << rec << " byte " << at);
      CheckModel(b, "tensor #" + std::to_string(rec));
    }
  }
}

TEST_CASE("corrupt: padding, trailing bytes and non-finite values", "[cli][corrupt]") {
  auto b = Tiny();
  const uint32_t n = NumTensors(b);
  SECTION("non-zero byte in the gap after the directory") {
    const size_t at = Record(n) + 5;
    REQUIRE(at < BlobOffset(b, 0));
    b[at] = 1;
    CheckModel(b, "padding byte " + std::to_string(at) + " before tensor #0 'embedding' is 0x01");
  }
  SECTION("non-zero byte in a gap between blobs") {
    size_t i = 0;  // the first blob followed by padding
    while (i + 1 < n &&
           BlobOffset(b, i) + GetAt<uint64_t>(b, Record(i) + kRecNbytes) == BlobOffset(b, i + 1))
      ++i;
    REQUIRE(i + 1 < n);
    b[BlobOffset(b, i) + GetAt<uint64_t>(b, Record(i) + kRecNbytes)] = 0x80;
    CheckModel(b, "before tensor #" + std::to_string(i + 1) + " '");
    CheckModel(b, "is 0x80 (padding must be zero bytes)");
  }
  SECTION("one trailing byte") {
    b.push_back(0);
    CheckModel(b, "1 trailing bytes after the last tensor");
  }
  SECTION("64 trailing bytes") {
    b.resize(b.size() + 64, 0);
    CheckModel(b, "64 trailing bytes");
  }
  SECTION("NaN in an FP16 norm vector") {
    PutAt<uint16_t>(&b, BlobOffset(b, 1) + 2 * 3, 0x7E00);
    CheckModel(b, "tensor #1 'layer00.norm_in': value 3 is nan (must be finite)");
  }
  SECTION("Inf in an FP16 vector") {
    PutAt<uint16_t>(&b, BlobOffset(b, 1), 0xFC00);
    CheckModel(b, "tensor #1 'layer00.norm_in': value 0 is -inf");
  }
  SECTION("NaN in a CQ norm (last norm of the embedding)") {
    const uint64_t end0 = BlobOffset(b, 0) + GetAt<uint64_t>(b, Record(0) + kRecNbytes);
    PutAt<uint16_t>(&b, end0 - 2, 0x7C01);
    CheckModel(b, "tensor #0 'embedding': norm");
  }
  SECTION("unknown probe-head code") {
    // tiny: 61 core tensors, then heads.manifest [2].
    PutAt<uint16_t>(&b, BlobOffset(b, 61), 0x4200);  // 3.0
    CheckModel(b, "heads.manifest[0] = 3 is not a known head code");
  }
  SECTION("tokenizer blob: piece count flipped") {
    const uint64_t tok = BlobOffset(b, n - 1);
    PutAt<uint32_t>(&b, tok, GetAt<uint32_t>(b, tok) ^ (1u << 30));
    CheckModel(b, "tokenizer");
  }
}

TEST_CASE("corrupt: model path is a FIFO, a device or a directory", "[cli][corrupt]") {
  TempDir dir;
  const std::string fifo = dir / "model.fifo";
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  CliResult r = RunShell("\"" + std::string(NEEDLE_BINARY) + "\" inspect \"" + fifo + "\"", dir);
  CheckError(r, 3, "is a FIFO (pipe), expected a regular file", fifo);
  r = RunCli({"run", "/dev/zero", "hi"});
  CheckError(r, 3, "/dev/zero: is a character device, expected a regular file");
  r = RunCli({"inspect", dir.path()});
  CheckError(r, 3, "is a directory, expected a regular file");
}

TEST_CASE("corrupt: tools through a pipe are read to EOF", "[cli][corrupt]") {
  TempDir dir;
  const std::string bin = NEEDLE_BINARY, model = ModelPath("tiny.cact");
  WriteBytes(dir / "good.json",
             {'[', '{', '"', 'n', 'a', 'm', 'e', '"', ':', '"', 'p', 'i', 'n', 'g', '"', '}', ']'});
  WriteBytes(dir / "bad.json", {'[', '{', '"', 'n', 'a', 'm', 'e', '"', ':'});
  // A pipe as /dev/stdin: fstat reports size 0, the content must still be read.
  CliResult r = RunShell("cat \"" + dir / "good.json" + "\" | \"" + bin + "\" run \"" + model +
                             "\" --tools /dev/stdin --print-prompt hi",
                         dir);
  INFO(r.err);
  CHECK(r.exit_code == 0);
  CHECK(r.out.find("<tools>[{\"name\":\"ping\"}]</tools>") != std::string::npos);
  r = RunShell("\"" + bin + "\" run \"" + model + "\" --tools <(cat \"" + dir / "bad.json" +
                   "\") --print-prompt hi",
               dir);
  CheckError(r, 5, "invalid JSON", "/dev/fd/");
  // A device without end stops at the size limit instead of growing without bound.
  r = RunCli({"run", model, "--tools", "/dev/zero", "--print-prompt", "hi"});
  CheckError(r, 3, "/dev/zero: input is larger than the limit");
}

TEST_CASE("corrupt: tools files", "[cli][corrupt]") {
  TempDir dir;
  const std::string tools = dir / "tools.json";
  SECTION("array of numbers") {
    CheckError(RunTools("[1,2,3]", dir), 5, "tool #0 is a JSON number (1), expected an object",
               tools);
  }
  SECTION("name is not a string") {
    CheckError(RunTools(R"([{"name":42,"parameters":{}}])", dir), 5,
               "tool #0: \"name\" is a JSON number (42), expected a string", tools);
  }
  SECTION("top-level object") {
    CheckError(RunTools(R"({"name":"x"})", dir), 5, "expected a JSON array of tools", tools);
  }
  SECTION("invalid JSON") {
    CheckError(RunTools(R"([{"name":"x")", dir), 5, "invalid JSON", tools);
  }
  SECTION("number out of double range") {
    CheckError(RunTools(R"([{"name":"x","n":1e400}])", dir), 5, "invalid JSON", tools);
  }
  SECTION("UTF-8 BOM is skipped") {
    const CliResult r = RunTools("\xEF\xBB\xBF[{\"name\":\"ping\"}]", dir);
    INFO(r.err);
    CHECK(r.exit_code == 0);
    CHECK(r.out.find("<tools>[{\"name\":\"ping\"}]</tools>") != std::string::npos);
  }
  SECTION("schema length and item limits out of range") {
    struct Limit {
      const char* schema;
      const char* message;
    };
    for (const Limit& l : {
             Limit{R"({"type":"string","maxLength":1e300})",
                   "tool 'set_timer' parameters property 'label': \"maxLength\": 1e+300 is not a "
                   "whole number in [0, 2147483647]"},
             Limit{R"({"type":"string","maxLength":-1})",
                   "property 'label': \"maxLength\": -1 is not a whole number"},
             Limit{R"({"type":"string","minLength":-5})",
                   "\"minLength\": -5 is not a whole number"},
             Limit{R"({"type":"array","minItems":1e300})", "\"minItems\": 1e+300"},
             Limit{R"({"type":"array","maxItems":-3})", "\"maxItems\": -3"},
             Limit{R"({"type":"string","maxLength":2.5})", "\"maxLength\": 2.5"},
         }) {
      INFO(l.schema);
      CheckError(RunTools(ToolWithProperty(l.schema), dir), 5, l.message, tools);
    }
  }
  SECTION("65 tools") {
    const std::string t =
        Joined(65, [](int i) { return "{\"name\":\"t" + std::to_string(i) + "\"}"; });
    CheckError(RunTools("[" + t + "]", dir), 5, "65 tools, the call grammar supports at most 64",
               tools);
  }
  SECTION("65 properties") {
    const std::string p =
        Joined(65, [](int i) { return "\"p" + std::to_string(i) + R"(":{"type":"string"})"; });
    CheckError(
        RunTools(R"([{"name":"x","parameters":{"type":"object","properties":{)" + p + "}}}]", dir),
        5, "tool 'x' parameters: 65 properties, the call grammar supports at most 64", tools);
  }
  SECTION("65 enum values") {
    const std::string e = Joined(65, [](int i) { return "\"v" + std::to_string(i) + "\""; });
    CheckError(RunTools(ToolWithProperty(R"({"type":"string","enum":[)" + e + "]}"), dir), 5,
               "property 'label': 65 enum values, the call grammar supports at most 64", tools);
  }
  SECTION("64 tools are fine") {
    const std::string t =
        Joined(64, [](int i) { return "{\"name\":\"t" + std::to_string(i) + "\"}"; });
    const CliResult r = RunTools("[" + t + "]", dir);
    INFO(r.err);
    CHECK(r.exit_code == 0);
  }
}

TEST_CASE("corrupt: JSON numbers out of range in requant inputs", "[cli][corrupt]") {
  TempDir dir;
  const std::string out = dir / "f32";
  REQUIRE(RunCli({"dequant", ModelPath("tiny.cact"), out}).exit_code == 0);
  SECTION("config.json") {
    auto cfg = ReadBytes(out + "/config.json");
    const std::string bad = "{\"big\":1e400,";
    REQUIRE(cfg.front() == '{');
    cfg.erase(cfg.begin());
    cfg.insert(cfg.begin(), bad.begin(), bad.end());
    WriteBytes(out + "/config.json", cfg);
    CheckError(RunCli({"requant", out, dir / "out.cact"}), 4, "not valid JSON",
               out + "/config.json");
  }
  SECTION("safetensors header") {
    const std::string header =
        R"({"embedding":{"dtype":"F32","shape":[1e400],"data_offsets":[0,4]}})";
    std::vector<uint8_t> st(8);
    const uint64_t len = header.size();
    std::memcpy(st.data(), &len, 8);
    st.insert(st.end(), header.begin(), header.end());
    st.resize(st.size() + 4, 0);
    WriteBytes(out + "/weights.safetensors", st);
    CheckError(RunCli({"requant", out, dir / "out.cact"}), 4,
               "safetensors header is not valid JSON", out + "/weights.safetensors");
  }
}

TEST_CASE("corrupt: -n/--max-tokens out of range", "[cli][corrupt]") {
  const std::string model = ModelPath("tiny.cact");
  CheckError(RunCli({"run", model, "-n", "-1", "hi"}), 2, "-n/--max-tokens must be >= 0 (got -1)");
  CheckError(RunCli({"run", model, "--raw", "-n", "-1", "hi"}), 2, "must be >= 0");
  CheckError(RunCli({"run", model, "-n", "1000000000", "hi"}), 2,
             "-n/--max-tokens 1000000000 is above the limit 65536");
  CheckError(RunCli({"run", model, "-n", "4096", "hi"}), 2,
             "-n/--max-tokens 4096 is above the model's max_seq_len 2048", model);
  // CLI11's own parse errors are usage errors too.
  const CliResult r = RunCli({"run", model});
  CHECK(r.exit_code == 2);
}

TEST_CASE("corrupt: invalid UTF-8 in user text with --json", "[cli][corrupt]") {
  const std::string model = ModelPath("tiny.cact");
  const std::string bad = "caf\xE9 \xFF";
  CheckError(RunCli({"run", model, "--print-prompt", "--json", bad}), 5,
             "the query is not valid UTF-8 (byte 3 = 0xE9)");
  // Outputs holding model text or the query are written with U+FFFD, never an internal error.
  CliResult r = RunCli({"run", model, "--raw", "--json", "-n", "4", bad});
  INFO(r.err);
  CHECK(r.exit_code == 0);
  CHECK_NOTHROW(nlohmann::json::parse(r.out));
  r = RunCli({"run", model, "-n", "8", "-v", bad});
  INFO(r.err);
  CHECK(r.exit_code == 0);
  CHECK_NOTHROW(nlohmann::json::parse(r.out));
  // A model path that is not UTF-8 appears in inspect, verify and bench JSON.
  TempDir dir;
  const std::string odd = dir / "caf\xE9.cact";
  WriteBytes(odd, ReadBytes(model));
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"inspect", odd, "--json"},
        std::vector<std::string>{"bench", odd, "-p", "1", "-n", "1", "-r", "1", "--warmup", "0",
                                 "-o", "json"}}) {
    r = RunCli(args);
    INFO(args[0] << ": " << r.err);
    CHECK(r.exit_code == 0);
    const auto j = nlohmann::json::parse(r.out, nullptr, false);
    CHECK(!j.is_discarded());
    CHECK(r.out.find("caf\xEF\xBF\xBD.cact") != std::string::npos);  // U+FFFD
  }
}
