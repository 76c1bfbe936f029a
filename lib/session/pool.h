// Sessions on one loaded model, one per distinct (system, tools) set, each kept with its prefix
// state so that independent requests (needle run --batch, needle eval) prefill a tools prefix once.
#pragma once

#include <cstddef>
#include <list>
#include <memory>
#include <string>
#include <string_view>

#include "format/cact.h"
#include "model/decoder.h"
#include "session/session.h"

namespace needle::session {

// Not thread-safe: one pool per thread (sessions share the read-only weights).
class SessionPool {
 public:
  // `file` must outlive the pool. At most `capacity` (>= 1) sessions are kept; the least
  // recently used one goes first.
  SessionPool(const format::CactFile& file, const SessionConfig& config, size_t capacity = 8);

  // The session for (system, tools_json), reset to the state right after its prefix: a fresh
  // request on it answers as a new Session would. Built on a miss (throws what Session's
  // constructor throws, e.g. InvalidInput for bad tools; the pool is then unchanged).
  // `*reused` (optional) tells whether it already existed. The reference is valid until the
  // next Get.
  Session& Get(std::string_view system, std::string_view tools_json, bool* reused = nullptr);

  size_t size() const { return entries_.size(); }

 private:
  struct Entry {
    std::string key;
    std::unique_ptr<Session> session;
  };
  const format::CactFile& file_;
  SessionConfig config_;
  size_t capacity_;
  std::shared_ptr<const model::Model> model_;
  std::list<Entry> entries_;  // most recently used first
};

}  // namespace needle::session
