// Drives the official engine (npm @tyler71/cactus-needle2, unmodified WASM) through whole turns and
// prints one JSON line per case with what NEEDLE_DEBUG reveals (prefix/turn ids, call text, think
// text) next to each reply. Used by make-session-goldens.sh.
// Usage: OFFICIAL_PKG=... node engine_session.mjs MODEL.cact CASES.jsonl
//   CASES.jsonl: one case per line: {"system","tools_text","max_tokens","conversation","inputs":[..],
//                "env":{NEEDLE_*: ...}}  (env optional; applies to that case only)
import fs from "node:fs";
import path from "node:path";
import vm from "node:vm";
import { createRequire } from "node:module";

const pkg = process.env.OFFICIAL_PKG;
if (!pkg) {
  console.error("set OFFICIAL_PKG to the installed @tyler71/cactus-needle2 package folder");
  process.exit(2);
}
const dir = path.join(pkg, "vendor", "wasm");
let src = fs.readFileSync(path.join(dir, "needle.js"), "utf8");
// Let the caller give the module its environment (NEEDLE_DEBUG and friends).
src = src.replace("var ENV={};", "var ENV=Module.ENV||{};");
const require = createRequire(import.meta.url);
const mod = { exports: {} };
vm.runInThisContext("(function(module,exports,require,__dirname,__filename){" + src + "\n})")(
    mod, mod.exports, require, dir, path.join(dir, "needle.js"));

const [modelPath, casesPath] = process.argv.slice(2);
let log = [];
// The engine's debug lines reach the console directly in node builds: capture them there too.
console.error = (...a) => log.push(a.join(" "));
const writeLine = (s) => process.stdout.write(s + "\n");
const ENV = { NEEDLE_DEBUG: "1" };
console.log = (...a) => log.push(a.join(" "));
const M = await mod.exports({
  ENV,
  locateFile: (f) => path.join(dir, f),
  print: (s) => log.push(String(s)),
  printErr: (s) => log.push(String(s)),
});
const bytes = fs.readFileSync(modelPath);
const ptr = M._malloc(bytes.length);
M.HEAPU8.set(bytes, ptr);
const rcLoad = M._needle_load(ptr, BigInt(bytes.length));
if (rcLoad < 0) throw new Error("needle_load " + rcLoad);
const init = M.cwrap("needle_init", "number", ["string", "string", "string"]);
const complete = M.cwrap("needle_complete", "number", ["string", "number", "number", "number"]);
const reset = M.cwrap("needle_reset", null, []);
const CAP = 1 << 20;
const out = M._malloc(CAP);

const cases = fs.readFileSync(casesPath, "utf8").split("\n").filter((l) => l.trim());
for (const line of cases) {
  const c = JSON.parse(line);
  const saved = {};
  for (const [k, v] of Object.entries(c.env || {})) { saved[k] = ENV[k]; ENV[k] = String(v); }
  log = [];
  const rcInit = init(c.system || "", c.tools_text, "");
  const initLog = log;
  const steps = [];
  for (const input of c.inputs) {
    if (!c.conversation) reset();
    log = [];
    const returned = complete(input, c.max_tokens, out, CAP);
    const reply_text = M.UTF8ToString(out);
    steps.push({ input, returned, reply_text, debug: log });
  }
  reset();
  for (const [k, v] of Object.entries(saved)) { if (v === undefined) delete ENV[k]; else ENV[k] = v; }
  writeLine(JSON.stringify({ ...c, init_rc: rcInit, init_debug: initLog, steps }));
}
