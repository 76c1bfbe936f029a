// Emscripten --pre-js of needle.js (cmake/wasm.cmake). Node >= 18 defines fetch(), so emscripten
// 3.1.6's loader would try to fetch the .wasm by its file path, which is not a URL, and fail. In
// node the bytes are read here instead (through the caller's locateFile, as the loader would).
if (typeof process == 'object' && process.versions && process.versions.node &&
    !Module['wasmBinary'] && !Module['instantiateWasm']) {
  var needleWasmDir = __dirname + '/';
  var needleWasmPath = Module['locateFile'] ? Module['locateFile']('needle.wasm', needleWasmDir)
                                            : needleWasmDir + 'needle.wasm';
  Module['wasmBinary'] = require('fs').readFileSync(needleWasmPath);
}
