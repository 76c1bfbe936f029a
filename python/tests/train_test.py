#!/usr/bin/env python3
"""A short QAT run lowers the loss, resumes exactly, and its export round-trips through needle.
Run by CTest (tests/CMakeLists.txt, only where torch imports):

  train_test.py NEEDLE_BINARY MODEL.cact

1. data: 8 generated examples offering 2 tools, ids rendered by the binary (render.py); the
   rendered turns are checked against the engine inside render.py;
2. train 12 steps (batch 2, QAT on) from the model's dequant folder: the mean target loss over
   the 8 examples (QAT forward, no grad) must fall below 70% of its value before training;
3. packing (--pack): the examples packed after their shared prefix give the logits they give
   alone (f32, within 1e-4), and a packed run (--pack 4) lowers the loss below 70% as well;
4. resume: stop at step 6, then --resume to 12: the same weights as the straight run;
5. export: requant the weights to a .cact; `needle verify` passes on it, `needle run` answers with
   it, and its dequantized CQ tensors equal the training-time fake quantization of the trained
   weights (what the model saw in training is what the .cact holds), its FP16 tensors the
   weights rounded to FP16.
Exit 0 pass, 1 fail.
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from needle_torch import dataset, render, train  # noqa: E402
from needle_torch import model as needle_model  # noqa: E402


def fail(message):
    print("FAIL: " + message)
    sys.exit(1)


def mean_loss(net, rows):
    net.set_qat(True, True)
    with torch.no_grad():
        ids, positions, targets = train.make_batch(rows)
        return float(train.target_loss(net, ids, positions, targets))


def run_train(init, data, out, stop_at=0, resume=False, extra=()):
    argv = ["--init", init, "--data", data, "--out", out, "--steps", "12",
            "--stop-at", str(stop_at), "--batch", "2", "--lr", "3e-3", "--warmup", "2",
            "--log-every", "4",
            "--checkpoint-every", "8", "--seed", "3"]
    if resume:
        argv.append("--resume")
    argv += list(extra)
    return train.main(argv)


def main(argv):
    if len(argv) != 3:
        print(__doc__)
        return 2
    needle, model_path = argv[1], argv[2]
    torch.set_num_threads(1)
    start = time.time()
    with tempfile.TemporaryDirectory() as tmp:
        init = os.path.join(tmp, "init")
        subprocess.run([needle, "dequant", model_path, init], check=True, stdout=subprocess.DEVNULL)
        # 8 examples offering two tools (short prompts keep the test fast)
        examples = [e for e in dataset.generate("train", 64, seed=9, tool_sets=4)
                    if len(e["tools"]) == 2][:8]
        if len(examples) != 8:
            fail(f"{len(examples)} two-tool examples generated, expected 8")
        data = os.path.join(tmp, "train.ids.jsonl")
        with open(data, "w", encoding="utf-8") as handle:
            for row in render.render(needle, model_path, examples):
                handle.write(json.dumps(row) + "\n")
        rows = train.load_examples(data)

        before = mean_loss(needle_model.load_dequant(init), rows)
        run_train(init, data, os.path.join(tmp, "run"))
        trained = needle_model.load_dequant(init)
        state = torch.load(os.path.join(tmp, "run", "checkpoint.pt"))
        trained.load_state_dict(state["model"])
        after = mean_loss(trained, rows)
        print(f"target loss on the 8 examples: {before:.4f} before, {after:.4f} after 12 steps; "
              f"logged {state['losses']}")
        if not after < 0.7 * before:
            fail(f"loss {before:.4f} -> {after:.4f}: not below 70%")

        # Packing (--pack): examples sharing a prefix in one sequence compute what they
        # compute alone (f32), and a packed run lowers the loss too.
        packable = train.load_packable(data)
        groups = train.pack_groups(packable)
        packs = [(list(packable[g[0]][0]), [(packable[i][1], packable[i][2]) for i in g])
                 for g in groups]
        plain_net = needle_model.load_dequant(init)
        with torch.no_grad():
            ids, layout, positions, targets = train.make_packed_batch(
                packs, train.max_back(plain_net.geometry))
            hidden = plain_net.hidden(ids, layout=layout)
            packed = plain_net.logits_of(hidden.reshape(-1, hidden.shape[-1])[positions])
            alone = []
            for prefix, items in packs:
                for turn, target in items:
                    one, where, _ = train.make_batch([(prefix + turn, target)])
                    h = plain_net.hidden(one)
                    alone.append(plain_net.logits_of(h.reshape(-1, h.shape[-1])[where]))
            alone = torch.cat(alone)
        worst = float((packed - alone).abs().max())
        print(f"packed: {len(packs)} sequences of {[len(i) for _, i in packs]} examples, "
              f"{ids.shape[1]} ids wide; max |logit diff| vs unpacked {worst:.3g}")
        if packed.shape != alone.shape or worst > 1e-4:
            fail("packed sequences do not compute what the examples compute alone")
        run_train(init, data, os.path.join(tmp, "packed"), extra=["--pack", "4"])
        packed_state = torch.load(os.path.join(tmp, "packed", "checkpoint.pt"))
        packed_net = needle_model.load_dequant(init)
        packed_net.load_state_dict(packed_state["model"])
        packed_after = mean_loss(packed_net, rows)
        print(f"packed run (--pack 4 --batch 2): {before:.4f} -> {packed_after:.4f}")
        if not packed_after < 0.7 * before:
            fail(f"packed run: loss {before:.4f} -> {packed_after:.4f}: not below 70%")

        run_train(init, data, os.path.join(tmp, "resumed"), stop_at=6)
        at6 = os.path.join(tmp, "at6.pt")
        shutil.copyfile(os.path.join(tmp, "resumed", "checkpoint.pt"), at6)
        run_train(init, data, os.path.join(tmp, "resumed"), resume=True)
        resumed = torch.load(os.path.join(tmp, "resumed", "checkpoint.pt"))["model"]
        worst = max(float((resumed[k] - state["model"][k]).abs().max()) for k in resumed)
        print(f"resume: max |weight diff| vs the straight run {worst:.3g}")
        if worst > 1e-6:
            fail("resumed run differs from the straight run")

        # export --average: the mean of the step-6 and step-12 weights
        w6 = torch.load(at6)["model"]
        mean = train.average_states([at6, os.path.join(tmp, "resumed", "checkpoint.pt")])
        floats = [k for k in mean if mean[k].is_floating_point()]
        worst = max(float((mean[k] - (w6[k] + resumed[k]) / 2).abs().max()) for k in floats)
        moved = sum(not torch.equal(mean[k], resumed[k]) for k in floats)
        print(f"average of 2 checkpoints: max |diff| vs (w6 + w12) / 2 {worst:.3g}, "
              f"{moved} of {len(floats)} tensors differ from w12")
        if worst > 1e-6 or moved == 0 or mean.keys() != resumed.keys():
            fail("checkpoint averaging is not the mean of the weights")

        cact = os.path.join(tmp, "trained.cact")
        record = train.export(os.path.join(tmp, "run"), needle, cact)
        print(f"requant: {record['tensors']} tensors, {len(record['reencoded'])} re-encoded")
        if not record["reencoded"]:
            fail("requant re-encoded nothing: the trained weights did not reach the file")
        verify = subprocess.run([needle, "verify", cact], capture_output=True, text=True)
        print(f"needle verify: exit {verify.returncode}")
        if verify.returncode != 0:
            fail(verify.stdout + verify.stderr)
        tools = os.path.join(tmp, "tools.json")
        with open(tools, "w", encoding="utf-8") as handle:
            json.dump(examples[0]["tools"], handle)
        answer = subprocess.run([needle, "run", cact, "--tools", tools, "-n", "24",
                                 examples[0]["query"]], capture_output=True, text=True)
        envelope = json.loads(answer.stdout) if answer.returncode == 0 else {}
        if envelope.get("type") not in ("call", "respond"):
            fail(f"needle run on the export: exit {answer.returncode} {answer.stdout}")

        back = os.path.join(tmp, "back")
        subprocess.run([needle, "dequant", cact, back], check=True, stdout=subprocess.DEVNULL)
        deployed = needle_model.load_dequant(back)
        worst = {"CQ": 0.0, "FP16": 0.0}
        moved = total = 0  # CQ values off by more than rounding (a near-tie code flip)
        trained.set_qat(weights=True, activations=False)
        for name in trained.names:
            info = trained.tensor_info[name]
            with torch.no_grad():
                if info["dtype"] == "CQ":  # exactly what the QAT forward used
                    expected = trained.weight(name)
                elif info["dtype"] == "FP16":
                    expected = trained.parameter(name).to(torch.float16).to(torch.float32)
                else:
                    continue
            diff = (deployed.parameter(name).detach() - expected).abs()
            worst[info["dtype"]] = max(worst[info["dtype"]], float(diff.max()))
            if info["dtype"] == "CQ":
                moved += int((diff > 1e-6).sum())
                total += diff.numel()
        print(f"deployed vs trained: CQ max|diff| {worst['CQ']:.3g} ({moved} of {total} values "
              f"off by > 1e-6), FP16 max|diff| {worst['FP16']:.3g}")
        # needle's encoder rotates with a fast Walsh-Hadamard, ours with a matrix product: the
        # rounding differs, so a code at a near-tie may flip (its whole group then moves a little).
        if moved > total * 1e-3 or worst["CQ"] > 0.01 or worst["FP16"] > 0:
            fail("the .cact does not hold what training used")
    print(f"pass ({time.time() - start:.1f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
