#!/usr/bin/env python3
"""Copy segmentation of training targets (needle_torch/render.py), standard library only. Run by
CTest:

  render_test.py NEEDLE_BINARY MODEL.cact

- every copy-segmented target decodes (`needle detokenize`) to exactly the text of the plain
  target (`<tool_call>[calls JSON]</tool_call><|im_end|>`), so the engine reads the same calls;
- a free string value is spelled with the query's own pieces: its pieces after the first are
  those of the query, and the first is the query's word-start piece without its `▁` when the
  tokenizer has that piece (or the tokenizer's split of it);
- an enum value is spelled `value"` encoded without the dummy prefix (what enum grounding feeds);
- the module's piece table (read from the .cact) agrees with `needle tokenize --json`'s pieces;
- `--plain-targets` gives the tokenizer's own segmentation of the target text.
Exit 0 pass, 1 fail.
"""
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from needle_torch import dataset, render  # noqa: E402

SPACE = "\u2581"


def fail(message):
    print("FAIL: " + message)
    sys.exit(1)


def main(argv):
    if len(argv) != 3:
        print(__doc__)
        return 2
    needle, model = argv[1], argv[2]
    pieces, types = render.read_pieces(model)
    probe = subprocess.run([needle, "tokenize", model, "--json", "Text Caracas that I am late"],
                           capture_output=True, text=True, check=True)
    probe = json.loads(probe.stdout)
    if [pieces[i] for i in probe["ids"]] != probe["pieces"]:
        fail(f"piece table disagrees with needle tokenize: {probe}")

    examples = dataset.generate("train", 40, seed=5, tool_sets=3, synthetic=0.5, vocab_share=0.5)
    examples += dataset.generate("test", 40, seed=5)
    copied = render.render(needle, model, examples)
    plain = render.render(needle, model, examples, copy=False)
    changed = checked = enums = 0
    for e, c, p in zip(examples, copied, plain):
        text = render.target_text(e["expected"])
        if c["prefix_ids"] != p["prefix_ids"] or c["turn_ids"] != p["turn_ids"]:
            fail("copy segmentation changed the context ids")
        decoded = subprocess.run([needle, "detokenize", model, "--json"] +
                                 [str(i) for i in c["target_ids"]],
                                 capture_output=True, text=True, check=True)
        if json.loads(decoded.stdout) != text:
            fail(f"{e['query']!r}: copy target decodes to {decoded.stdout.strip()}, not {text!r}")
        if render.decode_pieces(p["target_ids"], pieces, types) != text:
            fail(f"{e['query']!r}: plain target does not spell {text!r}")
        changed += c["target_ids"] != p["target_ids"]
        target = [pieces[i] for i in c["target_ids"]]
        schemas = {t["name"]: t["parameters"]["properties"] for t in e["tools"]}
        for call in e["expected"]:
            for key, value in call["arguments"].items():
                if isinstance(value, str) and "enum" in schemas[call["name"]][key]:
                    grounding = subprocess.run(
                        [needle, "tokenize", model, "--json", "--no-dummy-prefix", value + '"'],
                        capture_output=True, text=True, check=True)
                    fed = json.loads(grounding.stdout)["pieces"]
                    if not any(target[k:k + len(fed)] == fed for k in range(len(target))):
                        fail(f"{e['query']!r}: enum {value!r} is not spelled {fed} (as enum "
                             f"grounding feeds it) in {target}")
                    enums += 1
                    continue
                if not isinstance(value, str) or (" " + value) not in (" " + e["query"]):
                    continue
                spelled = subprocess.run([needle, "tokenize", model, "--json", value],
                                         capture_output=True, text=True, check=True)
                query_pieces = json.loads(spelled.stdout)["pieces"]  # as after a space
                first = query_pieces[0]
                head = ([first[1:]] if first[1:] in pieces else None) if first != SPACE else []
                rest = query_pieces[1:]
                found = any(target[k:k + len(rest)] == rest and
                            (head is None or target[k - len(head):k] == head)
                            for k in range(1, len(target) - len(rest) + 1))
                if not found:
                    fail(f"{e['query']!r}: {value!r} is not spelled {head} + {rest} in {target}")
                checked += 1
    print(f"{len(examples)} targets decode to their calls; {changed} differ from the plain "
          f"segmentation; {checked} string values spelled with the query's pieces, {enums} enum "
          f"values as enum grounding feeds them")
    if changed == 0 or checked == 0 or enums == 0:
        fail("no target used the copy segmentation")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
