#!/usr/bin/env python3
"""The torch forward pass against the upstream f32 goldens, and the CQ codec against the upstream
exporter's cases. Run by CTest (tests/CMakeLists.txt, only where torch imports):

  forward_test.py golden NEEDLE_BINARY MODEL.cact GOLDEN_DIR  # the reference entries of golden.json
  forward_test.py cq PACK.json CODEBOOKS.json                  # cq_quantize == upstream dequant

golden: `needle dequant` the model into a temporary folder, load it with needle_torch, and for each
reference entry (ids, kv_window, sink_len) require max |logit diff| <= 1e-4 at the last position
(the stored f32 logits) and at every position on the stored top-5 ids and values.
Exit 0 pass, 1 fail; prints what was measured.
"""
import json
import math
import os
import subprocess
import sys
import tempfile
import time

import numpy as np
import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from needle_torch import model as needle_model  # noqa: E402
from needle_torch import quant  # noqa: E402

TOLERANCE = 1e-4


def check_golden(binary, model_path, golden_dir):
    torch.set_num_threads(1)
    with open(os.path.join(golden_dir, "golden.json"), encoding="utf-8") as handle:
        golden = json.load(handle)
    failures = 0
    with tempfile.TemporaryDirectory() as tmp:
        folder = os.path.join(tmp, "f32")
        subprocess.run([binary, "dequant", model_path, folder], check=True,
                       stdout=subprocess.DEVNULL)
        net = needle_model.load_dequant(folder)
    worst = 0.0
    for index, entry in enumerate(golden["reference"]):
        start = time.time()
        ids = torch.tensor([entry["ids"]], dtype=torch.int64)
        with torch.no_grad():
            logits = net(ids, entry["kv_window"], entry["sink_len"])[0].numpy()
        expected = np.fromfile(os.path.join(golden_dir, entry["last_logits"]), dtype="<f4")
        last_diff = float(np.abs(logits[-1] - expected).max())
        top_diff = 0.0
        for position, top in enumerate(entry["top5"]):
            for token, value in top:
                top_diff = max(top_diff, abs(float(logits[position, token]) - value))
        worst = max(worst, last_diff, top_diff)
        ok = last_diff <= TOLERANCE and top_diff <= TOLERANCE
        failures += not ok
        print(f"reference {index}: {len(entry['ids'])} ids, window {entry['kv_window']}, "
              f"sinks {entry['sink_len']}: last-position max|diff| {last_diff:.3g}, top-5 at "
              f"every position max|diff| {top_diff:.3g} ({time.time() - start:.2f} s): "
              f"{'ok' if ok else 'FAIL'}")
    print(f"{os.path.basename(model_path)}: worst max|diff| {worst:.3g} (limit {TOLERANCE})")
    if not golden["reference"]:
        print("FAIL: no reference entries")
        return 1
    return 1 if failures else 0


def check_cq(pack_path, codebooks_path):
    with open(codebooks_path, encoding="utf-8") as handle:
        books = json.load(handle)
    with open(pack_path, encoding="utf-8") as handle:
        cases = json.load(handle)["cases"]
    failures = checked = 0
    for index, case in enumerate(cases):
        bits, group = case["record_bits"], case["group"]
        if bits not in (2, 3, 4):
            continue  # ternary is not a QAT target here
        # Training takes the group-128 codebook from config.json and rescales it.
        book = torch.tensor(books["128"][f"cb{bits}"]) * math.sqrt(128.0 / group)
        weights = torch.tensor(case["weights"], dtype=torch.float32)
        decoded = quant.cq_quantize(weights.reshape(case["rows"], case["cols"]), book, group)
        diff = float((decoded.flatten() - torch.tensor(case["dequant"])).abs().max())
        ok = diff <= 1e-6
        failures += not ok
        checked += 1
        print(f"case {index}: {bits} bits, group {group}, {case['rows']}x{case['cols']}: "
              f"max|diff| {diff:.3g}: {'ok' if ok else 'FAIL'}")
    if not checked:
        print("FAIL: no CQ cases checked")
        return 1
    return 1 if failures else 0


def main(argv):
    if len(argv) == 5 and argv[1] == "golden":
        return check_golden(argv[2], argv[3], argv[4])
    if len(argv) == 4 and argv[1] == "cq":
        return check_cq(argv[2], argv[3])
    print(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
