// needle synth: a deterministic random-weight model of any geometry, with a real tokenizer.
#include <fmt/format.h>

#include <algorithm>

#include "commands.h"
#include "convert/synth.h"
#include "format/cact.h"
#include "options.h"

namespace needle::cli {

void RegisterSynth(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "synth", "Write a random-weight model (deterministic per seed) for tests and benchmarks");
  struct Args {
    std::string out, like, geometry = "official", bits_map = convert::kDefaultScheme;
    uint64_t seed = 0;
    bool no_heads = false, force = false;
    // Overrides; 0 / empty = keep the base geometry's value.
    uint32_t d_model = 0, heads = 0, kv_heads = 0, layers = 0, head_dim = 0, lanes = 0;
    uint32_t engram_slots = 0, engram_sub_dim = 0, engram_heads = 0;
    int64_t kv_window = -1;
    std::vector<uint32_t> engram_sites, engram_orders;
    bool no_engram = false;
    OutputArgs output;
  };
  auto a = std::make_shared<Args>();
  cmd->add_option("out", a->out, "Output model (.cact)")->required()->type_name("OUT.cact");
  cmd->add_option("--like", a->like,
                  "Model to take the tokenizer from (and the geometry with "
                  "--geometry like)")
      ->required();
  cmd->add_option("--geometry", a->geometry, "Base geometry: official or like")
      ->check(CLI::IsMember({"official", "like"}));
  cmd->add_option("--seed", a->seed, "Random seed (same seed, same file)");
  cmd->add_option("--bits-map", a->bits_map, "CQ widths (default embedding=4,mhc=4,default=2)");
  cmd->add_option("--d-model", a->d_model, "Override d_model");
  cmd->add_option("--heads", a->heads, "Override the number of query heads");
  cmd->add_option("--kv-heads", a->kv_heads, "Override the number of KV heads");
  cmd->add_option("--layers", a->layers, "Override the number of layers");
  cmd->add_option("--head-dim", a->head_dim, "Override head_dim");
  cmd->add_option("--lanes", a->lanes, "Override the mHC lane count");
  auto* sites = cmd->add_option("--engram-sites", a->engram_sites, "Engram site layers, e.g. 2,15")
                    ->delimiter(',');
  auto* no_engram = cmd->add_flag("--no-engram", a->no_engram, "No engram sites");
  auto* orders =
      cmd->add_option("--engram-orders", a->engram_orders, "Engram n-gram orders, e.g. 2,3")
          ->delimiter(',');
  auto* engram_heads = cmd->add_option("--engram-heads", a->engram_heads, "Engram heads per order");
  auto* slots = cmd->add_option("--engram-slots", a->engram_slots, "Engram slots per table");
  auto* sub_dim = cmd->add_option("--engram-sub-dim", a->engram_sub_dim, "Engram table row size");
  // Without engram sites no engram tensor is written: the engram shape options would be ignored.
  for (CLI::Option* engram : {sites, orders, engram_heads, slots, sub_dim})
    no_engram->excludes(engram);
  cmd->add_option("--kv-window", a->kv_window, "KV window written in the header (0 = budget)")
      ->check(CLI::Range(int64_t{0}, int64_t{UINT32_MAX}));
  cmd->add_flag("--no-heads", a->no_heads, "Leave out the probe heads");
  cmd->add_flag("--force", a->force, "Replace an existing output file");
  a->output.Attach(cmd);
  cmd->callback([a] {
    convert::SynthOptions o;
    o.like = a->like;
    o.seed = a->seed;
    o.bits = convert::BitsMap::Parse(a->bits_map);
    o.heads = !a->no_heads;
    o.force = a->force;
    format::Geometry g = a->geometry == "like" ? format::CactFile::Open(a->like).geometry()
                                               : convert::OfficialGeometry();
    const uint32_t old_heads_per_order = g.engram_heads_per_order();
    if (a->d_model) g.d_model = a->d_model;
    if (a->heads) g.num_heads = a->heads;
    if (a->kv_heads) g.num_kv_heads = a->kv_heads;
    if (a->layers) g.num_layers = a->layers;
    if (a->head_dim) g.head_dim = a->head_dim;
    if (a->lanes) g.lanes = a->lanes;
    if (a->engram_slots) g.engram_slots = a->engram_slots;
    if (a->engram_sub_dim) g.engram_sub_dim = a->engram_sub_dim;
    if (a->kv_window >= 0) g.kv_window = static_cast<uint32_t>(a->kv_window);
    if (!a->engram_orders.empty()) g.engram_orders = a->engram_orders;
    if (!a->engram_sites.empty()) g.engram_sites = a->engram_sites;
    if (a->no_engram) g.engram_sites.clear();
    const uint32_t per_order =
        a->engram_heads ? a->engram_heads : std::max(1u, old_heads_per_order);
    g.num_engram_tables = per_order * static_cast<uint32_t>(g.engram_orders.size());
    uint32_t max_order = 0;
    for (uint32_t o2 : g.engram_orders) max_order = std::max(max_order, o2);
    g.engram_conv_dilation = max_order;  // the exporter's rule: dilation = largest order
    o.geometry = g;
    const auto s = convert::Synth(a->out, o);
    if (a->output.machine()) {
      nlohmann::ordered_json j;
      j["output"] = WrittenFileJson(a->out);
      j["like"] = a->like;
      j["seed"] = a->seed;
      j["bits_map"] = a->bits_map;
      j["heads"] = o.heads;
      j["tensors"] = s.tensors;
      a->output.Emit(j, {});
      return;
    }
    fmt::print("{}: {} tensors, {} bytes (seed {}, bits map {})\n", a->out, s.tensors, s.file_bytes,
               a->seed, a->bits_map);
  });
}

}  // namespace needle::cli
