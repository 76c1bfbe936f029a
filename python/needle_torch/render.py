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

  python3 -m needle_torch.render --needle build/needle --model M.cact --data train.jsonl \
      --out train.ids.jsonl
"""
import argparse
import concurrent.futures
import json
import os
import subprocess
import sys
import tempfile


def target_text(expected):
    calls = json.dumps(expected, separators=(",", ":"), ensure_ascii=False)
    return "<tool_call>" + calls + "</tool_call><|im_end|>"


def _tokenize_lines(needle, model, lines):
    for line in lines:
        if "\n" in line or "\r" in line:
            raise ValueError(f"cannot batch-encode a text with a line break: {line!r}")
    result = subprocess.run([needle, "tokenize", model, "--no-dummy-prefix", "--batch"],
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


def render(needle, model, examples, workers=2):
    """examples: list of dicts -> list of {"prefix_ids", "turn_ids", "target_ids"}."""
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
    args = parser.parse_args(argv)
    with open(args.data, encoding="utf-8") as handle:
        examples = [json.loads(l) for l in handle if l.strip()]
    rows = render(args.needle, args.model, examples, args.workers)
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
