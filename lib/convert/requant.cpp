// needle requant: validate all inputs, re-encode what changed, write atomically.
#include "convert/requant.h"

#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>

#include "base/error.h"
#include "base/fp16.h"
#include "convert/dequant.h"
#include "format/cact.h"
#include "format/cact_writer.h"
#include "format/mapped_file.h"
#include "format/safetensors.h"
#include "format/sha256.h"
#include "quant/cq.h"
#include "report/progress.h"

namespace needle::convert {

namespace fs = std::filesystem;

namespace {

constexpr float kF16Max = 65504.f;

nlohmann::json ReadConfig(const fs::path& path) {
  if (!fs::exists(path))
    Fail<IoError>("{}: missing (IN_DIR must be a folder written by `needle dequant`)",
                  path.string());
  const std::vector<uint8_t> bytes = format::ReadFileBytes(path.string());
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(bytes.begin(), bytes.end());
  } catch (const nlohmann::json::exception& e) {  // parse_error, or out_of_range (1e400)
    Fail<FormatError>("{}: not valid JSON: {}", path.string(), e.what());
  }
  if (!j.is_object() || !j.contains("needle_dequant"))
    Fail<FormatError>("{}: not a needle dequant config (no \"needle_dequant\" field)",
                      path.string());
  if (j["needle_dequant"] != kDequantFolderVersion)
    Fail<FormatError>("{}: needle_dequant version {} is not supported (expected {})", path.string(),
                      j["needle_dequant"].dump(), kDequantFolderVersion);
  if (!j.contains("tensors") || !j["tensors"].is_array())
    Fail<FormatError>("{}: field \"tensors\" is missing or not an array", path.string());
  return j;
}

std::string JsonString(const nlohmann::json& j, const char* key) {
  const auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : std::string();
}

}  // namespace

RequantSummary Requant(const std::string& in_dir, const std::string& out_path,
                       const RequantOptions& options) {
  const fs::path dir(in_dir);
  if (!fs::is_directory(dir))
    Fail<IoError>("{}: not a folder (expected the output of `needle dequant`)", in_dir);
  if (!options.force && fs::exists(out_path))
    Fail<IoError>("{}: already exists (use --force to overwrite)", out_path);

  const fs::path config_path = dir / kConfigFile;
  const nlohmann::json config = ReadConfig(config_path);
  const fs::path source_path = dir / kSourceFile;
  if (!fs::exists(source_path)) Fail<IoError>("{}: missing", source_path.string());
  const format::CactFile src = format::CactFile::Open(source_path.string());
  const std::string want_sha =
      JsonString(config.value("source", nlohmann::json::object()), "sha256");
  if (!want_sha.empty() && format::Sha256Hex(src.bytes()) != want_sha)
    Fail<InvalidInput>(
        "{}: SHA-256 differs from the one recorded in {} at dequant time; "
        "source.cact must be the original model",
        source_path.string(), config_path.string());
  const fs::path weights_path = dir / kWeightsFile;
  if (!fs::exists(weights_path)) Fail<IoError>("{}: missing", weights_path.string());
  const format::SafetensorsFile st = format::SafetensorsFile::Open(weights_path.string());
  const std::string wl = weights_path.string();

  // SHA-256 of each tensor's F32 bytes as dequant wrote them.
  std::map<std::string, std::string> written_sha;
  for (const auto& e : config["tensors"])
    if (e.is_object()) written_sha[JsonString(e, "name")] = JsonString(e, "sha256");

  // Every safetensors tensor must be a numeric tensor of the model.
  for (const auto& s : st.tensors()) {
    const format::TensorInfo* t = src.find(s.name);
    if (!t || t->dtype == format::DType::kRaw)
      Fail<InvalidInput>(
          "{}: tensor '{}' is not a tensor of this model (names must be the "
          "canonical ones dequant wrote)",
          wl, s.name);
  }

  struct Plan {
    bool reencode = false;
    uint32_t bits = 0;
    std::vector<uint8_t> blob;
  };
  std::vector<Plan> plans(src.tensors().size());
  const uint64_t work = src.tensors().size();
  report::Progress bar("requant", work, options.progress && ::isatty(2) == 1);
  for (const auto& t : src.tensors()) {
    Plan& plan = plans[t.index];
    bar.Advance();
    if (t.dtype == format::DType::kRaw) continue;
    const format::StTensor* s = st.find(t.name);
    if (!s) Fail<InvalidInput>("{}: tensor '{}' is missing", wl, t.name);
    if (s->dtype != format::StDType::kF32)
      Fail<InvalidInput>("{}: tensor '{}' has dtype {}, expected F32", wl, t.name,
                         format::StDTypeName(s->dtype));
    bool same_shape = s->shape.size() == t.ndim;
    for (uint32_t k = 0; same_shape && k < t.ndim; ++k) same_shape = s->shape[k] == t.shape[k];
    if (!same_shape)
      Fail<InvalidInput>("{}: tensor '{}' has shape {}, expected {}", wl, t.name, s->shape_str(),
                         t.shape_str());
    const auto bytes = st.data(*s);
    const uint64_t n = s->elements();
    for (uint64_t i = 0; i < n; ++i) {
      const float v = LoadLE<float>(bytes.data() + 4 * i);
      if (!std::isfinite(v))
        Fail<InvalidInput>("{}: tensor '{}' has a non-finite value ({}) at flat index {}", wl,
                           t.name, v, i);
    }
    const auto sha = written_sha.find(t.name);
    if (sha == written_sha.end() || sha->second.empty())
      Fail<FormatError>("{}: no SHA-256 recorded for tensor '{}'", config_path.string(), t.name);
    const bool changed = format::Sha256Hex(bytes) != sha->second;
    plan.bits = t.bits;
    if (t.dtype == format::DType::kCQ && options.bits_map)
      plan.bits = options.bits_map->BitsFor(t.name);
    plan.reencode = changed || plan.bits != t.bits;
    if (!plan.reencode) continue;

    if (t.dtype == format::DType::kCQ) {
      std::vector<float> values(n);
      std::memcpy(values.data(), bytes.data(), n * 4);
      quant::CqParams p;
      p.rows = t.rows();
      p.cols = t.cols();
      p.group = t.group;
      p.record_bits = plan.bits;
      plan.blob = quant::Quantize(values, p, quant::Levels(src.codebooks(), plan.bits, t.group));
    } else if (t.dtype == format::DType::kF16) {
      plan.blob.resize(n * 2);
      for (uint64_t i = 0; i < n; ++i) {
        const float v = LoadLE<float>(bytes.data() + 4 * i);
        if (std::fabs(v) > kF16Max)
          Fail<InvalidInput>("{}: tensor '{}' value {} at flat index {} overflows FP16 (max {})",
                             wl, t.name, v, i, kF16Max);
        const uint16_t h = F32ToF16(v);
        std::memcpy(plan.blob.data() + 2 * i, &h, 2);
      }
    } else {  // FP32: the values are the blob
      plan.blob.assign(bytes.begin(), bytes.end());
    }
  }

  std::vector<format::TensorRecord> records;
  records.reserve(src.tensors().size());
  RequantSummary summary;
  for (const auto& t : src.tensors()) {
    format::TensorRecord r = format::RecordOf(src, t);
    const Plan& plan = plans[t.index];
    if (plan.reencode) {
      r.bits = plan.bits;
      r.data = plan.blob;
      summary.reencoded.push_back(t.name);
    } else {
      ++summary.kept;
    }
    records.push_back(r);
  }
  format::WriteCact(out_path, src.header(), src.codebooks(), records, /*overwrite=*/true);
  bar.Finish();
  summary.file_bytes = fs::file_size(out_path);
  return summary;
}

}  // namespace needle::convert
