#!/usr/bin/env python3
"""Compares `needle tokenize --batch` with SentencePiece itself on a few MB of text.

The corpus is built at test time, deterministically: the machine's documentation
(/usr/share/common-licenses, /usr/share/doc/**/copyright and *.gz, /usr/share/man/man1/*.gz, in
sorted order, up to --doc-bytes) plus seeded synthetic lines (random vocabulary pieces, chat
markers, digits, runs of spaces, tabs, non-Latin text), plus long lines made of joined lines.
Lines are raw bytes (invalid UTF-8 included). Every line is encoded with python3-sentencepiece (the fixture's .model) and with needle (the same
tokenizer, from the .cact blob); any differing id fails the test.

Exit codes: 0 all equal, 1 a difference (first ones printed), 77 python3-sentencepiece missing
(CTest reports the test as skipped).
"""
import argparse
import gzip
import os
import random
import subprocess
import sys

SKIP = 77


def import_sentencepiece():
    try:
        import sentencepiece  # noqa: F401
        return sentencepiece
    except ImportError:
        pass
    # Debian's python3-sentencepiece lives in the system interpreter; a pyenv/venv python3 that
    # comes first on PATH does not see it: re-run under /usr/bin/python3 once.
    system_python = "/usr/bin/python3"
    if (os.path.exists(system_python) and os.path.realpath(sys.executable) !=
            os.path.realpath(system_python) and not os.environ.get("NEEDLE_SPM_REEXEC")):
        env = dict(os.environ, NEEDLE_SPM_REEXEC="1")
        sys.exit(subprocess.call([system_python] + sys.argv, env=env))
    print("SKIPPED: python3-sentencepiece is not installed (apt-get install python3-sentencepiece);"
          " the SentencePiece corpus comparison did not run.", flush=True)
    sys.exit(SKIP)


def read_doc(path):
    try:
        if path.endswith(".gz"):
            with gzip.open(path, "rb") as f:
                data = f.read(1 << 20)
        else:
            with open(path, "rb") as f:
                data = f.read(1 << 20)
    except (OSError, EOFError, gzip.BadGzipFile):
        return b""
    return data  # raw bytes: invalid UTF-8 is part of the test


def doc_files():
    roots = []
    lic = "/usr/share/common-licenses"
    if os.path.isdir(lic):
        roots += sorted(os.path.join(lic, n) for n in os.listdir(lic))
    docs = []
    for base, dirs, files in os.walk("/usr/share/doc"):
        dirs.sort()
        for n in sorted(files):
            if n == "copyright" or n.endswith(".gz"):
                docs.append(os.path.join(base, n))
    man1 = "/usr/share/man/man1"
    if os.path.isdir(man1):
        docs += sorted(os.path.join(man1, n) for n in os.listdir(man1) if n.endswith(".gz"))
    return [p for p in roots + docs if os.path.isfile(p) and not os.path.islink(p)]


def doc_lines(limit_bytes):
    lines, total, files = [], 0, 0
    for path in doc_files():
        text = read_doc(path)
        if not text:
            continue
        files += 1
        for line in text.split(b"\n"):
            lines.append(line)
            total += len(line) + 1
        if total >= limit_bytes:
            break
    return lines, total, files


def synthetic_lines(sp, count, seed):
    rng = random.Random(seed)
    pieces = [sp.id_to_piece(i) for i in range(sp.get_piece_size())
              if not (sp.is_control(i) or sp.is_unknown(i) or sp.is_byte(i))]
    markers = [p for p in pieces if p.startswith("<") and p.endswith(">") and len(p) > 3]
    extras = ["  ", "   ", "\t", " \t ", "0", "12", "345", "3.14", "-7", "é", "ß", "—", "日本語",
              "🙂", "\u2581", "\u00a0", "\u200b", "\r", "\x00", "{\"a\": 1}", "\\n", "'", '"',
              "<s>", "</s>", "<pad>", "<unk>", "<0x41>", "<|im_end", "|>",
              b"\xff", b"\xe6\x97", b"\xed\xa0\x80", b"\xc0\xaf", b"\x80"]
    out = []
    for _ in range(count):
        parts = []
        for _ in range(rng.randint(1, 40)):
            r = rng.random()
            if r < 0.7:
                part = rng.choice(pieces).replace("\u2581", " ")
            elif r < 0.8 and markers:
                part = rng.choice(markers)
            else:
                part = rng.choice(extras)
            parts.append(part if isinstance(part, bytes) else part.encode("utf-8"))
        out.append(b"".join(parts))
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("needle")
    ap.add_argument("cact")
    ap.add_argument("spm_model")
    ap.add_argument("--doc-bytes", type=int, default=4_000_000)
    ap.add_argument("--synthetic", type=int, default=20000)
    args = ap.parse_args()

    spm = import_sentencepiece()
    sp = spm.SentencePieceProcessor(model_file=args.spm_model)

    docs, doc_bytes, files = doc_lines(args.doc_bytes)
    synth = synthetic_lines(sp, args.synthetic, seed=1234)
    # Long texts: 64 consecutive lines joined by spaces (exercise long merge sequences).
    joined = [b" ".join(docs[i:i + 64]) for i in range(0, len(docs), 64)]
    lines = docs + synth + joined
    if len(lines) < 1000:
        print(f"FAIL: corpus too small ({len(lines)} lines)")
        return 1

    payload = b"\n".join(lines) + b"\n"
    proc = subprocess.run([args.needle, "tokenize", "--batch", args.cact],
                          input=payload, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, check=False)
    if proc.returncode != 0:
        print("FAIL: needle tokenize --batch exited", proc.returncode, proc.stderr.decode())
        return 1
    ours = proc.stdout.decode("utf-8").split("\n")
    if ours and ours[-1] == "":
        ours.pop()
    if len(ours) != len(lines):
        print(f"FAIL: needle printed {len(ours)} lines for {len(lines)} inputs")
        return 1

    import json
    diffs, tokens = 0, 0
    for i, (text, got) in enumerate(zip(lines, ours)):
        want = sp.encode(text, out_type=int)
        tokens += len(want)
        if json.loads(got) != want:
            diffs += 1
            if diffs <= 5:
                print(f"DIFF line {i}: {text[:200]!r}\n  spm:    {want[:60]}\n  needle: {got[:400]}")
    total_bytes = len(payload)
    print(f"corpus: {len(lines)} lines ({len(docs)} from {files} documentation files, "
          f"{len(synth)} synthetic, {len(joined)} joined), {total_bytes / 1e6:.2f} MB, "
          f"{tokens} tokens; differing lines: {diffs}")
    return 1 if diffs else 0


if __name__ == "__main__":
    sys.exit(main())
