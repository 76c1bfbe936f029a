// `needle requant`'s folder reader (convert/requant.h) with a fuzzed config.json: the folder is the
// tiny model's own `needle dequant` output (made once at start-up in a temp dir), with config.json
// replaced by the input. Whatever the config says, Requant must validate it (typed errors) or
// write a model that opens again. The input may also carry a bits map: config, NUL, bits map.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>

#include "convert/bits_map.h"
#include "convert/dequant.h"
#include "convert/requant.h"
#include "format/cact.h"
#include "fuzz_util.h"

namespace fs = std::filesystem;

namespace {
std::string g_dir;

void Cleanup() {
  std::error_code ec;
  if (!g_dir.empty()) fs::remove_all(g_dir, ec);
}
}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  std::string tmpl = (fs::temp_directory_path() / "needle-fuzz-requant-XXXXXX").string();
  if (!mkdtemp(tmpl.data())) std::abort();
  g_dir = tmpl;
  std::atexit(Cleanup);
  needle::convert::DequantOptions opt;
  opt.force = true;
  opt.progress = false;
  needle::convert::Dequant(needle::fuzz::DataPath("models/tiny.cact"), g_dir + "/in", opt);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace needle;
  const char* p = reinterpret_cast<const char*>(data);
  const void* nul = std::memchr(p, 0, size);
  const size_t config_len = nul ? static_cast<size_t>(static_cast<const char*>(nul) - p) : size;
  {
    std::ofstream out(g_dir + "/in/" + convert::kConfigFile, std::ios::binary | std::ios::trunc);
    out.write(p, static_cast<std::streamsize>(config_len));
  }
  fuzz::ExpectErrors([&] {
    convert::RequantOptions opt;
    opt.force = true;
    opt.progress = false;
    if (nul)
      opt.bits_map =
          convert::BitsMap::Parse(std::string(p + config_len + 1, size - config_len - 1));
    const std::string out = g_dir + "/out.cact";
    convert::Requant(g_dir + "/in", out, opt);
    // Whatever Requant writes must be a valid model.
    (void)format::CactFile::Open(out);
  });
  return 0;
}
