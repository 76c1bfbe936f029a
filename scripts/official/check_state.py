#!/usr/bin/env python3
"""Official-engine state fixtures (tests/data/official-state/<case>/): build them from a raw
dump_state.mjs dump, and check them against the bit-exact numpy emulation of the official engine.
Development tool, not run by CI. Needs numpy and the emulation (emu.py) from the folder given by
NEEDLE_EMU_DIR (default /work/shared/tools/official-numerics).

  check_state.py convert RAWDIR FIXDIR --model tiny.cact --how "..."
  check_state.py check FIXDIR [--models DIR] [--later RULE]

`check` replays the fixture's forward calls in the emulation and counts mismatches in the
first-step logits, every live K/V code and scale, and the engram rings; it exits 1 on any mismatch.
`--later` replaces the chunking of later turns' prefill (turn 2 on) by an alternative rule, to
establish which rule the engine uses:
  turn      32-token chunks counted from the first token of the turn's prefill (the fixture's calls)
  abs32     chunk boundaries at absolute multiples of 32
  grid      chunk boundaries at P + 32k (the first turn's grid continued)
  whole     the whole prefill of a later turn as one call
  prevtok   the previous turn's last generated token is forwarded with the next prefill
            (chunks counted from one position earlier)
  perpos    no chunk effect: every later-turn prefill position sees the window t+1-W .. t
"""
import argparse
import json
import os
import sys

import numpy as np

CHUNK = 32  # the engine's prefill chunk length
HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))


def slot_of(p, P, W):
    return p if p < P else P + (p - P) % W


def convert(a):
    raw = a.raw
    st = json.load(open(os.path.join(raw, "state.json")))
    h = st["hdr"]
    P, W, cap = h["sink"], h["window"], h["cap"]
    L, kvd, d, ns = h["layers"], h["kv_dim"], h["d"], h["sites"]
    if h["kv_bits"] != 0:
        sys.exit("convert: only the int8 KV mode is supported")
    if cap != P + W:
        sys.exit(f"convert: ring capacity {cap} != sinks {P} + window {W}")
    toks = np.fromfile(os.path.join(raw, "tokens.i32"), "<i4")
    N = len(toks)
    if N != st["n_tokens"]:
        sys.exit("convert: token count mismatch")
    # The token stream must be exactly: prefix, then per turn its prompt ids and generated ids.
    if st["init_returned"] != P or st["after_init"] != P or st["prefix_ids"] != toks[:P].tolist():
        sys.exit("convert: prefix ids / sink length disagree")
    calls = [[0, P]]
    turns = []
    pos = P
    for t in st["turns"]:
        b, ids, e = t["before"], t["turn_ids"], t["after"]
        if b != pos or toks[b:b + len(ids)].tolist() != ids or e < b + len(ids):
            sys.exit(f"convert: turn at {b} does not continue the stream at {pos}")
        calls.append([b, b + len(ids)])
        calls += [[p, p + 1] for p in range(b + len(ids), e)]
        turns.append([b, b + len(ids), e])
        pos = e
    if pos != N:
        sys.exit("convert: turns do not cover the token stream")
    first = turns[-1][1]
    # Live slots in slot order; every position must be where the slot rule puts it.
    sp = np.fromfile(os.path.join(raw, "slotpos.i32"), "<i4")
    assert len(sp) == cap
    slots = [s for s in range(cap) if sp[s] >= 0]
    live = [int(sp[s]) for s in slots]
    for s, p in zip(slots, live):
        if slot_of(p, P, W) != s:
            sys.exit(f"convert: position {p} found in slot {s}")
    # Everything the ring can hold must be there: positions [0, P) and [max(P, N - W), N).
    want = list(range(min(P, N))) + list(range(max(P, N - W), N))
    if sorted(live) != want:
        sys.exit("convert: the ring does not hold exactly the last W positions and the sinks "
                 f"(max live {max(live)}, N {N}); were all generated tokens forwarded?")

    def take(name, dt, per_slot, nrows):
        x = np.fromfile(os.path.join(raw, name), dt).reshape(nrows, cap, per_slot)
        return np.ascontiguousarray(x[:, slots])

    os.makedirs(a.fix, exist_ok=True)
    take("k.i8", np.int8, kvd, L).tofile(os.path.join(a.fix, "k.i8"))
    take("v.i8", np.int8, kvd, L).tofile(os.path.join(a.fix, "v.i8"))
    take("ks.f32", "<f4", kvd // 64, L).tofile(os.path.join(a.fix, "ks.f32"))
    take("vs.f32", "<f4", kvd // 64, L).tofile(os.path.join(a.fix, "vs.f32"))
    take("ring.i8", np.int8, d, ns).tofile(os.path.join(a.fix, "ring.i8"))
    take("rings.f32", "<f4", d // 32, ns).tofile(os.path.join(a.fix, "rings.f32"))
    for name in ("logits.f32", "invf.f32"):
        with open(os.path.join(raw, name), "rb") as f, open(os.path.join(a.fix, name), "wb") as g:
            g.write(f.read())
    case = {
        "model": a.model, "kv_window": W, "sink_len": P,
        "tokens": toks.tolist(), "calls": calls, "first_step": first, "live": live,
        "layers": L, "kv_dim": kvd, "d_model": d, "sites": ns,
        "vocab": h["vocab"], "head_dim": h["head_dim"],
        "turns": turns, "turn_inputs": [t["input"] for t in st["turns"]],
        "system": st["system"], "max_tokens": st["max_tokens"],
        "how": a.how,
    }
    with open(os.path.join(a.fix, "case.json"), "w") as f:
        # one key per line, arrays on one line: small diffs, easy to read
        f.write("{\n" + ",\n".join(f" {json.dumps(k)}: {json.dumps(v, separators=(',', ':'))}"
                                    for k, v in case.items()) + "\n}\n")
    print(f"convert: {a.fix}: {N} tokens, {len(calls)} calls, {len(live)} live, first step {first}")


def expand(calls):
    """The engine splits one prefill call into 32-token chunks counted from its first position."""
    ch = []
    for b, e in calls:
        ch += [(c, min(c + CHUNK, e)) for c in range(b, e, CHUNK)]
    return ch


def chunks_for(case, rule):
    P = case["sink_len"]
    turns = case["turns"]
    if rule == "turn":
        return expand(case["calls"])
    ch = expand([[0, P]])
    for k, (b, pe, e) in enumerate(turns):
        if k == 0:
            pre = expand([[b, pe]])
        elif rule == "abs32":
            cuts = [b] + [c for c in range((b // CHUNK + 1) * CHUNK, pe, CHUNK)] + [pe]
            pre = list(zip(cuts[:-1], cuts[1:]))
        elif rule == "grid":
            nxt = P + ((b - P) // CHUNK + 1) * CHUNK
            cuts = [b] + list(range(nxt, pe, CHUNK)) + [pe]
            pre = list(zip(cuts[:-1], cuts[1:]))
        elif rule == "whole":
            pre = [(b, pe)]
        elif rule == "prevtok":
            ch.pop()  # the previous turn's last decode call [b-1, b) did not happen ...
            pre = expand([[b - 1, pe]])  # ... that token went with this prefill
        elif rule == "perpos":
            pre = [(t, t + 1) for t in range(b, pe)]
        else:
            raise SystemExit(f"unknown rule {rule}")
        ch += pre
        ch += [(t, t + 1) for t in range(pe, e)]
    assert [p for b, e in ch for p in range(b, e)] == list(range(turns[-1][2])), "bad chunks"
    return ch


def check(a):
    sys.path.insert(0, os.environ.get("NEEDLE_EMU_DIR", "/work/shared/tools/official-numerics"))
    import warnings
    warnings.filterwarnings("ignore")
    import emu
    fx = a.fix
    case = json.load(open(os.path.join(fx, "case.json")))
    P, W = case["sink_len"], case["kv_window"]
    L, kvd, d, ns = case["layers"], case["kv_dim"], case["d_model"], case["sites"]
    toks, live, first = case["tokens"], case["live"], case["first_step"]
    nl = len(live)
    models = a.models or os.path.join(ROOT, "tests", "data", "models")
    E = emu.Engine(os.path.join(models, case["model"]), P, W)
    E.chunks = chunks_for(case, a.later)
    bad = 0
    invf = np.fromfile(os.path.join(fx, "invf.f32"), "<f4")
    if invf.tobytes() != E.invf.astype("<f4").tobytes():
        print("  invf: differs")
        bad += 1
    lg = E.forward(toks[:first]).astype("<f4")
    ref = np.fromfile(os.path.join(fx, "logits.f32"), "<f4")
    neq = int(np.sum(lg.view("<u4") != ref.view("<u4")))
    print(f"  first-step logits ({first} tokens): {len(ref) - neq}/{len(ref)} equal, "
          f"max|d| {np.abs(lg.astype(np.float64) - ref).max():.3e}")
    bad += neq
    E.forward(toks)
    Kq, Ks, Vq, Vs = E.dbg["K"]
    got = {"k.i8": (np.int8, kvd, L, Kq), "v.i8": (np.int8, kvd, L, Vq),
           "ks.f32": ("<f4", kvd // 64, L, Ks), "vs.f32": ("<f4", kvd // 64, L, Vs)}
    for s in range(ns):
        q, sc = E.dbg[f"ring{s}"]
        got.setdefault("ring.i8", (np.int8, d, ns, []))[3].append(q)
        got.setdefault("rings.f32", ("<f4", d // 32, ns, []))[3].append(sc)
    counts = {}
    for name, (dt, per, rows, em) in got.items():
        x = np.fromfile(os.path.join(fx, name), dt).reshape(rows, nl, per)
        y = np.stack([np.asarray(em[r])[live].reshape(nl, per) for r in range(rows)])
        if dt == "<f4":
            diff = x.view("<u4") != y.astype("<f4").view("<u4")
        else:
            diff = x != y.astype(np.int8)
        counts[name] = int(diff.sum())
        if counts[name]:
            r, j, _ = np.argwhere(diff)[0]
            print(f"  {name}: {counts[name]} mismatches, first at row {r} position {live[j]}")
    kv = counts["k.i8"] + counts["v.i8"] + counts["ks.f32"] + counts["vs.f32"]
    ring = counts["ring.i8"] + counts["rings.f32"]
    bad += kv + ring
    print(f"  {len(toks)} tokens, {nl} live, rule {a.later}: KV mismatches {kv}, ring mismatches "
          f"{ring} -> {'OK' if bad == 0 else 'MISMATCH'}")
    return 0 if bad == 0 else 1


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("convert")
    c.add_argument("raw")
    c.add_argument("fix")
    c.add_argument("--model", required=True, help="file name in tests/data/models")
    c.add_argument("--how", required=True)
    k = sub.add_parser("check")
    k.add_argument("fix")
    k.add_argument("--models", help="folder of the .cact files (default tests/data/models)")
    k.add_argument("--later", default="turn",
                   choices=["turn", "abs32", "grid", "whole", "prevtok", "perpos"])
    a = ap.parse_args()
    if a.cmd == "convert":
        convert(a)
        return 0
    return check(a)


if __name__ == "__main__":
    sys.exit(main())
