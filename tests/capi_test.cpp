// libneedle's C ABI (lib/capi/needle.h): the official four functions' return values and bad-use
// answers (as measured on the official engine), the handle API across threads, and the C and
// Python (ctypes) examples giving `needle run`'s envelopes.
#include <catch2/catch.hpp>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "capi/needle.h"
#include "test_util.h"

using namespace needle::testing;
using nlohmann::json;

namespace {

const char* kQuery = "Set a timer for 5 minutes.";

std::string ToolsJson() {
  const auto b = ReadBytes(std::string(NEEDLE_EXAMPLES_DIR) + "/tools.json");
  return std::string(b.begin(), b.end());
}

// The envelope without its timing fields.
json Stable(const std::string& envelope) {
  json j = json::parse(envelope);
  for (const char* k : {"prefill_tps", "decode_tps", "peak_ram_mb"}) j.erase(k);
  return j;
}

}  // namespace

TEST_CASE("C ABI: return values and bad use, as the official engine", "[capi]") {
  const auto model = ReadBytes(ModelPath("tiny.cact"));
  const std::string tools = ToolsJson();
  char out[4096];
  // Before load / init: -1 and the engine's error envelope.
  CHECK(needle_complete("hi", 8, out, sizeof out) == -1);
  CHECK(std::string(out) == R"({"type":"error","error":"needle_init not called"})");
  CHECK(needle_init("", tools.c_str(), "") == -1);
  const unsigned char garbage[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  CHECK(needle_load(garbage, sizeof garbage) == -1);
  CHECK(needle_load(model.data(), 1000) == -1);  // truncated
  CHECK(needle_load(nullptr, 10) == -1);
  CHECK(needle_load(model.data(), model.size()) == 0);
  CHECK(needle_complete("hi", 8, out, sizeof out) == -1);  // loaded, not initialized
  CHECK(needle_load(model.data(), model.size()) == 0);     // twice
  // needle_init returns the prefix length (the engine: 101 for these tools on tiny, 4 without
  // tools, 8 for "[]").
  CHECK(needle_init("", tools.c_str(), "") == 101);
  CHECK(needle_init("", "", "") == 4);
  CHECK(needle_init(nullptr, nullptr, nullptr) == 4);
  CHECK(needle_init("", "[]", "") == 8);
  CHECK(needle_init("", "[{bad", "") == -1);  // the engine renders it as is (11); we refuse
  // More than 5 tools (retrieval): the fixed prefix is the BOS alone (the engine: 1).
  const json golden = json::parse(std::ifstream(DataPath("golden/session-v2/tiny.session.json")));
  CHECK(needle_init("", golden["cases"][12]["tools_text"].get<std::string>().c_str(), "") == 1);
  CHECK(needle_init("You are helpful.", tools.c_str(), "") == 112);  // the engine: 112
  REQUIRE(needle_init("", tools.c_str(), "") == 101);
  const int n = needle_complete(kQuery, 16, out, sizeof out);
  CHECK(n > 0);
  const std::string full = out;
  CHECK(json::parse(full)["type"].is_string());
  // A small buffer gets the envelope's first capacity - 1 bytes, the same return value.
  needle_reset();
  char small[10];
  std::memset(small, 'A', sizeof small);
  CHECK(needle_complete(kQuery, 16, small, sizeof small) == n);
  CHECK(std::string(small) == full.substr(0, 9));
  needle_reset();
  CHECK(needle_complete(kQuery, 16, small, 0) == n);
  CHECK(small[0] == full[0]);  // capacity 0: nothing written
  needle_reset();
  CHECK(needle_complete(kQuery, 16, nullptr, 5) == -1);
  CHECK(needle_complete(nullptr, 16, out, sizeof out) == -1);
  CHECK(json::parse(out)["type"] == "error");
  // max_new_tokens 0 or negative: nothing decoded, a respond envelope (engine: 0).
  needle_reset();
  CHECK(needle_complete(kQuery, 0, out, sizeof out) == 0);
  CHECK(json::parse(out)["type"] == "respond");
  needle_reset();
  CHECK(needle_complete(kQuery, -1, out, sizeof out) == 0);
  // Invalid UTF-8 in the input: an envelope, not a crash.
  needle_reset();
  CHECK(needle_complete("caf\xC3(", 8, out, sizeof out) >= 0);
  CHECK_NOTHROW(json::parse(out));
  // Reset then the same query: the same reply.
  needle_reset();
  CHECK(needle_complete(kQuery, 16, out, sizeof out) == n);
  CHECK(Stable(out) == Stable(full));
}

TEST_CASE("C handle API: sessions on one model across threads equal the singleton", "[capi]") {
  char err[256] = "";
  CHECK(needle_model_open("/nonexistent/model.cact", err, sizeof err) == nullptr);
  CHECK(std::string(err).find("/nonexistent/model.cact") != std::string::npos);
  CHECK(needle_session_new(nullptr, "", "", 1, err, sizeof err) == nullptr);
  CHECK(needle_session_complete(nullptr, kQuery, 8, err, sizeof err) == -1);
  needle_model* m = needle_model_open(ModelPath("small.cact").c_str(), err, sizeof err);
  REQUIRE(m != nullptr);
  const std::string tools = ToolsJson();
  CHECK(needle_session_new(m, "", "[{bad", 1, err, sizeof err) == nullptr);
  CHECK(std::string(err).find("tools") != std::string::npos);
  const std::vector<std::string> queries = {kQuery, "Turn on the kitchen light.",
                                            "what's the weather in Lagos?"};
  // One thread first (the expected envelopes), then all of them at once on their own sessions.
  std::vector<std::string> want(queries.size()), got(queries.size());
  for (size_t i = 0; i < queries.size(); ++i) {
    needle_session* s = needle_session_new(m, "", tools.c_str(), 1, err, sizeof err);
    REQUIRE(s != nullptr);
    std::vector<char> out(8192);
    REQUIRE(needle_session_complete(s, queries[i].c_str(), 24, out.data(), 8192) >= 0);
    want[i] = out.data();
    needle_session_free(s);
  }
  std::vector<std::thread> threads;
  for (size_t i = 0; i < queries.size(); ++i)
    threads.emplace_back([&, i] {
      needle_session* s = needle_session_new(m, "", tools.c_str(), 1, nullptr, 0);
      if (s == nullptr) return;
      std::vector<char> out(8192);
      if (needle_session_complete(s, queries[i].c_str(), 24, out.data(), 8192) >= 0)
        got[i] = out.data();
      needle_session_free(s);
    });
  for (auto& t : threads) t.join();
  for (size_t i = 0; i < queries.size(); ++i) {
    INFO(queries[i]);
    REQUIRE(!got[i].empty());
    CHECK(Stable(got[i]) == Stable(want[i]));
  }
  needle_model_free(m);
}

TEST_CASE("libneedle examples (C, Python ctypes) give needle run's envelope", "[capi]") {
  const std::string model = ModelPath("small.cact");
  const std::string tools = std::string(NEEDLE_EXAMPLES_DIR) + "/tools.json";
  const CliResult cli = RunCli({"run", model, "--tools", tools, "-n", "24", "-t", "1", kQuery});
  REQUIRE(cli.exit_code == 0);
  const json want = Stable(cli.out);
  auto check_lines = [&](const CliResult& r, size_t lines) {
    REQUIRE(r.exit_code == 0);
    size_t count = 0, pos = 0;
    while (pos < r.out.size()) {
      const size_t end = r.out.find('\n', pos);
      const std::string line = r.out.substr(pos, end - pos);
      pos = end == std::string::npos ? r.out.size() : end + 1;
      // "<prefix tokens> <committed tokens> <envelope>"
      const size_t a = line.find(' '), b = line.find(' ', a + 1);
      REQUIRE(b != std::string::npos);
      CHECK(std::stoi(line.substr(0, a)) > 0);
      CHECK(Stable(line.substr(b + 1)) == want);
      ++count;
    }
    CHECK(count == lines);
  };
  check_lines(RunProgram(NEEDLE_CAPI_EXAMPLE, {model, tools, kQuery, "24"}), 2);
  std::vector<std::string> py_args = {std::string("NEEDLE_LIB_PATH=") + NEEDLE_LIBNEEDLE};
  // Sanitizer builds (scripts/test-sanitizers.sh): libneedle.so takes the sanitizer runtime from
  // the process, so python3 must preload it; the interpreter's own leaks are not ours.
  if (const char* preload = std::getenv("NEEDLE_TEST_PYTHON_PRELOAD"); preload && *preload) {
    py_args.push_back(std::string("LD_PRELOAD=") + preload);
    py_args.push_back("ASAN_OPTIONS=detect_leaks=0");
  }
  for (std::string a :
       {std::string("python3"), std::string(NEEDLE_EXAMPLES_DIR) + "/capi/complete.py", model,
        std::string(tools), std::string(kQuery), std::string("24")})
    py_args.push_back(std::move(a));
  check_lines(RunProgram("/usr/bin/env", py_args), 1);
}
