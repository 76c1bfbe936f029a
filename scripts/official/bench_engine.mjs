// Times the official engine (npm @tyler71/cactus-needle2, WASM) on the official entries of a
// golden.json, for a side-by-side with `needle bench`. Prints one JSON line per run.
// Usage: node bench_engine.mjs MODEL.cact REPEATS GOLDEN.json
import { readFileSync } from "node:fs";
import { createNeedleEngine } from "@tyler71/cactus-needle2";

const [model, repeats, goldenPath] = [process.argv[2], Number(process.argv[3] || 3), process.argv[4]];
const golden = JSON.parse(readFileSync(goldenPath, "utf8"));
const engine = await createNeedleEngine();
await engine.loadModelBytes(new Blob([readFileSync(model)]));
for (let rep = 0; rep < repeats; rep++) {
  for (const o of golden.official) {
    const reply = JSON.parse(await engine.run(o.system, o.tools_text, o.query, { maxTokens: 24 }));
    console.log(JSON.stringify({ prefill_tps: reply.prefill_tps, decode_tps: reply.decode_tps }));
  }
}
