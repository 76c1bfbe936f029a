// needle dequant: writes the folder in a temporary sibling and renames it into place.
#include "convert/dequant.h"

#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "base/error.h"
#include "format/atomic_file.h"
#include "format/safetensors.h"
#include "format/sha256.h"
#include "quant/cq.h"
#include "report/progress.h"

namespace needle::convert {

namespace fs = std::filesystem;

std::vector<float> TensorToF32(const format::CactFile& file, const format::TensorInfo& t) {
  if (t.dtype == format::DType::kCQ) {
    quant::CqParams p;
    p.rows = t.rows();
    p.cols = t.cols();
    p.group = t.group;
    p.record_bits = t.bits;
    return quant::Dequantize(file.data(t), p, quant::Levels(file.codebooks(), t.bits, t.group));
  }
  return file.floats(t);  // throws for RAW
}

namespace {

std::span<const uint8_t> AsBytes(const std::vector<float>& v) {
  return {reinterpret_cast<const uint8_t*>(v.data()), v.size() * sizeof(float)};
}

nlohmann::ordered_json HeaderJson(const format::Header& h) {
  nlohmann::ordered_json j;
  j["tag"] = h.tag;
  j["num_tensors"] = h.num_tensors;
  j["codebook_len"] = h.codebook_len;
  j["kv_window"] = h.kv_window;
  j["kv_bits"] = h.kv_bits;
  j["vocab"] = h.vocab;
  j["d_model"] = h.d_model;
  j["num_heads"] = h.num_heads;
  j["num_kv_heads"] = h.num_kv_heads;
  j["num_layers"] = h.num_layers;
  j["head_dim"] = h.head_dim;
  j["max_seq_len"] = h.max_seq_len;
  j["hada_n"] = h.hada_n;
  j["mhc_lanes"] = h.mhc_lanes;
  j["engram_slots"] = h.engram_slots;
  j["engram_sub_dim"] = h.engram_sub_dim;
  j["num_engram_tables"] = h.num_engram_tables;
  j["engram_conv_taps"] = h.engram_conv_taps;
  j["engram_conv_dilation"] = h.engram_conv_dilation;
  j["engram_orders"] =
      std::vector<uint32_t>(h.engram_orders, h.engram_orders + h.num_engram_orders);
  j["engram_sites"] = std::vector<uint32_t>(h.engram_sites, h.engram_sites + h.num_engram_sites);
  j["rope_theta"] = h.rope_theta;
  return j;
}

// Removes a temporary folder unless released (an interrupted dequant leaves nothing behind).
class TempDir {
 public:
  explicit TempDir(fs::path p) : path_(std::move(p)) {}
  ~TempDir() {
    if (!released_) {
      std::error_code ec;
      fs::remove_all(path_, ec);
    }
  }
  void Release() { released_ = true; }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
  bool released_ = false;
};

}  // namespace

DequantSummary Dequant(const std::string& model_path, const std::string& out_dir,
                       const DequantOptions& options) {
  fs::path out = fs::path(out_dir);
  if (out.has_filename() == false) out = out.parent_path();  // "dir/" -> "dir"
  std::error_code ec;
  const bool exists = fs::exists(fs::symlink_status(out, ec));
  if (exists && !options.force)
    Fail<IoError>("{}: already exists (use --force to overwrite)", out.string());

  const format::CactFile file = format::CactFile::Open(model_path);
  DequantSummary summary;
  summary.source_sha256 = format::Sha256Hex(file.bytes());

  const fs::path tmp_path = out.string() + ".tmp." + std::to_string(::getpid());
  fs::remove_all(tmp_path, ec);
  if (!fs::create_directory(tmp_path, ec))
    Fail<IoError>("{}: cannot create temporary folder: {}", tmp_path.string(), ec.message());
  TempDir tmp(tmp_path);

  // weights.safetensors: every numeric tensor as F32 in file order.
  format::SafetensorsWriter st((tmp.path() / kWeightsFile).string(), /*overwrite=*/true);
  st.SetMetadata("format", "pt");
  st.SetMetadata("needle_source_sha256", summary.source_sha256);
  for (const auto& t : file.tensors()) {
    if (t.dtype == format::DType::kRaw) continue;
    st.Declare(t.name, format::StDType::kF32,
               std::vector<uint64_t>(t.shape.begin(), t.shape.begin() + t.ndim));
  }
  nlohmann::ordered_json tensors = nlohmann::ordered_json::array();
  report::Progress bar("dequant", file.tensors().size(), options.progress && ::isatty(2) == 1);
  for (const auto& t : file.tensors()) {
    nlohmann::ordered_json e;
    e["index"] = t.index;
    e["name"] = t.name;
    e["dtype"] = format::DTypeName(t.dtype);
    e["shape"] = std::vector<uint64_t>(t.shape.begin(), t.shape.begin() + t.ndim);
    e["bits"] = t.bits;
    e["group"] = t.group;
    e["blob_bytes"] = t.nbytes;
    e["blob_sha256"] = format::Sha256Hex(file.data(t));
    if (t.dtype != format::DType::kRaw) {
      const std::vector<float> values = TensorToF32(file, t);
      e["sha256"] = format::Sha256Hex(AsBytes(values));  // of the F32 bytes in the safetensors
      st.Write(AsBytes(values));
      ++summary.tensors;
    }
    e["in_safetensors"] = t.dtype != format::DType::kRaw;
    tensors.push_back(std::move(e));
    bar.Advance();
  }
  st.Commit();
  summary.safetensors_bytes = fs::file_size(tmp.path() / kWeightsFile);

  const format::Header& h = file.header();
  nlohmann::ordered_json config;
  config["needle_dequant"] = kDequantFolderVersion;
  config["source"] = {{"file", kSourceFile},
                      {"original_path", model_path},
                      {"bytes", file.bytes().size()},
                      {"sha256", summary.source_sha256}};
  config["weights"] = {{"file", kWeightsFile}, {"dtype", "F32"}};
  config["geometry"] = HeaderJson(h);  // every header field, by name
  config["kv"] = {{"window", h.kv_window}, {"bits", h.kv_bits}};
  nlohmann::ordered_json heads = nlohmann::ordered_json::array();
  for (const auto& hd : file.heads()) heads.push_back(format::HeadName(hd.kind));
  config["heads"] = heads;
  config["codebooks"] = std::vector<float>(file.codebooks().begin(), file.codebooks().end());
  config["tensors"] = std::move(tensors);
  const std::string text =
      config.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
  format::WriteFileAtomic((tmp.path() / kConfigFile).string(),
                          {reinterpret_cast<const uint8_t*>(text.data()), text.size()});
  format::WriteFileAtomic((tmp.path() / kSourceFile).string(), file.bytes());
  bar.Finish();

  // Move into place; with --force the old folder is moved aside first and removed last.
  if (exists) {
    const fs::path old = out.string() + ".old." + std::to_string(::getpid());
    fs::remove_all(old, ec);
    fs::rename(out, old, ec);
    if (ec)
      Fail<IoError>("{}: cannot move the existing output aside: {}", out.string(), ec.message());
    fs::rename(tmp.path(), out, ec);
    if (ec) {
      std::error_code ec2;
      fs::rename(old, out, ec2);
      Fail<IoError>("{}: cannot rename {} into place: {}", out.string(), tmp.path().string(),
                    ec.message());
    }
    fs::remove_all(old, ec);
  } else {
    fs::rename(tmp.path(), out, ec);
    if (ec)
      Fail<IoError>("{}: cannot rename {} into place: {}", out.string(), tmp.path().string(),
                    ec.message());
  }
  tmp.Release();
  return summary;
}

}  // namespace needle::convert
