#!/usr/bin/env python3
"""Load one CPU with a busy loop, the "other work" of a busy machine, for the benchmarks.

    python3 bench/load.py --cpu 1 &      # one core fully busy until stopped (kill %1)
    python3 bench/load.py --cpu 1 --seconds 600

The loop is pinned to the given CPU (`os.sched_setaffinity`, as `taskset -c 1` would) and runs at
normal priority: what a compile job or a browser tab does to the machine a tool runs on.
`bench/bundler.py --load-cpu 1` starts and stops it itself."""

from __future__ import annotations

import argparse
import os
import signal
import sys
import time


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cpu", type=int, default=1, help="CPU to keep busy (default 1)")
    ap.add_argument("--seconds", type=float, default=0, help="stop after this long (default: until killed)")
    args = ap.parse_args()
    os.sched_setaffinity(0, {args.cpu})
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    end = time.monotonic() + args.seconds if args.seconds > 0 else float("inf")
    n = 0
    while True:
        n += 1
        if n & 0xFFFFF == 0 and time.monotonic() > end:
            return 0


if __name__ == "__main__":
    sys.exit(main())
