// needle inspect end to end: JSON accounting, human table, and one-line errors on bad files.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "test_util.h"

using namespace needle::testing;

TEST_CASE("inspect --json reports the published accounting", "[cli][inspect]") {
  const CliResult r =
      RunCli({"inspect", ModelPath("official-geometry.cact"), "--json", "--tensors"});
  REQUIRE(r.exit_code == 0);
  const auto j = nlohmann::json::parse(r.out);
  CHECK(j["geometry"]["d_model"] == 512);
  CHECK(j["geometry"]["num_layers"] == 27);
  CHECK(j["accounting"]["numeric_params"] == 43634423);
  CHECK(j["accounting"]["norm_bytes"] == 676096);
  CHECK(j["tensors"].size() == 405);
  CHECK(j["tensors"][1]["name"] == "layer00.norm_in");
  CHECK(j["heads"].size() == 2);
  CHECK(j["file"]["sha256"].get<std::string>().size() == 64);
}

TEST_CASE("inspect prints a readable table", "[cli][inspect]") {
  const CliResult r = RunCli({"inspect", ModelPath("tiny.cact")});
  REQUIRE(r.exit_code == 0);
  CHECK(r.out.find("accounting") != std::string::npos);
  CHECK(r.out.find("CQ4") != std::string::npos);
  CHECK(r.err.empty());
}

TEST_CASE("inspect on a truncated or missing file prints one clear line", "[cli][inspect]") {
  TempDir dir;
  auto bytes = ReadBytes(ModelPath("tiny.cact"));
  bytes.resize(bytes.size() / 2);
  WriteBytes(dir / "cut.cact", bytes);
  CliResult r = RunCli({"inspect", dir / "cut.cact"});
  CHECK(r.exit_code != 0);
  CHECK(r.out.empty());
  CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
  CHECK(r.err.find("not within the file") != std::string::npos);

  r = RunCli({"inspect", dir / "missing.cact"});
  CHECK(r.exit_code != 0);
  CHECK(r.err.find("cannot open") != std::string::npos);
}
