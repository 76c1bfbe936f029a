"""Fine-tunes a Needle 2 model on rendered tool-calling examples (render.py), with QAT, resumable.

Loss: cross-entropy on the target ids only (the assistant's `<tool_call>...</tool_call><|im_end|>`),
averaged over target tokens; the tools prefix and the user turn are context. Optimizer AdamW
(weight decay on matrices only), linear warm-up then cosine decay to 10%, gradient clipping 1.0.
QAT as upstream: on a QAT step every tensor the .cact stores as CQ is CQ-fake-quantized with its
export width (straight-through), and activations are 8-bit fake-quantized before the attention,
engram and output projections (model.py, quant.py). The probe heads are not trained.

Checkpoints (OUT/checkpoint.pt, written atomically every --checkpoint-every steps and at the end)
hold the weights, the optimizer state, the step and the loss log; `--resume` continues from one
exactly (the batch order is a function of the seed and the step). Keep OUT out of git (train-out/).

  python3 -m needle_torch.train --init DEQUANT_DIR --data train.ids.jsonl --out train-out/run1 \
      --steps 2000 --batch 8 --lr 1e-3 [--bits-map default=4] [--resume]
  python3 -m needle_torch.train --export train-out/run1 --needle build/needle --output model.cact
"""
import argparse
import json
import math
import os
import shutil
import subprocess
import sys
import time

import numpy as np
import torch

from . import model as needle_model
from . import safetensors_io

_UNTRAINED_PREFIXES = ("heads.", "contrastive_head.", "confidence_head.")


def parse_bits_map(spec):
    """'embedding=4,mhc=4,default=2' -> (prefix -> bits, default bits or None)."""
    prefixes, default = {}, None
    for part in (spec or "").split(","):
        if not part.strip():
            continue
        key, _, value = part.partition("=")
        if value.strip() not in ("2", "3", "4"):
            raise ValueError(f"bits map {spec!r}: {key.strip()} width must be 2, 3 or 4")
        if key.strip() == "default":
            default = int(value)
        else:
            prefixes[key.strip()] = int(value)
    return prefixes, default


def apply_bits_map(net, spec):
    """Sets the CQ width each tensor will be exported with (longest prefix wins, as requant)."""
    prefixes, default = parse_bits_map(spec)
    for name, info in net.tensor_info.items():
        if info["dtype"] != "CQ":
            continue
        hits = [p for p in prefixes if name.startswith(p)]
        bits = prefixes[max(hits, key=len)] if hits else default
        if bits is not None:
            info["bits"] = bits


def load_examples(path):
    """[(prefix + turn, target)] of a rendered file."""
    return [(list(prefix) + turn, target) for prefix, turn, target in load_packable(path)]


def load_packable(path):
    """[(prefix, turn, target)] of a rendered file (for --pack)."""
    rows = []
    with open(path, encoding="utf-8") as handle:
        for line in handle:
            if line.strip():
                row = json.loads(line)
                rows.append((tuple(row["prefix_ids"]), row["turn_ids"], row["target_ids"]))
    if not rows:
        raise ValueError(f"{path}: no examples")
    return rows


def make_packed_batch(packs, max_back):
    """Packed sequences: each pack is (prefix, [(turn, target), ...]) and becomes one sequence
    prefix + turn1 + target1 + turn2 + target2 + ..., where every turn (with its target) sees
    the prefix and itself only, at the positions it would have alone after the prefix (RoPE
    positions, engram n-grams and taps follow the same chain): each example computes exactly
    what it computes unpacked, while the prefix is run once for all of them.
    -> ids [B, T], layout (model.hidden's), positions, targets (as make_batch)."""
    lengths = [len(prefix) + sum(len(t) + len(y) for t, y in items) for prefix, items in packs]
    length = max(lengths)
    batch = len(packs)
    ids = torch.zeros(batch, length, dtype=torch.int64)
    rope = torch.zeros(batch, length, dtype=torch.int64)
    segment = torch.full((batch, length), -2, dtype=torch.int64)  # -1 prefix, k turn k, -2 pad
    back = torch.full((max_back, batch, length), -1, dtype=torch.int64)
    positions, targets = [], []
    for b, (prefix, items) in enumerate(packs):
        p = len(prefix)
        ids[b, :p] = torch.tensor(prefix)
        rope[b, :p] = torch.arange(p)
        segment[b, :p] = -1
        for s in range(1, max_back + 1):
            back[s - 1, b, s:p] = torch.arange(0, p - s)
        start = p
        for k, (turn, target) in enumerate(items):
            sequence = list(turn) + list(target)
            n = len(sequence)
            ids[b, start:start + n] = torch.tensor(sequence)
            rope[b, start:start + n] = torch.arange(p, p + n)
            segment[b, start:start + n] = k
            chain = torch.cat([torch.arange(p), torch.arange(start, start + n)])
            for s in range(1, max_back + 1):
                earlier = torch.arange(p, p + n) - s  # places in the chain
                back[s - 1, b, start:start + n] = torch.where(
                    earlier >= 0, chain[earlier.clamp_min(0)], torch.full_like(earlier, -1))
            for j, token in enumerate(target):
                positions.append(b * length + start + len(turn) + j - 1)
                targets.append(token)
            start += n
    seq = torch.arange(length)
    causal = seq[None, :] <= seq[:, None]  # [T, T]
    query, key = segment[:, :, None], segment[:, None, :]
    mask = causal & ((key == -1) | (key == query))
    mask |= torch.eye(length, dtype=torch.bool)  # padding sees itself (never read)
    layout = {"positions": rope, "mask": mask, "back": list(back)}
    return ids, layout, torch.tensor(positions), torch.tensor(targets)


def pack_groups(rows):
    """Example indices grouped by prefix (in order of first appearance)."""
    groups = {}
    for i, (prefix, _, _) in enumerate(rows):
        groups.setdefault(prefix, []).append(i)
    return list(groups.values())


def packed_rows(rows, groups, step, batch, pack, seed):
    """The packs of `step`: per epoch (seeded by (seed, epoch)) every prefix group is shuffled
    and cut into packs of `pack` examples, and the packs are shuffled; `batch` packs a step."""
    count = sum(-(-len(g) // pack) for g in groups)
    per_epoch = max(1, count // batch)
    epoch, index = divmod(step, per_epoch)
    rng = np.random.default_rng([seed, epoch])
    packs = []
    for group in groups:
        order = [group[i] for i in rng.permutation(len(group))]
        packs += [order[k:k + pack] for k in range(0, len(order), pack)]
    chosen = [packs[i] for i in rng.permutation(len(packs))[index * batch:(index + 1) * batch]]
    return [(list(rows[c[0]][0]), [(rows[i][1], rows[i][2]) for i in c]) for c in chosen]


def max_back(geometry):
    """Steps back the forward pass looks along a sequence (engram n-grams and taps)."""
    g = geometry
    return max([1] + [o - 1 for o in g.engram_orders]
               + [(g.engram_taps - 1) * g.engram_dilation])


def packed_loss(net, ids, layout, positions, targets):
    hidden = net.hidden(ids, layout=layout)
    picked = hidden.reshape(-1, hidden.shape[-1])[positions]
    return torch.nn.functional.cross_entropy(net.logits_of(picked), targets)


def make_batch(rows):
    """-> ids [B, T] (0-padded), positions (flat index into B*T of each predicting position),
    targets (the id each of those positions must predict)."""
    length = max(len(context) + len(target) for context, target in rows)
    ids = torch.zeros(len(rows), length, dtype=torch.int64)
    positions, targets = [], []
    for b, (context, target) in enumerate(rows):
        sequence = context + target
        ids[b, :len(sequence)] = torch.tensor(sequence)
        for j, token in enumerate(target):
            positions.append(b * length + len(context) + j - 1)
            targets.append(token)
    return ids, torch.tensor(positions), torch.tensor(targets)


def target_loss(net, ids, positions, targets):
    """Mean cross-entropy over target tokens; logits only where they are needed."""
    hidden = net.hidden(ids)
    picked = hidden.reshape(-1, hidden.shape[-1])[positions]
    return torch.nn.functional.cross_entropy(net.logits_of(picked), targets)


def batch_rows(rows, step, batch, seed):
    """The examples of `step`: epoch-wise permutations seeded by (seed, epoch)."""
    per_epoch = max(1, len(rows) // batch)
    epoch, index = divmod(step, per_epoch)
    order = np.random.default_rng([seed, epoch]).permutation(len(rows))
    return [rows[i] for i in order[index * batch:(index + 1) * batch]]


def learning_rate(step, args):
    if step < args.warmup:
        return args.lr * (step + 1) / args.warmup
    progress = min(1.0, (step - args.warmup) / max(1, args.steps - args.warmup))
    return args.lr * (0.1 + 0.9 * 0.5 * (1.0 + math.cos(math.pi * progress)))


def build_optimizer(net, args):
    decay, plain = [], []
    for name in net.names:
        if name.startswith(_UNTRAINED_PREFIXES) or name == "tokenizer":
            net.parameter(name).requires_grad_(False)
            continue
        (decay if net.parameter(name).dim() >= 2 else plain).append(net.parameter(name))
    return torch.optim.AdamW([{"params": decay, "weight_decay": args.weight_decay},
                              {"params": plain, "weight_decay": 0.0}], lr=args.lr)


def save_checkpoint(path, net, optimizer, step, losses, args):
    tmp = path + ".tmp"
    torch.save({"step": step, "model": net.state_dict(), "optimizer": optimizer.state_dict(),
                "losses": losses, "args": vars(args)}, tmp)
    os.replace(tmp, path)


def train(args):
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    os.makedirs(args.out, exist_ok=True)
    checkpoint_path = os.path.join(args.out, "checkpoint.pt")
    net = needle_model.load_dequant(args.init)
    apply_bits_map(net, args.bits_map)
    optimizer = build_optimizer(net, args)
    if args.pack > 0:
        rows = load_packable(args.data)
        groups = pack_groups(rows)
        back_steps = max_back(net.geometry)
    else:
        rows = load_examples(args.data)
    step, losses = 0, []
    if args.resume:
        if not os.path.exists(checkpoint_path):
            raise SystemExit(f"--resume: no checkpoint at {checkpoint_path}")
        state = torch.load(checkpoint_path)
        net.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        step, losses = state["step"], state["losses"]
        print(f"resumed at step {step} from {checkpoint_path}", flush=True)
    elif os.path.exists(checkpoint_path) and not args.force:
        raise SystemExit(f"{checkpoint_path} exists: --resume to continue, --force to restart")
    with open(os.path.join(args.out, "run.json"), "w", encoding="utf-8") as handle:
        json.dump(vars(args), handle, indent=1)
    net.train()
    window_loss, window_tokens, window_start = [], 0, time.time()
    stop = min(args.steps, args.stop_at) if args.stop_at else args.steps
    while step < stop:
        for group in optimizer.param_groups:
            group["lr"] = learning_rate(step, args)
        qat = args.qat_every > 0 and step % args.qat_every == 0
        net.set_qat(weights=qat, activations=qat)
        if args.pack > 0:
            ids, layout, positions, targets = make_packed_batch(
                packed_rows(rows, groups, step, args.batch, args.pack, args.seed), back_steps)
            loss = packed_loss(net, ids, layout, positions, targets)
        else:
            ids, positions, targets = make_batch(batch_rows(rows, step, args.batch, args.seed))
            loss = target_loss(net, ids, positions, targets)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_([p for p in net.parameters() if p.requires_grad], 1.0)
        optimizer.step()
        step += 1
        window_loss.append(float(loss))
        window_tokens += int((ids > 0).sum())
        if step % args.log_every == 0 or step == args.steps:
            seconds = time.time() - window_start
            mean = sum(window_loss) / len(window_loss)
            losses.append([step, mean])
            print(f"step {step}/{args.steps} loss {mean:.4f} "
                  f"lr {learning_rate(step - 1, args):.2e} {len(window_loss) / seconds:.3f} "
                  f"steps/s {window_tokens / seconds:.0f} tokens/s",
                  flush=True)
            window_loss, window_tokens, window_start = [], 0, time.time()
        if step % args.checkpoint_every == 0 or step == stop:
            save_checkpoint(checkpoint_path, net, optimizer, step, losses, args)
    return losses


def average_states(paths):
    """The element-wise mean of the model weights saved in several checkpoints (same run)."""
    total, first = None, None
    for path in paths:
        model = torch.load(path)["model"]
        if total is None:
            first = model
            total = {k: v.double().clone() for k, v in model.items() if v.is_floating_point()}
        elif model.keys() != first.keys():
            raise SystemExit(f"{path}: its weights differ in names from {paths[0]}")
        else:
            for k in total:
                total[k] += model[k].double()
    return {k: (total[k] / len(paths)).to(v.dtype) if k in total else v for k, v in first.items()}


def export(run_dir, needle, output, force=False, average=None):
    """Writes the checkpoint's weights (or the mean of the `average` checkpoint files) as a
    dequant folder (RUN/export/) and requantizes it to `output` with the widths training used.
    Returns requant's --json record."""
    with open(os.path.join(run_dir, "run.json"), encoding="utf-8") as handle:
        args = json.load(handle)
    net = needle_model.load_dequant(args["init"])
    if average:
        net.load_state_dict(average_states(average))
    else:
        net.load_state_dict(torch.load(os.path.join(run_dir, "checkpoint.pt"))["model"])
    folder = os.path.join(run_dir, "export")
    if os.path.exists(folder):
        shutil.rmtree(folder)
    os.makedirs(folder)
    with open(os.path.join(args["init"], "config.json"), encoding="utf-8") as handle:
        config = json.load(handle)
    shutil.copyfile(os.path.join(args["init"], "config.json"), os.path.join(folder, "config.json"))
    shutil.copyfile(os.path.join(args["init"], config["source"]["file"]),
                    os.path.join(folder, config["source"]["file"]))
    _, metadata = safetensors_io.read(os.path.join(args["init"], config["weights"]["file"]))
    safetensors_io.write(os.path.join(folder, config["weights"]["file"]), net.state_arrays(),
                         metadata)
    command = [needle, "requant", folder, output, "--json"]
    if args.get("bits_map"):
        command += ["--bits-map", args["bits_map"]]
    if force:
        command.append("--force")
    result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode != 0:
        raise SystemExit(f"{' '.join(command)}: exit {result.returncode}: {result.stderr.strip()}")
    return json.loads(result.stdout)


def main(argv=None):
    parser = argparse.ArgumentParser(description="Train (QAT) or export a Needle 2 model")
    parser.add_argument("--init", help="dequant folder to start from (needle dequant M.cact DIR)")
    parser.add_argument("--data", help="rendered ids JSONL (render.py)")
    parser.add_argument("--out", help="run folder: checkpoint.pt, run.json (keep out of git)")
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--pack", type=int, default=0,
                        help="pack this many examples that share a tools prefix into one "
                             "sequence (the prefix computed once; --batch counts sequences)")
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--warmup", type=int, default=50)
    parser.add_argument("--weight-decay", type=float, default=0.01)
    parser.add_argument("--bits-map", default="",
                        help="export widths, as requant's (e.g. default=4); empty: the init's")
    parser.add_argument("--qat-every", type=int, default=1,
                        help="fake-quantize on every k-th step (1: always, 0: never)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--log-every", type=int, default=10)
    parser.add_argument("--checkpoint-every", type=int, default=100)
    parser.add_argument("--stop-at", type=int, default=0,
                        help="end this session after that step (checkpointed; the schedule "
                             "stays the one of --steps, so --resume continues it)")
    parser.add_argument("--resume", action="store_true")
    parser.add_argument("--force", action="store_true", help="restart over an existing run")
    parser.add_argument("--export", metavar="RUN_DIR", help="export RUN_DIR's checkpoint")
    parser.add_argument("--needle", help="needle binary (for --export)")
    parser.add_argument("--output", help="the .cact --export writes")
    parser.add_argument("--average", nargs="+", metavar="CHECKPOINT",
                        help="with --export: export the mean of these checkpoint files' weights "
                             "(copies of RUN_DIR/checkpoint.pt saved along the run)")
    args = parser.parse_args(argv)
    if args.export:
        if not args.needle or not args.output:
            parser.error("--export needs --needle and --output")
        record = export(args.export, args.needle, args.output, args.force, args.average)
        print(json.dumps(record))
        return 0
    if not (args.init and args.data and args.out):
        parser.error("training needs --init, --data and --out")
    train(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
