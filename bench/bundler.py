#!/usr/bin/env python3
"""Benchmark: offload-bundler (our CLI, `python -m offload_tool.cli.bundler`, one subprocess per operation)
against clang-offload-bundler-19, in one run.

Rows: bundle, unbundle and list of 3 inputs of --size-mib MiB each (binary bundle, 3 targets),
compress (bundle -compress at the default level) and decompress (unbundle of that), and unbundling
an archive of --members bundled members with 4 targets each (`-type=a`). For each side it prints
wall time and peak memory (max RSS of the child, from the kernel's rusage of that child via
`os.wait4`, the per-child form of `getrusage(RUSAGE_CHILDREN)`), and the ratio ours/LLVM.
Both sides run as subprocesses, so start-up costs count on both. Each row runs each side
--repeat times (default 3), alternating, and prints the medians. Outputs are checked equal.

    python3 bench/bundler.py                 # 3 x 256 MiB, 1000 members (a few minutes on 2 cores)
    python3 bench/bundler.py --size-mib 32   # quicker
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TARGETS = ["host-x86_64-unknown-linux-gnu", "hip-amdgcn-amd-amdhsa--gfx906", "hip-amdgcn-amd-amdhsa--gfx90a"]
ARCHIVE_TARGETS = ["hip-amdgcn-amd-amdhsa--gfx900", "hip-amdgcn-amd-amdhsa--gfx906", "hip-amdgcn-amd-amdhsa--gfx908",
                   "hip-amdgcn-amd-amdhsa--gfx90a"]


def make_input(path: str, size_mib: int, seed: int) -> None:
    """Code-object-like data that zstd compresses about 4-5x: per MiB, runs copied from a 256 KiB
    pool of "instructions" (LZ matches) interleaved with fresh random bytes (literals)."""
    rng = random.Random(seed)
    pool = rng.randbytes(256 << 10)
    with open(path, "wb") as f:
        for _ in range(size_mib):
            parts, n = [], 0
            while n < (1 << 20):
                start, length = rng.randrange(0, len(pool) - 4096), rng.randrange(64, 1024)
                parts.append(pool[start:start + length])
                parts.append(rng.randbytes(rng.randrange(8, 48)))
                n += len(parts[-1]) + length
            f.write(b"".join(parts)[:1 << 20])


def measure(cmd: list[str], cwd: str, env: dict) -> tuple[float, float, subprocess.CompletedProcess | None]:
    """(wall seconds, peak RSS MiB) of one child process."""
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    out = proc.stdout.read()
    err = proc.stderr.read()
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise SystemExit(f"command failed ({proc.returncode}): {' '.join(cmd)}\n{err.decode(errors='replace')}")
    return wall, usage.ru_maxrss / 1024.0, out


def files_equal(a: str, b: str) -> bool:
    if os.path.getsize(a) != os.path.getsize(b):
        return False
    with open(a, "rb") as fa, open(b, "rb") as fb:
        while True:
            # Small reads keep this process's peak RSS low: a child started with vfork inherits the
            # parent's high-water mark into its own ru_maxrss.
            x, y = fa.read(1 << 20), fb.read(1 << 20)
            if x != y:
                return False
            if not x:
                return True


def make_members(directory: str, count: int) -> None:
    """`count` binary bundles with the 4 archive targets (2-16 KiB payloads each)."""
    sys.path.insert(0, REPO)
    from offload_tool.formats.bundle import BundleEntry, write_binary_bundle

    rng = random.Random(7)
    for m in range(count):
        # A fixed prefix: random leading bytes can look like a COFF or bitcode header to LLVM's archive writer.
        payloads = [b"DEVICE-CODE\0" + rng.randbytes(rng.randint(2048, 16384)) for _ in ARCHIVE_TARGETS]
        with open(os.path.join(directory, f"m{m:04d}.o"), "wb") as f:
            write_binary_bundle([BundleEntry(t, p) for t, p in zip(ARCHIVE_TARGETS, payloads)], f)


def main() -> int:
    if len(sys.argv) == 4 and sys.argv[1] == "--make-members":
        make_members(sys.argv[2], int(sys.argv[3]))
        return 0
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size-mib", type=int, default=256, help="size of each of the 3 inputs (default 256)")
    ap.add_argument("--members", type=int, default=1000, help="archive members (default 1000)")
    ap.add_argument("--llvm", default="clang-offload-bundler-19")
    ap.add_argument("--repeat", type=int, default=3, help="runs of each side per row; medians are printed (default 3)")
    ap.add_argument("--workdir", default=None, help="where to put the data (default: a temp dir, removed)")
    args = ap.parse_args()

    llvm = shutil.which(args.llvm)
    if llvm is None:
        print(f"{args.llvm} not found", file=sys.stderr)
        return 1
    ar = shutil.which("llvm-ar-19") or shutil.which("llvm-ar") or shutil.which("ar")
    env = dict(os.environ)
    for k in ("OFFLOAD_BUNDLER_COMPRESS", "OFFLOAD_BUNDLER_VERBOSE", "OFFLOAD_BUNDLER_COMPRESSION_LEVEL",
              "COMPRESSED_BUNDLE_FORMAT_VERSION"):
        env.pop(k, None)
    env["PYTHONPATH"] = REPO + os.pathsep + env.get("PYTHONPATH", "")
    ours = [sys.executable, "-m", "offload_tool.cli.bundler"]
    # Byte-compile first, as an installed package is (PYTHONDONTWRITEBYTECODE would otherwise make every
    # run recompile the modules it imports).
    subprocess.run([sys.executable, "-m", "compileall", "-q", os.path.join(REPO, "offload_tool")], check=False)
    work = args.workdir or tempfile.mkdtemp(prefix="bundler-bench-")
    os.makedirs(work, exist_ok=True)
    rows: list[tuple[str, float, float, float, float]] = []

    def fresh(cmd_args: list[str]) -> None:
        """Both sides create their outputs anew (overwriting an existing file in place is much cheaper
        than creating one on some file systems, and our outputs are always new files: temp + rename)."""
        for a in cmd_args:
            if a.startswith("-output="):
                path = os.path.join(work, a[len("-output="):])
                if os.path.exists(path):
                    os.unlink(path)
        os.sync()  # no write-back of the previous step inside this one's timing

    def row(name: str, our_args: list[str], llvm_args: list[str], check: list[tuple[str, str]] = ()) -> None:
        # The machine's wall times vary a lot from run to run: each side runs --repeat times,
        # alternating, and the median of each is reported.
        samples: dict[str, list[tuple[float, float]]] = {"llvm": [], "ours": []}
        for _ in range(args.repeat):
            fresh(llvm_args)
            samples["llvm"].append(measure([llvm, *llvm_args], work, env)[:2])
            fresh(our_args)
            samples["ours"].append(measure([*ours, *our_args], work, env)[:2])
        lw, lm = (statistics.median(v) for v in zip(*samples["llvm"]))
        ow, om = (statistics.median(v) for v in zip(*samples["ours"]))
        for a, b in check:
            if not files_equal(os.path.join(work, a), os.path.join(work, b)):
                raise SystemExit(f"{name}: outputs differ: {a} vs {b}")
        rows.append((name, ow, lw, om, lm))
        print(f"  {name}: ours {ow:.2f}s / LLVM {lw:.2f}s", file=sys.stderr)

    try:
        print(f"generating 3 x {args.size_mib} MiB inputs in {work} ...", file=sys.stderr)
        # In a child process, so this process stays small: a child's peak RSS starts from its parent's.
        gen = ("import sys; sys.path.insert(0, sys.argv[1]); from bundler import make_input; "
               "[make_input(f'{sys.argv[2]}/in{n}', int(sys.argv[3]), n) for n in range(3)]")
        subprocess.run([sys.executable, "-c", gen, os.path.dirname(os.path.abspath(__file__)), work,
                        str(args.size_mib)], check=True)
        ins = [f"-input=in{n}" for n in range(3)]
        tg = "-targets=" + ",".join(TARGETS)
        row("bundle", ["-type=bc", tg, *ins, "-output=ours.bc"], ["-type=bc", tg, *ins, "-output=llvm.bc"],
            [("ours.bc", "llvm.bc")])
        row("unbundle", ["-type=bc", "-unbundle", tg, "-input=llvm.bc", *[f"-output=o{n}" for n in range(3)]],
            ["-type=bc", "-unbundle", tg, "-input=llvm.bc", *[f"-output=l{n}" for n in range(3)]],
            [(f"o{n}", f"l{n}") for n in range(3)] + [(f"o{n}", f"in{n}") for n in range(3)])
        row("list", ["-type=bc", "-list", "-input=llvm.bc"], ["-type=bc", "-list", "-input=llvm.bc"])
        row("compress", ["-type=bc", tg, *ins, "-output=ours.cbc", "-compress"],
            ["-type=bc", tg, *ins, "-output=llvm.cbc", "-compress"])
        # Each side decompresses the other's output (so both formats are proven readable).
        row("decompress", ["-type=bc", "-unbundle", tg, "-input=llvm.cbc", *[f"-output=o{n}" for n in range(3)]],
            ["-type=bc", "-unbundle", tg, "-input=ours.cbc", *[f"-output=l{n}" for n in range(3)]],
            [(f"o{n}", f"l{n}") for n in range(3)] + [(f"o{n}", f"in{n}") for n in range(3)])
        sizes = (os.path.getsize(os.path.join(work, "ours.cbc")), os.path.getsize(os.path.join(work, "llvm.cbc")))
        for n in ("ours.bc", "llvm.bc", "ours.cbc", "llvm.cbc", *[f"o{n}" for n in range(3)],
                  *[f"l{n}" for n in range(3)]):
            os.unlink(os.path.join(work, n))

        print(f"building an archive of {args.members} bundles ...", file=sys.stderr)
        mdir = os.path.join(work, "members")
        os.makedirs(mdir)
        subprocess.run([sys.executable, os.path.abspath(__file__), "--make-members", mdir, str(args.members)],
                       check=True, env=env)
        names = sorted(os.listdir(mdir))
        subprocess.run([ar, "rc", os.path.join(work, "lib.a"), *names], cwd=mdir, check=True)
        atg = "-targets=" + ",".join(ARCHIVE_TARGETS)
        archive_row = lambda: row("archive unbundle", ["-type=a", "-unbundle", atg, "-input=lib.a", *[f"-output=oa{n}.a" for n in range(4)]],
            ["-type=a", "-unbundle", atg, "-input=lib.a", *[f"-output=la{n}.a" for n in range(4)]],
            [(f"oa{n}.a", f"la{n}.a") for n in range(4)])
        try:
            archive_row()
        except SystemExit as exc:  # e.g. archive unbundling not available in this checkout
            print(f"archive unbundle: not measured: {exc}", file=sys.stderr)
    finally:
        if args.workdir is None:
            shutil.rmtree(work, ignore_errors=True)

    print(f"\noffload-bundler (CLI subprocess) vs {os.path.basename(llvm)}; 3 x {args.size_mib} MiB inputs, "
          f"archive of {args.members} members x 4 targets; {os.cpu_count()} CPUs; median of {args.repeat} runs each")
    print(f"{'operation':<18}{'ours s':>9}{'LLVM s':>9}{'ratio':>8}{'ours MiB':>10}{'LLVM MiB':>10}{'ratio':>8}")
    by_name = {r[0]: r for r in rows}
    if "compress" in by_name and "decompress" in by_name:
        c, d = by_name["compress"], by_name["decompress"]
        rows.insert(rows.index(d) + 1, ("compress+decomp.", c[1] + d[1], c[2] + d[2], max(c[3], d[3]),
                                        max(c[4], d[4])))
    for name, ow, lw, om, lm in rows:
        print(f"{name:<18}{ow:>9.2f}{lw:>9.2f}{ow / lw:>8.2f}{om:>10.1f}{lm:>10.1f}{om / lm:>8.2f}")
    if len(rows) >= 5:
        print(f"compressed sizes: ours {sizes[0]:,} bytes, LLVM {sizes[1]:,} bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
