// lib/report: statistics, tables, bench record renderers, RSS readings.
#include <catch2/catch.hpp>
#include <cmath>
#include <nlohmann/json.hpp>

#include "report/bench_record.h"
#include "report/session_record.h"
#include "report/svg_plot.h"
#include "report/system.h"
#include "report/table.h"
#include "report/timer.h"

using namespace needle::report;

TEST_CASE("median and MAD", "[report]") {
  CHECK(Median({}) == 0.0);
  CHECK(Median({3.0, 1.0, 2.0}) == 2.0);
  CHECK(Median({4.0, 1.0, 3.0, 2.0}) == 2.5);
  CHECK(MedianAbsDeviation({1.0, 2.0, 3.0, 4.0, 100.0}) == 1.0);
}

TEST_CASE("thousands separators and aligned tables", "[report]") {
  CHECK(Thousands(0) == "0");
  CHECK(Thousands(999) == "999");
  CHECK(Thousands(1000) == "1,000");
  CHECK(Thousands(13737807) == "13,737,807");
  Table t({"name", "n"}, {Table::Align::kLeft, Table::Align::kRight});
  t.AddRow({"a", "1"});
  t.AddRow({"long", "100"});
  CHECK(t.Render() == "name    n\n----  ---\na       1\nlong  100\n");
}

TEST_CASE("bench records render in every format", "[report]") {
  BenchRecord r;
  r.model = "m.cact";
  r.isa = "scalar";
  r.threads = 2;
  r.prefill_tok_s = {100, 300, 200};
  r.decode_tok_s = {10, 30};
  const SystemInfo sys = GetSystemInfo();
  const auto j = nlohmann::json::parse(Render({r}, sys, BenchFormat::kJson));
  CHECK(j["records"][0]["prefill_tok_s"] == 200.0);
  CHECK(j["records"][0]["decode_tok_s"] == 20.0);
  CHECK(j["records"][0]["prefill_samples"].size() == 3);
  CHECK(nlohmann::json::parse(Render({r}, sys, BenchFormat::kJsonl))["threads"] == 2);
  const std::string csv = Render({r, r}, sys, BenchFormat::kCsv);
  CHECK(std::count(csv.begin(), csv.end(), '\n') == 3);
  CHECK(Render({r}, sys, BenchFormat::kMarkdown).find("200.0") != std::string::npos);
  CHECK_THROWS(ParseBenchFormat("xml"));
}

TEST_CASE("session bench records render in every format with as many values as columns",
          "[report]") {
  SessionBenchRecord r;
  r.model = "m,'|\".cact";  // a comma, a quote, a pipe and a double quote in a cell
  r.isa = "avx2";
  r.query = "What's up, \"doc\"?";
  r.prefix_tokens = 94;
  r.turn_tokens = 14;
  r.reply_tokens = 25;
  r.reply_type = "call";
  r.load_s = {0.002, 0.001, 0.003};
  r.init_s = {0.1, 0.3, 0.2};
  r.init_cached_s = {0.004, 0.005, 0.006};
  r.reply_s = {0.02, 0.01, 0.04};
  const SystemInfo sys = GetSystemInfo();
  auto render = [&](BenchFormat f) {
    SessionBenchWriter w(f, sys);
    std::string out = w.Begin();
    out += w.Row(r);
    out += w.Row(r);
    return out + w.End();
  };
  const auto j = nlohmann::json::parse(render(BenchFormat::kJson));
  REQUIRE(j["records"].size() == 2);
  CHECK(j["records"][0]["init_ms"] == Approx(200.0));
  CHECK(j["records"][0]["reply_ms"] == Approx(20.0));
  CHECK(j["records"][0]["init_cached_ms_samples"].size() == 3);
  CHECK(j["records"][0]["query"] == r.query);
  const std::string jsonl = render(BenchFormat::kJsonl);
  CHECK(nlohmann::json::parse(jsonl.substr(0, jsonl.find('\n')))["system"]["cpu"] == sys.cpu_model);
  // Comma-separated items of s, commas inside `quote`-quoted text not counting.
  auto items = [](const std::string& s, char quote) {
    size_t n = 1;
    bool quoted = false;
    for (char c : s) {
      if (c == quote) quoted = !quoted;
      if (c == ',' && !quoted) ++n;
    }
    return n;
  };
  // CSV: every row has the header's field count (quoted fields may hold commas).
  auto fields = [&](const std::string& line) { return items(line, '"'); };
  const std::string csv = render(BenchFormat::kCsv);
  std::vector<std::string> lines;
  for (size_t at = 0, end; at < csv.size(); at = end + 1) {
    end = csv.find('\n', at);
    lines.push_back(csv.substr(at, end - at));
  }
  REQUIRE(lines.size() == 3);
  CHECK(fields(lines[1]) == fields(lines[0]));
  CHECK(fields(lines[2]) == fields(lines[0]));
  // SQL: the INSERT names as many columns as it gives values, and the table has them all.
  const std::string sql = render(BenchFormat::kSql);
  const size_t insert = sql.find("INSERT INTO needle_bench_session (");
  REQUIRE(insert != std::string::npos);
  const size_t names_end = sql.find(") VALUES (", insert);
  const std::string names = sql.substr(insert, names_end - insert);
  const std::string values = sql.substr(names_end, sql.find(");\n", names_end) - names_end);
  CHECK(items(names, '\'') == items(values, '\''));
  CHECK(sql.find("reply_ms REAL") != std::string::npos);
  // Markdown: a pipe in a cell is escaped, so both rows have the header's cells.
  const std::string md = render(BenchFormat::kMarkdown);
  CHECK(md.find("m,'\\|\".cact") != std::string::npos);
  CHECK(md.find("200.00 ± 100.00") != std::string::npos);
}

TEST_CASE("RSS readings grow with touched memory", "[report]") {
  const uint64_t before = CurrentRssBytes();
  CHECK(before > 0);
  std::vector<char> block(64 << 20, 1);  // touch 64 MiB
  const uint64_t after = CurrentRssBytes();
  CHECK(after >= before + (32u << 20));
  CHECK(PeakRssBytes() >= after);
  CHECK(block[12345] == 1);
}

TEST_CASE("bench records carry the read ceiling measured beside them", "[report]") {
  BenchRecord r;
  r.decode_tok_s = {500, 500};
  r.weight_bytes_per_token = 10'000'000;
  r.read_bytes_per_s = 50e9;  // ceiling 5,000 tok/s
  const auto j = nlohmann::json::parse(Render({r}, GetSystemInfo(), BenchFormat::kJson));
  CHECK(j["records"][0]["decode_ceiling_tok_s"] == 5000.0);
  CHECK(j["records"][0]["decode_pct_of_ceiling"] == 10.0);
  CHECK(Render({r}, GetSystemInfo(), BenchFormat::kMarkdown).find("10% of 5000") !=
        std::string::npos);
  // The K/V cache a step reads counts too: 10 MB + 2.5 MB at 50 GB/s, 4,000 tok/s.
  r.kv_bytes_per_token = 2'500'000;
  const auto jk = nlohmann::json::parse(Render({r}, GetSystemInfo(), BenchFormat::kJson));
  CHECK(jk["records"][0]["kv_bytes_per_token"] == 2'500'000);
  CHECK(jk["records"][0]["decode_ceiling_tok_s"] == 4000.0);
  CHECK(jk["records"][0]["decode_pct_of_ceiling"] == 12.5);
  // The probe itself: a real, finite bandwidth for a buffer of a few MB.
  const double bw = MeasureReadBandwidth(4 << 20, 0.01);
  CHECK(bw > 1e8);
  CHECK(bw < 1e13);
}

TEST_CASE("bench records carry the int8 compute ceiling measured beside them", "[report]") {
  BenchRecord r;
  r.decode_tok_s = {800, 800};
  r.prefill_tok_s = {2000, 2000};
  const std::string unmeasured = Render({r}, GetSystemInfo(), BenchFormat::kMarkdown);
  const auto j0 = nlohmann::json::parse(Render({r}, GetSystemInfo(), BenchFormat::kJson));
  CHECK(j0["records"][0]["compute_ceiling_tok_s"] == 0.0);
  CHECK(j0["records"][0]["decode_pct_of_compute_ceiling"] == 0.0);
  r.macs_per_token = 25'000'000;
  r.macs_per_s = 100e9;  // ceiling 4,000 tok/s
  CHECK(r.compute_ceiling_tok_s() == 4000.0);
  const auto j = nlohmann::json::parse(Render({r}, GetSystemInfo(), BenchFormat::kJson));
  CHECK(j["records"][0]["macs_per_token"] == 25'000'000);
  CHECK(j["records"][0]["mac_gops"] == 100.0);
  CHECK(j["records"][0]["compute_ceiling_tok_s"] == 4000.0);
  CHECK(j["records"][0]["decode_pct_of_compute_ceiling"] == 20.0);
  CHECK(j["records"][0]["prefill_pct_of_compute_ceiling"] == 50.0);
  const std::string md = Render({r}, GetSystemInfo(), BenchFormat::kMarkdown);
  CHECK(md.find("20% of 4000") != std::string::npos);
  CHECK(unmeasured.find("20% of 4000") == std::string::npos);
  const std::string csv = Render({r}, GetSystemInfo(), BenchFormat::kCsv);
  CHECK(csv.find("compute_ceiling_tok_s") != std::string::npos);
  CHECK(csv.find(",4000.00,") != std::string::npos);
  const std::string sql = Render({r}, GetSystemInfo(), BenchFormat::kSql);
  CHECK(sql.find("compute_ceiling_tok_s REAL") != std::string::npos);
  CHECK(sql.find("25000000") != std::string::npos);
  // The probe: the best rate of repeated calls, in units per second.
  int calls = 0;
  const double rate = MeasureRate(
      [&calls] {
        ++calls;
        volatile uint64_t sink = 0;
        for (uint64_t i = 0; i < 200'000; ++i) sink = sink + i;
        return uint64_t{1'000'000};
      },
      0.01);
  CHECK(calls >= 3);
  CHECK(rate > 1e6);  // a million units in well under a second
  CHECK(rate < 1e14);
}

TEST_CASE("the peak RSS can be reset between bench points", "[report]") {
  {
    std::vector<char> block(96 << 20, 1);  // a 96 MiB peak, then freed
    CHECK(block[777] == 1);
  }
  const uint64_t high = PeakRssBytes();
  REQUIRE(ResetPeakRss());  // Linux: /proc/self/clear_refs
  const uint64_t reset = PeakRssBytes();
  CHECK(reset + (64u << 20) <= high);
}

// glibc: freeing a large mmapped block raises its mmap threshold, so later blocks below that size
// come from the heap, and freed heap pages stay resident; the reset returns them first, or an
// earlier bench point's buffers would count in the next point's peak (37 MiB instead of 26 in a
// three-ISA bench of the official geometry).
TEST_CASE("the peak RSS reset does not count memory freed to the heap", "[report]") {
  { std::vector<char> big(24 << 20, 1); }  // mmapped, freed: the threshold rises to 24 MiB
  {
    std::vector<std::vector<char>> blocks;
    for (int i = 0; i < 40; ++i) blocks.emplace_back(1 << 20, 1);  // 40 MiB from the heap
  }
  const uint64_t high = PeakRssBytes();
  REQUIRE(ResetPeakRss());
  const uint64_t reset = PeakRssBytes();
  INFO("peak " << (high >> 20) << " MiB, after the reset " << (reset >> 20) << " MiB");
  CHECK(reset + (32u << 20) <= high);
}

TEST_CASE("the CPU model comes from /proc/cpuinfo: x86 model name, ARM board and MIDR core",
          "[report]") {
  // A Raspberry Pi 5's /proc/cpuinfo (first core and the board lines).
  const std::string pi5 =
      "processor\t: 0\nBogoMIPS\t: 108.00\n"
      "Features\t: fp asimd evtstrm aes pmull sha1 sha2 crc32 atomics fphp asimdhp cpuid "
      "asimdrdm lrcpc dcpop asimddp\n"
      "CPU implementer\t: 0x41\nCPU architecture: 8\nCPU variant\t: 0x4\nCPU part\t: 0xd0b\n"
      "CPU revision\t: 1\n\nprocessor\t: 1\nCPU implementer\t: 0x41\nCPU part\t: 0xd03\n\n"
      "Revision\t: d04170\nSerial\t\t: 1234\nModel\t\t: Raspberry Pi 5 Model B Rev 1.0\n";
  CHECK(CpuModelFromCpuinfo(pi5, 0) == "Raspberry Pi 5 Model B Rev 1.0 (ARM Cortex-A76 r4p1)");
  // The sysfs MIDR wins over the cpuinfo lines.
  CHECK(CpuModelFromCpuinfo(pi5, 0x410fd083) ==
        "Raspberry Pi 5 Model B Rev 1.0 (ARM Cortex-A72 r0p3)");
  CHECK(ArmCoreName(0x414fd0b1) == "ARM Cortex-A76 r4p1");
  CHECK(ArmCoreName(0x61ff0221) == "implementer 0x61 part 0x022 r15p1");
  const std::string x86 =
      "processor\t: 0\nvendor_id\t: AuthenticAMD\nmodel name\t: AMD EPYC 7B13 64-Core "
      "Processor\nflags\t\t: fpu vme\n";
  CHECK(CpuModelFromCpuinfo(x86, 0) == "AMD EPYC 7B13 64-Core Processor");
  CHECK(CpuModelFromCpuinfo("", 0).empty());
  SystemInfo sys = GetSystemInfo();
  CHECK_FALSE(sys.cpu_model.empty());
  sys.isas = {"scalar", "neon", "dotprod"};
  BenchRecord r;
  r.isa = "dotprod";
  const auto j = nlohmann::json::parse(Render({r}, sys, BenchFormat::kJsonl));
  CHECK(j["isa"] == "dotprod");
  CHECK(j["system"]["isas"].size() == 3);
  CHECK(j["system"]["cpu"] == sys.cpu_model);
}

TEST_CASE("bench records carry first-token, pg and chunk, and null for missing times", "[report]") {
  BenchRecord r;
  r.prompt_tokens = 30;
  r.gen_tokens = 10;
  r.chunk = 8;
  r.prefill_tok_s = {1000};
  r.first_token_s = {0.002, 0.004, 0.003};
  r.total_s = {0.5, 0.4, 0.2};  // (30 + 10) tokens: 80, 100, 200 tok/s
  const SystemInfo sys = GetSystemInfo();
  auto j = nlohmann::json::parse(Render({r}, sys, BenchFormat::kJsonl));
  CHECK(j["chunk"] == 8);
  CHECK(j["first_token_ms"].get<double>() == Approx(3.0));
  CHECK(j["pg_tok_s"].get<double>() == Approx(100.0));
  CHECK(j["tokenize_ms"].is_null());
  CHECK(j["engine"] == "needle");
  r.engine = "official";
  r.first_token_s.clear();
  r.total_s.clear();
  j = nlohmann::json::parse(Render({r}, sys, BenchFormat::kJsonl));
  CHECK(j["engine"] == "official");
  CHECK(j["first_token_ms"].is_null());
  CHECK(j["pg_tok_s"].is_null());
  const std::string sql = Render({r}, sys, BenchFormat::kSql);
  CHECK(sql.find("'official'") != std::string::npos);
}

TEST_CASE("bench plots are SVG with one path per series and a point per sample", "[report]") {
  PlotPanel p{"decode tok/s", "tok/s", {}};
  p.series.push_back({"a <1>", {{1, 100}, {2, 190}}});
  p.series.push_back({"b", {{1, 50}, {2, std::nan("")}}});  // the NaN point is left out
  const std::string svg = RenderSvgPlot("t", "threads", {p});
  CHECK(svg.rfind("<svg", 0) == 0);
  CHECK(svg.find("</svg>") != std::string::npos);
  auto count = [&](const std::string& needle) {
    size_t n = 0;
    for (size_t at = svg.find(needle); at != std::string::npos; at = svg.find(needle, at + 1)) ++n;
    return n;
  };
  CHECK(count("<circle") == 3);
  CHECK(count("stroke-width=\"2\" fill=\"none\"") == 2);
  CHECK(svg.find("a &lt;1&gt;") != std::string::npos);  // labels escaped
  CHECK(svg.find("a <1>") == std::string::npos);
}
