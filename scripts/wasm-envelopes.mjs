// End-to-end check of the WASM build through the official npm wrapper (scripts/test-wasm.sh):
// single turns (the wrapper's run(): init, complete, reset) from the official engine's session
// goldens, answered by
//   ours      the npm package with vendor/wasm/needle.{js,wasm} replaced by build-wasm's,
//   native    build/needle run (same model, tools, system text and token budget),
//   official  the engine's own module (the unchanged package's vendor/wasm), driven as its goldens
//             were made (scripts/wasm-engine.mjs: its wrapper frees the model bytes the engine
//             keeps using),
// and compared envelope by envelope without the timing fields and peak_ram_mb. Ours must equal
// native, native must equal the golden (the engine's own answer), and ours must equal the official
// wasm on every turn where that engine reproduces its golden (a disagreement of the engine with
// its own golden is printed and counted, not failed). Exit 1 on any failure.
// Usage: node scripts/wasm-envelopes.mjs OURS_PKG OFFICIAL_PKG NATIVE_BINARY [--official-turns N]
import { execFileSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";

import { openModule } from "./wasm-engine.mjs";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const [oursPkg, officialPkg, nativeBin, ...rest] = process.argv.slice(2);
if (!oursPkg || !officialPkg || !nativeBin) {
  console.error("usage: node scripts/wasm-envelopes.mjs OURS_PKG OFFICIAL_PKG NATIVE_BINARY");
  process.exit(2);
}
const officialTurns = rest[0] === "--official-turns" ? Number(rest[1]) : Infinity;

// (golden file, case index): single-turn cases (conversation false) of the session goldens,
// covering both models' sizes, a system text, retrieval (7 tools) and no tools.
const CHOICE = [
  ["official-geometry", 0],
  ["official-geometry", 3],
  ["official-geometry", 5],
  ["official-geometry", 7],
  ["small", 1],
  ["tiny", 2],
];
const TIMING = ["prefill_tps", "decode_tps", "peak_ram_mb"];

function strip(envelope) {
  const j = JSON.parse(envelope);
  for (const k of TIMING) delete j[k];
  return JSON.stringify(j);
}

function turns() {
  const out = [];
  for (const [name, index] of CHOICE) {
    const golden = JSON.parse(
      fs.readFileSync(path.join(root, "tests/data/golden/session", `${name}.session.json`)),
    );
    const c = golden.cases[index];
    if (c.conversation) throw new Error(`${name} case ${index} is a conversation`);
    for (const step of c.steps)
      out.push({
        model: path.join(root, "tests/data/models", golden.model),
        label: `${name}#${index} "${step.input.slice(0, 32)}"`,
        system: c.system,
        tools: c.tools_text,
        input: step.input,
        maxTokens: c.max_tokens,
        golden: strip(step.reply_text),
      });
  }
  return out;
}

function native(turn, toolsFile) {
  fs.writeFileSync(toolsFile, turn.tools);
  const args = ["run", turn.model, "--tools", toolsFile, "-n", String(turn.maxTokens), "-t", "1"];
  if (turn.system) args.push("--system", turn.system);
  args.push(turn.input);
  return strip(execFileSync(nativeBin, args, { encoding: "utf8" }).trim());
}

async function engineFor(pkg) {
  const { createNeedleEngine } = await import(path.join(path.resolve(pkg), "src/needle.mjs"));
  return createNeedleEngine();
}

// Ours through the npm wrapper; reloaded when the model changes.
async function answerOurs(state, turn) {
  if (state.model !== turn.model) {
    await state.engine.loadModelBytes(new Blob([fs.readFileSync(turn.model)]));
    state.model = turn.model;
  }
  const t0 = performance.now();
  const envelope = await state.engine.run(turn.system, turn.tools, turn.input, {
    maxTokens: turn.maxTokens,
  });
  state.seconds += (performance.now() - t0) / 1000;
  return strip(envelope);
}

// The official module (a fresh instance per model: its loads keep their bytes).
async function answerOfficial(state, turn) {
  if (state.model !== turn.model) {
    state.module = await openModule(officialPkg);
    state.module.load(turn.model);
    state.model = turn.model;
  }
  const t0 = performance.now();
  const envelope = state.module.turn(turn.system, turn.tools, turn.input, turn.maxTokens);
  state.seconds += (performance.now() - t0) / 1000;
  return strip(envelope);
}

const all = turns();
const ours = { engine: await engineFor(oursPkg), model: null, seconds: 0 };
const official = { module: null, model: null, seconds: 0 };
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), "needle-wasm-"));
let failures = 0;
let officialCompared = 0;
let officialReproduced = 0;  // turns where the official wasm gave its golden answer
for (const turn of all) {
  const n = native(turn, path.join(tmp, "tools.json"));
  const o = await answerOurs(ours, turn);
  const problems = [];
  if (o !== n) problems.push(`ours != native\n    ours:   ${o}\n    native: ${n}`);
  if (n !== turn.golden) problems.push(`native != golden (the engine's)\n    golden: ${turn.golden}`);
  let note = "";
  if (officialCompared < officialTurns) {
    const e = await answerOfficial(official, turn);
    ++officialCompared;
    if (e === turn.golden) {
      ++officialReproduced;
      if (o !== e) problems.push(`ours != official wasm\n    official: ${e}`);
      else note = " (= official wasm)";
    } else {
      note = ` (official wasm differs from its own golden this run: ${e.slice(0, 90)}...)`;
    }
  }
  console.log(`${problems.length ? "FAIL" : "ok  "} ${turn.label}${note}`);
  for (const p of problems) console.log(`  ${p}`);
  failures += problems.length ? 1 : 0;
}
fs.rmSync(tmp, { recursive: true, force: true });
console.log(
  `${all.length - failures}/${all.length} turns pass (ours = native = golden); official wasm: ` +
    `${officialReproduced}/${officialCompared} turns reproduced its golden, ours equal on all of ` +
    `those; ` +
    `wasm time: ours ${ours.seconds.toFixed(1)} s, official ${official.seconds.toFixed(1)} s`,
);
process.exit(failures ? 1 : 0);
