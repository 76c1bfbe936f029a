// Writes the fuzz targets' seed corpora from the repository's fixtures (tests/data, examples) into
// OUT_DIR/<target>/, so that no binary seed is committed: make_seeds OUT_DIR.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "convert/dequant.h"
#include "format/cact.h"
#include "format/safetensors.h"
#include "fuzz_util.h"
#include "model/snapshot_io.h"

namespace fs = std::filesystem;
using needle::fuzz::DataPath;
using needle::fuzz::ReadAll;

namespace {
fs::path g_out;

void Write(const std::string& target, const std::string& name, const std::string& bytes) {
  const fs::path dir = g_out / target;
  fs::create_directories(dir);
  std::ofstream out(dir / name, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}
std::string Text(const std::string& path) {
  const auto b = ReadAll(path);
  return {b.begin(), b.end()};
}
}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: make_seeds OUT_DIR\n");
    return 2;
  }
  g_out = argv[1];
  using needle::format::CactFile;
  const std::vector<std::string> models = {"tiny", "small"};
  const std::string examples = NEEDLE_EXAMPLES_DIR;
  const std::vector<std::string> tools_files = {examples + "/tools.json",
                                                DataPath("official-state/tools.json")};

  // .cact images (the C API loader only gets the tiny one: each accepted input runs a turn).
  for (const auto& m : models) {
    const std::string bytes = Text(DataPath("models/" + m + ".cact"));
    Write("fuzz_cact", m + ".cact", bytes);
    if (m == "tiny") Write("fuzz_capi_load", m + ".cact", bytes);
    const CactFile f = CactFile::Open(DataPath("models/" + m + ".cact"));
    const auto blob = f.tokenizer_blob();
    Write("fuzz_tokenizer_blob", m + ".tok", std::string(blob.begin(), blob.end()));
  }

  // Texts: the tokenizer fixtures, the tools files, a long query.
  std::vector<std::string> texts;
  {
    std::ifstream in(DataPath("tokenizer/encode.jsonl"));
    for (std::string line; std::getline(in, line);)
      if (!line.empty()) texts.push_back(nlohmann::json::parse(line).at("text").get<std::string>());
  }
  texts.push_back(Text(DataPath("official-state/long-query.txt")));
  texts.push_back(
      "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n<tool_call>[]</tool_call>");
  for (size_t i = 0; i < texts.size(); ++i) {
    Write("fuzz_tokenizer_encode", "text" + std::to_string(i), texts[i]);
    if (i < 8)
      Write("fuzz_capi_session", "text" + std::to_string(i), std::string(1, '\xff') + texts[i]);
  }
  Write("fuzz_capi_session", "cut", std::string(1, '\x05') + texts[0]);
  for (const auto& t : tools_files)
    Write("fuzz_tokenizer_encode",
          fs::path(t).filename().string() + fs::path(t).parent_path().filename().string(), Text(t));

  // Tools JSON + NUL + generated call text.
  const std::vector<std::string> calls = {
      R"([{"name":"set_timer","arguments":{"minutes":5}}])",
      R"([{"name":"set_lights","arguments":{"room":"kitchen","state":"on"}},{"name":"set_timer","arguments":{"minutes":10}}])",
      R"([{"name":"get_weather","arguments":{"city":"Paris"}}])",
      R"([{"name":"set_lights","arguments":{"room":"a\"b\\u00e9}","state":"off",}}])", "[]"};
  int n = 0;
  for (const auto& t : tools_files)
    for (const auto& c : calls)
      Write("fuzz_tools_grammar", "call" + std::to_string(n++), Text(t) + std::string(1, '\0') + c);

  // safetensors: small files written by our writer (every dtype, a scalar, metadata).
  {
    const fs::path tmp = g_out / "tmp";
    fs::create_directories(tmp);
    const std::string path = (tmp / "a.safetensors").string();
    needle::format::SafetensorsWriter w(path, true);
    w.SetMetadata("format", "pt");
    w.Declare("a.weight", needle::format::StDType::kF32, {2, 3});
    w.Declare("b", needle::format::StDType::kF16, {4});
    w.Declare("scalar", needle::format::StDType::kI64, {});
    w.Declare("empty", needle::format::StDType::kU8, {0, 5});
    w.Write(std::vector<uint8_t>(24, 1));
    w.Write(std::vector<uint8_t>(8, 2));
    w.Write(std::vector<uint8_t>(8, 3));
    w.Write({});
    w.Commit();
    Write("fuzz_safetensors", "a.safetensors", Text(path));

    // The tiny model's dequant folder: its config.json (the requant target's input).
    needle::convert::DequantOptions opt;
    opt.force = true;
    opt.progress = false;
    needle::convert::Dequant(DataPath("models/tiny.cact"), (tmp / "dq").string(), opt);
    const std::string config = Text((tmp / "dq" / needle::convert::kConfigFile).string());
    Write("fuzz_requant_config", "config.json", config);
    // Re-encoding is slow under ASan: the bits-map seed only names a width the model already
    // uses for nothing (parse and lookup), and a config without tensor records stops early.
    Write("fuzz_requant_config", "config-bits.json",
          config + std::string(1, '\0') + "no.such.tensor=3,default=2");
    nlohmann::json short_config = nlohmann::json::parse(config);
    short_config["tensors"] = nlohmann::json::array();
    Write("fuzz_requant_config", "config-short.json", short_config.dump());
    // The head of the tiny model's weights file (header + first bytes) as a safetensors seed.
    const std::string st = Text((tmp / "dq" / needle::convert::kWeightsFile).string());
    Write("fuzz_safetensors", "tiny-head.safetensors",
          st.substr(0, std::min<size_t>(st.size(), 65536)));
    fs::remove_all(tmp);
  }
  // A prefix snapshot of the tiny model after 9 tokens (4 pinned), the file without its magic
  // and key (the harness adds them), and the same after 70 tokens (the window wrapped).
  {
    const CactFile f = CactFile::Open(DataPath("models/tiny.cact"));
    const needle::model::Model model(f);
    needle::model::Decoder dec(model, needle::fuzz::SnapshotDecoderConfig(f.geometry()));
    const fs::path tmp = g_out / "tmp-snapshot";
    fs::create_directories(tmp);
    for (const size_t n : {9, 70}) {
      std::vector<int32_t> ids(n);
      for (size_t i = 0; i < n; ++i) ids[i] = static_cast<int32_t>(5 + i % 40);
      std::vector<float> logits(f.geometry().vocab);
      dec.Reset();
      dec.Prefill(ids, logits);
      needle::model::Snapshot snap;
      dec.Save(&snap);
      const std::string path = (tmp / "s.prefix").string();
      needle::model::WriteSnapshotFile(path, needle::fuzz::kSnapshotKey, snap, logits);
      const std::string file = Text(path);
      const size_t header = 8 + 4 + std::string(needle::fuzz::kSnapshotKey).size();
      Write("fuzz_prefix_snapshot", "after" + std::to_string(n), file.substr(header));
    }
    fs::remove_all(tmp);
  }
  std::printf("make_seeds: wrote %s\n", g_out.string().c_str());
  return 0;
}
