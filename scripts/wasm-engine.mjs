// The official C ABI of a needle wasm module (vendor/wasm/needle.js + needle.wasm of the npm
// package, ours or the engine's), driven the way the session goldens were made
// (scripts/official/engine_session.mjs): needle_init, needle_reset, needle_complete with a 1 MiB
// reply buffer, and the model bytes kept alive. The official module reads the model in place from
// the buffer given to needle_load: the npm wrapper frees that buffer right after loading, so the
// official engine then runs on reused heap memory and answers wrongly or differently run to run
// (ours copies the bytes and is unaffected). Comparisons with the official module go through here.
import fs from "node:fs";
import path from "node:path";
import { createRequire } from "node:module";

const require = createRequire(import.meta.url);
const kCapacity = 1 << 20;

export async function openModule(pkgDir) {
  const dir = path.join(path.resolve(pkgDir), "vendor", "wasm");
  const factory = require(path.join(dir, "needle.js"));
  const M = await factory({ locateFile: (f) => path.join(dir, f) });
  const init = M.cwrap("needle_init", "number", ["string", "string", "string"]);
  const complete = M.cwrap("needle_complete", "number", ["string", "number", "number", "number"]);
  const reset = M.cwrap("needle_reset", null, []);
  const out = M._malloc(kCapacity);
  return {
    load(file) {
      const bytes = fs.readFileSync(file);
      const ptr = M._malloc(bytes.length);
      M.HEAPU8.set(bytes, ptr);
      let rc;
      try {
        rc = M._needle_load(ptr, bytes.length);
      } catch (e) {
        if (!(e instanceof TypeError)) throw e;
        rc = M._needle_load(ptr, BigInt(bytes.length));  // a WASM_BIGINT build
      }
      // Not freed: the official module keeps pointing into these bytes.
      if (rc < 0) throw new Error(`needle_load ${file}: ${rc}`);
    },
    turn(system, tools, input, maxTokens) {
      if (init(system, tools, "") < 0) throw new Error("needle_init failed");
      reset();
      complete(input, maxTokens, out, kCapacity);
      return M.UTF8ToString(out);
    },
  };
}
