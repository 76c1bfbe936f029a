// Plain-text aligned tables for human output (right-aligned numbers, left-aligned text).
#pragma once

#include <string>
#include <vector>

namespace needle::report {

class Table {
 public:
  enum class Align { kLeft, kRight };
  explicit Table(std::vector<std::string> headers, std::vector<Align> align = {});
  void AddRow(std::vector<std::string> cells);
  // Columns separated by two spaces, a dashed rule under the header, optional indent.
  std::string Render(int indent = 0) const;

 private:
  std::vector<std::string> headers_;
  std::vector<Align> align_;
  std::vector<std::vector<std::string>> rows_;
};

// 13737807 -> "13,737,807".
std::string Thousands(unsigned long long v);

}  // namespace needle::report
