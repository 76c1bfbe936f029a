// SessionPool: sessions keyed by system text and rendered tools text, least recently used first
// out.
#include "session/pool.h"

#include <fmt/format.h>

#include <algorithm>

#include "text/prompt.h"

namespace needle::session {

SessionPool::SessionPool(const format::CactFile& file, const SessionConfig& config, size_t capacity)
    : file_(file),
      config_(config),
      capacity_(std::max<size_t>(capacity, 1)),
      model_(std::make_shared<const model::Model>(file)) {}

Session& SessionPool::Get(std::string_view system, std::string_view tools_json, bool* reused) {
  // Tools texts that differ only in whitespace outside strings render the same prefix.
  const std::string tools_text = text::RenderToolsText(tools_json);
  const std::string key = fmt::format("{}:{}{}", system.size(), system, tools_text);
  const auto hit =
      std::find_if(entries_.begin(), entries_.end(), [&](const Entry& e) { return e.key == key; });
  if (reused) *reused = hit != entries_.end();
  if (hit != entries_.end()) {
    entries_.splice(entries_.begin(), entries_, hit);
    entries_.front().session->Reset();
    return *entries_.front().session;
  }
  auto session = std::make_unique<Session>(file_, model_, config_, system, tools_json);
  entries_.push_front({key, std::move(session)});
  while (entries_.size() > capacity_) entries_.pop_back();
  return *entries_.front().session;
}

}  // namespace needle::session
