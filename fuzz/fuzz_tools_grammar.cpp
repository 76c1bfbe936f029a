// Tools text -> schema -> call grammar, with generated text fed through it. The input is the tools
// JSON, a NUL byte, then the "generated" bytes (no NUL: all of it is tools JSON, nothing is fed).
// RenderToolsText / ToolInventory validate the JSON and BuildCallSchema the schemas (InvalidInput
// is a rejected input); the grammar must then accept or refuse every byte without failing, on the
// state machine alone and through the per-token constraint of the tiny model's vocabulary.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "format/cact.h"
#include "fuzz_util.h"
#include "grammar/call_grammar.h"
#include "grammar/schema.h"
#include "text/json_text.h"
#include "text/prompt.h"
#include "text/tokenizer.h"

namespace {
// The tiny model's token byte strings (what the session builds its TokenConstraint from).
struct Vocab {
  std::vector<std::string> bytes;
  std::vector<uint8_t> text_token;
};
const Vocab& TinyVocab() {
  static const Vocab* v = [] {
    const auto file = needle::format::CactFile::Open(needle::fuzz::DataPath("models/tiny.cact"));
    const auto tok = needle::text::Tokenizer::FromCact(file);
    auto* out = new Vocab;
    for (int32_t id = 0; id < tok.vocab_size(); ++id) {
      out->bytes.emplace_back(tok.TokenBytes(id));
      const auto t = tok.type(id);
      out->text_token.push_back(t == needle::format::PieceType::kNormal ||
                                t == needle::format::PieceType::kByte);
    }
    return out;
  }();
  return *v;
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace needle;
  const char* p = reinterpret_cast<const char*>(data);
  const void* nul = std::memchr(p, 0, size);
  const size_t tools_len = nul ? static_cast<size_t>(static_cast<const char*>(nul) - p) : size;
  const std::string_view tools_json(p, tools_len);
  const std::string_view generated =
      nul ? std::string_view(p + tools_len + 1, size - tools_len - 1) : std::string_view();
  fuzz::ExpectErrors([&] {
    const std::string tools_text = text::RenderToolsText(tools_json);
    const std::vector<std::string> inventory = text::ToolInventory(tools_text, "tools");
    // With more than 5 tools the session renders a subset; the join must stay valid JSON.
    std::vector<std::string_view> views(inventory.begin(), inventory.end());
    text::ValidateJson(text::JoinToolsText(views), "joined tools");
    grammar::CallSchema schema = grammar::BuildCallSchema(inventory);
    for (const auto& node : schema.nodes) (void)grammar::StringEnumValues(node);
    for (bool require_call : {false, true}) {
      const grammar::CallGrammar g(schema);
      grammar::GrammarState s = g.Start(require_call);
      // Byte by byte, with the value-start probe the session uses at every step.
      for (size_t i = 0; i < generated.size(); ++i) {
        if (g.ArgumentValueStart(s) >= 0) {
          grammar::GrammarState probe;
          grammar::CallGrammar::CopyState(s, &probe);
          (void)g.FeedClosesArgumentValue(probe, generated.substr(i, 4));
        }
        if (!g.Feed(s, static_cast<uint8_t>(generated[i]))) break;
      }
      if (require_call) continue;
      // Through the vocabulary: mask, then advance by allowed tokens that match the text.
      static grammar::TokenConstraint tc(
          std::vector<std::string_view>(TinyVocab().bytes.begin(), TinyVocab().bytes.end()),
          TinyVocab().text_token);  // views into the static vocabulary
      std::vector<uint8_t> allowed(tc.vocab());
      grammar::GrammarState t = g.Start(false);
      size_t pos = 0;
      for (int step = 0; step < 64 && pos < generated.size(); ++step) {
        const size_t n = tc.Mask(g, t, allowed);
        if (n == 0) break;
        int32_t best = -1;
        size_t best_len = 0;
        for (size_t id = 0; id < allowed.size(); ++id) {
          const std::string_view b = tc.bytes(static_cast<int32_t>(id));
          if (allowed[id] && !b.empty() && b.size() > best_len &&
              generated.substr(pos, b.size()) == b) {
            best = static_cast<int32_t>(id);
            best_len = b.size();
          }
        }
        if (best < 0) break;
        if (!tc.Advance(g, t, best)) __builtin_trap();  // Mask said it is accepted
        pos += best_len;
      }
    }
  });
  return 0;
}
