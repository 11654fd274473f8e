#!/usr/bin/env python3
"""Bytes a call copies, by the function that copied them, from the files `bench/copies.c`
writes (see there for how to build and run it):

    python3 bench/copies.py EXE CALLS A [B]

EXE is the binary that ran (its symbols name the callers), CALLS the number of calls the
run made (`callcost W N` makes 2 N). With one file it lists the run's copies made about
once a call or more (at least nine calls in ten); with two, what A copies beyond B,
largest first. The setup's copies do not count.
"""

import collections
import re
import subprocess
import sys


def load(path, exe, calls):
    """Bytes and copies a call, by function, of one run."""
    maps, records = [], []
    with open(path) as f:
        for line in f:
            kind, _, rest = line.partition(" ")
            if kind == "M":
                p = rest.split()
                lo, hi = (int(x, 16) for x in p[0].split("-"))
                maps.append((lo, hi, int(p[2], 16), p[5] if len(p) > 5 else ""))
            elif kind == "R":
                caller, size, count = rest.split()
                records.append((int(caller, 16), int(size), int(count)))
    # A return address in EXE, as the address its symbols use: its distance from where the
    # executable's first segment (file offset 0, address 0 for a position-independent
    # executable) was mapped. How the linker lays the later segments out does not matter.
    exe_name = exe.split("/")[-1]
    base = min((lo for lo, _, offset, mapped in maps
                if offset == 0 and mapped.split("/")[-1] == exe_name), default=0)
    located = []
    for caller, size, count in records:
        # Made at least nine times in ten calls: a copy of every call but the first
        # (a connection's) counts; the setup's do not.
        if count < 0.9 * calls:
            continue
        for lo, hi, _, mapped in maps:
            if lo <= caller < hi:
                ours = mapped.split("/")[-1] == exe_name
                located.append((caller - base if ours else caller, ours, mapped, size, count))
                break
    addresses = [hex(a) for a, ours, *_ in located if ours]
    out = subprocess.run(["addr2line", "-f", "-C", "-e", exe, *addresses],
                         capture_output=True, text=True, check=True).stdout
    symbols = iter(out.split("\n")[0::2])
    copied, copies = collections.Counter(), collections.Counter()
    for _, ours, mapped, size, count in located:
        name = next(symbols) if ours else mapped.split("/")[-1]
        name = re.sub(r"::h[0-9a-f]{16}", "", name)
        copied[name] += size * count / calls
        copies[name] += count / calls
    return copied, copies


def main():
    if len(sys.argv) not in (4, 5):
        sys.exit(__doc__)
    exe, calls = sys.argv[1], int(sys.argv[2])
    runs = [load(p, exe, calls) for p in sys.argv[3:]]
    for path, (copied, _) in zip(sys.argv[3:], runs):
        print(f"{path}: {sum(copied.values()):,.0f} bytes a call in copies")
    copied, copies = runs[0]
    if len(runs) == 2:
        base, base_copies = runs[1]
        names = set(copied) | set(base)
        copied = {k: copied.get(k, 0) - base.get(k, 0) for k in names}
        copies = {k: copies.get(k, 0) - base_copies.get(k, 0) for k in names}
        print(f"difference: {sum(copied.values()):+,.0f} bytes a call")
    for k in sorted(copied, key=lambda k: -copied[k])[:25]:
        if copied[k]:
            print(f"{copied[k]:+8,.0f} bytes {copies[k]:+5.1f} copies  {k}")


if __name__ == "__main__":
    main()
