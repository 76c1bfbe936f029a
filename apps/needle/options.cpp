// Option groups.
#include "options.h"

#include <fmt/format.h>
#include <omp.h>

#include <algorithm>
#include <cstdlib>
#include <iostream>
#include <iterator>

#include "format/mapped_file.h"
#include "format/sha256.h"

namespace needle::cli {

CLI::Option* AddModelPositional(CLI::App* cmd, std::string* path) {
  return cmd->add_option("model", *path, "Model file (.cact, Needle 2)")
      ->required()
      ->type_name("MODEL.cact");
}

void ModelArgs::Attach(CLI::App* cmd) {
  AddModelPositional(cmd, &path);
  cmd->add_flag("--no-mmap", no_mmap, "Read the model into memory instead of memory-mapping it");
}

void OutputArgs::Attach(CLI::App* cmd) {
  auto* j = cmd->add_flag("--json", json, "Print one JSON document on stdout (schema in README)");
  cmd->add_flag("--jsonl", jsonl,
                "Print JSON lines: one per list element (with \"record\": the list), then a "
                "\"summary\" line")
      ->excludes(j);
}

namespace {
// The element at a dotted path of `doc`, or nullptr.
nlohmann::ordered_json* AtPath(nlohmann::ordered_json& doc, const std::string& path) {
  nlohmann::ordered_json* node = &doc;
  size_t start = 0;
  while (true) {
    const size_t dot = path.find('.', start);
    const std::string key = path.substr(start, dot == std::string::npos ? dot : dot - start);
    if (!node->is_object() || !node->contains(key)) return nullptr;
    node = &(*node)[key];
    if (dot == std::string::npos) return node;
    start = dot + 1;
  }
}
}  // namespace

void OutputArgs::Emit(const nlohmann::ordered_json& doc,
                      std::initializer_list<const char*> lists) const {
  if (!jsonl) return PrintJsonLine(doc);
  nlohmann::ordered_json rest = doc;
  for (const char* path : lists) {
    nlohmann::ordered_json* list = AtPath(rest, path);
    if (list == nullptr || !list->is_array()) continue;
    for (const auto& element : *list) {
      nlohmann::ordered_json line;
      line["record"] = path;
      if (element.is_object()) {
        for (const auto& [k, v] : element.items()) line[k] = v;
      } else {
        line["value"] = element;
      }
      PrintJsonLine(line);
    }
    // The summary keeps the list's length where the list was.
    *list = list->size();
  }
  nlohmann::ordered_json summary;
  summary["record"] = "summary";
  for (const auto& [k, v] : rest.items()) summary[k] = v;
  PrintJsonLine(summary);
}

nlohmann::ordered_json WrittenFileJson(const std::string& path) {
  const format::MappedFile file(path, format::LoadMode::kMmap);
  nlohmann::ordered_json j;
  j["path"] = path;
  j["bytes"] = file.bytes().size();
  j["sha256"] = format::Sha256Hex(file.bytes());
  return j;
}

void PrintJsonLine(const nlohmann::ordered_json& j) {
  fmt::print("{}\n", j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
}

void ThreadArgs::Attach(CLI::App* cmd) {
  cmd->add_option("-t,--threads", threads, "Worker threads (0 = all cores)")
      ->check(CLI::Range(0, 1024))
      ->default_val(0);
}

int ThreadArgs::Resolve() const { return threads > 0 ? threads : omp_get_num_procs(); }

void NumericsArgs::Attach(CLI::App* cmd) {
  cmd->add_option("--numerics", numerics,
                  "Arithmetic: official (the official engine's int8 path, bit for bit) or f32 "
                  "(upstream f32 reference)")
      ->check(CLI::IsMember({"official", "f32"}))
      ->default_val("official");
}

void SchemaArgs::Attach(CLI::App* cmd) {
  cmd->add_flag("--enforce-schema", enforce,
                "Also keep call values within the schema's minimum/maximum/exclusive bounds, "
                "minLength, pattern and regular formats while generating (the official engine "
                "does not: off gives its answers)");
}

namespace {
constexpr char kBracketMark = '\x1f';  // unit separator: never the start of a real argument
std::vector<std::string>& LiteralSubcommands() {
  static std::vector<std::string> names;
  return names;
}
// Out of line: GCC 12 reports a false maybe-uninitialized when this is inlined into the
// std::function CLI11 keeps.
[[gnu::noinline]] std::string StripBracketMark(const std::string& s) {
  return !s.empty() && s[0] == kBracketMark ? s.substr(1) : s;
}
}  // namespace

void KeepBracketedArguments(CLI::App* cmd) {
  LiteralSubcommands().push_back(cmd->get_name());
  for (CLI::Option* opt : cmd->get_options()) {
    opt->transform([](const std::string& s) { return StripBracketMark(s); }, "", "");
  }
}

std::vector<std::string> ProtectBracketedArguments(const CLI::App& app, int argc,
                                                   const char* const* argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  const auto& literal = LiteralSubcommands();
  const std::vector<const CLI::App*> subs =
      app.get_subcommands([](const CLI::App*) { return true; });
  auto it = std::find_if(args.begin(), args.end(), [&](const std::string& a) {
    return std::any_of(subs.begin(), subs.end(),
                       [&](const CLI::App* sub) { return sub->check_name(a); });
  });
  if (it != args.end() && std::find(literal.begin(), literal.end(), *it) != literal.end()) {
    for (++it; it != args.end(); ++it) {
      const bool bracketed = it->size() >= 2 && it->front() == '[' && it->back() == ']';
      if (bracketed || (!it->empty() && it->front() == kBracketMark))
        it->insert(it->begin(), kBracketMark);
    }
  }
  std::reverse(args.begin(), args.end());  // CLI11 takes them last first
  return args;
}

std::string PrefixCacheDir(const std::string& option_value) {
  if (!option_value.empty()) return option_value;
  const char* env = std::getenv("NEEDLE_PREFIX_CACHE");
  return env != nullptr ? std::string(env) : std::string();
}

std::string ReadTextInput(const std::string& path) {
  if (path == "-") return std::string(std::istreambuf_iterator<char>(std::cin), {});
  const std::vector<uint8_t> b = format::ReadFileBytes(path);
  return std::string(b.begin(), b.end());
}

}  // namespace needle::cli
