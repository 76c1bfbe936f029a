// libneedle's C ABI (capi/needle.h) over session::Session. No exception crosses the boundary:
// every entry point catches, reports through its error buffer or the envelope, and returns -1 /
// null.
#include <cstring>
#include <exception>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "capi/needle.h"
#include "format/cact.h"
#include "session/session.h"

struct needle_model {
  needle::format::CactFile file;
};

struct needle_session {
  // Built in place: the session's decoder points into the session itself (never moved).
  needle_session(const needle_model* m, const needle::session::SessionConfig& cfg,
                 const char* system_prompt, const char* tools_json)
      : model(m),
        session(m->file, cfg, system_prompt ? system_prompt : "", tools_json ? tools_json : "") {}
  const needle_model* model;
  needle::session::Session session;
};

namespace {

// Copies `text` into buf (cut to capacity - 1 bytes, NUL-terminated); nothing if capacity <= 0.
void CopyOut(const std::string& text, char* buf, int capacity) {
  if (buf == nullptr || capacity <= 0) return;
  const size_t n = std::min(text.size(), static_cast<size_t>(capacity) - 1);
  std::memcpy(buf, text.data(), n);
  buf[n] = '\0';
}

std::string ErrorEnvelope(const std::string& message) {
  nlohmann::ordered_json j;
  j["type"] = "error";
  j["error"] = message;
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

int Complete(needle_session* s, const char* input, int max_new_tokens, char* out,
             int out_capacity) {
  if (out == nullptr && out_capacity > 0) return -1;
  if (s == nullptr) {
    CopyOut(ErrorEnvelope("needle_init not called"), out, out_capacity);
    return -1;
  }
  if (input == nullptr) {
    CopyOut(ErrorEnvelope("input is a null pointer"), out, out_capacity);
    return -1;
  }
  try {
    const needle::session::Reply r = s->session.Respond(input, max_new_tokens);
    CopyOut(r.EnvelopeJson(), out, out_capacity);
    return r.counted_tokens;
  } catch (const std::exception& e) {
    CopyOut(ErrorEnvelope(e.what()), out, out_capacity);
    return -1;
  }
}

// The singleton of the official functions.
struct Global {
  std::mutex mutex;
  std::unique_ptr<needle_model> model;
  std::unique_ptr<needle_session> session;
  // needle_init's texts of `session`: an init with the same ones on the same model only resets it
  // to its prefix (what a fresh session computes), skipping the prefix prefill.
  std::string system_prompt, tools_json;
};

Global& TheGlobal() {
  static Global g;
  return g;
}

}  // namespace

extern "C" {

needle_model* needle_model_open(const char* path, char* error, int error_capacity) {
  try {
    if (path == nullptr) throw std::invalid_argument("path is a null pointer");
    return new needle_model{needle::format::CactFile::Open(path)};
  } catch (const std::exception& e) {
    CopyOut(e.what(), error, error_capacity);
    return nullptr;
  }
}

needle_model* needle_model_load(const unsigned char* cact, unsigned long long n, char* error,
                                int error_capacity) {
  try {
    if (cact == nullptr && n > 0) throw std::invalid_argument("model bytes are a null pointer");
    return new needle_model{
        needle::format::CactFile::FromBytes(std::vector<uint8_t>(cact, cact + n), "<memory>")};
  } catch (const std::exception& e) {
    CopyOut(e.what(), error, error_capacity);
    return nullptr;
  }
}

void needle_model_free(needle_model* model) { delete model; }

needle_session* needle_session_new(const needle_model* model, const char* system_prompt,
                                   const char* tools_json, int threads, char* error,
                                   int error_capacity) {
  try {
    if (model == nullptr) throw std::invalid_argument("model is a null pointer");
    needle::session::SessionConfig cfg;
    cfg.threads = threads > 0 ? threads : 1;
    return new needle_session(model, cfg, system_prompt, tools_json);
  } catch (const std::exception& e) {
    CopyOut(e.what(), error, error_capacity);
    return nullptr;
  }
}

int needle_session_prefix_tokens(const needle_session* session) {
  return session ? static_cast<int>(session->session.prefix_ids().size()) : -1;
}

int needle_session_complete(needle_session* session, const char* input, int max_new_tokens,
                            char* out, int out_capacity) {
  return Complete(session, input, max_new_tokens, out, out_capacity);
}

void needle_session_reset(needle_session* session) {
  if (session == nullptr) return;
  try {
    session->session.Reset();
  } catch (const std::exception&) {  // nothing to report through this signature
  }
}

void needle_session_free(needle_session* session) { delete session; }

int needle_load(const unsigned char* cact, unsigned long long n) {
  Global& g = TheGlobal();
  std::lock_guard<std::mutex> lock(g.mutex);
  needle_model* m = needle_model_load(cact, n, nullptr, 0);
  if (m == nullptr) return -1;
  g.session.reset();
  g.model.reset(m);
  return 0;
}

int needle_init(const char* system_prompt, const char* tools_json, const char* tool_index_path) {
  (void)tool_index_path;
  Global& g = TheGlobal();
  std::lock_guard<std::mutex> lock(g.mutex);
  const std::string system = system_prompt ? system_prompt : "";
  const std::string tools = tools_json ? tools_json : "";
  if (g.model && g.session && g.system_prompt == system && g.tools_json == tools) {
    needle_session_reset(g.session.get());
    return needle_session_prefix_tokens(g.session.get());
  }
  g.session.reset();
  if (!g.model) return -1;
  needle_session* s = needle_session_new(g.model.get(), system_prompt, tools_json, 1, nullptr, 0);
  if (s == nullptr) return -1;
  g.session.reset(s);
  g.system_prompt = system;
  g.tools_json = tools;
  return needle_session_prefix_tokens(s);
}

int needle_complete(const char* input, int max_new_tokens, char* out, int out_capacity) {
  Global& g = TheGlobal();
  std::lock_guard<std::mutex> lock(g.mutex);
  return Complete(g.session.get(), input, max_new_tokens, out, out_capacity);
}

void needle_reset(void) {
  Global& g = TheGlobal();
  std::lock_guard<std::mutex> lock(g.mutex);
  needle_session_reset(g.session.get());
}

}  // extern "C"
