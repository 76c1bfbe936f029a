// Option groups.
#include "options.h"

#include <omp.h>

#include <iostream>
#include <iterator>

#include "format/mapped_file.h"

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
  cmd->add_flag("--json", json, "Print one JSON document on stdout (schema in README)");
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

std::string ReadTextInput(const std::string& path) {
  if (path == "-") return std::string(std::istreambuf_iterator<char>(std::cin), {});
  const std::vector<uint8_t> b = format::ReadFileBytes(path);
  return std::string(b.begin(), b.end());
}

}  // namespace needle::cli
