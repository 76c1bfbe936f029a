// Runs the unmodified official engine (npm @tyler71/cactus-needle2, WASM) as one conversation and
// writes its internal state after the last turn: int8 K/V codes + f32 scales, engram rings, slot
// map, token list, RoPE table, the last turn's first-step logits, and what the debug output said
// about the prefix and every turn (state.json). Development tool, not run by CI.
//
// Usage: node dump_state.mjs MODEL.cact TOOLS.json OUTDIR "turn 1" ["turn 2" ...]
// Env:   OFFICIAL_PKG (the installed package folder), MAX_TOKENS (per turn, default 16),
//        SYSTEM (system text), any NEEDLE_* engine variable (NEEDLE_DEBUG=1 is always set).
//
// The engine context layout (byte offsets below) was read from the engine's disassembly; see
// NUMERICS.md of the project's notes. It is specific to package version 1.0.3.
import fs from "node:fs";
import path from "node:path";
import vm from "node:vm";
import { createRequire } from "node:module";

const pkg = process.env.OFFICIAL_PKG;
if (!pkg) {
  console.error("dump_state: set OFFICIAL_PKG to the installed @tyler71/cactus-needle2 folder");
  process.exit(2);
}
const [modelPath, toolsPath, outDir, ...turns] = process.argv.slice(2);
if (!outDir || turns.length === 0) {
  console.error('usage: node dump_state.mjs MODEL TOOLS OUTDIR "turn" ["turn" ...]');
  process.exit(2);
}
const wasmDir = path.join(pkg, "vendor", "wasm");

// The Emscripten glue keeps its ENV and FS private; patch two lines so that we can pass engine
// variables and read the engine's in-memory files.
let glue = fs.readFileSync(path.join(wasmDir, "needle.js"), "utf8");
const patched = glue.replace("var ENV={};", "var ENV=Module.ENV||{};")
                    .replace(/(var FS=\{)/, "Module.__fs=()=>FS;$1");
if (patched === glue || !patched.includes("Module.__fs")) {
  console.error("dump_state: unexpected needle.js (package version changed?)");
  process.exit(2);
}
glue = patched;
const factory = { exports: {} };
vm.runInThisContext("(function(module,exports,require,__dirname,__filename){" + glue + "\n})")(
    factory, factory.exports, createRequire(import.meta.url), wasmDir, path.join(wasmDir, "needle.js"));

// Engine output (the glue prints through console.log / console.error): keep every line, echo it
// to stderr.
const log = [];
const echo = console.error.bind(console);
const sink = (...a) => { log.push(a.map(String).join(" ")); echo(...a); };
console.log = sink;
console.error = sink;
const ENV = { NEEDLE_DEBUG: "1" };
for (const [k, v] of Object.entries(process.env)) if (k.startsWith("NEEDLE_")) ENV[k] = v;
ENV.NEEDLE_DEBUG = "1";
const M = await factory.exports({
  ENV,
  locateFile: (f) => path.join(wasmDir, f),
});

// Engine context: a pointer at a fixed address; fields at fixed offsets from it.
const CTX_PTR = 15528;
const i32 = () => new Int32Array(M.HEAPU8.buffer);
const ctx = () => i32()[CTX_PTR >> 2];
const field = (off) => i32()[(ctx() + off) >> 2];
const TOKENS = 756;  // std::vector<int32> of every token id in position order (begin, end)
const tokenCount = () => (field(TOKENS + 4) - field(TOKENS)) >> 2;

const modelBytes = fs.readFileSync(modelPath);
const mp = M._malloc(modelBytes.length);
M.HEAPU8.set(modelBytes, mp);
const loadRc = M._needle_load(mp, BigInt(modelBytes.length));
if (loadRc !== 0) { console.error("dump_state: needle_load failed", loadRc); process.exit(1); }
const init = M.cwrap("needle_init", "number", ["string", "string", "string"]);
const complete = M.cwrap("needle_complete", "number", ["string", "number", "number", "number"]);
const system = process.env.SYSTEM || "";
const maxTokens = Number(process.env.MAX_TOKENS || 16);
const initRc = init(system, fs.readFileSync(toolsPath, "utf8"), "");
const afterInit = tokenCount();
const OUT_CAP = 1 << 16;
const outBuf = M._malloc(OUT_CAP);
const steps = [];
for (const text of turns) {
  const before = tokenCount();
  const logFrom = log.length;
  const returned = complete(text, maxTokens, outBuf, OUT_CAP);
  const reply = M.UTF8ToString(outBuf);
  const ids = log.slice(logFrom).map((l) => /turn ids: (.*)/.exec(l)).filter(Boolean);
  if (ids.length !== 1) { console.error("dump_state: expected one 'turn ids' line per turn"); process.exit(1); }
  // The head confidence's cached pool: valid flag (u8 at +816) and forward-call records (+804).
  const poolValid = M.HEAPU8[ctx() + 816];
  const poolRecords = (field(808) - field(804)) / 40;
  const poolPos = [field(2016), field(820)];
  steps.push({ input: text, before, turn_ids: ids[0][1].trim().split(/\s+/).map(Number),
               returned, after: tokenCount(), reply, pool_valid: poolValid,
               pool_records: poolRecords, pool_pos: poolPos });
}
const prefixLine = log.map((l) => /prefix ids: (.*)/.exec(l)).filter(Boolean);
const prefixIds = prefixLine.length ? prefixLine[0][1].trim().split(/\s+/).map(Number) : null;

fs.mkdirSync(outDir, { recursive: true });
const heap = M.HEAPU8;
const bytesAt = (ptr, n) => heap.slice(ptr, ptr + n);
const vecBytes = (off) => heap.slice(field(off), field(off + 4));
const hdr = {};
const HDR = { vocab: 164, d: 168, heads: 172, kv_heads: 176, layers: 180, head_dim: 184, kv_dim: 188,
              group: 200, sites: 248, lanes: 252, kv_bits: 424, cap: 784, sink: 788, window: 792 };
for (const [k, off] of Object.entries(HDR)) hdr[k] = field(off);
const { layers: L, cap, kv_dim: kvd, sites, d } = hdr;
fs.writeFileSync(path.join(outDir, "tokens.i32"), vecBytes(TOKENS));
fs.writeFileSync(path.join(outDir, "slotpos.i32"), vecBytes(768));
fs.writeFileSync(path.join(outDir, "invf.f32"), vecBytes(312));
fs.writeFileSync(path.join(outDir, "k.i8"), bytesAt(field(384), L * cap * kvd));
fs.writeFileSync(path.join(outDir, "v.i8"), bytesAt(field(388), L * cap * kvd));
fs.writeFileSync(path.join(outDir, "ring.i8"), bytesAt(field(392), sites * cap * d));
fs.writeFileSync(path.join(outDir, "ks.f32"), bytesAt(field(396), L * cap * (kvd / 64) * 4));
fs.writeFileSync(path.join(outDir, "vs.f32"), bytesAt(field(400), L * cap * (kvd / 64) * 4));
fs.writeFileSync(path.join(outDir, "rings.f32"), bytesAt(field(404), sites * cap * (d / 32) * 4));
// With NEEDLE_DEBUG the engine writes each turn's first-step logits into its in-memory FS.
fs.writeFileSync(path.join(outDir, "logits.f32"), M.__fs().readFile("/tmp/needle_logits.f32"));
const state = { hdr, init_returned: initRc, after_init: afterInit, prefix_ids: prefixIds,
                system, max_tokens: maxTokens, n_tokens: tokenCount(), turns: steps,
                env: Object.fromEntries(Object.entries(ENV).filter(([k]) => k !== "NEEDLE_DEBUG")) };
fs.writeFileSync(path.join(outDir, "state.json"), JSON.stringify(state));
console.error(`dump_state: ${state.n_tokens} tokens, ${turns.length} turn(s) -> ${outDir}`);
