/* A C program on libneedle.so: the official four functions, then the handle API.
 * Usage: complete MODEL.cact TOOLS.json QUERY [MAX_TOKENS] */
#include <needle.h>
#include <stdio.h>
#include <stdlib.h>

static unsigned char* read_file(const char* path, unsigned long long* n) {
  FILE* f = fopen(path, "rb");
  if (!f) return NULL;
  fseek(f, 0, SEEK_END);
  long size = ftell(f);
  fseek(f, 0, SEEK_SET);
  unsigned char* buf = malloc(size > 0 ? (size_t)size : 1);
  *n = fread(buf, 1, (size_t)size, f);
  fclose(f);
  return buf;
}

int main(int argc, char** argv) {
  if (argc < 4) {
    fprintf(stderr, "usage: %s MODEL.cact TOOLS.json QUERY [MAX_TOKENS]\n", argv[0]);
    return 2;
  }
  const int max_tokens = argc > 4 ? atoi(argv[4]) : 64;
  unsigned long long model_bytes = 0, tools_bytes = 0;
  unsigned char* model = read_file(argv[1], &model_bytes);
  unsigned char* tools = read_file(argv[2], &tools_bytes);
  if (!model || !tools) {
    fprintf(stderr, "cannot read %s or %s\n", argv[1], argv[2]);
    return 3;
  }
  char* tools_json = calloc(tools_bytes + 1, 1);
  for (unsigned long long i = 0; i < tools_bytes; ++i) tools_json[i] = (char)tools[i];

  char out[8192];
  /* Official singleton ABI. */
  if (needle_load(model, model_bytes) != 0) return 4;
  const int prefix = needle_init("", tools_json, "");
  if (prefix < 0) return 5;
  const int n = needle_complete(argv[3], max_tokens, out, sizeof out);
  printf("%d %d %s\n", prefix, n, out);
  needle_reset();

  /* Handle API: the same turn on a session of its own. */
  char err[256];
  needle_model* m = needle_model_open(argv[1], err, sizeof err);
  if (!m) {
    fprintf(stderr, "%s\n", err);
    return 4;
  }
  needle_session* s = needle_session_new(m, "", tools_json, 1, err, sizeof err);
  if (!s) {
    fprintf(stderr, "%s\n", err);
    return 5;
  }
  const int n2 = needle_session_complete(s, argv[3], max_tokens, out, sizeof out);
  printf("%d %d %s\n", needle_session_prefix_tokens(s), n2, out);
  needle_session_free(s);
  needle_model_free(m);
  free(tools_json);
  free(tools);
  free(model);
  return 0;
}
