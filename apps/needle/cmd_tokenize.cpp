// needle tokenize / detokenize: a model's tokenizer on the command line (prompt debugging,
// corpus comparison in batch mode, throughput benchmark).
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <iostream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <sstream>

#include "base/error.h"
#include "commands.h"
#include "format/cact.h"
#include "options.h"
#include "text/tokenizer.h"

namespace needle::cli {

namespace {

std::string ReadAll(std::istream& in) {
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

std::string ReadFileOrFail(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) Fail<IoError>("{}: cannot open for reading", path);
  return ReadAll(in);
}

std::string JsonString(std::string_view s) {
  return nlohmann::json(std::string(s))
      .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::string IdsJson(const std::vector<int32_t>& ids) {
  std::string out = "[";
  for (size_t i = 0; i < ids.size(); ++i) {
    if (i) out += ',';
    out += std::to_string(ids[i]);
  }
  return out + "]";
}

// Encodes FILE line by line and as one text; prints sizes, timings and MB/s (median of runs).
void RunBench(const text::Tokenizer& tok, const std::string& path, bool dummy) {
  const std::string data = ReadFileOrFail(path);
  std::vector<std::string_view> lines;
  for (size_t pos = 0; pos < data.size();) {
    size_t nl = data.find('\n', pos);
    if (nl == std::string::npos) nl = data.size();
    lines.push_back(std::string_view(data).substr(pos, nl - pos));
    pos = nl + 1;
  }
  // CPU time of this (single-threaded) process: stable when other jobs share the cores.
  auto cpu_seconds = [] {
    timespec ts{};
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
  };
  struct Result {
    double cpu_s, wall_s;
    size_t tokens;
  };
  auto measure = [&](auto&& body) {
    std::vector<double> cpu, wall;
    size_t tokens = 0;
    const double start = cpu_seconds();
    body();  // warm-up
    do {
      const auto w0 = std::chrono::steady_clock::now();
      const double c0 = cpu_seconds();
      tokens = body();
      cpu.push_back(cpu_seconds() - c0);
      wall.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - w0).count());
    } while (cpu.size() < 3 || (cpu_seconds() - start < 2.0 && cpu.size() < 50));
    std::sort(cpu.begin(), cpu.end());
    std::sort(wall.begin(), wall.end());
    return Result{cpu[cpu.size() / 2], wall[wall.size() / 2], tokens};
  };
  std::vector<int32_t> ids;
  const Result per_line = measure([&] {
    size_t n = 0;
    for (auto line : lines) {
      ids.clear();
      tok.EncodeAppend(line, dummy, &ids);
      n += ids.size();
    }
    return n;
  });
  const Result whole = measure([&] {
    ids.clear();
    tok.EncodeAppend(data, dummy, &ids);
    return ids.size();
  });
  const double mb = static_cast<double>(data.size()) / 1e6;
  fmt::print("file: {} ({:.2f} MB, {} lines); medians, MB/s from CPU time\n", path, mb,
             lines.size());
  for (const auto& [name, r] : {std::pair<const char*, Result>{"per line", per_line},
                                std::pair<const char*, Result>{"one text", whole}}) {
    fmt::print("{}:  {} tokens  cpu {:.1f} ms  wall {:.1f} ms  {:.1f} MB/s  {:.2f} M tokens/s\n",
               name, r.tokens, r.cpu_s * 1e3, r.wall_s * 1e3, mb / r.cpu_s,
               static_cast<double>(r.tokens) / r.cpu_s / 1e6);
  }
}

}  // namespace

void RegisterTokenize(CLI::App& app) {
  struct Options {
    std::string model;
    std::string text;
    bool no_dummy = false;
    bool json = false;
    bool batch = false;
    std::string bench;
  };
  auto opt = std::make_shared<Options>();
  auto* cmd =
      app.add_subcommand("tokenize", "Encode text with a model's tokenizer (ids and pieces)");
  AddModelPositional(cmd, &opt->model);
  auto* text =
      cmd->add_option("text", opt->text, "Text to encode; '-' or nothing reads standard input");
  cmd->add_flag("--no-dummy-prefix", opt->no_dummy,
                "Do not prepend the dummy-prefix space (as the engine encodes a turn)");
  auto* json =
      cmd->add_flag("--json", opt->json, "Print one JSON object {\"ids\":[..],\"pieces\":[..]}");
  auto* batch =
      cmd->add_flag("--batch", opt->batch,
                    "Read standard input, one text per line; print one JSON array of ids per line");
  auto* bench = cmd->add_option("--bench", opt->bench,
                                "Benchmark: encode FILE per line and as one text, print MB/s")
                    ->type_name("FILE");
  // --bench prints a throughput report and --batch JSON lines: neither has a TEXT or --json form.
  bench->excludes(text)->excludes(json)->excludes(batch);
  batch->excludes(json);
  cmd->callback([opt] {
    const auto file = format::CactFile::Open(opt->model);
    const auto tok = text::Tokenizer::FromCact(file);
    const bool dummy = opt->no_dummy ? false : tok.add_dummy_prefix();
    if (!opt->bench.empty()) {
      RunBench(tok, opt->bench, dummy);
      return;
    }
    if (opt->batch) {
      if (!opt->text.empty() && opt->text != "-") {
        Fail<UsageError>("tokenize --batch reads standard input; got a TEXT argument '{}'",
                         opt->text);
      }
      std::string line, out;
      std::vector<int32_t> ids;
      while (std::getline(std::cin, line)) {
        ids.clear();
        tok.EncodeAppend(line, dummy, &ids);
        out = IdsJson(ids);
        out += '\n';
        std::fwrite(out.data(), 1, out.size(), stdout);
      }
      return;
    }
    const std::string input =
        (opt->text.empty() || opt->text == "-") ? ReadAll(std::cin) : opt->text;
    const auto ids = tok.Encode(input, dummy);
    if (opt->json) {
      std::string pieces = "[";
      for (size_t i = 0; i < ids.size(); ++i) {
        if (i) pieces += ',';
        pieces += JsonString(tok.piece(ids[i]));
      }
      fmt::print("{{\"ids\":{},\"pieces\":{}]}}\n", IdsJson(ids), pieces);
      return;
    }
    fmt::print("{} tokens\n", ids.size());
    for (int32_t id : ids) fmt::print("{:>6}  {}\n", id, JsonString(tok.piece(id)));
  });
}

void RegisterDetokenize(CLI::App& app) {
  struct Options {
    std::string model;
    std::vector<std::string> ids;
    bool json = false;
  };
  auto opt = std::make_shared<Options>();
  auto* cmd = app.add_subcommand("detokenize", "Decode token ids with a model's tokenizer");
  AddModelPositional(cmd, &opt->model);
  cmd->add_option("ids", opt->ids, "Token ids (separated by spaces or commas)")->required();
  cmd->add_flag("--json", opt->json, "Print the text as a JSON string");
  cmd->callback([opt] {
    std::vector<int32_t> ids;
    for (const std::string& arg : opt->ids) {
      std::stringstream ss(arg);
      std::string item;
      while (std::getline(ss, item, ',')) {
        if (item.empty()) continue;
        size_t used = 0;
        long long v = 0;
        try {
          v = std::stoll(item, &used);
        } catch (const std::exception&) {
          used = 0;
        }
        if (used != item.size() || v < INT32_MIN || v > INT32_MAX) {
          Fail<UsageError>("detokenize: '{}' is not a token id (an integer)", item);
        }
        ids.push_back(static_cast<int32_t>(v));
      }
    }
    const auto file = format::CactFile::Open(opt->model);
    const auto tok = text::Tokenizer::FromCact(file);
    for (size_t k = 0; k < ids.size(); ++k) {
      if (!tok.valid_id(ids[k])) {
        Fail<InvalidInput>(
            "detokenize: token id {} is out of range for {}: vocab has {} pieces "
            "(ids 0..{})",
            ids[k], opt->model, tok.vocab_size(), tok.vocab_size() - 1);
      }
    }
    const std::string text = tok.Decode(ids);
    if (opt->json) {
      fmt::print("{}\n", JsonString(text));
    } else {
      fmt::print("{}\n", text);
    }
  });
}

}  // namespace needle::cli
