// safetensors: header parsing with strict validation, and the streaming writer.
#include "format/safetensors.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <nlohmann/json.hpp>

#include "base/error.h"
#include "base/fp16.h"

namespace needle::format {

namespace {

struct DTypeEntry {
  StDType dtype;
  const char* name;
  uint32_t size;
};
constexpr DTypeEntry kDTypes[] = {
    {StDType::kBool, "BOOL", 1}, {StDType::kU8, "U8", 1},   {StDType::kI8, "I8", 1},
    {StDType::kI16, "I16", 2},   {StDType::kU16, "U16", 2}, {StDType::kF16, "F16", 2},
    {StDType::kBF16, "BF16", 2}, {StDType::kI32, "I32", 4}, {StDType::kU32, "U32", 4},
    {StDType::kF32, "F32", 4},   {StDType::kF64, "F64", 8}, {StDType::kI64, "I64", 8},
    {StDType::kU64, "U64", 8}};

template <class... Args>
[[noreturn]] void FailInternal(fmt::format_string<Args...> f, Args&&... args) {
  throw Error(ErrorKind::kInternal, fmt::format(f, std::forward<Args>(args)...));
}

// Upper bound on the JSON header, as in the reference implementation (100 MB).
constexpr uint64_t kMaxHeaderBytes = 100'000'000;

}  // namespace

const char* StDTypeName(StDType d) {
  for (const auto& e : kDTypes)
    if (e.dtype == d) return e.name;
  return "?";
}

uint32_t StDTypeSize(StDType d) {
  for (const auto& e : kDTypes)
    if (e.dtype == d) return e.size;
  return 0;
}

uint64_t StTensor::elements() const {
  uint64_t n = 1;
  for (uint64_t d : shape) n *= d;
  return n;
}

std::string StTensor::shape_str() const {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

SafetensorsFile SafetensorsFile::Open(const std::string& path) {
  SafetensorsFile f(std::make_shared<MappedFile>(path, LoadMode::kMmap));
  f.Parse();
  return f;
}

SafetensorsFile SafetensorsFile::FromBytes(std::vector<uint8_t> bytes, const std::string& label) {
  SafetensorsFile f(std::make_shared<MappedFile>(std::move(bytes), label));
  f.Parse();
  return f;
}

const StTensor* SafetensorsFile::find(std::string_view name) const {
  for (const auto& t : tensors_)
    if (t.name == name) return &t;
  return nullptr;
}

std::span<const uint8_t> SafetensorsFile::data(const StTensor& t) const {
  return file_->bytes().subspan(data_start_ + t.begin, t.end - t.begin);
}

void SafetensorsFile::Parse() {
  const std::string& label = file_->label();
  const auto b = file_->bytes();
  if (b.size() < 8)
    Fail<FormatError>("{}: not a safetensors file: {} bytes, less than the 8-byte header length",
                      label, b.size());
  const uint64_t header_len = LoadLE<uint64_t>(b.data());
  if (header_len > b.size() - 8)
    Fail<FormatError>("{}: safetensors header length {} goes beyond the end of the file ({} bytes)",
                      label, header_len, b.size());
  if (header_len > kMaxHeaderBytes)
    Fail<FormatError>("{}: safetensors header length {} exceeds the {} byte limit", label,
                      header_len, kMaxHeaderBytes);
  data_start_ = 8 + header_len;
  const uint64_t data_size = b.size() - data_start_;
  const char* text = reinterpret_cast<const char*>(b.data() + 8);

  nlohmann::json header;
  try {
    header = nlohmann::json::parse(text, text + header_len);
  } catch (const nlohmann::json::exception& e) {  // parse_error, or out_of_range (1e400)
    Fail<FormatError>("{}: safetensors header is not valid JSON: {}", label, e.what());
  }
  if (!header.is_object())
    Fail<FormatError>("{}: safetensors header is JSON but not an object", label);

  tensors_.clear();
  metadata_.clear();
  for (const auto& [name, entry] : header.items()) {
    if (name == "__metadata__") {
      if (!entry.is_object())
        Fail<FormatError>("{}: __metadata__ must be an object of strings", label);
      for (const auto& [k, v] : entry.items()) {
        if (!v.is_string())
          Fail<FormatError>("{}: __metadata__ entry '{}' is not a string", label, k);
        metadata_[k] = v.get<std::string>();
      }
      continue;
    }
    if (!entry.is_object())
      Fail<FormatError>("{}: tensor '{}': header entry is not an object", label, name);
    StTensor t;
    t.name = name;
    const auto dt = entry.find("dtype");
    if (dt == entry.end() || !dt->is_string())
      Fail<FormatError>("{}: tensor '{}': missing or non-string \"dtype\"", label, name);
    const std::string dname = dt->get<std::string>();
    const DTypeEntry* de = nullptr;
    for (const auto& e : kDTypes)
      if (dname == e.name) de = &e;
    if (!de) Fail<FormatError>("{}: tensor '{}': unknown dtype \"{}\"", label, name, dname);
    t.dtype = de->dtype;

    const auto sh = entry.find("shape");
    if (sh == entry.end() || !sh->is_array())
      Fail<FormatError>("{}: tensor '{}': missing or non-array \"shape\"", label, name);
    uint64_t elements = 1;
    for (const auto& d : *sh) {
      if (!d.is_number_unsigned())
        Fail<FormatError>(
            "{}: tensor '{}': shape {} has an entry that is not a non-negative "
            "integer",
            label, name, sh->dump());
      const uint64_t v = d.get<uint64_t>();
      if (v != 0 && elements > UINT64_MAX / v)
        Fail<FormatError>("{}: tensor '{}': shape {} overflows", label, name, sh->dump());
      elements *= v;
      t.shape.push_back(v);
    }
    const auto off = entry.find("data_offsets");
    if (off == entry.end() || !off->is_array() || off->size() != 2 ||
        !(*off)[0].is_number_unsigned() || !(*off)[1].is_number_unsigned())
      Fail<FormatError>("{}: tensor '{}': \"data_offsets\" must be two non-negative integers",
                        label, name);
    t.begin = (*off)[0].get<uint64_t>();
    t.end = (*off)[1].get<uint64_t>();
    if (t.begin > t.end)
      Fail<FormatError>("{}: tensor '{}': data_offsets [{}, {}] end before they begin", label, name,
                        t.begin, t.end);
    if (t.end > data_size)
      Fail<FormatError>(
          "{}: tensor '{}': data_offsets [{}, {}] are out of range (data region "
          "has {} bytes)",
          label, name, t.begin, t.end, data_size);
    if (elements > UINT64_MAX / de->size || t.end - t.begin != elements * de->size)
      Fail<FormatError>("{}: tensor '{}': {} bytes for {} {} (expected {} bytes)", label, name,
                        t.end - t.begin, dname, t.shape_str(), elements * de->size);
    tensors_.push_back(std::move(t));
  }
  std::sort(tensors_.begin(), tensors_.end(), [](const StTensor& a, const StTensor& c) {
    return a.begin != c.begin ? a.begin < c.begin : a.end < c.end;
  });
  for (size_t i = 1; i < tensors_.size(); ++i) {
    const StTensor& prev = tensors_[i - 1];
    const StTensor& cur = tensors_[i];
    if (cur.begin < prev.end)
      Fail<FormatError>("{}: tensors '{}' [{}, {}] and '{}' [{}, {}] overlap", label, prev.name,
                        prev.begin, prev.end, cur.name, cur.begin, cur.end);
  }
}

SafetensorsWriter::SafetensorsWriter(std::string path, bool overwrite)
    : path_(path), out_(std::move(path), overwrite) {}

void SafetensorsWriter::Declare(std::string name, StDType dtype, std::vector<uint64_t> shape) {
  if (header_written_) FailInternal("{}: tensor '{}' declared after data was written", path_, name);
  StTensor t;
  t.name = std::move(name);
  t.dtype = dtype;
  t.shape = std::move(shape);
  t.begin = declared_.empty() ? 0 : declared_.back().end;
  t.end = t.begin + t.elements() * StDTypeSize(dtype);
  declared_.push_back(std::move(t));
}

void SafetensorsWriter::WriteHeader() {
  // Ordered: metadata first, then tensors in file order (readers do not care; people do).
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata_.empty()) {
    nlohmann::ordered_json meta = nlohmann::ordered_json::object();
    for (const auto& [k, v] : metadata_) meta[k] = v;
    header["__metadata__"] = meta;
  }
  for (const auto& t : declared_) {
    nlohmann::ordered_json e;
    e["dtype"] = StDTypeName(t.dtype);
    e["shape"] = t.shape;
    e["data_offsets"] = {t.begin, t.end};
    header[t.name] = e;
  }
  std::string text = header.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  text.append((8 - text.size() % 8) % 8, ' ');  // data starts 8-byte aligned
  uint8_t len[8];
  const uint64_t n = text.size();
  std::memcpy(len, &n, 8);
  out_.Write(std::span<const uint8_t>(len, 8));
  out_.Write(std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(text.data()), text.size()));
  header_written_ = true;
}

void SafetensorsWriter::Write(std::span<const uint8_t> bytes) {
  if (!header_written_) WriteHeader();
  if (next_ >= declared_.size()) FailInternal("{}: more tensors written than declared", path_);
  const StTensor& t = declared_[next_];
  if (bytes.size() != t.end - t.begin)
    FailInternal("{}: tensor '{}': {} bytes written, {} declared", path_, t.name, bytes.size(),
                 t.end - t.begin);
  out_.Write(bytes);
  ++next_;
}

void SafetensorsWriter::Commit() {
  if (!header_written_) WriteHeader();
  if (next_ != declared_.size())
    FailInternal("{}: {} of {} declared tensors written", path_, next_, declared_.size());
  out_.Commit();
}

}  // namespace needle::format
