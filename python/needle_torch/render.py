"""Token ids for training, taken from the needle binary so that they are exactly the ids the
engine sees (PROTOCOL.md section 1), never re-implemented here.

For every example {tools, query, expected} of a JSONL file it writes one line
{"prefix_ids", "turn_ids", "target_ids"}:
- prefix_ids: `needle run MODEL --tools T --print-prompt --json QUERY`'s prefix_ids (BOS ...
  </tools>), one process per distinct tools set (the prefix depends on nothing else);
- turn_ids: the engine's turn is "\n{query}<|im_end|>\n<|im_start|>assistant\n" encoded without
  the dummy prefix. Special markers are atomic pieces, so it is the fixed head and tail around the
  query's own encoding; one `needle tokenize --no-dummy-prefix --batch` process encodes every
  query, head and tail are read off print-prompt's turn_ids, and every example that print-prompt
  rendered (one per tools set) is checked to equal head + query + tail (any mismatch is an error);
- target_ids: what the assistant should produce, "<tool_call>{calls JSON}</tool_call><|im_end|>"
  (compact JSON, as the engine's grammar writes calls: no whitespace, keys name then arguments;
  `[]` for a refusal), encoded the same way (the engine appends <|im_end|> itself after a call,
  so the last id only teaches the model to stop).
  Copy segmentation (default; `--plain-targets` turns it off): a string value that the query
  holds after a space is spelled with the query's own pieces instead of the tokenizer's
  segmentation of the JSON text. In the query a word is `▁Car ac as`, in `"city":"Caracas"` the
  tokenizer writes `C ar ac as`; the target uses `Car ac as` (the first piece without its `▁`
  when that piece exists, else the tokenizer's split of it, then the query's pieces), so the
  model learns a plain copy. The engine decodes freely, so any segmentation that spells the
  value is valid output; every target is checked to decode to the same text as the plain one.
  An enum value is spelled with its closing quote as `value"` encoded without the dummy prefix:
  that is the sequence the engine's enum grounding scores for each enum value the query names
  (PROTOCOL.md section 3), so the model learns the ids it will be asked about.

  python3 -m needle_torch.render --needle build/needle --model M.cact --data train.jsonl \
      --out train.ids.jsonl
"""
import argparse
import concurrent.futures
import json
import os
import struct
import subprocess
import sys
import tempfile

_TOKENIZER_HEADER = "<IIIIIBBH"
_SPACE = "\u2581"  # SentencePiece's word-start mark


def read_pieces(model):
    """The piece strings of the model's tokenizer (FORMAT.md "Tokenizer blob", the last tensor
    of the .cact, which ends the file), in id order, and their types."""
    with open(model, "rb") as handle:
        data = handle.read()
    header = struct.calcsize(_TOKENIZER_HEADER)
    # The blob is the file's tail; its size is not known up front, so try each start that
    # parses to exactly the end of the file (the header's piece count fixes the walk).
    for start in range(len(data) - header, max(-1, len(data) - (1 << 22)), -1):
        count = struct.unpack_from("<I", data, start)[0]
        if count != 8192 and not (256 < count < (1 << 20)):
            continue
        offset, pieces, types = start + header, [], []
        try:
            for _ in range(count):
                _, kind, size = struct.unpack_from("<fBH", data, offset)
                offset += 7
                pieces.append(data[offset:offset + size].decode("utf-8"))
                types.append(kind)
                offset += size
        except (struct.error, UnicodeDecodeError):
            continue
        if offset == len(data) and kind <= 4:
            return pieces, types
    raise ValueError(f"{model}: no tokenizer blob at the end of the file")


def decode_pieces(ids, pieces, types):
    """Text of ids from the piece table (▁ -> space, byte pieces as bytes), for checking."""
    out = bytearray()
    for i in ids:
        if types[i] == 4:
            out.append(int(pieces[i][3:5], 16))
        else:
            out += pieces[i].replace(_SPACE, " ").encode("utf-8")
    return out.decode("utf-8", errors="replace")


def target_text(expected):
    calls = json.dumps(expected, separators=(",", ":"), ensure_ascii=False)
    return "<tool_call>" + calls + "</tool_call><|im_end|>"


def _enum_keys(tools):
    """{tool name: keys whose schema has an enum} of a tools list."""
    keys = {}
    for tool in tools or []:
        properties = tool.get("parameters", {}).get("properties", {})
        keys[tool.get("name")] = {k for k, p in properties.items()
                                  if isinstance(p, dict) and "enum" in p}
    return keys


def _target_segments(expected, query, tools=None):
    """The target text cut into (text, kind) segments: "copy" for a free string value that the
    query holds after a space (spelled with the query's pieces), "enum" for an enum value with
    its closing quote (spelled as the engine's enum grounding feeds it: `value"` encoded
    without the dummy prefix), "" for the JSON around them."""
    segments, literal = [], ["<tool_call>["]
    enum_keys = _enum_keys(tools)

    def value(v, enum=False):
        if isinstance(v, str):
            quoted = json.dumps(v, ensure_ascii=False)
            if enum and v and quoted[1:-1] == v:
                literal.append('"')
                segments.append(("".join(literal), ""))
                literal.clear()
                segments.append((v + '"', "enum"))
                return
            if v and quoted[1:-1] == v and (" " + v) in (" " + query):
                literal.append('"')
                segments.append(("".join(literal), ""))
                literal.clear()
                segments.append((v, "copy"))
                literal.append('"')
                return
            literal.append(quoted)
        elif isinstance(v, dict):
            literal.append("{")
            for k, (key, item) in enumerate(v.items()):
                literal.append(("," if k else "") + json.dumps(key, ensure_ascii=False) + ":")
                value(item, enum=key in keys_of.get(id(v), ()))
            literal.append("}")
        elif isinstance(v, list):
            literal.append("[")
            for k, item in enumerate(v):
                literal.append("," if k else "")
                value(item)
            literal.append("]")
        else:
            literal.append(json.dumps(v, separators=(",", ":"), ensure_ascii=False))
    keys_of = {}  # id of an arguments object -> its enum keys
    for call in expected:
        if isinstance(call.get("arguments"), dict):
            keys_of[id(call["arguments"])] = enum_keys.get(call.get("name"), set())
    for k, call in enumerate(expected):
        literal.append("," if k else "")
        value(call)
    literal.append("]</tool_call><|im_end|>")
    segments.append(("".join(literal), ""))
    return [(text, kind) for text, kind in segments if text]


def copy_targets(needle, model, examples, pieces, types):
    """target_ids with copy segmentation (module doc) for every example."""
    plan = [_target_segments(e["expected"], e["query"], e.get("tools")) for e in examples]
    literals = sorted({t for segments in plan for t, kind in segments if kind != "copy"})
    values = sorted({t for segments in plan for t, kind in segments if kind == "copy"})
    literal_ids = dict(zip(literals, _tokenize_lines(needle, model, literals)))
    # Values as the query spells them: with the dummy prefix, i.e. after a space.
    value_ids = dict(zip(values, _tokenize_lines(needle, model, values, dummy_prefix=True)))
    index = {p: i for i, p in enumerate(pieces) if types[i] in (0, 3)}
    heads = sorted({pieces[ids[0]][1:] for ids in value_ids.values()
                    if pieces[ids[0]].startswith(_SPACE) and len(pieces[ids[0]]) > 1
                    and pieces[ids[0]][1:] not in index})
    head_ids = dict(zip(heads, _tokenize_lines(needle, model, heads)))
    copied = {}
    for text, ids in value_ids.items():
        first = pieces[ids[0]]
        if first == _SPACE:
            head = []
        elif first.startswith(_SPACE):
            rest = first[1:]
            head = [index[rest]] if rest in index else head_ids[rest]
        else:  # no word start (e.g. a value opening with a digit piece): nothing to drop
            head = None
        copied[text] = (head + ids[1:]) if head is not None else None
    result = []
    for e, segments in zip(examples, plan):
        ids = []
        for text, kind in segments:
            spelled = copied[text] if kind == "copy" else literal_ids[text]
            if spelled is None or decode_pieces(spelled, pieces, types) != text:
                spelled = _tokenize_lines(needle, model, [text])[0]
            ids += spelled
        result.append(ids)
    return result


def _tokenize_lines(needle, model, lines, dummy_prefix=False):
    if not lines:
        return []
    for line in lines:
        if "\n" in line or "\r" in line:
            raise ValueError(f"cannot batch-encode a text with a line break: {line!r}")
    command = [needle, "tokenize", model, "--batch"] + ([] if dummy_prefix else ["--no-dummy-prefix"])
    result = subprocess.run(command,
                            input="\n".join(lines) + "\n", capture_output=True, text=True,
                            check=True)
    rows = [json.loads(l) for l in result.stdout.splitlines() if l.strip()]
    if len(rows) != len(lines):
        raise RuntimeError(f"needle tokenize --batch: {len(rows)} rows for {len(lines)} lines")
    return rows


def _print_prompt(needle, model, tools_text, query, folder, index):
    path = os.path.join(folder, f"tools{index}.json")
    with open(path, "w", encoding="utf-8") as handle:
        handle.write(tools_text)
    result = subprocess.run([needle, "run", model, "--tools", path, "--print-prompt", "--json",
                             query], capture_output=True, text=True, check=True)
    return json.loads(result.stdout)


def render(needle, model, examples, workers=2, copy=True):
    """examples: list of dicts -> list of {"prefix_ids", "turn_ids", "target_ids"}; copy: the
    copy segmentation of string values in targets (module doc)."""
    tools_texts = [json.dumps(e["tools"], ensure_ascii=False) for e in examples]
    first_of_set = {}
    for i, text in enumerate(tools_texts):
        first_of_set.setdefault(text, i)
    prompts = {}
    with tempfile.TemporaryDirectory() as folder, \
            concurrent.futures.ThreadPoolExecutor(max_workers=workers) as pool:
        jobs = {text: pool.submit(_print_prompt, needle, model, text, examples[i]["query"],
                                  folder, i)
                for text, i in first_of_set.items()}
        for text, job in jobs.items():
            prompts[text] = job.result()
    queries = _tokenize_lines(needle, model, [e["query"] for e in examples])
    if copy:
        pieces, types = read_pieces(model)
        targets = copy_targets(needle, model, examples, pieces, types)
        for e, ids in zip(examples, targets):
            if decode_pieces(ids, pieces, types) != target_text(e["expected"]):
                raise RuntimeError(f"copy target of {e['query']!r} does not spell its calls")
    else:
        targets = _tokenize_lines(needle, model, [target_text(e["expected"]) for e in examples])

    # Head and tail of a turn around the query's ids, from one engine rendering.
    some_text, some_index = next(iter(first_of_set.items()))
    engine_turn, query_ids = prompts[some_text]["turn_ids"], queries[some_index]
    head_len = next((k for k in range(len(engine_turn) - len(query_ids) + 1)
                     if engine_turn[k:k + len(query_ids)] == query_ids), None)
    if head_len is None:
        raise RuntimeError("the query's ids do not occur in the engine's turn ids")
    head, tail = engine_turn[:head_len], engine_turn[head_len + len(query_ids):]
    for text, i in first_of_set.items():
        if head + queries[i] + tail != prompts[text]["turn_ids"]:
            raise RuntimeError(f"example {i}: turn ids differ from the engine's "
                               f"({examples[i]['query']!r}); cannot batch-encode turns")
    return [{"prefix_ids": prompts[tools_texts[i]]["prefix_ids"],
             "turn_ids": head + queries[i] + tail, "target_ids": targets[i]}
            for i in range(len(examples))]


def main(argv=None):
    parser = argparse.ArgumentParser(description="Token ids of a {tools, query, expected} JSONL "
                                                 "file, from the needle binary")
    parser.add_argument("--needle", required=True, help="path of the needle binary")
    parser.add_argument("--model", required=True, help=".cact whose tokenizer to use")
    parser.add_argument("--data", required=True, help="input JSONL")
    parser.add_argument("--out", required=True, help="output JSONL of ids, line by line")
    parser.add_argument("--workers", type=int, default=2, help="print-prompt processes at once")
    parser.add_argument("--plain-targets", action="store_true",
                        help="targets in the tokenizer's own segmentation (no copy segmentation)")
    args = parser.parse_args(argv)
    with open(args.data, encoding="utf-8") as handle:
        examples = [json.loads(l) for l in handle if l.strip()]
    rows = render(args.needle, args.model, examples, args.workers, copy=not args.plain_targets)
    with open(args.out, "w", encoding="utf-8") as handle:
        for row in rows:
            handle.write(json.dumps(row, separators=(",", ":")) + "\n")
    sets = len({json.dumps(e["tools"]) for e in examples})
    print(f"render: {len(rows)} examples, {sets} tools sets, "
          f"{sum(len(r['prefix_ids']) + len(r['turn_ids']) + len(r['target_ids']) for r in rows)} "
          f"ids -> {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
