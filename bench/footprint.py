#!/usr/bin/env python3
"""The cache lines one call of a function touches: code (64-byte lines of instructions run)
and data (64-byte lines read or written), from valgrind's lackey memory trace.

Between network reads a call's lines leave the caches, so each line it touches is about
one miss a call (`callcost parts` measures what that costs); this counts them exactly,
data included, where `code_lines.py` counts code only. The engine's healthy call:

    cargo build --release -p baton-core --example healthy_calls
    valgrind --tool=lackey --trace-mem=yes --log-file=calls.trace \
        target/release/examples/healthy_calls 3
    python3 bench/footprint.py calls.trace target/release/examples/healthy_calls \
        'healthy_calls::common::healthy_call'

The call is the trace between the last two entries to the function named (its symbol as
`nm -C` prints it); the binary is a position-independent executable, which valgrind loads
at 0x108000 (pass another base as a fourth argument). It prints the code and data lines of
that call, then each function's code lines and instructions, most lines first.
"""

import bisect
import collections
import subprocess
import sys


def symbols(binary, base):
    """Sorted (start, size, name) of the binary's functions, at their loaded addresses."""
    out = subprocess.run(
        ["nm", "-C", "-S", "--defined-only", binary], capture_output=True, text=True, check=True
    ).stdout
    syms = []
    for line in out.splitlines():
        parts = line.split(" ", 3)
        if len(parts) == 4 and parts[2] in ("t", "T", "w", "W"):
            syms.append((int(parts[0], 16) + base, int(parts[1], 16), parts[3]))
    return sorted(syms)


def one_call(trace, entry):
    """The (kind, address) accesses from the last but one entry to `entry` to the last."""
    accesses, starts = [], []
    with open(trace) as f:
        for line in f:
            kind = line[:2].strip()
            if kind not in ("I", "L", "S", "M"):
                continue
            try:
                addr = int(line[3:].split(",")[0], 16)
            except ValueError:
                continue
            if kind == "I" and addr == entry:
                starts.append(len(accesses))
            accesses.append((kind, addr))
    if len(starts) < 2:
        sys.exit(f"footprint: the function was entered {len(starts)} times; it needs two")
    return accesses[starts[-2] : starts[-1]]


def main():
    if len(sys.argv) not in (4, 5):
        sys.exit(__doc__)
    trace, binary, function = sys.argv[1:4]
    base = int(sys.argv[4], 16) if len(sys.argv) == 5 else 0x108000
    syms = symbols(binary, base)
    entries = [s for s in syms if s[2] == function]
    if not entries:
        sys.exit(f"footprint: no function named {function!r} in {binary}")
    call = one_call(trace, entries[0][0])
    starts = [s[0] for s in syms]

    def owner(addr):
        i = bisect.bisect_right(starts, addr) - 1
        if i >= 0 and addr < syms[i][0] + max(syms[i][1], 1):
            return syms[i][2]
        return "(outside the binary)"

    code = collections.defaultdict(set)
    instructions = collections.Counter()
    data = set()
    for kind, addr in call:
        if kind == "I":
            name = owner(addr)
            code[name].add(addr >> 6)
            instructions[name] += 1
        else:
            data.add(addr >> 6)
    lines = set().union(*code.values())
    print(
        f"one call: {sum(instructions.values())} instructions, "
        f"{len(lines)} code lines, {len(data)} data lines"
    )
    for name, held in sorted(code.items(), key=lambda kv: -len(kv[1])):
        print(f"{len(held):5d} lines {instructions[name]:6d} instructions  {name[:120]}")


if __name__ == "__main__":
    main()
