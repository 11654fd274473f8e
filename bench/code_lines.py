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

    python3 bench/code_lines.py --layout target/release/callcost baton.cg 4000 baton

With `--layout BINARY RUN CALLS [NAME]` it asks how much of those lines is layout: for each
function of BINARY whose name holds NAME (every function without it) and that a call runs,
the lines it touches and its hot bytes (the machine code of the instructions that ran about
once a call or more, sized by `objdump`), as lines if those bytes were packed together. The
difference is the most that laying the code out differently (rare branches out of line,
hot functions side by side) could save without running less of it.
"""

import collections
import re
import subprocess
import sys


def position(token, previous):
    """An address of callgrind's compressed output: absolute, relative, or the same."""
    if token == "*":
        return previous
    if token[0] in "+-":
        return previous + int(token, 0)
    return int(token, 0)


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


def hot_bytes(path, calls):
    """Instruction addresses of one run with the instructions each ran, summed over contexts."""
    ran = collections.Counter()
    addr, skip = 0, False
    with open(path) as f:
        for raw in f:
            if raw.startswith("calls="):
                skip = True
            elif raw[:1].isdigit() or raw[:1] in ("+", "-", "*"):
                fields = raw.split()
                addr = position(fields[0], addr)
                if skip:
                    skip = False
                    continue
                ran[addr] += int(fields[-1]) if len(fields) > 2 else 0
    return {a for a, n in ran.items() if n >= calls}


def layout(binary, path, calls, pattern):
    """Per function of `binary` that a call runs: lines touched, hot bytes, packed lines."""
    hot = hot_bytes(path, calls)
    symbols = subprocess.run(
        ["nm", "-C", "-S", "--defined-only", binary], capture_output=True, text=True, check=True
    ).stdout
    rows = []
    for line in symbols.splitlines():
        parts = line.split(None, 3)
        if len(parts) != 4 or parts[2] not in "tTwW" or pattern not in parts[3]:
            continue
        start, size = int(parts[0], 16), int(parts[1], 16)
        if not size or not any(a in hot for a in range(start, start + size)):
            continue
        listing = subprocess.run(
            ["objdump", "-d", "--no-show-raw-insn", f"--start-address={start}",
             f"--stop-address={start + size}", binary],
            capture_output=True, text=True, check=True,
        ).stdout
        starts = [int(m.group(1), 16) for m in re.finditer(r"^\s*([0-9a-f]+):\s", listing, re.M)]
        ends = starts[1:] + [start + size]
        ran = [(a, e - a) for a, e in zip(starts, ends) if a in hot]
        rows.append((len({a >> 6 for a, _ in ran}), sum(n for _, n in ran), parts[3]))
    rows.sort(key=lambda r: (-r[0], r[2]))
    touched, packed = sum(r[0] for r in rows), sum(r[1] for r in rows) / 64
    print(f"{len(rows)} functions: {touched} lines a call, {packed:.0f} if packed")
    for n, b, name in rows[:30]:
        print(f"{n:5d} lines {b / 64:7.1f} packed  {name[:120]}")


def main():
    if len(sys.argv) in (5, 6) and sys.argv[1] == "--layout":
        pattern = sys.argv[5] if len(sys.argv) == 6 else ""
        layout(sys.argv[2], sys.argv[3], int(sys.argv[4]), pattern)
        return
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
