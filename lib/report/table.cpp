// Table rendering.
#include "report/table.h"

#include <algorithm>

namespace needle::report {

Table::Table(std::vector<std::string> headers, std::vector<Align> align)
    : headers_(std::move(headers)), align_(std::move(align)) {
  align_.resize(headers_.size(), Align::kLeft);
}

void Table::AddRow(std::vector<std::string> cells) {
  cells.resize(headers_.size());
  rows_.push_back(std::move(cells));
}

std::string Table::Render(int indent) const {
  std::vector<size_t> w(headers_.size());
  for (size_t c = 0; c < headers_.size(); ++c) {
    w[c] = headers_[c].size();
    for (const auto& r : rows_) w[c] = std::max(w[c], r[c].size());
  }
  std::string out;
  auto line = [&](const std::vector<std::string>& cells) {
    std::string s(indent, ' ');
    for (size_t c = 0; c < cells.size(); ++c) {
      const size_t pad = w[c] - cells[c].size();
      if (c) s.append(2, ' ');
      if (align_[c] == Align::kRight) s.append(pad, ' ');
      s.append(cells[c]);
      if (align_[c] == Align::kLeft && c + 1 < cells.size()) s.append(pad, ' ');
    }
    out.append(s);
    out.push_back('\n');
  };
  line(headers_);
  std::vector<std::string> rule;
  for (size_t c = 0; c < w.size(); ++c) rule.push_back(std::string(w[c], '-'));
  line(rule);
  for (const auto& r : rows_) line(r);
  return out;
}

std::string Thousands(unsigned long long v) {
  const std::string digits = std::to_string(v);
  std::string out;
  out.reserve(digits.size() + digits.size() / 3);
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out.push_back(',');
    out.push_back(digits[i]);
  }
  return out;
}

}  // namespace needle::report
