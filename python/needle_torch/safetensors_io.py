"""Reads and writes the safetensors files of a `needle dequant` folder with numpy only.

Layout (the standard one): 8-byte little-endian header length N, N bytes of JSON
{name: {"dtype", "shape", "data_offsets": [begin, end]}, "__metadata__": {...}}, then the data
region; offsets are relative to the data region, tensors back to back, little-endian values.
"""
import json
import struct

import numpy as np

_DTYPES = {"F32": np.float32, "F16": np.float16, "F64": np.float64, "I32": np.int32,
           "I64": np.int64, "U8": np.uint8, "I8": np.int8}


def read(path):
    """Returns (tensors: name -> numpy array (a copy), metadata dict). Tensor order is kept."""
    with open(path, "rb") as handle:
        raw = handle.read()
    if len(raw) < 8:
        raise ValueError(f"{path}: {len(raw)} bytes, too short for a safetensors header")
    (header_len,) = struct.unpack_from("<Q", raw, 0)
    if 8 + header_len > len(raw):
        raise ValueError(f"{path}: header length {header_len} runs past the end of the file")
    header = json.loads(raw[8:8 + header_len].decode("utf-8"))
    metadata = header.pop("__metadata__", {})
    data = memoryview(raw)[8 + header_len:]
    tensors = {}
    for name, entry in header.items():
        if entry["dtype"] not in _DTYPES:
            raise ValueError(f"{path}: tensor '{name}' has unsupported dtype {entry['dtype']}")
        dtype = np.dtype(_DTYPES[entry["dtype"]]).newbyteorder("<")
        begin, end = entry["data_offsets"]
        count = int(np.prod(entry["shape"], dtype=np.int64))
        if not 0 <= begin <= end <= len(data) or end - begin != count * dtype.itemsize:
            raise ValueError(f"{path}: tensor '{name}' offsets {begin}..{end} do not fit shape "
                             f"{entry['shape']} inside {len(data)} data bytes")
        array = np.frombuffer(data, dtype=dtype, count=count, offset=begin)
        tensors[name] = array.reshape(entry["shape"]).astype(dtype.newbyteorder("="), copy=True)
    return tensors, metadata


def write(path, tensors, metadata=None):
    """Writes name -> float32 array (in the dict's order) as F32 tensors, 8-byte aligned data."""
    header = {}
    offset = 0
    blobs = []
    for name, array in tensors.items():
        blob = np.ascontiguousarray(array, dtype="<f4").tobytes()
        header[name] = {"dtype": "F32", "shape": list(array.shape),
                        "data_offsets": [offset, offset + len(blob)]}
        offset += len(blob)
        blobs.append(blob)
    if metadata:
        header["__metadata__"] = {str(k): str(v) for k, v in metadata.items()}
    text = json.dumps(header, separators=(",", ":")).encode("utf-8")
    text += b" " * ((-(8 + len(text))) % 8)  # the data region starts 8-byte aligned
    with open(path, "wb") as handle:
        handle.write(struct.pack("<Q", len(text)))
        handle.write(text)
        for blob in blobs:
            handle.write(blob)
