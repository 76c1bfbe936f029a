/* libneedle: the official Needle 2 engine's C ABI (needle_load, needle_init, needle_complete,
 * needle_reset; same signatures and return values as the header of the official package), plus a
 * re-entrant handle API that the four functions are a thin layer on.
 *
 * Official (singleton) functions, one conversation per process, serialized by a mutex:
 *   needle_load(cact, n)   copies the model bytes; 0 on success, -1 if they are not a valid model.
 *                          A later load replaces the model and forgets the conversation.
 *   needle_init(system, tools_json, tool_index_path)
 *                          starts a conversation; returns the prefix length in tokens (>= 0), -1
 *                          before a successful load or for tools JSON that is not valid (the
 *                          official engine renders invalid JSON as it is; libneedle refuses it).
 *                          tool_index_path is accepted and ignored: retrieval embeddings (more
 *                          than 5 tools) are computed in memory.
 *   needle_complete(input, max_new_tokens, out, out_capacity)
 *                          the next turn; writes the reply envelope (JSON, NUL-terminated, cut to
 *                          out_capacity - 1 bytes when longer; nothing when out_capacity <= 0) and
 *                          returns the number of tokens committed, or -1 with
 *                          {"type":"error","error":"..."} in out (before needle_init: "needle_init
 *                          not called"; a null input; out null with out_capacity > 0).
 *   needle_reset()         back to the state right after the prefix.
 *
 * Handle API (re-entrant). A needle_model is immutable once opened and may be shared by any
 * number of sessions on any threads; a needle_session is used by one thread at a time. Every
 * function that can fail takes an error buffer (may be null) that receives a NUL-terminated
 * message. Free sessions before their model.
 */
#ifndef NEEDLE_H
#define NEEDLE_H

#ifndef NEEDLE_API
#define NEEDLE_API __attribute__((visibility("default")))
#endif

#ifdef __cplusplus
extern "C" {
#endif

NEEDLE_API int needle_init(const char* system_prompt, const char* tools_json,
                           const char* tool_index_path);
NEEDLE_API int needle_complete(const char* input, int max_new_tokens, char* out, int out_capacity);
NEEDLE_API void needle_reset(void);
NEEDLE_API int needle_load(const unsigned char* cact, unsigned long long n);

typedef struct needle_model needle_model;
typedef struct needle_session needle_session;

/* Memory-maps a .cact file (null on error). */
NEEDLE_API needle_model* needle_model_open(const char* path, char* error, int error_capacity);
/* Copies n bytes of a .cact image (null on error). */
NEEDLE_API needle_model* needle_model_load(const unsigned char* cact, unsigned long long n,
                                           char* error, int error_capacity);
NEEDLE_API void needle_model_free(needle_model* model);

/* A conversation over `model` (system and tools_json may be null or empty). threads <= 0: one. */
NEEDLE_API needle_session* needle_session_new(const needle_model* model, const char* system_prompt,
                                              const char* tools_json, int threads, char* error,
                                              int error_capacity);
/* Prefix length in tokens (what needle_init returns). */
NEEDLE_API int needle_session_prefix_tokens(const needle_session* session);
/* As needle_complete, on this session. */
NEEDLE_API int needle_session_complete(needle_session* session, const char* input,
                                       int max_new_tokens, char* out, int out_capacity);
NEEDLE_API void needle_session_reset(needle_session* session);
NEEDLE_API void needle_session_free(needle_session* session);

#ifdef __cplusplus
}
#endif
#endif /* NEEDLE_H */
