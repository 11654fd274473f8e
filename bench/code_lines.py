#!/usr/bin/env python3
"""The code a call runs, as 64-byte cache lines, read from callgrind's instruction-level
output: a deterministic stand-in for the instruction-cache misses a call costs when its
code does not stay in the cache between calls (the client's, the runtime's and the
provider's code together are far larger than a 32 KB L1 instruction cache, so every
line a call runs is, roughly, one miss a call).

    valgrind --tool=callgrind --dump-instr=yes --callgrind-out-file=baton.cg \
        target/release/callcost baton 2000
    valgrind --tool=callgrind --dump-instr=yes --callgrind-out-file=raw.cg \
        target/release/callcost raw 2000
    python3 bench/code_lines.py baton.cg raw.cg 4000

CALLS is the number of calls the run made (`callcost W N` makes 2 N: a warm-up round and
a timed one). A line counts when its instructions ran at least CALLS times in all, that is
about once a call or more; code of the setup and of rare paths does not count. With one
file it prints that run's lines and instructions a call; with two, both and the functions
that account for the difference, largest first.
"""

import collections
import re
import sys


def load(path, calls):
    """Lines (address >> 6) run per function, and instructions per function, of one run."""
    names = {}
    lines = collections.defaultdict(set)
    instructions = collections.Counter()
    fn, addr, skip = None, 0, False

    def name(value, kind):
        m = re.match(r"\((\d+)\)(?: (.*))?", value)
        if not m:
            return value
        key = (kind, m.group(1))
        if m.group(2):
            names[key] = m.group(2)
        return names.get(key, value)

    def position(token, previous):
        if token == "*":
            return previous
        if token[0] in "+-":
            return previous + int(token, 0)
        return int(token, 0)

    with open(path) as f:
        for raw in f:
            raw = raw.rstrip("\n")
            if not raw:
                continue
            if raw.startswith("fn="):
                fn = name(raw[3:], "fn")
            elif raw.startswith("cfn="):
                name(raw[4:], "fn")
            elif raw.startswith("calls="):
                # The next cost line is the call's inclusive cost, not this function's.
                skip = True
            elif raw[0].isdigit() or raw[0] in "+-*":
                fields = raw.split()
                addr = position(fields[0], addr)
                if skip:
                    skip = False
                    continue
                ir = int(fields[-1]) if len(fields) > 2 else 0
                if ir >= calls:
                    lines[fn].add(addr >> 6)
                    instructions[fn] += ir
    return lines, instructions


def total(lines):
    return len(set().union(*lines.values())) if lines else 0


def main():
    if len(sys.argv) not in (3, 4):
        sys.exit(__doc__)
    calls = int(sys.argv[-1])
    runs = [load(p, calls) for p in sys.argv[1:-1]]
    for path, (lines, instructions) in zip(sys.argv[1:-1], runs):
        per_call = sum(instructions.values()) / calls
        print(f"{path}: {total(lines)} lines a call, {per_call:,.0f} instructions a call")
    if len(runs) == 2:
        (la, ia), (lb, ib) = runs
        names = set(la) | set(lb)
        diff = {k: len(la.get(k, ())) - len(lb.get(k, ())) for k in names}
        print(f"difference: {total(la) - total(lb):+d} lines a call")
        for k in sorted(names, key=lambda k: -diff[k])[:30]:
            extra = (ia[k] - ib[k]) / calls
            print(f"{diff[k]:+5d} lines {extra:+8.0f} instructions  {k}")


if __name__ == "__main__":
    main()
