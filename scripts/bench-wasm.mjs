// Speed of our WASM module against the official engine's in one node process, both driven through
// the official C ABI the same way (scripts/wasm-engine.mjs), on the same turns: the inputs of
// session-golden case 1 of the official-geometry model (two tools, 96-token budget), each from the
// fixed tools prefix. The engines alternate turn by turn so machine noise hits both alike.
// Reported per engine: medians of the envelope's own prefill_tps and decode_tps and of the wall
// time of a whole turn (init + prefill + decode), then ours / official. Only turns where both
// gave the same envelope (timings aside) count, so both did the same work; the count is printed.
// Usage: node scripts/bench-wasm.mjs OURS_PKG OFFICIAL_PKG [--runs N] [--json]
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

import { openModule } from "./wasm-engine.mjs";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const args = process.argv.slice(2);
const [oursPkg, officialPkg] = args;
if (!oursPkg || !officialPkg) {
  console.error("usage: node scripts/bench-wasm.mjs OURS_PKG OFFICIAL_PKG [--runs N] [--json]");
  process.exit(2);
}
const option = (name, fallback) => {
  const i = args.indexOf(name);
  return i >= 0 ? Number(args[i + 1]) : fallback;
};
const runs = option("--runs", 3);
const session = JSON.parse(
  fs.readFileSync(path.join(root, "tests/data/golden/session/official-geometry.session.json")),
);
const model = path.join(root, "tests/data/models", session.model);
const bench = session.cases[1];
const tokens = bench.max_tokens;

async function engineFor(pkg) {
  const module = await openModule(pkg);
  module.load(model);
  return { module, prefill: [], decode: [], wall: [] };
}

function once(e, input) {
  const t0 = performance.now();
  const reply = JSON.parse(e.module.turn(bench.system, bench.tools_text, input, tokens));
  const seconds = (performance.now() - t0) / 1000;
  const sample = { prefill: reply.prefill_tps, decode: reply.decode_tps, wall: seconds };
  for (const k of ["prefill_tps", "decode_tps", "peak_ram_mb"]) delete reply[k];
  return { sample, envelope: JSON.stringify(reply) };
}

function record(e, sample) {
  e.prefill.push(sample.prefill);
  e.decode.push(sample.decode);
  e.wall.push(sample.wall);
}

const median = (v) => {
  const s = [...v].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
};

const engines = { ours: await engineFor(oursPkg), official: await engineFor(officialPkg) };
const inputs = bench.steps.map((step) => step.input);
for (const e of Object.values(engines)) once(e, inputs[0]);  // warm-up
let matched = 0;
for (let r = 0; r < runs; ++r)
  for (const input of inputs) {
    const a = once(engines.ours, input);
    const b = once(engines.official, input);
    if (a.envelope !== b.envelope) continue;
    ++matched;
    record(engines.ours, a.sample);
    record(engines.official, b.sample);
  }
if (matched === 0) {
  console.error("bench-wasm: the engines never gave the same envelope; no comparison");
  process.exit(1);
}

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
  console.log(JSON.stringify({ model, tokens, runs, matched, summary, ratio }));
} else {
  console.log(
    `${path.basename(model)}, ${inputs.length} turns x ${runs} runs, max ${tokens} new tokens, ` +
      `node ${process.versions.node}; ${matched} runs with equal envelopes, their medians:`,
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
