#!/usr/bin/env python3
"""Independent numpy reader/editor for the folders `needle dequant` writes (used by CTest).

check DIR        parse DIR/weights.safetensors with plain numpy + json (no needle code), check
                 its layout the way stock loaders do (8-byte length, JSON header, contiguous data),
                 the per-tensor SHA-256s in config.json, and dequantize CQ / widen FP16 tensors of
                 DIR/source.cact in numpy to compare with the stored F32 values.
edit DIR NAME    scale tensor NAME by 1.5 and add 0.01 to its first element, rewriting the file.
Exit status 0 on success, 1 with a message on any mismatch.
"""
import hashlib
import json
import struct
import sys

import numpy as np

DTYPES = {"F32": np.float32, "F16": np.float16, "F64": np.float64, "I32": np.int32,
          "I64": np.int64, "U8": np.uint8, "I8": np.int8}


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


def read_safetensors(path):
    raw = open(path, "rb").read()
    (n,) = struct.unpack_from("<Q", raw, 0)
    if 8 + n > len(raw):
        fail(f"{path}: header length {n} beyond file")
    header = json.loads(raw[8:8 + n].decode("utf-8"))
    data = raw[8 + n:]
    if (8 + n) % 8 != 0:
        fail(f"{path}: data region starts at {8 + n}, not 8-byte aligned")
    meta = header.pop("__metadata__", {})
    tensors = {}
    spans = []
    for name, e in header.items():
        b, end = e["data_offsets"]
        dt = np.dtype(DTYPES[e["dtype"]]).newbyteorder("<")
        count = int(np.prod(e["shape"], dtype=np.int64)) if e["shape"] else 1
        if end - b != count * dt.itemsize:
            fail(f"{name}: {end - b} bytes for shape {e['shape']}")
        tensors[name] = (np.frombuffer(data, dtype=dt, count=count, offset=b).reshape(e["shape"]),
                         data[b:end], e)
        spans.append((b, end, name))
    spans.sort()
    pos = 0
    for b, end, name in spans:  # stock loaders require back-to-back tensors covering the data
        if b != pos:
            fail(f"{name}: starts at {b}, expected {pos} (gap or overlap)")
        pos = end
    if pos != len(data):
        fail(f"data region has {len(data)} bytes, tensors cover {pos}")
    return header, meta, tensors


def write_safetensors(path, header_entries, meta, arrays):
    """Writes arrays (name -> float32 array) in the order of header_entries."""
    header = {}
    if meta:
        header["__metadata__"] = meta
    pos = 0
    blobs = []
    for name in header_entries:
        a = np.ascontiguousarray(arrays[name], dtype="<f4")
        header[name] = {"dtype": "F32", "shape": list(a.shape), "data_offsets": [pos, pos + a.nbytes]}
        pos += a.nbytes
        blobs.append(a.tobytes())
    text = json.dumps(header).encode("utf-8")
    text += b" " * ((8 - len(text) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for b in blobs:
            f.write(b)


def hadamard(n):
    h = np.array([[1.0]])
    while h.shape[0] < n:
        h = np.block([[h, h], [h, -h]])
    return h / np.sqrt(n)


def cact_blobs(path, config):
    raw = open(path, "rb").read()
    hdr = struct.unpack_from("<29If", raw, 0)
    n, cbl = hdr[1], hdr[2]
    cb = np.frombuffer(raw, dtype="<f4", count=cbl, offset=120).astype(np.float64)
    recs = [struct.unpack_from("<BBHIIIIQQII", raw, 120 + 4 * cbl + 44 * i) for i in range(n)]
    return raw, cb, recs


def dequant_cq(raw, cb, rec):
    dtype, ndim, _, r, c, _, _, off, nbytes, g, bits = rec
    code_bits = 2 if bits == 5 else bits
    in_pad = -(-c // g) * g
    row_bytes = in_pad * code_bits // 8
    codes_raw = np.frombuffer(raw, dtype=np.uint8, count=r * row_bytes, offset=off)
    bitsarr = np.unpackbits(codes_raw.reshape(r, row_bytes), axis=1, bitorder="little")
    bitsarr = bitsarr.reshape(r, in_pad, code_bits)
    codes = (bitsarr * (1 << np.arange(code_bits))).sum(axis=2)
    if bits == 5:
        levels = np.array([-1.2240064, 0.0, 1.2240064]) / np.sqrt(g)
        codes = np.select([codes == 3, codes == 0, codes == 1], [0, 1, 2], -1)
        if (codes < 0).any():
            fail("ternary crumb 2 found")
    else:
        start = {2: 0, 3: 4, 4: 12}[bits]
        levels = cb[start:start + (1 << bits)]
    norms = np.frombuffer(raw, dtype="<f2", count=r * (in_pad // g),
                          offset=off + r * row_bytes).astype(np.float64).reshape(r, in_pad // g, 1)
    vals = levels[codes].reshape(r, in_pad // g, g) * norms
    return (vals @ hadamard(g)).reshape(r, in_pad)[:, :c]


def check(folder):
    config = json.load(open(folder + "/config.json"))
    header, meta, tensors = read_safetensors(folder + "/weights.safetensors")
    raw, cb, recs = cact_blobs(folder + "/source.cact", config)
    if meta.get("needle_source_sha256") != config["source"]["sha256"]:
        fail("metadata source SHA-256 differs from config.json")
    if hashlib.sha256(raw).hexdigest() != config["source"]["sha256"]:
        fail("source.cact SHA-256 differs from config.json")
    entries = config["tensors"]
    if len(entries) != len(recs):
        fail(f"config lists {len(entries)} tensors, source has {len(recs)}")
    checked_cq = checked_f16 = 0
    for e, rec in zip(entries, recs):
        name = e["name"]
        if rec[0] == 4:
            if name in tensors:
                fail(f"RAW tensor {name} must not be in the safetensors")
            continue
        if name not in tensors:
            fail(f"{name} missing from the safetensors")
        arr, blob, st = tensors[name]
        if st["dtype"] != "F32":
            fail(f"{name}: dtype {st['dtype']}")
        if list(arr.shape) != list(rec[3:3 + rec[1]]):
            fail(f"{name}: shape {arr.shape} vs record {rec[3:3 + rec[1]]}")
        if hashlib.sha256(blob).hexdigest() != e["sha256"]:
            fail(f"{name}: SHA-256 of the stored bytes differs from config.json")
        if rec[0] == 1:
            want = np.frombuffer(raw, dtype="<f2", count=arr.size, offset=rec[7]).astype(np.float32)
            if not np.array_equal(want.reshape(arr.shape), arr):
                fail(f"{name}: F32 values are not the widened FP16 values")
            checked_f16 += 1
        elif rec[0] == 3:
            want = dequant_cq(raw, cb, rec)
            err = np.abs(want - arr).max()
            scale = max(np.abs(want).max(), 1e-30)
            if err > 1e-5 * scale:
                fail(f"{name}: numpy dequantization differs by {err} (scale {scale})")
            checked_cq += 1
    if len(tensors) != sum(1 for r in recs if r[0] != 4):
        fail("safetensors holds tensors that are not in the model")
    print(f"OK: {len(tensors)} tensors ({checked_cq} CQ dequantized in numpy, "
          f"{checked_f16} FP16 exact)")


def edit(folder, name):
    path = folder + "/weights.safetensors"
    header, meta, tensors = read_safetensors(path)
    if name not in tensors:
        fail(f"no tensor {name}")
    arrays = {k: np.array(v[0], dtype=np.float32) for k, v in tensors.items()}
    a = arrays[name] * np.float32(1.5)
    a.reshape(-1)[0] += np.float32(0.01)
    arrays[name] = a
    order = sorted(header, key=lambda k: header[k]["data_offsets"][0])
    write_safetensors(path, order, meta, arrays)
    print(f"OK: edited {name}")


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "check":
        check(sys.argv[2])
    elif len(sys.argv) == 4 and sys.argv[1] == "edit":
        edit(sys.argv[2], sys.argv[3])
    else:
        print(__doc__)
        sys.exit(2)
