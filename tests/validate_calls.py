#!/usr/bin/env python3
"""Validates generated tool calls against their tools' JSON schemas with an independent validator
(Debian's python3-jsonschema, Draft 7; draft-4 style boolean exclusiveMinimum/Maximum are rewritten
to their numeric form first; `pattern` with Python's re; the formats date, time, date-time,
email, uuid and ipv4 with the standard library). Input: TOOLS.json and CALLS.txt (one generated call array per line).
A line that is not JSON counts as malformed (the engine's `,}` quirk, a failed call, not an emitted
one). Prints one JSON summary; exit 1 when an emitted call fails its schema, 2 on bad input.
  validate_calls.py TOOLS.json CALLS.txt [--expect-invalid]
--expect-invalid: exit 0 only if some call fails (proves the validator catches what it checks)."""
import datetime
import ipaddress
import json
import re
import sys
import uuid

import jsonschema

# The formats needle's grammar enforces (grammar/pattern.h), checked here with the standard library
# (jsonschema checks some formats only with optional packages).
FORMATS = jsonschema.FormatChecker(formats=())


@FORMATS.checks("date", raises=ValueError)
def _date(s):
    return not isinstance(s, str) or bool(re.fullmatch(r"\d{4}-\d{2}-\d{2}", s)) and bool(
        datetime.date.fromisoformat(s))


def _rfc3339_time(s):
    m = re.fullmatch(r"(\d{2}):(\d{2}):(\d{2})(\.\d+)?([Zz]|[+-](\d{2}):(\d{2}))", s)
    if not m:
        return False
    h, mi, sec = int(m[1]), int(m[2]), int(m[3])
    ok = h <= 23 and mi <= 59 and sec <= 60
    return ok and (m[6] is None or (int(m[6]) <= 23 and int(m[7]) <= 59))


@FORMATS.checks("time")
def _time(s):
    return not isinstance(s, str) or _rfc3339_time(s)


@FORMATS.checks("date-time", raises=ValueError)
def _date_time(s):
    if not isinstance(s, str):
        return True
    if len(s) < 11 or s[10] not in "Tt":
        return False
    return _date(s[:10]) and _rfc3339_time(s[11:])


@FORMATS.checks("email")
def _email(s):
    return not isinstance(s, str) or (s.count("@") == 1 and not s.startswith("@") and
                                      not s.endswith("@") and not any(c.isspace() for c in s))


@FORMATS.checks("uuid", raises=ValueError)
def _uuid(s):
    return not isinstance(s, str) or (len(s) == 36 and s.count("-") == 4 and bool(uuid.UUID(s)))


@FORMATS.checks("ipv4", raises=ValueError)
def _ipv4(s):
    return not isinstance(s, str) or bool(ipaddress.IPv4Address(s))


def draft4_to_draft7(schema):
    if isinstance(schema, dict):
        out = {k: draft4_to_draft7(v) for k, v in schema.items()}
        for bound, excl in (("minimum", "exclusiveMinimum"), ("maximum", "exclusiveMaximum")):
            if out.get(excl) is True and bound in out:
                out[excl] = out.pop(bound)
            elif out.get(excl) is False:
                del out[excl]
        return out
    if isinstance(schema, list):
        return [draft4_to_draft7(v) for v in schema]
    return schema


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    expect_invalid = "--expect-invalid" in sys.argv
    if len(args) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    tools = {t["name"]: t for t in json.load(open(args[0]))}
    validators = {}
    for name, t in tools.items():
        schema = draft4_to_draft7(t.get("parameters", {"type": "object"}))
        schema.setdefault("additionalProperties", False)
        validators[name] = jsonschema.Draft7Validator(schema, format_checker=FORMATS)
    counts = {"calls": 0, "valid": 0, "invalid": 0, "malformed": 0}
    failures = []
    for line in open(args[1], encoding="utf-8"):
        line = line.rstrip("\n")
        if not line:
            continue
        try:
            calls = json.loads(line)
        except json.JSONDecodeError:
            counts["malformed"] += 1
            continue
        for call in calls:
            counts["calls"] += 1
            if set(call) != {"name", "arguments"} or call["name"] not in tools:
                counts["invalid"] += 1
                failures.append({"call": call, "error": "not a declared tool call"})
                continue
            errors = [e.message for e in validators[call["name"]].iter_errors(call["arguments"])]
            if errors:
                counts["invalid"] += 1
                failures.append({"call": call, "errors": errors})
            else:
                counts["valid"] += 1
    counts["first_failures"] = failures[:5]
    print(json.dumps(counts))
    if expect_invalid:
        return 0 if counts["invalid"] > 0 else 1
    return 1 if counts["invalid"] > 0 else 0


if __name__ == "__main__":
    sys.exit(main())
