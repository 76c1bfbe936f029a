#!/usr/bin/env python3
"""Writes tests/data/libm/vectors-f64.bin: inputs and the official engine's results for its musl
double exp and log (wasm functions 57 and 98), which it uses for the protocol's probabilities.

Development tool, not run by the tests. Needs node, numpy, and
OFFICIAL_PKG=<...>/node_modules/@tyler71/cactus-needle2. Like make_libm_vectors.py, it adds exports
for the two functions to a temporary copy of needle.wasm and calls them from node.

File format (little-endian): 8 bytes "NLIBMD1\\n", then per function: 8-byte name padded with
NULs, u32 arity (1), u32 count, then count records of the input's and the result's double bits
(u64 each).
Usage: make_libm_vectors_f64.py [--out tests/data/libm/vectors-f64.bin] [--seed N]
"""
import argparse
import os
import struct
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_libm_vectors import Engine  # noqa: E402

FUNCS = {'exp': 57, 'log': 98}

def bits(u):
    return np.asarray(u, np.uint64).view(np.float64)


def exp_inputs(rng):
    parts = [
        rng.uniform(-60.0, 0.0, 12000),         # the protocol's exp(l - max) and exp(mean log p)
        rng.uniform(-745.2, 709.8, 6000),        # the whole finite range
        rng.uniform(-745.2, -708.3, 1500),       # subnormal results (the special path, k < 0)
        rng.uniform(512.0, 709.8, 800),          # large results (the special path, k > 0)
        rng.uniform(-1e-12, 1e-12, 400),
        np.array([0.0, -0.0, 1.0, -1.0, 2.0 ** -54, -(2.0 ** -54), 2.0 ** -55, 512.0, -512.0,
                  709.782712893384, 709.7827128933841, -745.1332191019411, -745.1332191019412,
                  -708.3964185322641, 1024.0, -1024.0, 1e300, -1e300, np.inf, -np.inf]),
    ]
    return np.concatenate(parts)


def log_inputs(rng):
    parts = [
        rng.uniform(1.0, 8192.0, 8000),         # sums of probabilities (the walk's S)
        rng.uniform(1e-30, 1.0, 6000),           # probabilities
        rng.uniform(0.9375, 1.0647, 4000),       # the near-1 path
        bits(rng.integers(0x0010000000000000, 0x7ff0000000000000, 3000, dtype=np.uint64)),
        bits(rng.integers(1, 0x0010000000000000, 500, dtype=np.uint64)),  # subnormals
        np.array([1.0, 0.9375, 1.0646972656249998, 1.064697265625, 2.0, 0.5, 0.0, -0.0, -1.0,
                  np.inf, -np.inf, 5e-324, 1.7976931348623157e308]),
    ]
    return np.concatenate(parts)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--out', default=os.path.join(os.path.dirname(__file__), '..', '..', 'tests',
                                                  'data', 'libm', 'vectors-f64.bin'))
    ap.add_argument('--seed', type=int, default=1)
    a = ap.parse_args()
    pkg = os.environ.get('OFFICIAL_PKG')
    if not pkg:
        sys.exit('set OFFICIAL_PKG to the installed @tyler71/cactus-needle2 package folder')
    rng = np.random.default_rng(a.seed)
    out = bytearray(b'NLIBMD1\n')
    with tempfile.TemporaryDirectory() as tmp:
        engine = Engine(pkg, tmp, FUNCS, np.float64)
        for name, x in (('exp', exp_inputs(rng)), ('log', log_inputs(rng))):
            x = np.asarray(x, np.float64)
            y = engine(name, x)
            out += name.encode().ljust(8, b'\0') + struct.pack('<II', 1, len(x))
            rec = np.empty((len(x), 2), np.uint64)
            rec[:, 0] = x.view(np.uint64)
            rec[:, 1] = y.view(np.uint64)
            out += rec.tobytes()
            print('%s: %d vectors' % (name, len(x)))
    tmp_out = a.out + '.tmp'
    open(tmp_out, 'wb').write(out)
    os.replace(tmp_out, a.out)


if __name__ == '__main__':
    main()
