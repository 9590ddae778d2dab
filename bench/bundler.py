#!/usr/bin/env python3
"""Benchmark: offload-bundler (our CLI as users run it: the installed console script, one subprocess per operation)
against clang-offload-bundler-19, and offload-packager against clang-offload-packager-19, in one run.

Rows: bundle, unbundle and list of 3 code-like inputs of --size-mib MiB each (binary bundle, 3
targets); compress (bundle -compress at the default level) with every CPU usable and pinned to
one CPU (`taskset -c`), and decompress (unbundle of the other side's output), for the code-like
inputs and for 3 text-like ones (assembly listings); a small package (one 4 KiB image); and
unbundling archives of --members bundled members with 4 targets each (`-type=a`), and of 10x as
many (linear growth). For each side it prints wall time and peak memory (max RSS of the child,
from the kernel's rusage of that child via `os.wait4`), and the ratio ours/LLVM.
Both sides run as subprocesses, so start-up costs count on both. Each row runs each side
--repeat times (default 3), alternating, and prints the medians. Outputs are checked equal.

A busy machine: `--load-cpu 1` keeps CPU 1 busy with `bench/load.py` (a pinned busy loop) for the
whole run, and the one-CPU rows then run on CPU 0 (`--one-cpu`). The header line records the
CPUs, the load average before the run and the load.

    python3 bench/bundler.py                          # 3 x 128 MiB, 1,000 and 10,000 members
    python3 bench/bundler.py --load-cpu 1             # the same with one core busy
    python3 bench/bundler.py --size-mib 32 --repeat 1 # quicker
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


def make_text_input(path: str, size_mib: int, seed: int) -> None:
    """Text-like data (an assembly listing) that zstd compresses about 4x: lines drawn from a pool of
    200,000 generated instruction lines (mnemonics, registers, immediates, labels, comments)."""
    rng = random.Random(seed)
    ops = ["v_add_f32", "v_mul_f32", "v_fma_f32", "s_load_dwordx4", "s_mov_b32", "global_load_dword",
           "global_store_dword", "v_mov_b32", "s_waitcnt", "v_cmp_gt_i32", "s_cbranch_execz", "ds_read_b32",
           "ds_write_b32", "v_lshlrev_b32", "buffer_load_dword", "s_add_u32", "s_addc_u32", "v_cndmask_b32",
           "v_mad_u64_u32", "s_and_saveexec_b64"]

    def operand() -> str:
        return rng.choice([f"v{rng.randrange(256)}", f"s{rng.randrange(104)}",
                           f"s[{2 * rng.randrange(50)}:{2 * rng.randrange(50) + 1}]", f"0x{rng.randrange(1 << 16):x}",
                           f"{rng.randrange(-64, 65)}", "vcc", "exec"])

    def line() -> str:
        k = rng.random()
        if k < 0.05:
            return f".LBB{rng.randrange(4096)}_{rng.randrange(64)}:\n"
        if k < 0.08:
            return (f"\t; %bb.{rng.randrange(512)}: {rng.choice(['Loop', 'Header', 'Exit', 'Preheader'])} "
                    f"Depth={rng.randrange(4)}\n")
        return f"\t{rng.choice(ops)} {', '.join(operand() for _ in range(rng.randrange(1, 4)))}\n"

    pool = [line().encode() for _ in range(200_000)]
    with open(path, "wb") as f:
        for _ in range(size_mib):
            out = b"".join(rng.choices(pool, k=60_000))
            while len(out) < (1 << 20):
                out += b"".join(rng.choices(pool, k=10_000))
            f.write(out[:1 << 20])


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


def _command(script: str, module: str) -> list[str]:
    """How users run our tool: the installed console script (what `pip install` puts beside this
    Python, run with this `PYTHONPATH`, so it is this checkout's code), else `python -m` (which adds
    `runpy`'s imports to every start)."""
    path = os.path.join(os.path.dirname(sys.executable), script)
    return [path] if os.access(path, os.X_OK) else [sys.executable, "-m", f"offload_tool.cli.{module}"]


def main() -> int:
    if len(sys.argv) == 4 and sys.argv[1] == "--make-members":
        make_members(sys.argv[2], int(sys.argv[3]))
        return 0
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size-mib", type=int, default=128, help="size of each of the 3 inputs (default 128)")
    ap.add_argument("--members", type=int, default=1000, help="archive members (default 1000; also 10x that)")
    ap.add_argument("--llvm", default="clang-offload-bundler-19")
    ap.add_argument("--llvm-packager", default="clang-offload-packager-19")
    ap.add_argument("--repeat", type=int, default=3, help="runs of each side per row; medians are printed (default 3)")
    ap.add_argument("--load-cpu", type=int, default=None, help="keep this CPU busy with bench/load.py during the run")
    ap.add_argument("--one-cpu", type=int, default=None,
                    help="CPU of the one-CPU rows (default: 0, or the first CPU other than --load-cpu)")
    ap.add_argument("--workdir", default=None, help="where to put the data (default: a temp dir, removed)")
    args = ap.parse_args()

    llvm = shutil.which(args.llvm)
    if llvm is None:
        print(f"{args.llvm} not found", file=sys.stderr)
        return 1
    llvm_packager = shutil.which(args.llvm_packager)
    taskset = shutil.which("taskset")
    cpus = sorted(os.sched_getaffinity(0))
    one_cpu = args.one_cpu if args.one_cpu is not None else next((c for c in cpus if c != args.load_cpu), cpus[0])
    ar = shutil.which("llvm-ar-19") or shutil.which("llvm-ar") or shutil.which("ar")
    env = dict(os.environ)
    for k in ("OFFLOAD_BUNDLER_COMPRESS", "OFFLOAD_BUNDLER_VERBOSE", "OFFLOAD_BUNDLER_COMPRESSION_LEVEL",
              "COMPRESSED_BUNDLE_FORMAT_VERSION", "OFFLOAD_TOOL_BUDGET"):
        env.pop(k, None)
    env["PYTHONPATH"] = REPO + os.pathsep + env.get("PYTHONPATH", "")
    ours, ours_packager = _command("offload-bundler", "bundler"), _command("offload-packager", "packager")
    # Byte-compile first, as an installed package is (PYTHONDONTWRITEBYTECODE would otherwise make every
    # run recompile the modules it imports).
    subprocess.run([sys.executable, "-m", "compileall", "-q", os.path.join(REPO, "offload_tool")], check=False)
    work = args.workdir or tempfile.mkdtemp(prefix="bundler-bench-")
    os.makedirs(work, exist_ok=True)
    rows: list[tuple[str, float, float, float, float]] = []
    load_before = os.getloadavg()
    load = None
    if args.load_cpu is not None:
        load = subprocess.Popen([sys.executable, os.path.join(os.path.dirname(os.path.abspath(__file__)), "load.py"),
                                 "--cpu", str(args.load_cpu)])

    def fresh(cmd_args: list[str]) -> None:
        """Both sides create their outputs anew (overwriting an existing file in place is much cheaper
        than creating one on some file systems, and our outputs are always new files: temp + rename)."""
        for a in cmd_args:
            if a.startswith("-output=") or a.startswith("-o="):
                path = os.path.join(work, a.split("=", 1)[1])
                if os.path.exists(path):
                    os.unlink(path)
        os.sync()  # no write-back of the previous step inside this one's timing

    def row(name: str, our_args: list[str], llvm_args: list[str], check: list[tuple[str, str]] = (), *,
            pin: bool = False, our_cmd: list[str] = ours, llvm_cmd: list[str] | None = None) -> None:
        # The machine's wall times vary a lot from run to run: each side runs --repeat times,
        # alternating, and the median of each is reported.
        prefix = [taskset, "-c", str(one_cpu)] if pin else []
        llvm_cmd = llvm_cmd or [llvm]
        samples: dict[str, list[tuple[float, float]]] = {"llvm": [], "ours": []}
        for _ in range(args.repeat):
            fresh(llvm_args)
            samples["llvm"].append(measure([*prefix, *llvm_cmd, *llvm_args], work, env)[:2])
            fresh(our_args)
            samples["ours"].append(measure([*prefix, *our_cmd, *our_args], work, env)[:2])
        lw, lm = (statistics.median(v) for v in zip(*samples["llvm"]))
        ow, om = (statistics.median(v) for v in zip(*samples["ours"]))
        for a, b in check:
            if not files_equal(os.path.join(work, a), os.path.join(work, b)):
                raise SystemExit(f"{name}: outputs differ: {a} vs {b}")
        rows.append((name, ow, lw, om, lm))
        print(f"  {name}: ours {ow:.3f}s / LLVM {lw:.3f}s = {ow / lw:.2f}", file=sys.stderr)

    sizes: list[tuple[str, int, int]] = []
    try:
        print(f"generating inputs in {work} ...", file=sys.stderr)
        # In a child process, so this process stays small: a child's peak RSS starts from its parent's.
        gen = ("import sys; sys.path.insert(0, sys.argv[1]); from bundler import make_input, make_text_input; "
               "[make_input(f'{sys.argv[2]}/in{n}', int(sys.argv[3]), n) for n in range(3)]; "
               "[make_text_input(f'{sys.argv[2]}/tx{n}', int(sys.argv[3]), n) for n in range(3)]")
        subprocess.run([sys.executable, "-c", gen, os.path.dirname(os.path.abspath(__file__)), work,
                        str(args.size_mib)], check=True)
        tg = "-targets=" + ",".join(TARGETS)
        ins = [f"-input=in{n}" for n in range(3)]
        row("bundle", ["-type=bc", tg, *ins, "-output=ours.bc"], ["-type=bc", tg, *ins, "-output=llvm.bc"],
            [("ours.bc", "llvm.bc")])
        row("unbundle", ["-type=bc", "-unbundle", tg, "-input=llvm.bc", *[f"-output=o{n}" for n in range(3)]],
            ["-type=bc", "-unbundle", tg, "-input=llvm.bc", *[f"-output=l{n}" for n in range(3)]],
            [(f"o{n}", f"l{n}") for n in range(3)] + [(f"o{n}", f"in{n}") for n in range(3)])
        row("list", ["-type=bc", "-list", "-input=llvm.bc"], ["-type=bc", "-list", "-input=llvm.bc"])
        for label, stem in (("code", "in"), ("text", "tx")):
            ins = [f"-input={stem}{n}" for n in range(3)]
            if taskset:
                row(f"compress {label}, 1 CPU", ["-type=bc", tg, *ins, "-output=ours.cbc", "-compress"],
                    ["-type=bc", tg, *ins, "-output=llvm.cbc", "-compress"], pin=True)
            row(f"compress {label}", ["-type=bc", tg, *ins, "-output=ours.cbc", "-compress"],
                ["-type=bc", tg, *ins, "-output=llvm.cbc", "-compress"])
            sizes.append((label, os.path.getsize(os.path.join(work, "ours.cbc")),
                          os.path.getsize(os.path.join(work, "llvm.cbc"))))
            # Each side decompresses the other's output (so both formats are proven readable).
            row(f"decompress {label}",
                ["-type=bc", "-unbundle", tg, "-input=llvm.cbc", *[f"-output=o{n}" for n in range(3)]],
                ["-type=bc", "-unbundle", tg, "-input=ours.cbc", *[f"-output=l{n}" for n in range(3)]],
                [(f"o{n}", f"l{n}") for n in range(3)] + [(f"o{n}", f"{stem}{n}") for n in range(3)])
        for n in ("ours.bc", "llvm.bc", "ours.cbc", "llvm.cbc", *[f"o{n}" for n in range(3)],
                  *[f"l{n}" for n in range(3)]):
            os.unlink(os.path.join(work, n))

        if llvm_packager:
            with open(os.path.join(work, "small.o"), "wb") as f:
                f.write(b"\x7fELF" + random.Random(3).randbytes(4092))
            image = "--image=file=small.o,triple=amdgcn-amd-amdhsa,arch=gfx90a,kind=hip"
            row("small package", [image, "-o=ours.pkg"], [image, "-o=llvm.pkg"], [("ours.pkg", "llvm.pkg")],
                our_cmd=ours_packager, llvm_cmd=[llvm_packager])

        atg = "-targets=" + ",".join(ARCHIVE_TARGETS)
        for count in (args.members, 10 * args.members):
            print(f"building an archive of {count} bundles ...", file=sys.stderr)
            mdir = os.path.join(work, f"members{count}")
            os.makedirs(mdir)
            subprocess.run([sys.executable, os.path.abspath(__file__), "--make-members", mdir, str(count)],
                           check=True, env=env)
            names = sorted(os.listdir(mdir))
            lib = os.path.join(work, f"lib{count}.a")
            subprocess.run([ar, "rcS", lib, *names], cwd=mdir, check=True)
            shutil.rmtree(mdir)
            try:
                row(f"archive unbundle {count:,}",
                    ["-type=a", "-unbundle", atg, f"-input=lib{count}.a", *[f"-output=oa{n}.a" for n in range(4)]],
                    ["-type=a", "-unbundle", atg, f"-input=lib{count}.a", *[f"-output=la{n}.a" for n in range(4)]],
                    [(f"oa{n}.a", f"la{n}.a") for n in range(4)])
            except SystemExit as exc:  # e.g. archive unbundling not available in this checkout
                print(f"archive unbundle: not measured: {exc}", file=sys.stderr)
    finally:
        if load is not None:
            load.terminate()
            load.wait()
        if args.workdir is None:
            shutil.rmtree(work, ignore_errors=True)

    state = (f"{len(cpus)} CPUs usable ({os.cpu_count()} online); load average before the run "
             f"{load_before[0]:.2f}/{load_before[1]:.2f}/{load_before[2]:.2f} (1/5/15 min); "
             + (f"CPU {args.load_cpu} kept busy by bench/load.py --cpu {args.load_cpu}"
                if load is not None else "no load started"))
    print(f"\nours (CLI subprocess) vs {os.path.basename(llvm)}; 3 x {args.size_mib} MiB inputs per kind; "
          f"median of {args.repeat} runs each; 1 CPU rows: taskset -c {one_cpu}\n{state}")
    print(f"{'operation':<26}{'ours s':>9}{'LLVM s':>9}{'ratio':>8}{'ours MiB':>10}{'LLVM MiB':>10}{'ratio':>8}")
    for name, ow, lw, om, lm in rows:
        print(f"{name:<26}{ow:>9.3f}{lw:>9.3f}{ow / lw:>8.2f}{om:>10.1f}{lm:>10.1f}{om / lm:>8.2f}")
    for label, o, l in sizes:
        print(f"compressed {label}: ours {o:,} bytes, LLVM {l:,} bytes ({100 * (o / l - 1):+.2f}%)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
