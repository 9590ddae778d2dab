#!/usr/bin/env python3
"""Benchmark: `offload-tool inspect` and `verify` on two vendor libraries as they ship, against the
vendors' own listing tools, in one run.

* cuRAND (`libcurand.so.10` of the PyPI wheel `nvidia-curand-cu12`: 167 MB, 11 fat binaries, 153
  images, its PTX LZ4-compressed) against `cuobjdump --list-elf` (PyPI `nvidia-cuda-cuobjdump`).
* rocSPARSE (`librocsparse.so.0.1` of Debian's `librocsparse0`: 1.3 GB, 111 bundles in
  `.hip_fatbin`, 777 images) against `clang-offload-bundler-19 -list`, on the `.hip_fatbin`
  section dumped to a file (LLVM lists its first bundle only) and on each bundle in a file of its
  own (111 processes; their times added, the largest peak memory shown).

Inputs are fetched into a cache (`--cache`, default ~/.cache/offload-tool-bench; never part of the
repository): the two wheels with `pip download`, the Debian package with `apt-get install` (when
run as root and it is missing; otherwise the rocSPARSE rows are skipped).

Every command runs as a subprocess (start-up counts on both sides; ours is the installed console
script, byte-compiled first as an installed package is), after one warm-up run so that both read
the file from the page cache.  Each row runs each side --repeat times, alternating, and prints the
medians of wall time and of peak resident memory (max RSS of the child from the kernel's rusage,
`os.wait4`; a memory-mapped file's pages count once mapped, and a kernel whose page cache holds
large folios maps a whole folio around each page touched, so on Linux 6.18 it overstates what was
read), and the ratios ours/theirs.  `inspect --hash` (which reads and hashes every image) is a
row of its own.

What each side reads of its input is measured apart, from a cold page cache: the input files'
cached pages are dropped (`posix_fadvise(POSIX_FADV_DONTNEED)`), the command runs once, and
`fincore` (util-linux) counts the bytes of the inputs now cached: what was read from disk,
readahead included.  That table gives the cold runs' wall time too (medians of --cold-repeat
alternating runs).

    python3 bench/vendor_libs.py               # both libraries, 5 runs per side
    python3 bench/vendor_libs.py --repeat 3 --skip-rocm
"""

from __future__ import annotations

import argparse
import glob
import os
import shutil
import statistics
import subprocess
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ROCSPARSE = "/usr/lib/x86_64-linux-gnu/librocsparse.so.0.1"
WHEELS = ("nvidia-curand-cu12", "nvidia-cuda-cuobjdump")


def run_child(cmd: list[str], env: dict) -> tuple[float, float, bytes]:
    """(wall seconds, peak RSS MiB, stdout) of one child process, which must succeed (its output
    goes to temporary files, so that nothing reaps it before `os.wait4` reads its rusage)."""
    import tempfile
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        start = time.perf_counter()
        proc = subprocess.Popen(cmd, env=env, stdout=out, stderr=err)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - start
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        if proc.returncode != 0:
            raise SystemExit(f"command failed ({proc.returncode}): {' '.join(cmd)}\n"
                             f"{err.read().decode(errors='replace')[-2000:]}")
        return wall, usage.ru_maxrss / 1024.0, out.read()


def fetch_nvidia(cache: str) -> tuple[str, str]:
    """(libcurand.so.10, cuobjdump) from the wheels, downloaded and unpacked once into `cache`."""
    wheels, tree = os.path.join(cache, "wheels"), os.path.join(cache, "nvidia-wheels")
    lib = glob.glob(os.path.join(tree, "nvidia", "curand", "lib", "libcurand.so.*"))
    tool = glob.glob(os.path.join(tree, "nvidia", "*", "bin", "cuobjdump"))
    if not lib or not tool:
        os.makedirs(wheels, exist_ok=True)
        print(f"downloading {', '.join(WHEELS)} into {wheels} ...", file=sys.stderr)
        subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "-q", "-d", wheels, *WHEELS],
                       check=True)
        import zipfile
        for whl in glob.glob(os.path.join(wheels, "*.whl")):
            with zipfile.ZipFile(whl) as z:
                z.extractall(tree)
        lib = glob.glob(os.path.join(tree, "nvidia", "curand", "lib", "libcurand.so.*"))
        tool = glob.glob(os.path.join(tree, "nvidia", "*", "bin", "cuobjdump"))
        if not lib or not tool:
            raise SystemExit(f"the wheels in {wheels} hold no libcurand.so.* or cuobjdump")
    os.chmod(tool[0], 0o755)
    return sorted(lib)[0], tool[0]


def fetch_rocsparse() -> str | None:
    """Debian's librocsparse.so.0.1, installed with apt-get when missing (as root); else None."""
    if not os.path.exists(ROCSPARSE) and os.geteuid() == 0 and shutil.which("apt-get"):
        print("apt-get install -y librocsparse0 ...", file=sys.stderr)
        subprocess.run(["apt-get", "install", "-y", "-q", "librocsparse0"], check=False,
                       stdout=subprocess.DEVNULL)
    return ROCSPARSE if os.path.exists(ROCSPARSE) else None


# Run in a child (this process stays small: a child started with vfork starts from its parent's
# peak RSS): the `.hip_fatbin` section to one file, and each bundle in it to a file of its own.
_SPLIT = """
import os, sys
sys.path.insert(0, sys.argv[1])
from offload_tool.fileio import open_input
from offload_tool.formats import elf
from offload_tool.formats.ccob import split_bundles
lib, section_file, bundle_dir = sys.argv[2:5]
os.makedirs(bundle_dir, exist_ok=True)
with open_input(lib) as buf:
    (data,) = [s.data for s in elf.read_sections(buf) if s.name == ".hip_fatbin"]
    with open(section_file + ".tmp", "wb") as f:
        for i in range(0, len(data), 1 << 24):
            f.write(data[i:i + (1 << 24)])
    os.replace(section_file + ".tmp", section_file)
    for n, (off, part) in enumerate(split_bundles(data)):
        with open(os.path.join(bundle_dir, f"{n:04d}.bundle"), "wb") as f:
            f.write(part)
"""


def split_rocsparse(lib: str, cache: str, env: dict) -> tuple[str, list[str]]:
    section = os.path.join(cache, "rocsparse.hip_fatbin")
    bundle_dir = os.path.join(cache, "rocsparse-bundles")
    if not os.path.exists(section) or os.path.getmtime(section) < os.path.getmtime(lib):
        print(f"dumping .hip_fatbin of {lib} into {cache} ...", file=sys.stderr)
        shutil.rmtree(bundle_dir, ignore_errors=True)
        subprocess.run([sys.executable, "-c", _SPLIT, REPO, lib, section, bundle_dir], check=True, env=env)
    return section, sorted(glob.glob(os.path.join(bundle_dir, "*.bundle")))


def drop_cached(paths: list[str]) -> None:
    """Drop the page cache's clean pages of `paths` (the next read comes from disk)."""
    for path in paths:
        fd = os.open(path, os.O_RDONLY)
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


def cached_bytes(paths: list[str]) -> int:
    """Bytes of `paths` in the page cache now (`fincore`)."""
    out = subprocess.run(["fincore", "--bytes", "--noheadings", "--output", "RES", *paths],
                         capture_output=True, text=True, check=True).stdout
    return sum(int(x) for x in out.split())


def cold_run(cmds: list[list[str]], inputs: list[str], env: dict) -> tuple[float, float]:
    """(wall seconds, MiB read from `inputs`) of `cmds` run one after another from a cold cache."""
    drop_cached(inputs)
    wall = sum(run_child(c, env)[0] for c in cmds)
    return wall, cached_bytes(inputs) / (1 << 20)


def _ours(script: str, module: str) -> list[str]:
    """How users run our tool: the installed console script beside this Python (run with this
    `PYTHONPATH`, so this checkout's code), else `python -m`."""
    path = os.path.join(os.path.dirname(sys.executable), script)
    return [path] if os.access(path, os.X_OK) else [sys.executable, "-m", f"offload_tool.cli.{module}"]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cache", default=os.path.expanduser("~/.cache/offload-tool-bench"),
                    help="where the downloaded inputs are kept (default ~/.cache/offload-tool-bench)")
    ap.add_argument("--repeat", type=int, default=5, help="runs of each side per row; medians (default 5)")
    ap.add_argument("--cold-repeat", type=int, default=3,
                    help="cold-cache runs of each side per row; medians (default 3; 0: none)")
    ap.add_argument("--llvm", default="clang-offload-bundler-19")
    ap.add_argument("--skip-rocm", action="store_true", help="only the cuRAND rows")
    ap.add_argument("--skip-cuda", action="store_true", help="only the rocSPARSE rows")
    args = ap.parse_args()

    env = dict(os.environ)
    env.pop("OFFLOAD_TOOL_BUDGET", None)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["PYTHONPATH"] = REPO + os.pathsep + env.get("PYTHONPATH", "")
    # Byte-compile first, as an installed package is.
    subprocess.run([sys.executable, "-m", "compileall", "-q", os.path.join(REPO, "offload_tool")],
                   check=False, stdout=subprocess.DEVNULL, env=env)
    ours = _ours("offload-tool", "tool")
    os.makedirs(args.cache, exist_ok=True)
    rows: list[tuple[str, float, float, float, float]] = []
    cold_rows: list[tuple[str, float, float, float, float]] = []
    has_fincore = shutil.which("fincore") is not None

    def warm(path: str) -> None:
        with open(path, "rb") as f:
            while f.read(1 << 24):
                pass

    def row(name: str, our_cmd: list[str], their_cmds: list[list[str]], check=None, *,
            our_inputs: list[str] = (), their_inputs: list[str] = ()) -> None:
        """Each side --repeat times, alternating, after a warm-up run of each; `their_cmds` run
        one after another count as one run (times added, the largest peak memory).  With
        `fincore` and the inputs named, then one run of each side from a cold cache."""
        samples: dict[str, list[tuple[float, float]]] = {"ours": [], "theirs": []}
        for i in range(args.repeat + 1):
            runs = [run_child(c, env) for c in their_cmds]
            theirs = (sum(r[0] for r in runs), max(r[1] for r in runs))
            w, m, out = run_child(our_cmd, env)
            if i == 0:
                if check is not None:
                    check(out, [r[2] for r in runs])
                continue
            samples["theirs"].append(theirs)
            samples["ours"].append((w, m))
        ow, om = (statistics.median(v) for v in zip(*samples["ours"]))
        tw, tm = (statistics.median(v) for v in zip(*samples["theirs"]))
        rows.append((name, ow, tw, om, tm))
        print(f"  {name}: ours {ow:.3f}s / theirs {tw:.3f}s = {ow / tw:.2f}", file=sys.stderr)
        if has_fincore and args.cold_repeat > 0 and our_inputs and their_inputs:
            cold: dict[str, list[tuple[float, float]]] = {"ours": [], "theirs": []}
            for _ in range(args.cold_repeat):
                cold["ours"].append(cold_run([our_cmd], list(our_inputs), env))
                cold["theirs"].append(cold_run(their_cmds, list(their_inputs), env))
            ocw, ocr = (statistics.median(v) for v in zip(*cold["ours"]))
            tcw, tcr = (statistics.median(v) for v in zip(*cold["theirs"]))
            cold_rows.append((name, ocw, tcw, ocr, tcr))
            for path in {*our_inputs, *their_inputs}:
                warm(path)

    notes: list[str] = []
    if not args.skip_cuda:
        lib, cuobjdump = fetch_nvidia(args.cache)
        warm(lib)
        size = os.path.getsize(lib)
        theirs = [[cuobjdump, "--list-elf", lib]]

        def same_count(out: bytes, their_outs: list[bytes]) -> None:
            # cuobjdump lists the cubins; we list those and the PTX.
            cubins = sum(1 for line in out.decode().splitlines()[1:] if " cubin " in line)
            listed = sum(1 for line in their_outs[0].decode().splitlines() if line.startswith("ELF file"))
            if cubins != listed:
                raise SystemExit(f"cuRAND: we list {cubins} cubins, cuobjdump --list-elf {listed}")
            notes.append(f"cuRAND: {os.path.basename(lib)}, {size / 1e6:.0f} MB; {cubins} cubins listed by both")

        io = {"our_inputs": [lib], "their_inputs": [lib]}
        row("cuRAND inspect", [*ours, "inspect", lib], theirs, same_count, **io)
        row("cuRAND inspect --hash", [*ours, "inspect", "--hash", lib], theirs, **io)
        row("cuRAND verify", [*ours, "verify", lib], theirs, **io)
    if not args.skip_rocm:
        llvm = shutil.which(args.llvm)
        lib = fetch_rocsparse()
        if lib is None or llvm is None:
            print(f"rocSPARSE rows skipped: {'no ' + ROCSPARSE if lib is None else args.llvm + ' not found'}",
                  file=sys.stderr)
        else:
            section, bundles = split_rocsparse(lib, args.cache, env)
            for path in (lib, section):
                warm(path)
            whole = [[llvm, "-list", "-type=o", f"-input={section}"]]
            each = [[llvm, "-list", "-type=o", f"-input={b}"] for b in bundles]

            def same_images(out: bytes, their_outs: list[bytes]) -> None:
                ids = [i for o in their_outs for i in o.decode().split() if not i.startswith("host-")]
                images = len(out.decode().splitlines()) - 1
                if images != len(ids):
                    raise SystemExit(f"rocSPARSE: we list {images} images, LLVM {len(ids)} device entries")
                notes.append(f"rocSPARSE: {os.path.basename(lib)}, {os.path.getsize(lib) / 1e9:.2f} GB; "
                             f"{len(bundles)} bundles, {images} device images listed by both")

            by_bundle = {"our_inputs": [lib], "their_inputs": bundles}
            by_section = {"our_inputs": [lib], "their_inputs": [section]}
            row(f"rocSPARSE inspect / -list x{len(bundles)}", [*ours, "inspect", lib], each, same_images,
                **by_bundle)
            row(f"rocSPARSE verify / -list x{len(bundles)}", [*ours, "verify", lib], each, **by_bundle)
            row("rocSPARSE inspect / -list .hip_fatbin", [*ours, "inspect", lib], whole, **by_section)
            row("rocSPARSE verify / -list .hip_fatbin", [*ours, "verify", lib], whole, **by_section)
            row("rocSPARSE inspect --hash / -list x{}".format(len(bundles)), [*ours, "inspect", "--hash", lib], each,
                **by_bundle)

    load = os.getloadavg()
    print(f"\nours ({os.path.basename(ours[0])}) vs the vendors' tools; median of {args.repeat} runs each; "
          f"{len(os.sched_getaffinity(0))} CPUs usable; load average {load[0]:.2f}/{load[1]:.2f}/{load[2]:.2f}")
    for n in notes:
        print(n)
    print(f"{'row':<40}{'ours s':>9}{'theirs s':>10}{'ratio':>8}{'ours MiB':>10}{'theirs MiB':>12}{'ratio':>8}")
    for name, ow, tw, om, tm in rows:
        print(f"{name:<40}{ow:>9.3f}{tw:>10.3f}{ow / tw:>8.2f}{om:>10.1f}{tm:>12.1f}{om / tm:>8.2f}")
    if cold_rows:
        print(f"\ncold page cache (median of {args.cold_repeat} runs each; MiB of the inputs read from disk, "
              "readahead included, by fincore)")
        print(f"{'row':<40}{'ours s':>9}{'theirs s':>10}{'ratio':>8}{'ours MiB':>10}{'theirs MiB':>12}{'ratio':>8}")
        for name, ow, tw, om, tm in cold_rows:
            print(f"{name:<40}{ow:>9.3f}{tw:>10.3f}{ow / tw:>8.2f}{om:>10.1f}{tm:>12.1f}{om / max(tm, 0.01):>8.2f}")
    elif not has_fincore:
        print("\ncold page cache rows skipped: no fincore (util-linux)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
