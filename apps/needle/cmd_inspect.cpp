// needle inspect: geometry, codebooks, tokenizer, heads, size accounting and (optionally) the
// tensor table of a .cact file. Metadata only: no forward pass, no dequantization.
#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "commands.h"
#include "format/accounting.h"
#include "format/cact.h"
#include "format/sha256.h"
#include "options.h"
#include "report/table.h"

namespace needle::cli {

namespace {

using format::CactFile;
using format::TensorInfo;
using nlohmann::ordered_json;
using report::Table;
using report::Thousands;

struct InspectArgs {
  ModelArgs model;
  OutputArgs output;
  bool tensors = false;
};

ordered_json GeometryJson(const format::Header& h) {
  ordered_json g;
  g["num_tensors"] = h.num_tensors;
  g["codebook_len"] = h.codebook_len;
  g["kv_window"] = h.kv_window;
  g["kv_bits"] = h.kv_bits;
  g["vocab"] = h.vocab;
  g["d_model"] = h.d_model;
  g["num_heads"] = h.num_heads;
  g["num_kv_heads"] = h.num_kv_heads;
  g["num_layers"] = h.num_layers;
  g["head_dim"] = h.head_dim;
  g["max_seq_len"] = h.max_seq_len;
  g["hada_n"] = h.hada_n;
  g["mhc_lanes"] = h.mhc_lanes;
  g["engram_slots"] = h.engram_slots;
  g["engram_sub_dim"] = h.engram_sub_dim;
  g["num_engram_tables"] = h.num_engram_tables;
  g["engram_conv_taps"] = h.engram_conv_taps;
  g["engram_conv_dilation"] = h.engram_conv_dilation;
  g["num_engram_orders"] = h.num_engram_orders;
  g["engram_orders"] = std::vector<uint32_t>(h.engram_orders, h.engram_orders + 4);
  g["num_engram_sites"] = h.num_engram_sites;
  g["engram_sites"] = std::vector<uint32_t>(h.engram_sites, h.engram_sites + 4);
  g["rope_theta"] = h.rope_theta;
  return g;
}

ordered_json TensorJson(const TensorInfo& t) {
  ordered_json j;
  j["index"] = t.index;
  j["name"] = t.name;
  j["dtype"] = format::DTypeName(t.dtype);
  j["class"] = format::StorageClass(t);
  j["shape"] = std::vector<uint64_t>(t.shape.begin(), t.shape.begin() + t.ndim);
  j["bits"] = t.bits;
  j["group"] = t.group;
  j["offset"] = t.offset;
  j["bytes"] = t.nbytes;
  return j;
}

// Pieces by type, special ids and the user-defined chat markers.
ordered_json TokenizerJson(const CactFile& f) {
  const format::TokenizerBlob& t = f.tokenizer();
  ordered_json counts = ordered_json::object();
  ordered_json markers = ordered_json::array();
  for (uint8_t k = 0; k <= format::kMaxPieceType; ++k)
    counts[std::string(format::PieceTypeName(static_cast<format::PieceType>(k)))] = 0;
  for (size_t i = 0; i < t.pieces.size(); ++i) {
    const auto& p = t.pieces[i];
    counts[std::string(format::PieceTypeName(p.type))] =
        counts[std::string(format::PieceTypeName(p.type))].get<int>() + 1;
    if (p.type == format::PieceType::kUserDefined)
      markers.push_back({{"id", i}, {"piece", p.text}});
  }
  return {{"bytes", f.tokenizer_tensor().nbytes},
          {"pieces", t.pieces.size()},
          {"pieces_by_type", counts},
          {"pad_id", t.pad_id},
          {"eos_id", t.eos_id},
          {"bos_id", t.bos_id},
          {"unk_id", t.unk_id},
          {"add_dummy_prefix", t.add_dummy_prefix},
          {"byte_fallback", t.byte_fallback},
          {"markers", markers}};
}

ordered_json BuildJson(const CactFile& f, const std::string& sha, const format::Accounting& a,
                       bool with_tensors) {
  ordered_json j;
  j["file"] = {{"path", f.path()},
               {"bytes", f.bytes().size()},
               {"sha256", sha},
               {"format", "cact-v2"},
               {"tag", fmt::format("0x{:08X}", f.header().tag)}};
  j["geometry"] = GeometryJson(f.header());
  const auto cb = f.codebooks();
  j["codebooks"] = {{"cb2", std::vector<float>(cb.begin(), cb.begin() + 4)},
                    {"cb3", std::vector<float>(cb.begin() + 4, cb.begin() + 12)},
                    {"cb4", std::vector<float>(cb.begin() + 12, cb.begin() + 28)}};
  ordered_json heads = ordered_json::array();
  for (const auto& h : f.heads())
    heads.push_back(
        {{"kind", format::HeadName(h.kind)}, {"probes", h.num_probes}, {"out", h.out_dim}});
  j["heads"] = heads;
  j["tokenizer"] = TokenizerJson(f);
  ordered_json classes = ordered_json::array();
  for (const auto& c : a.classes)
    classes.push_back({{"class", c.name},
                       {"tensors", c.tensors},
                       {"elements", c.elements},
                       {"blob_bytes", c.blob_bytes},
                       {"norm_bytes", c.norm_bytes}});
  j["accounting"] = {{"classes", classes},
                     {"numeric_params", a.numeric_params},
                     {"cq_elements", a.cq_elements},
                     {"weighted_code_width_bits", a.weighted_code_width},
                     {"norm_bytes", a.norm_bytes},
                     {"payload_bytes", a.payload_bytes},
                     {"payload_bits_per_param", a.payload_bits_per_param},
                     {"file_bytes", a.file_bytes},
                     {"file_bits_per_param", a.file_bits_per_param}};
  if (with_tensors) {
    ordered_json ts = ordered_json::array();
    for (const auto& t : f.tensors()) ts.push_back(TensorJson(t));
    j["tensors"] = ts;
  }
  return j;
}

void PrintHuman(const CactFile& f, const std::string& sha, const format::Accounting& a,
                bool with_tensors) {
  const auto& h = f.header();
  const auto& g = f.geometry();
  fmt::print("model       {}\n", f.path());
  fmt::print("file        {} bytes, sha256 {}\n", Thousands(f.bytes().size()), sha);
  fmt::print("format      .cact v2 (Needle 2, tag 0x{:08X}), {} tensors\n", h.tag, h.num_tensors);
  fmt::print("\ngeometry\n");
  fmt::print("  vocab {}  d_model {}  layers {}  heads {} / kv heads {}  head_dim {}\n", h.vocab,
             h.d_model, h.num_layers, h.num_heads, h.num_kv_heads, h.head_dim);
  fmt::print("  max_seq_len {}  hada_n {}  mhc_lanes {}  rope_theta {}\n", h.max_seq_len, h.hada_n,
             h.mhc_lanes, h.rope_theta);
  fmt::print(
      "  engram: orders [{}]  sites [{}]  tables {}  slots {}  sub_dim {}  conv taps {} "
      "dilation {}\n",
      fmt::join(g.engram_orders, ", "), fmt::join(g.engram_sites, ", "), h.num_engram_tables,
      h.engram_slots, h.engram_sub_dim, h.engram_conv_taps, h.engram_conv_dilation);
  fmt::print("  kv cache: window {}{}  kv_bits {}\n", h.kv_window,
             h.kv_window == 0 ? " (size from budget)" : "", h.kv_bits);
  const auto cb = f.codebooks();
  fmt::print("\ncodebooks\n");
  fmt::print("  cb2 [{:.6g}]\n", fmt::join(cb.subspan(0, 4), ", "));
  fmt::print("  cb3 [{:.6g}]\n", fmt::join(cb.subspan(4, 8), ", "));
  fmt::print("  cb4 [{:.6g}]\n", fmt::join(cb.subspan(12, 16), ", "));
  fmt::print("\nprobe heads ");
  if (f.heads().empty()) fmt::print("none\n");
  for (size_t i = 0; i < f.heads().size(); ++i) {
    const auto& hd = f.heads()[i];
    fmt::print("{}{} (P={}, out={})", i ? ", " : "", format::HeadName(hd.kind), hd.num_probes,
               hd.out_dim);
  }
  if (!f.heads().empty()) fmt::print("\n");
  const ordered_json tok = TokenizerJson(f);
  fmt::print("\ntokenizer   {} pieces ({} bytes RAW): ", tok["pieces"].get<size_t>(),
             Thousands(f.tokenizer_tensor().nbytes));
  bool first = true;
  for (const auto& [type, n] : tok["pieces_by_type"].items()) {
    if (n.get<int>() == 0) continue;
    fmt::print("{}{} {}", first ? "" : ", ", n.get<int>(), type);
    first = false;
  }
  fmt::print(
      "\n  special ids: pad {}  eos {}  bos {}  unk {}   dummy prefix {}  byte fallback {}\n",
      tok["pad_id"].get<int>(), tok["eos_id"].get<int>(), tok["bos_id"].get<int>(),
      tok["unk_id"].get<int>(), tok["add_dummy_prefix"].get<bool>() ? "on" : "off",
      tok["byte_fallback"].get<bool>() ? "on" : "off");
  std::string markers;
  for (const auto& m : tok["markers"])
    markers += fmt::format("{}{} {}", markers.empty() ? "" : "  ", m["id"].get<int>(),
                           m["piece"].get<std::string>());
  fmt::print("  markers: {}\n", markers.empty() ? "none" : markers);

  fmt::print("\naccounting\n");
  using A = Table::Align;
  Table t({"class", "tensors", "elements", "blob bytes", "norm bytes"},
          {A::kLeft, A::kRight, A::kRight, A::kRight, A::kRight});
  for (const auto& c : a.classes)
    t.AddRow({c.name, std::to_string(c.tensors), c.name == "RAW" ? "-" : Thousands(c.elements),
              Thousands(c.blob_bytes), c.norm_bytes ? Thousands(c.norm_bytes) : "-"});
  fmt::print("{}", t.Render(2));
  fmt::print("  numeric parameters      {}\n", Thousands(a.numeric_params));
  fmt::print("  weighted code width     {:.6f} bits per CQ element\n", a.weighted_code_width);
  fmt::print("  CQ norm bytes (FP16)    {}\n", Thousands(a.norm_bytes));
  fmt::print("  numeric payload         {} bytes = {:.6f} bits per parameter\n",
             Thousands(a.payload_bytes), a.payload_bits_per_param);
  fmt::print("  whole file              {} bytes = {:.6f} bits per parameter\n",
             Thousands(a.file_bytes), a.file_bits_per_param);

  if (with_tensors) {
    fmt::print("\ntensors\n");
    Table tt({"#", "name", "dtype", "shape", "bits", "group", "offset", "bytes"},
             {A::kRight, A::kLeft, A::kLeft, A::kLeft, A::kRight, A::kRight, A::kRight, A::kRight});
    for (const auto& x : f.tensors())
      tt.AddRow({std::to_string(x.index), x.name, format::StorageClass(x), x.shape_str(),
                 x.bits ? std::to_string(x.bits) : "-", x.group ? std::to_string(x.group) : "-",
                 std::to_string(x.offset), std::to_string(x.nbytes)});
    fmt::print("{}", tt.Render(2));
  }
}

}  // namespace

void RegisterInspect(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "inspect", "Show a model's geometry, codebooks, heads, tokenizer and size accounting");
  auto args = std::make_shared<InspectArgs>();
  args->model.Attach(cmd);
  args->output.Attach(cmd);
  cmd->add_flag("--tensors", args->tensors,
                "Also list every tensor (index, name, dtype, shape, ...)");
  cmd->callback([args] {
    const CactFile f = CactFile::Open(
        args->model.path, args->model.no_mmap ? format::LoadMode::kRead : format::LoadMode::kMmap);
    const std::string sha = format::Sha256Hex(f.bytes());
    const format::Accounting a = format::Account(f);
    if (args->output.machine()) {
      args->output.Emit(BuildJson(f, sha, a, args->tensors), {"tensors"});
    } else {
      PrintHuman(f, sha, a, args->tensors);
    }
  });
}

}  // namespace needle::cli
