#!/usr/bin/env python3
"""libneedle.so through ctypes (standard library only), as the official Python package loads its
native library: the path comes from NEEDLE_LIB_PATH.
Usage: NEEDLE_LIB_PATH=build/libneedle.so complete.py MODEL.cact TOOLS.json QUERY [MAX_TOKENS]"""
import ctypes
import os
import sys


def main():
    if len(sys.argv) < 4:
        print(__doc__, file=sys.stderr)
        return 2
    lib = ctypes.CDLL(os.environ["NEEDLE_LIB_PATH"])
    lib.needle_load.argtypes = [ctypes.c_char_p, ctypes.c_ulonglong]
    lib.needle_init.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p]
    lib.needle_complete.argtypes = [ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_int]
    model = open(sys.argv[1], "rb").read()
    tools = open(sys.argv[2], "rb").read()
    max_tokens = int(sys.argv[4]) if len(sys.argv) > 4 else 64
    if lib.needle_load(model, len(model)) != 0:
        return 4
    prefix = lib.needle_init(b"", tools, b"")
    if prefix < 0:
        return 5
    out = ctypes.create_string_buffer(8192)
    n = lib.needle_complete(sys.argv[3].encode(), max_tokens, out, len(out))
    print(prefix, n, out.value.decode())
    lib.needle_reset()
    return 0


if __name__ == "__main__":
    sys.exit(main())
