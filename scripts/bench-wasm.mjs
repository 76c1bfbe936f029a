// Speed of our WASM module against the official engine's, both through the official npm wrapper in
// one node process, on the same turns (the official entries of tests/data/golden/official: one
// query each from the fixed tools prefix). The engines alternate run by run so machine noise hits
// both alike. Reported per engine: medians over the runs of the envelope's own prefill_tps and
// decode_tps, and of the wall time of a whole run() (init + prefill + decode + reset); then
// ours / official. Both engines answer identically (scripts/wasm-envelopes.mjs), so they do the
// same work.
// Usage: node scripts/bench-wasm.mjs OURS_PKG OFFICIAL_PKG MODEL.cact [--runs N] [--tokens N]
//        [--json]
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const args = process.argv.slice(2);
const [oursPkg, officialPkg, model] = args;
if (!oursPkg || !officialPkg || !model) {
  console.error("usage: node scripts/bench-wasm.mjs OURS_PKG OFFICIAL_PKG MODEL.cact");
  process.exit(2);
}
const option = (name, fallback) => {
  const i = args.indexOf(name);
  return i >= 0 ? Number(args[i + 1]) : fallback;
};
const runs = option("--runs", 5);
const tokens = option("--tokens", 48);
const golden = JSON.parse(
  fs.readFileSync(path.join(root, "tests/data/golden/official/golden.json"), "utf8"),
);
const entries = golden.official;

async function engineFor(pkg) {
  const { createNeedleEngine } = await import(path.join(path.resolve(pkg), "src/needle.mjs"));
  const engine = await createNeedleEngine();
  await engine.loadModelBytes(new Blob([fs.readFileSync(model)]));
  return { engine, prefill: [], decode: [], wall: [] };
}

async function once(e, entry, record) {
  const t0 = performance.now();
  const reply = JSON.parse(
    await e.engine.run(entry.system, entry.tools_text, entry.query, { maxTokens: tokens }),
  );
  const seconds = (performance.now() - t0) / 1000;
  if (record) {
    e.prefill.push(reply.prefill_tps);
    e.decode.push(reply.decode_tps);
    e.wall.push(seconds);
  }
}

const median = (v) => {
  const s = [...v].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
};

const engines = { ours: await engineFor(oursPkg), official: await engineFor(officialPkg) };
for (const e of Object.values(engines)) await once(e, entries[0], false);  // warm-up
for (let r = 0; r < runs; ++r)
  for (const entry of entries)
    for (const e of Object.values(engines)) await once(e, entry, true);

const summary = {};
for (const [name, e] of Object.entries(engines))
  summary[name] = {
    prefill_tps: median(e.prefill),
    decode_tps: median(e.decode),
    wall_seconds_per_turn: median(e.wall),
    samples: e.wall.length,
  };
const ratio = {
  prefill: summary.ours.prefill_tps / summary.official.prefill_tps,
  decode: summary.ours.decode_tps / summary.official.decode_tps,
  wall: summary.official.wall_seconds_per_turn / summary.ours.wall_seconds_per_turn,
};
if (args.includes("--json")) {
  console.log(JSON.stringify({ model, tokens, runs, summary, ratio }));
} else {
  console.log(
    `${path.basename(model)}, ${entries.length} turns x ${runs} runs, max ${tokens} new tokens, ` +
      `node ${process.versions.node}, medians:`,
  );
  console.log("| engine | prefill tok/s | decode tok/s | wall s per turn |");
  console.log("|---|---|---|---|");
  for (const [name, s] of Object.entries(summary))
    console.log(
      `| ${name} | ${s.prefill_tps.toFixed(1)} | ${s.decode_tps.toFixed(1)} | ` +
        `${s.wall_seconds_per_turn.toFixed(3)} |`,
    );
  console.log(
    `ours / official: prefill ${ratio.prefill.toFixed(2)}x, decode ${ratio.decode.toFixed(2)}x, ` +
      `whole turn ${ratio.wall.toFixed(2)}x`,
  );
}
