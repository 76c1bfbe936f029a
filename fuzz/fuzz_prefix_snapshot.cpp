// The prefix cache's file reader on arbitrary bytes (a damaged or hostile `--prefix-cache` file
// that carries the right key): model::ReadSnapshotFile either refuses it (a cache miss) or gives a
// snapshot that Decoder::Restore accepts or refuses with InvalidInput; an accepted one must decode
// two more tokens. The input is the file after its magic and key (make_seeds writes a real one),
// or, when the first byte is 0xff, the whole file.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "format/cact.h"
#include "fuzz_util.h"
#include "model/snapshot_io.h"

namespace {

struct Fixture {
  needle::format::CactFile file =
      needle::format::CactFile::Open(needle::fuzz::DataPath("models/tiny.cact"));
  needle::model::Model model{file};
  needle::model::Decoder decoder{model, needle::fuzz::SnapshotDecoderConfig(file.geometry())};
  std::string path = "/tmp/needle-fuzz-snapshot-" + std::to_string(::getpid()) + ".prefix";
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static Fixture fx;
  const std::string key = needle::fuzz::kSnapshotKey;
  std::string bytes;
  if (size > 0 && data[0] == 0xff) {
    bytes.assign(reinterpret_cast<const char*>(data + 1), size - 1);
  } else {
    const uint32_t key_len = static_cast<uint32_t>(key.size());
    bytes.assign("NDLSNAP1", 8);
    bytes.append(reinterpret_cast<const char*>(&key_len), sizeof key_len);
    bytes += key;
    bytes.append(reinterpret_cast<const char*>(data), size);
  }
  if (FILE* f = std::fopen(fx.path.c_str(), "wb")) {
    std::fwrite(bytes.data(), 1, bytes.size(), f);
    std::fclose(f);
  } else {
    __builtin_trap();
  }
  needle::model::Snapshot snap;
  std::vector<float> logits;
  if (!needle::model::ReadSnapshotFile(fx.path, key, &snap, &logits)) return 0;
  needle::fuzz::ExpectErrors([&] {
    fx.decoder.Restore(snap);
    std::vector<float> next(fx.file.geometry().vocab);
    fx.decoder.Step(5, next);
    fx.decoder.Step(6, next);
  });
  fx.decoder.Reset();
  return 0;
}
