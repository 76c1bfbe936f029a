// .cact v2 serialization: [header][codebooks][directory][pad][blob][pad][blob]... (no trailing
// pad).
#include "format/cact_writer.h"

#include <cstring>

#include "base/error.h"
#include "format/atomic_file.h"

namespace needle::format {

TensorRecord RecordOf(const CactFile& file, const TensorInfo& t) {
  TensorRecord r;
  r.dtype = t.dtype;
  r.ndim = t.ndim;
  for (int k = 0; k < 4; ++k) r.shape[k] = static_cast<uint32_t>(t.shape[k]);
  r.group = t.group;
  r.bits = t.bits;
  r.data = file.data(t);
  return r;
}

std::vector<uint8_t> SerializeCact(const Header& header, std::span<const float> codebooks,
                                   std::span<const TensorRecord> tensors) {
  Header h = header;
  h.num_tensors = static_cast<uint32_t>(tensors.size());
  h.codebook_len = static_cast<uint32_t>(codebooks.size());
  const uint64_t dir_off = sizeof(Header) + 4ull * codebooks.size();
  const uint64_t dir_end = dir_off + sizeof(DirRecord) * tensors.size();
  uint64_t total = Align64(dir_end);
  std::vector<DirRecord> dir(tensors.size());
  for (size_t i = 0; i < tensors.size(); ++i) {
    const TensorRecord& t = tensors[i];
    total = Align64(total);
    DirRecord& r = dir[i];
    std::memset(&r, 0, sizeof r);
    r.dtype = static_cast<uint8_t>(t.dtype);
    r.ndim = static_cast<uint8_t>(t.ndim);
    for (int k = 0; k < 4; ++k) r.shape[k] = t.shape[k];
    r.offset = total;
    r.nbytes = t.data.size();
    r.group = t.group;
    r.bits = t.bits;
    total += t.data.size();
  }
  std::vector<uint8_t> out(total, 0);
  std::memcpy(out.data(), &h, sizeof h);
  std::memcpy(out.data() + sizeof h, codebooks.data(), 4 * codebooks.size());
  if (!dir.empty()) std::memcpy(out.data() + dir_off, dir.data(), sizeof(DirRecord) * dir.size());
  for (size_t i = 0; i < tensors.size(); ++i)
    if (!tensors[i].data.empty())
      std::memcpy(out.data() + dir[i].offset, tensors[i].data.data(), tensors[i].data.size());
  return out;
}

void WriteCact(const std::string& path, const Header& header, std::span<const float> codebooks,
               std::span<const TensorRecord> tensors, bool overwrite) {
  std::vector<uint8_t> bytes = SerializeCact(header, codebooks, tensors);
  // Validate before anything reaches the disk: a writer bug must not produce a bad model.
  CactFile check = CactFile::FromBytes(bytes, path);
  WriteFileAtomic(path, check.bytes(), overwrite);
}

}  // namespace needle::format
