#!/usr/bin/env python3
"""The synthetic dataset (needle_torch/dataset.py), standard library only. Run by CTest:

  dataset_test.py NEEDLE_BINARY MODEL.cact

- deterministic: the same split and seed give the same lines, another seed other lines;
- every expected call names an offered tool, with every required argument and only schema keys;
  string and integer values that are not schema enums occur in the query;
- the mix: single calls, multi-call queries and refusals (`[]`) are all present;
- disjoint pools: no free string value of the test split occurs as a value in the train split
  (which here has 60% made-up values, --synthetic 0.6: most of its strings are in no pool, and
  a part made with --vocab-words 0.6, whose word pieces include no one-word test value);
- --dict-words: made-up values of real words from the system word list (Debian wamerican),
  none a word of a test value;
- `needle eval` reads the lines without a line error.
Exit 0 pass, 1 fail.
"""
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from needle_torch import dataset  # noqa: E402


def fail(message):
    print("FAIL: " + message)
    sys.exit(1)


def free_values(example):
    """(tool, key, value) of every argument whose schema has no enum."""
    tools = {t["name"]: t for t in example["tools"]}
    for call in example["expected"]:
        properties = tools[call["name"]]["parameters"]["properties"]
        for key, value in call["arguments"].items():
            if "enum" not in properties[key]:
                yield call["name"], key, value


def main(argv):
    if len(argv) != 3:
        print(__doc__)
        return 2
    needle, model_path = argv[1], argv[2]
    train = dataset.generate("train", 3000, seed=1, tool_sets=50, synthetic=0.6)
    test = dataset.generate("test", 600, seed=2)
    if train != dataset.generate("train", 3000, seed=1, tool_sets=50, synthetic=0.6):
        fail("the same seed gave other examples")
    if train[:50] == dataset.generate("train", 50, seed=9, tool_sets=50, synthetic=0.6):
        fail("another seed gave the same examples")

    # --vocab-words: made-up values from the tokenizer's word pieces, none a one-word test value
    vocab_train = dataset.generate("train", 2000, seed=3, tool_sets=50, synthetic=0.8,
                                   vocab_share=0.6, all_minutes=True, max_words=8,
                                   wide_numbers=0.5)
    if vocab_train != dataset.generate("train", 2000, seed=3, tool_sets=50, synthetic=0.8,
                                       vocab_share=0.6, all_minutes=True, max_words=8,
                                       wide_numbers=0.5):
        fail("--vocab-words: the same seed gave other examples")
    test_words = {v.lower() for pool in (dataset.CITIES, dataset.NAMES, dataset.SONGS,
                                         dataset.MESSAGES, dataset.EVENT_TITLES, dataset.PHRASES,
                                         dataset.SEARCHES, dataset.ROOMS, dataset.ITEMS)
                  for v in pool[1] if " " not in v}  # one-word test values
    vocab_words = dataset._vocab_words()
    if len(vocab_words) < 1000 or test_words & {w.lower() for w in vocab_words}:
        fail(f"{len(vocab_words)} vocab words, test words among them: "
             f"{sorted(test_words & {w.lower() for w in vocab_words})[:5]}")
    used = {w for e in vocab_train for _, _, v in free_values(e) if isinstance(v, str)
            for w in v.split()} & set(vocab_words)
    print(f"--vocab-words 0.6: {len(vocab_words)} word pieces, {len(used)} used in 2000 examples")
    minutes = {v.split(":")[1] for e in vocab_train for c in e["expected"]
               for k, v in c["arguments"].items() if k == "time"}
    print(f"--all-minutes: {len(minutes)} minutes in train clock times")
    if len(minutes) < 40:
        fail("--all-minutes: too few minutes")
    longest = max(len(v.split()) for e in vocab_train for _, _, v in free_values(e)
                  if isinstance(v, str))
    print(f"--max-words 8: longest made-up value {longest} words")
    endings = {v % 100 for e in vocab_train for _, _, v in free_values(e)
               if isinstance(v, int) and v >= 10}
    test_endings = {v % 100 for e in dataset.generate("test", 600, seed=2)
                    for _, _, v in free_values(e) if isinstance(v, int) and v >= 10}
    print(f"--wide-numbers 0.5: {len(test_endings & endings)} of the test integers' "
          f"{len(test_endings)} final digit pairs occur in train")
    if len(test_endings & endings) < len(test_endings) // 2:
        fail("--wide-numbers: the test integers' final digit pairs do not occur in train")
    if longest != 8:
        fail("--max-words 8: no 8-word value")
    if len(used) < 500:
        fail("--vocab-words used too few word pieces")
    refusing = dataset.generate("train", 2000, seed=4, tool_sets=50, synthetic=0.8,
                                refusals=0.3)
    share = sum(not e["expected"] for e in refusing) / len(refusing)
    print(f"--refusals 0.3: {100 * share:.1f}% no-call examples")
    if not 0.26 < share < 0.34:
        fail("--refusals 0.3 does not give ~30% no-call examples")
    vocab_train += refusing
    train_single = train
    train = train + vocab_train

    counts = {"refusal": 0, "single": 0, "multi": 0}
    for example in train + test:
        tools = {t["name"]: t for t in example["tools"]}
        if not 2 <= len(tools) <= 5:
            fail(f"{len(tools)} tools offered: {example['query']}")
        for call in example["expected"]:
            if call["name"] not in tools:
                fail(f"{call['name']} is not offered: {example['query']}")
            schema = tools[call["name"]]["parameters"]
            missing = set(schema["required"]) - set(call["arguments"])
            extra = set(call["arguments"]) - set(schema["properties"])
            if missing or extra:
                fail(f"{example['query']}: missing {missing}, extra {extra}")
        for _, _, value in free_values(example):
            if str(value) not in example["query"]:
                fail(f"{value!r} does not occur in {example['query']!r}")
        calls = len(example["expected"])
        counts["refusal" if calls == 0 else "single" if calls == 1 else "multi"] += 1
    print(f"train {len(train)} + test {len(test)} examples: {counts}")
    if min(counts.values()) < 100:
        fail("a kind of example is (almost) missing")

    train_strings = {v for e in train for _, _, v in free_values(e) if isinstance(v, str)}
    train_numbers = {(t, k, v) for e in train for t, k, v in free_values(e)
                     if not isinstance(v, str)}
    test_strings = {v for e in test for _, _, v in free_values(e) if isinstance(v, str)}
    shared = test_strings & train_strings
    shared_numbers = {(t, k, v) for e in test for t, k, v in free_values(e)
                      if not isinstance(v, str)} & train_numbers
    print(f"free string values: {len(train_strings)} train, {len(test_strings)} test, "
          f"{len(shared)} shared; shared numbers {len(shared_numbers)}")
    if shared or shared_numbers:
        fail(f"test values seen in training: {sorted(shared)[:5]} {sorted(shared_numbers)[:5]}")
    pooled = {v for pool in (dataset.CITIES, dataset.NAMES, dataset.SONGS, dataset.MESSAGES,
                             dataset.EVENT_TITLES, dataset.PHRASES, dataset.SEARCHES,
                             dataset.ROOMS, dataset.ITEMS) for v in pool[0]}
    made_up = {v for e in train_single for _, _, v in free_values(e)
               if isinstance(v, str)} - pooled
    print(f"made-up train string values (--synthetic 0.6): {len(made_up)}")
    if len(made_up) < len({v for e in train_single for _, _, v in free_values(e)
                           if isinstance(v, str)}) // 2:
        fail("--synthetic made up too few values")

    # --long-units: both units of a conversion are spelled in the query with 3+ characters (the
    # engine's enum grounding), and nothing but unit words changes.
    conversions = 0
    for e in test:
        long = dataset.long_units(e)
        back = long["query"].replace("kilometers", "km").replace("kilograms", "kg")
        if back != e["query"]:
            fail(f"--long-units changed more than unit words: {e['query']!r}")
        for c in long["expected"]:
            if c["name"] != "convert_units":
                continue
            conversions += 1
            for key in ("from_unit", "to_unit"):
                unit = c["arguments"][key]
                if len(unit) < 3 or unit not in long["query"].lower():
                    fail(f"--long-units: {key} {unit!r} not grounded in {long['query']!r}")
    if conversions < 10:
        fail(f"--long-units: only {conversions} conversions in the test split")
    trigger = dataset.generate("train", 400, seed=5, synthetic=1.0, max_words=8,
                               trigger_words=0.3)
    trigger_hits = sum(w in dataset._TRIGGER_WORDS for e in trigger for c in e["expected"]
                       for v in c["arguments"].values() if isinstance(v, str)
                       for w in v.split())
    print(f"--trigger-words 0.3: {trigger_hits} trigger words inside made-up values")
    if trigger_hits < 50:
        fail("--trigger-words put too few query words into made-up values")

    # --dict-words: made-up values of real dictionary words, none a word of any test value
    # (free texts also mix in the train pools' words, which may be words of longer test values)
    common, proper = dataset._dict_words()
    dictionary = set(common) | set(proper)
    test_words = {w for v in dataset._TEST_VALUES for w in v.split()}
    dict_train = dataset.generate("train", 1000, seed=6, tool_sets=20, synthetic=1.0,
                                  dict_share=1.0, max_words=6)
    if dict_train != dataset.generate("train", 1000, seed=6, tool_sets=20, synthetic=1.0,
                                      dict_share=1.0, max_words=6):
        fail("--dict-words: the same seed gave other examples")
    used = set()
    for e in dict_train:
        for _, _, value in free_values(e):
            if not isinstance(value, str) or ":" in value:
                continue  # integers and clock times are not made up
            for w in value.split():
                if w.lower() in test_words and w.lower() not in dataset._TRAIN_WORDS:
                    fail(f"--dict-words: test word {w!r} in the train value {value!r}")
                if w in dictionary or w.lower() in dictionary:
                    used.add(w.lower())
                elif w.lower() not in dataset._TRAIN_WORDS and w != "room":
                    fail(f"--dict-words: {w!r} of {value!r} is from no dictionary or pool")
    print(f"--dict-words 1.0: {len(used)} distinct dictionary words in the values")
    if len(used) < 1000:
        fail("--dict-words drew too few dictionary words")

    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "heldout.jsonl")
        with open(path, "w", encoding="utf-8") as handle:
            for example in test[:6]:
                handle.write(json.dumps(example) + "\n")
        result = subprocess.run([needle, "eval", model_path, path, "-n", "8", "--json"],
                                capture_output=True, text=True)
        if result.returncode != 0:
            fail(f"needle eval: exit {result.returncode}: {result.stderr}")
        report = json.loads(result.stdout)
        print(f"needle eval: {report['lines']} lines, {report['errors']} line errors")
        if report["lines"] != 6 or report["errors"] != 0:
            fail("needle eval did not read every line")
    print("pass")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
