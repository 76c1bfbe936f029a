#!/usr/bin/env python3
"""Writes the session-golden cases (JSONL for engine_session.mjs) and turns the engine's output
into tests/data/golden/session-v2/<model>.session.json (the format of tests/data/README.md,
golden/session).
  session_cases.py cases OUT.jsonl
  session_cases.py golden MODEL_NAME ENGINE_OUT.jsonl GOLDEN.json"""
import json
import os
import sys

TWO = [
    {"name": "set_timer", "description": "Start a countdown timer.", "parameters": {"type": "object", "properties": {"minutes": {"type": "integer", "description": "Duration in minutes."}}, "required": ["minutes"]}},
    {"name": "set_lights", "description": "Turn lights on or off in a room.", "parameters": {"type": "object", "properties": {"room": {"type": "string"}, "state": {"type": "string", "enum": ["on", "off"]}}, "required": ["room", "state"]}},
]
MORE = [
    {"name": "send_message", "description": "Send a text message to a contact.", "parameters": {"type": "object", "properties": {"recipient": {"type": "string"}, "body": {"type": "string"}, "urgent": {"type": "boolean"}}, "required": ["recipient", "body"]}},
    {"name": "set_thermostat", "description": "Set the thermostat.", "parameters": {"type": "object", "properties": {"temperature": {"type": "number", "minimum": 10, "maximum": 30}, "zones": {"type": "array", "items": {"type": "string"}}}, "required": ["temperature"]}},
    {"name": "get_weather", "description": "Get the current weather for a city.", "parameters": {"type": "object", "properties": {"city": {"type": "string"}, "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}}, "required": ["city"]}},
    {"name": "play_music", "description": "Play a song, artist or playlist.", "parameters": {"type": "object", "properties": {"query": {"type": "string"}, "shuffle": {"type": "boolean"}}, "required": ["query"]}},
    {"name": "set_alarm", "description": "Set an alarm at a time of day.", "parameters": {"type": "object", "properties": {"hour": {"type": "integer", "minimum": 0, "maximum": 23}, "minute": {"type": "integer", "minimum": 0, "maximum": 59}}, "required": ["hour", "minute"]}},
]
# Every value type in one tool set, keys from the fixture tools' text (the crafted models walk
# into those tokens): integer, number, boolean, string, string enum, integer enum, nullable,
# array, nested object, maxLength.
TYPES = [
    {"name": "set_alarm", "description": "Set an alarm at a time of day.", "parameters": {"type": "object", "properties": {"hour": {"type": "integer", "minimum": 0, "maximum": 23}, "minute": {"type": "integer", "enum": [0, 15, 30, 45]}, "urgent": {"type": "boolean"}, "room": {"type": "string", "maxLength": 8}}, "required": ["hour", "minute"]}},
    {"name": "send_message", "description": "Send a text message to a contact.", "parameters": {"type": "object", "properties": {"recipient": {"type": "string"}, "urgent": {"type": "boolean"}, "body": {"type": ["string", "null"]}, "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}, "temperature": {"type": "number"}, "zones": {"type": "array", "items": {"type": "string"}, "maxItems": 2}, "state": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}, "required": ["recipient", "urgent"]}},
]
QUERIES = ["Set a timer for 5 minutes.", "Turn on the kitchen light.",
           "Text Priya that I'm running 10 minutes late",
           "what's the weather in Lagos in fahrenheit? don't use celsius",
           'Héllo wörld — "quoted" \\ back', "Turn off the lights in the living room"]


def tools_text(tools):
    return json.dumps(tools)  # with spaces: the engine strips them outside strings


def cases():
    out = []
    add = lambda tools, mt, inputs, conv=False, system="": out.append(
        {"system": system, "tools": tools, "tools_text": tools_text(tools), "max_tokens": mt,
         "conversation": conv, "inputs": inputs})
    for mt in (40, 96, 160):  # fresh turns, budgets around the think reserve and branch floor
        add(TWO, mt, QUERIES[:3])
    for mt in (50, 54, 55, 56, 58):  # value-start rules near the 29-token branch floor
        add(TYPES, mt, QUERIES[2:4])
    add(TYPES, 96, QUERIES, system="You are a helpful assistant.")
    add(MORE[:2], 96, QUERIES[2:5], system="Be brief.")
    # conversations with tool results
    add(TWO, 96, ["Set a timer for 5 minutes.", '{"ok": true, "id": 7}', "Turn on the kitchen light.", "thanks"], True)
    add(TYPES, 96, [QUERIES[3], '[{"status":"sent"}]', QUERIES[5]], True)
    # more than 5 tools: retrieval
    add(TWO + MORE, 96, QUERIES[:4])
    add(TWO + MORE, 96, ["Turn on the kitchen light.", '{"status": "done"}', QUERIES[4]], True)
    # long turns: the tail is kept so prefix + turn + max_tokens <= 2048
    long_query = " ".join("timer %d kitchen lights" % i for i in range(600))
    add(TWO, 64, [long_query])
    add(TWO, 1800, ["weather " * 40 + "in Lagos"])
    add([], 96, ["Set a timer for 5 minutes."])  # zero tools
    return out


def parse_debug(lines):
    d = {"prefix_ids": None, "turn_ids": None, "debug_calls": None, "debug_think": None, "debug_text": None}
    for l in lines:
        for key, tag in (("prefix_ids", "[debug] prefix ids: "), ("turn_ids", "[debug] turn ids: ")):
            if l.startswith(tag):
                d[key] = [int(x) for x in l[len(tag):].split()]
        for key, tag in (("debug_calls", "[debug] calls: "), ("debug_think", "[debug] think: "), ("debug_text", "[debug] text : ")):
            if l.startswith(tag):
                d[key] = l[len(tag):]
    return d


def golden(model, engine_out, path):
    result = {"model": model + ".cact", "cases": []}
    for line in open(engine_out):
        c = json.loads(line)
        case = {k: c[k] for k in ("system", "tools", "tools_text", "max_tokens", "conversation")}
        case["prefix_ids"], case["steps"] = [], []
        for s in c["steps"]:
            d = parse_debug(s["debug"])
            if d["prefix_ids"] is not None:
                case["prefix_ids"].append(d["prefix_ids"])
            case["steps"].append({"input": s["input"], "returned": s["returned"],
                                  # text: an envelope may not be JSON ("temperature":010)
                                  "reply_text": s["reply_text"],
                                  "turn_ids": d["turn_ids"], "debug_calls": d["debug_calls"],
                                  "debug_think": d["debug_think"], "debug_text": d["debug_text"]})
        result["cases"].append(case)
    with open(path, "w") as f:
        json.dump(result, f, ensure_ascii=False, indent=1)


def heldout_cases(heldout, mt, path):
    """One fresh turn per line of a held-out set ({tools, query, expected} lines)."""
    with open(path, "w") as f:
        for line in open(heldout):
            r = json.loads(line)
            f.write(json.dumps({"system": "", "tools_text": tools_text(r["tools"]), "max_tokens": mt,
                                "conversation": False, "inputs": [r["query"]]}, ensure_ascii=False) + "\n")


def heldout_golden(model, heldout, mt, engine_out, path):
    """The engine's reply per held-out line; the tools and query stay in the held-out file."""
    replies = []
    for i, line in enumerate(open(engine_out)):
        s = json.loads(line)["steps"][0]
        d = parse_debug(s["debug"])
        replies.append({"line": i, "returned": s["returned"], "reply_text": s["reply_text"],
                        "debug_calls": d["debug_calls"], "debug_think": d["debug_think"]})
    result = {"model": model + ".cact", "heldout": os.path.basename(heldout), "max_tokens": mt,
              "replies": replies}
    with open(path, "w") as f:
        f.write(json.dumps(result, ensure_ascii=False, indent=None, separators=(",", ":")).replace(
            ',{"line"', ',\n{"line"') + "\n")


def conversation_cases(heldout, n, seed, path):
    """n conversations of three turns (a held-out query, a tool result, another held-out query)
    over the union of the two lines' tools in a shuffled order (often more than 5: retrieval),
    budgets 64-256."""
    import random
    rows = [json.loads(l) for l in open(heldout)]
    rnd = random.Random(seed)
    results = ['{"ok": true}', '[{"status":"sent"}]', '{"temperature": 21}']
    with open(path, "w") as f:
        for _ in range(n):
            a, b = rnd.sample(rows, 2)
            tools = list({t["name"]: t for t in a["tools"] + b["tools"]}.values())
            rnd.shuffle(tools)
            case = {"system": "", "tools_text": tools_text(tools), "max_tokens": rnd.choice([64, 96, 128, 256]),
                    "conversation": True, "inputs": [a["query"], rnd.choice(results), b["query"]],
                    "tool_names": [t["name"] for t in tools]}
            f.write(json.dumps(case, ensure_ascii=False) + "\n")


def conversation_golden(model, heldout, cases_path, engine_out, path):
    """The engine's replies per conversation; the tools are named (their schemas are in the
    held-out file)."""
    convs = []
    for c, line in zip(open(cases_path), open(engine_out)):
        c, e = json.loads(c), json.loads(line)
        replies = []
        for s in e["steps"]:
            d = parse_debug(s["debug"])
            replies.append({"returned": s["returned"], "reply_text": s["reply_text"],
                            "debug_calls": d["debug_calls"]})
        convs.append({"tools": c["tool_names"], "max_tokens": c["max_tokens"], "inputs": c["inputs"],
                      "replies": replies})
    result = {"model": model + ".cact", "heldout": os.path.basename(heldout), "conversations": convs}
    with open(path, "w") as f:
        f.write(json.dumps(result, ensure_ascii=False, separators=(",", ":")).replace(
            ',{"tools"', ',\n{"tools"') + "\n")


if __name__ == "__main__":
    if sys.argv[1] == "conversation-cases":
        conversation_cases(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5])
    elif sys.argv[1] == "conversation-golden":
        conversation_golden(sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5], sys.argv[6])
    elif sys.argv[1] == "short-budgets":  # FILE B1,B2,...: the cases' budgets in turn
        budgets = [int(b) for b in sys.argv[3].split(",")]
        rows = [json.loads(l) for l in open(sys.argv[2])]
        with open(sys.argv[2], "w") as f:
            for i, r in enumerate(rows):
                r["max_tokens"] = budgets[i % len(budgets)]
                f.write(json.dumps(r, ensure_ascii=False) + "\n")
    elif sys.argv[1] == "heldout-cases":
        heldout_cases(sys.argv[2], int(sys.argv[3]), sys.argv[4])
    elif sys.argv[1] == "heldout-golden":
        heldout_golden(sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5], sys.argv[6])
    elif sys.argv[1] == "cases":
        with open(sys.argv[2], "w") as f:
            for c in cases():
                f.write(json.dumps(c, ensure_ascii=False) + "\n")
    else:
        golden(sys.argv[2], sys.argv[3], sys.argv[4])
