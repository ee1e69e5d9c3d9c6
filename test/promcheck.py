#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""promcheck: a strict checker of the Prometheus text exposition format (0.0.4), for
test/metrics.bats: rlock's --metrics-file must be accepted by node_exporter's textfile
collector, and stricter: every sample's family has a TYPE before its samples, a family's
lines are contiguous, no series twice, label values escaped as the format says.

usage: promcheck.py FILE            check FILE; exit 0, or 1 with one line per error
       promcheck.py --loop FILE STOP READY
                                    read FILE again and again until STOP exists (at
                                    most 120 s), checking every read; READY is created
                                    after the first one: exit 1 at the first read that
                                    fails (a partial file), else 0 and the number of
                                    reads on stdout
"""
import os
import re
import sys
import time

NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")
LABEL = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")
TYPES = {"counter", "gauge", "histogram", "summary", "untyped"}
SUFFIXES = ("_bucket", "_count", "_sum")


def parse_value(text):
    if text in ("NaN", "+Inf", "-Inf", "Inf"):
        return float(text.replace("Inf", "inf"))
    if not re.fullmatch(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?", text):
        raise ValueError("bad value %r" % text)
    return float(text)


def parse_labels(s, i):
    """s[i] is just after '{': (sorted label pairs, index after '}')."""
    labels = []
    while True:
        if s[i:i + 1] == "}":
            return labels, i + 1
        m = LABEL.match(s, i)
        if not m:
            raise ValueError("bad label name at %r" % s[i:])
        name = m.group(0)
        if name.startswith("__"):
            raise ValueError("reserved label name %r" % name)
        i = m.end()
        if s[i:i + 2] != '="':
            raise ValueError("expected =\" after label %r" % name)
        i += 2
        value = []
        while True:
            if i >= len(s):
                raise ValueError("unterminated label value")
            c = s[i]
            if c == "\\":
                nxt = s[i + 1:i + 2]
                if nxt not in ("\\", '"', "n"):
                    raise ValueError("bad escape \\%s in a label value" % nxt)
                value.append("\n" if nxt == "n" else nxt)
                i += 2
            elif c == '"':
                i += 1
                break
            elif c == "\n":
                raise ValueError("raw newline in a label value")
            else:
                value.append(c)
                i += 1
        if name in (n for n, _ in labels):
            raise ValueError("label %r twice" % name)
        labels.append((name, "".join(value)))
        if s[i:i + 1] == ",":
            i += 1
        elif s[i:i + 1] != "}":
            raise ValueError("expected , or } after a label value")


def family_of(name, types):
    if name in types:
        return name
    for suf in SUFFIXES:
        base = name[: -len(suf)]
        if name.endswith(suf) and types.get(base) in ("histogram", "summary"):
            return base
    return name


def check(text):
    errors = []
    if text and not text.endswith("\n"):
        errors.append("the file does not end with a newline (cut short?)")
    types, helps, seen, done = {}, set(), set(), set()
    current = None
    for n, line in enumerate(text.split("\n")[:-1] if text else [], 1):
        try:
            if not line.strip():
                continue
            if line.startswith("#"):
                parts = line.split(None, 3)
                if len(parts) >= 3 and parts[1] in ("HELP", "TYPE"):
                    fam = parts[2]
                    if not NAME.fullmatch(fam):
                        raise ValueError("bad metric name %r" % fam)
                    if fam in done and fam != current:
                        raise ValueError("%s: lines not together" % fam)
                    if parts[1] == "TYPE":
                        if fam in types:
                            raise ValueError("%s: TYPE twice" % fam)
                        if (fam, "s") in seen:
                            raise ValueError("%s: TYPE after its samples" % fam)
                        if len(parts) != 4 or parts[3] not in TYPES:
                            raise ValueError("%s: bad TYPE" % fam)
                        types[fam] = parts[3]
                    else:
                        if fam in helps:
                            raise ValueError("%s: HELP twice" % fam)
                        helps.add(fam)
                        if re.search(r"\\[^\\n]", parts[3] if len(parts) > 3 else ""):
                            raise ValueError("%s: bad escape in HELP" % fam)
                    if current is not None and current != fam:
                        done.add(current)
                    current = fam
                continue
            m = NAME.match(line)
            if not m:
                raise ValueError("bad metric name")
            name, i = m.group(0), m.end()
            labels = []
            if line[i:i + 1] == "{":
                labels, i = parse_labels(line, i + 1)
            rest = line[i:]
            if not rest.startswith(" "):
                raise ValueError("expected a space before the value")
            fields = rest.split()
            if len(fields) not in (1, 2):
                raise ValueError("expected a value and an optional timestamp")
            parse_value(fields[0])
            if len(fields) == 2 and not re.fullmatch(r"-?\d+", fields[1]):
                raise ValueError("bad timestamp %r" % fields[1])
            fam = family_of(name, types)
            if fam not in types:
                raise ValueError("%s: a sample without a TYPE" % name)
            if fam in done or (current is not None and current != fam):
                raise ValueError("%s: lines not together" % fam)
            current = fam
            series = (name, tuple(sorted(labels)))
            if series in seen:
                raise ValueError("duplicate series %s%s" % (name, dict(labels)))
            seen.add(series)
            seen.add((fam, "s"))
            if types[fam] == "counter" and float(fields[0]) < 0:
                raise ValueError("%s: a negative counter" % name)
        except ValueError as e:
            errors.append("line %d: %s: %s" % (n, e, line))
    if not [s for s in seen if s[1] != "s"]:
        errors.append("no samples")
    return errors


def main(argv):
    if len(argv) == 2:
        with open(argv[1], encoding="utf-8") as f:
            errors = check(f.read())
        for e in errors:
            print("promcheck: %s: %s" % (argv[1], e), file=sys.stderr)
        return 1 if errors else 0
    if len(argv) == 5 and argv[1] == "--loop":
        reads, end = 0, time.monotonic() + 120
        while not os.path.exists(argv[3]) and time.monotonic() < end:
            try:
                with open(argv[2], encoding="utf-8") as f:
                    text = f.read()
            except FileNotFoundError:
                continue
            errors = check(text)
            if errors:
                print("promcheck: read %d: %s" % (reads + 1, errors[0]), file=sys.stderr)
                return 1
            reads += 1
            if reads == 1:
                open(argv[4], "w").close()
        print(reads)
        return 0
    print(__doc__, file=sys.stderr)
    return 64


if __name__ == "__main__":
    sys.exit(main(sys.argv))
