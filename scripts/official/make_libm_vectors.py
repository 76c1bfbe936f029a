#!/usr/bin/env python3
"""Writes tests/data/libm/vectors.bin: inputs and the official engine's results for expf, logf,
sinf, cosf and powf (the musl routines linked into needle.wasm, NUMERICS.md section 9).

Development tool, not run by the tests. Needs node, numpy, and
OFFICIAL_PKG=<...>/node_modules/@tyler71/cactus-needle2. The expected values come from the engine
itself: the script adds exports for the five functions (wasm functions 24, 230, 80, 82, 107) to a
temporary copy of needle.wasm and calls them from node. With --libm-py DIR (the folder holding
the numpy ports libm.py and mem.py) it also checks that libm.py gives the same bits wherever it
is defined (finite inputs; |x| < 2^28*pi/2 for sin/cos; the RoPE grid for powf).

File format (little-endian): 8 bytes "NLIBMV1\\n", then per function: 8-byte name padded with
NULs, u32 arity (1 or 2), u32 count, then count records of arity input float bits followed by the
expected result's bits (all u32).
Usage: make_libm_vectors.py [--out tests/data/libm/vectors.bin] [--libm-py DIR]
"""
import argparse
import os
import struct
import subprocess
import sys
import tempfile

import numpy as np

F32 = np.float32
FUNCS = {'expf': 24, 'logf': 230, 'sinf': 80, 'cosf': 82, 'powf': 107}


def leb128(b, i):
    r = s = 0
    while True:
        x = b[i]
        i += 1
        r |= (x & 0x7f) << s
        s += 7
        if not x & 0x80:
            return r, i


def uleb128(n):
    out = bytearray()
    while True:
        b, n = n & 0x7f, n >> 7
        out.append(b | (0x80 if n else 0))
        if not n:
            return bytes(out)


def with_exports(wasm, funcs):
    """needle.wasm with extra function exports name -> absolute function index."""
    out, i = bytearray(wasm[:8]), 8
    while i < len(wasm):
        sid = wasm[i]
        size, body = leb128(wasm, i + 1)
        end = body + size
        if sid == 7:  # export section
            n, p = leb128(wasm, body)
            sec = uleb128(n + len(funcs)) + wasm[p:end]
            for name, idx in funcs.items():
                sec += uleb128(len(name)) + name.encode() + b'\x00' + uleb128(idx)
            out += bytes([7]) + uleb128(len(sec)) + sec
        else:
            out += wasm[i:end]
        i = end
    return bytes(out)


def runner_source(array):
    """A node script: runs export argv[3] of wasm argv[2] on the `array`s (Float32Array or
    Float64Array) in the files argv[5] (and argv[6] for two arguments); writes the results to
    argv[4]. The module's imports are stubs that throw: the libm functions call none."""
    return r"""
import fs from 'fs';
const m = new WebAssembly.Module(fs.readFileSync(process.argv[2]));
const imports = { a: {} };
for (const im of WebAssembly.Module.imports(m))
  imports.a[im.name] = () => { throw new Error('unexpected import call ' + im.name); };
const inst = new WebAssembly.Instance(m, imports);
const load = (p) => { const d = fs.readFileSync(p);
  return new ARRAY(d.buffer.slice(d.byteOffset, d.byteOffset + d.length)); };
const f = inst.exports[process.argv[3]];
const x = load(process.argv[5]);
const y = process.argv[6] ? load(process.argv[6]) : null;
const o = new ARRAY(x.length);
for (let i = 0; i < x.length; i++) o[i] = y ? f(x[i], y[i]) : f(x[i]);
fs.writeFileSync(process.argv[4], Buffer.from(o.buffer));
""".replace('ARRAY', array)


class Engine:
    """The engine's libm functions `funcs` ({name: wasm function index}) on arrays of `dtype`
    (float32 or float64), through node."""

    def __init__(self, pkg, tmp, funcs=None, dtype=F32):
        wasm = open(os.path.join(pkg, 'vendor', 'wasm', 'needle.wasm'), 'rb').read()
        self.tmp = tmp
        self.dtype = np.dtype(dtype)
        self.wasm = os.path.join(tmp, 'needle_libm.wasm')
        open(self.wasm, 'wb').write(with_exports(wasm, FUNCS if funcs is None else funcs))
        self.runner = os.path.join(tmp, 'run.mjs')
        array = 'Float64Array' if self.dtype == np.float64 else 'Float32Array'
        open(self.runner, 'w').write(runner_source(array))

    def __call__(self, name, *args):
        paths = []
        for k, a in enumerate(args):
            p = os.path.join(self.tmp, 'in%d.bin' % k)
            np.asarray(a, self.dtype).tofile(p)
            paths.append(p)
        out = os.path.join(self.tmp, 'out.bin')
        subprocess.run(['node', self.runner, self.wasm, name, out] + paths, check=True)
        return np.fromfile(out, self.dtype)


def from_bits(u):
    return np.asarray(u, np.uint32).view(F32)


def neighbors(values, ulps):
    """Each finite float32 value and its +-ulps neighbours (same sign)."""
    b = np.asarray(values, F32).view(np.uint32).astype(np.int64)
    d = np.arange(-ulps, ulps + 1)
    return from_bits((b[:, None] + d[None, :]).reshape(-1).astype(np.uint32))


def hardest(x, d, keep):
    """The `keep` inputs whose double result d (before the final rounding to float) lies closest
    to a float rounding boundary: there any change of constant or operation order shows."""
    f = d.astype(F32)
    ulp = np.abs(np.nextafter(f, F32(np.inf)) - f).astype(np.float64)
    frac = np.abs((d - f.astype(np.float64)) / ulp)  # 0.5 = exactly between two floats
    ok = np.isfinite(frac) & (f != 0)
    x, frac = x[ok], frac[ok]
    return x[np.argsort(np.abs(frac - 0.5))[:keep]]


def near_ties(rng, libm_tables):
    """Hard-to-round inputs for expf, logf and the medium-range sin/cos, found among random
    samples with the formulas of the numpy port (each double operation in the engine's order)."""
    exp_shift, exp_inv, c, exp_t, log_ln2, a, log_t = libm_tables
    out = {}
    x = rng.uniform(-103.9, 88.7, 4_000_000).astype(F32)
    xd = x.astype(np.float64)
    z = exp_inv * xd
    kd = z + exp_shift
    ki = kd.view(np.uint64)
    r = z - (kd - exp_shift)
    y = (c[0] * r + c[1]) * (r * r) + (c[2] * r + 1.0)
    with np.errstate(over='ignore'):
        s = (exp_t[(ki & np.uint64(31)).astype(np.int64)] + (ki << np.uint64(47))).view(np.float64)
    out['expf'] = hardest(x, y * s, 1500)
    x = from_bits(rng.integers(0x00800000, 0x7f000000, 4_000_000, dtype=np.uint32))
    ix = x.view(np.uint32).astype(np.int64)
    tmp = (ix - 0x3f330000) & 0xffffffff
    i = (tmp >> 19) & 15
    k = np.where(tmp >= 1 << 31, tmp - (1 << 32), tmp) >> 23
    zd = ((ix - (tmp & 0xff800000)) & 0xffffffff).astype(np.uint32).view(F32).astype(np.float64)
    r = zd * log_t[i, 0] - 1.0
    r2 = r * r
    y = (a[0] * r2 + (a[1] * r + a[2])) * r2 + ((log_t[i, 1] + k * log_ln2) + r)
    out['logf'] = hardest(x, y, 1500)
    # sin/cos on 9pi/4 < |x| < 3000: medium reduction, then the kernels.
    x = rng.uniform(7.1, 3000, 4_000_000).astype(F32) * rng.choice(F32([-1, 1]), 4_000_000)
    xd = x.astype(np.float64)
    pio2_1, pio2_1t = float.fromhex('0x1.921fb5p+0'), float.fromhex('0x1.110b4611a6263p-26')
    toint = float.fromhex('0x1.8p52')
    fn = (xd * float.fromhex('0x1.45f306dc9c883p-1') + toint) - toint
    yr = (xd - fn * pio2_1) - fn * pio2_1t
    assert (np.abs(yr) <= float.fromhex('0x1.921fb6p-1')).all()
    n = fn.astype(np.int64) & 3

    def sin_k(v):
        z = v * v
        w = z * z
        rr = float.fromhex('-0x1.a00f9e2cae774p-13') + z * float.fromhex('0x1.6cd878c3b46a7p-19')
        s = z * v
        return (v + s * (float.fromhex('-0x1.5555554cbac77p-3') +
                         z * float.fromhex('0x1.11110896efbb2p-7'))) + s * w * rr

    def cos_k(v):
        z = v * v
        w = z * z
        rr = float.fromhex('-0x1.6c087e80f1e27p-10') + z * float.fromhex('0x1.99342e0ee5069p-16')
        return ((1.0 + z * float.fromhex('-0x1.ffffffd0c5e81p-2')) +
                w * float.fromhex('0x1.55553e1053a42p-5')) + (w * z) * rr

    sv, cv = sin_k(yr), cos_k(yr)
    out['sinf'] = hardest(x, np.choose(n, [sv, cv, -sv, -cv]), 1500)
    out['cosf'] = hardest(x, np.choose(n, [cv, -sv, -cv, sv]), 1500)
    return out


def inputs(rng, libm_tables):
    specials = from_bits([0x00000000, 0x80000000, 0x7f800000, 0xff800000, 0x7fc00000, 0xffc00000,
                          0x7fa00000, 0x00000001, 0x80000001, 0x007fffff, 0x00800000, 0x7f7fffff,
                          0xff7fffff, 0x3f800000, 0xbf800000])
    tiny = np.concatenate([from_bits(rng.integers(1, 0x39800000, 1500, dtype=np.uint32)),
                           F32(2.0) ** -np.arange(12, 150, dtype=F32)])
    tiny = np.concatenate([tiny, -tiny])
    ins = {}
    # expf: dense over [-110, 95], the overflow/underflow thresholds, near 0, the subnormal range.
    ins['expf'] = np.concatenate([
        np.linspace(-110, 95, 24000, dtype=F32),
        rng.uniform(-1, 1, 2000).astype(F32), tiny,
        rng.uniform(-104, -87, 2000).astype(F32),
        neighbors([88.72283935546875, 88.0, -103.97207641601562, -87.33654, -88.0], 40),
        specials])
    # logf: bit patterns uniform over (0, 1e30] (subnormals to 1e30), near 1, specials.
    top = int(np.array([1e30], F32).view(np.uint32)[0])
    ins['logf'] = np.concatenate([
        from_bits(rng.integers(1, top, 24000, dtype=np.uint32)),
        from_bits(rng.integers(1, 0x00800000, 1000, dtype=np.uint32)),
        neighbors([1.0], 1000), (1 + rng.uniform(-0.05, 0.05, 2000)).astype(F32),
        -rng.uniform(0, 10, 20).astype(F32), specials])
    # sinf/cosf: [-3000, 3000], every branch boundary, tiny, near multiples of pi/2, large.
    bounds = from_bits([0x3f490fda, 0x4016cbe3, 0x407b53d1, 0x40afeddf, 0x40e231d5, 0x39800000,
                        0x4dc90fda])
    near_pio2 = (np.arange(1, 1911, 3) * (np.pi / 2)).astype(F32)
    big = rng.uniform(np.log2(2 ** 28 * np.pi / 2), 127.99, 1500)
    big = (2.0 ** big).astype(F32)
    sc = np.concatenate([
        rng.uniform(-3000, 3000, 18000).astype(F32), rng.uniform(-10, 10, 4000).astype(F32),
        neighbors(bounds, 24), -neighbors(bounds, 24), tiny, neighbors(near_pio2, 2),
        -neighbors(near_pio2[::4], 2), big, -big[::3],
        from_bits(rng.integers(0x4dc90fdb, 0x7f800000, 500, dtype=np.uint32)), specials])
    hard = near_ties(rng, libm_tables)
    ins['expf'] = np.concatenate([ins['expf'], hard['expf']])
    ins['logf'] = np.concatenate([ins['logf'], hard['logf']])
    ins['sinf'] = np.concatenate([sc, hard['sinf'], hard['cosf']])
    ins['cosf'] = ins['sinf']
    # powf: the RoPE grid (theta, 2j/hd), then general and special arguments.
    rope = [(F32(t), F32(F32(2 * j) / F32(hd))) for t in (1e4, 1e5, 5e5, 1e6)
            for hd in (32, 64, 128, 256) for j in range(hd // 2)]
    px = np.array([r[0] for r in rope], F32)
    py = np.array([r[1] for r in rope], F32)
    gx = from_bits(rng.integers(1, 0x7f800000, 8000, dtype=np.uint32))
    gy = rng.uniform(-3, 3, 8000).astype(F32)
    ux = rng.uniform(0, 4, 4000).astype(F32)
    uy = rng.uniform(-60, 60, 4000).astype(F32)
    sp = np.concatenate([specials, F32([2, -2, 0.5, -0.5, 10, -3])])
    spy = np.concatenate([specials, F32([2, 3, -3, 0.5, -1, 1e10, 127, 128, -149, -150, 1.5])])
    sx, sy = np.meshgrid(sp, spy)
    ins['powf'] = (np.concatenate([px, gx, ux, -ux[::4], sx.reshape(-1)]),
                   np.concatenate([py, gy, uy, np.round(uy[::4]).astype(F32), sy.reshape(-1)]),
                   len(rope))
    return ins


def table_constants(pkg):
    """expf/logf constants from the wasm data section (see extract_libm_constants.py)."""
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from extract_libm_constants import memory_image
    m = memory_image(os.path.join(pkg, 'vendor', 'wasm', 'needle.wasm'))
    d = lambda a: struct.unpack('<d', m[a:a + 8])[0]
    exp_t = np.frombuffer(m[8432:8432 + 256], '<u8').copy()
    log_t = np.frombuffer(m[13000:13256], '<f8').reshape(16, 2).copy()
    return (d(8720), d(8728), [d(8736), d(8744), d(8752)], exp_t, d(13256),
            [d(13264), d(13272), d(13280)], log_t)


def same_bits(a, b):
    a, b = np.asarray(a, F32), np.asarray(b, F32)
    return (a.view(np.uint32) == b.view(np.uint32)) | (np.isnan(a) & np.isnan(b))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--out', default=os.path.join(os.path.dirname(__file__), '..', '..', 'tests',
                                                  'data', 'libm', 'vectors.bin'))
    ap.add_argument('--libm-py', help='folder with libm.py and mem.py, to cross-check libm.py')
    args = ap.parse_args()
    pkg = os.environ.get('OFFICIAL_PKG')
    if not pkg:
        sys.exit('set OFFICIAL_PKG to the installed @tyler71/cactus-needle2 package folder')
    libm = None
    if args.libm_py:
        sys.path.insert(0, args.libm_py)
        import libm  # noqa: E402  (reads OFFICIAL_PKG itself)
    rng = np.random.default_rng(20240611)
    ins = inputs(rng, table_constants(pkg))
    blob = bytearray(b'NLIBMV1\n')
    with tempfile.TemporaryDirectory() as tmp:
        engine = Engine(pkg, tmp)
        for name in ('expf', 'logf', 'sinf', 'cosf', 'powf'):
            if name == 'powf':
                x, y, n_rope = ins[name]
                want = engine(name, x, y)
                cols = [x, y, want]
                if libm:
                    ok = same_bits(libm.powf(x[:n_rope], y[:n_rope]), want[:n_rope])
                    print('  powf: libm.py == engine on %d RoPE pairs: %s' % (n_rope, ok.all()))
                    assert ok.all()
            else:
                x = ins[name]
                want = engine(name, x)
                cols = [x, want]
                if libm:
                    ok = np.isfinite(x)
                    if name == 'logf':
                        ok &= x > 0
                    if name in ('sinf', 'cosf'):
                        ok &= np.abs(x) < F32(2 ** 28 * np.pi / 2)
                    got = getattr(libm, name)(x[ok])
                    eq = same_bits(got, want[ok])
                    print('  %s: libm.py == engine on %d of %d inputs: %d mismatches' %
                          (name, ok.sum(), len(x), (~eq).sum()))
                    assert eq.all()
            arity = len(cols) - 1
            recs = np.stack([np.asarray(c, F32).view(np.uint32) for c in cols], axis=1)
            blob += name.encode().ljust(8, b'\0') + struct.pack('<II', arity, len(x))
            blob += recs.astype('<u4').tobytes()
            print('%s: %d vectors' % (name, len(x)))
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    open(args.out, 'wb').write(blob)
    print('wrote %s (%d bytes)' % (args.out, len(blob)))


if __name__ == '__main__':
    main()
