#!/usr/bin/env python3
"""Scale benchmark of the offload SCons tool against the usual way of building offload code.

Generates a project of N OpenMP C sources x M offload archs (default 100 x 4) twice:
  - "offload": `env.OffloadProgram(...)` (host once + one device node per (source, arch); with AMD
    archs one DEVICELINK per AMD arch and one carrier of the device images, else package + embed per
    source; then the link);
  - "usual":   one `clang -fopenmp --offload-arch=a,b,c,d -c` per source under SCons, then the link
    (what CMake, Meson and friends do).
and measures, for each: the full build at -jJOBS, the null build, and the rebuild after adding one
arch. Prints times, action counts and the ratios the tool aims for:
  full build no slower than the usual way; add-arch rebuild <= 0.35x the usual way's;
  null build < 3 s at 100 x 4 and <= 2x the usual way's.

Usage: python3 bench/scons_scale.py [--sources N] [--archs sm_75,sm_80,gfx90a,gfx1030]
                                    [--add-arch sm_90] [--jobs 2] [--clang clang-19] [--keep DIR]"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

SOURCE = """\
#include <stddef.h>
double kern_{i}(double *x, size_t n) {{
  double s = 0;
#pragma omp target teams distribute parallel for reduction(+:s) map(to: x[0:n]) map(tofrom: s)
  for (size_t k = 0; k < n; k++) s += x[k] * {i}.0 + (double)k;
  return s;
}}
"""

MAIN = """\
#include <stdio.h>
#include <stddef.h>
{decls}
int main(void) {{
  double x[64]; double t = 0;
  for (int i = 0; i < 64; i++) x[i] = i;
{calls}
  printf("%g\\n", t);
  return 0;
}}
"""

OFFLOAD_SCONSTRUCT = """\
DefaultEnvironment(tools=[])
env = Environment(tools=['default', 'offload'], OFFLOAD_CLANG={clang!r},
                  OFFLOAD_ARCHS=ARGUMENTS['archs'].split(','), OFFLOAD_HOSTFLAGS=['-O2'],
                  OFFLOAD_DEVICEFLAGS=['-O2'])
env.OffloadProgram('app', Glob('src/*.c'))
"""

USUAL_SCONSTRUCT = """\
DefaultEnvironment(tools=[])
import os
archs = ARGUMENTS['archs']
env = Environment(tools=['default'], CC={clang!r}, LINK={clangxx!r},
                  CCFLAGS=['-O2', '-fopenmp', '--offload-arch=' + archs,
                           '--libomptarget-nvptx-bc-path={llvmlib}', '--cuda-path=/usr/local/cuda',
                           '--rocm-device-lib-path=/usr/lib/x86_64-linux-gnu/amdgcn/bitcode'],
                  LINKFLAGS=['-fopenmp', '--offload-arch=' + archs, '--libomptarget-nvptx-bc-path={llvmlib}',
                             '--cuda-path=/usr/local/cuda',
                             '--rocm-device-lib-path=/usr/lib/x86_64-linux-gnu/amdgcn/bitcode'],
                  CCCOMSTR='CC $SOURCE', LINKCOMSTR='LINK $TARGET')
env.Program('app', Glob('src/*.c'))
"""

ACTION_WORDS = ("HOST", "DEVICE", "DEVICELINK", "PACKAGE", "EMBED", "PACKAGE+EMBED", "LINK", "CC")


def generate(root: Path, n: int, sconstruct: str) -> None:
    (root / "src").mkdir(parents=True, exist_ok=True)
    for i in range(n):
        (root / "src" / f"k{i:04d}.c").write_text(SOURCE.format(i=i))
    decls = "\n".join(f"double kern_{i}(double *x, size_t n);" for i in range(n))
    calls = "\n".join(f"  t += kern_{i}(x, 64);" for i in range(n))
    (root / "src" / "main.c").write_text(MAIN.format(decls=decls, calls=calls))
    (root / "SConstruct").write_text(sconstruct)


def scons(root: Path, *args) -> tuple[float, dict[str, int], int, float]:
    """Run scons; (wall seconds, action counts, exit status, CPU seconds of all its processes).
    CPU time is reported too because wall time on a shared 2-core machine is noisy."""
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    env["PATH"] = env.get("PATH", "") + os.pathsep + "/usr/local/cuda/bin"
    env.pop("OFFLOAD_VERBOSE", None)
    cmd = [sys.executable, "-m", "SCons", "-Q", f"--site-dir={REPO / 'site_scons'}", *args]
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    cp = subprocess.run(cmd, cwd=root, capture_output=True, text=True, env=env)
    dt = time.perf_counter() - t0
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)
    if cp.returncode not in (0, 1) or (cp.returncode == 1 and "-q" not in args):
        sys.exit(f"scons {' '.join(args)} failed in {root}:\n{cp.stdout[-3000:]}\n{cp.stderr[-3000:]}")
    counts: dict[str, int] = {}
    for line in cp.stdout.splitlines():
        word = line.split(" ", 1)[0]
        if word in ACTION_WORDS:
            counts[word] = counts.get(word, 0) + 1
    return dt, counts, cp.returncode, cpu


def fmt_counts(c: dict[str, int]) -> str:
    return " ".join(f"{k}={v}" for k, v in sorted(c.items())) or "-"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sources", type=int, default=100)
    ap.add_argument("--archs", default="sm_75,sm_80,gfx90a,gfx1030")
    ap.add_argument("--add-arch", default="sm_90")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--clang", default="clang-19")
    ap.add_argument("--keep", help="build in this directory and keep it")
    a = ap.parse_args()
    clang = shutil.which(a.clang)
    if not clang:
        sys.exit(f"scons_scale: error: {a.clang} not found (install the Debian package clang-19)")
    llvmlib = os.path.join(os.path.dirname(os.path.dirname(os.path.realpath(clang))), "lib")
    clangxx = a.clang.replace("clang", "clang++", 1)
    base = Path(a.keep) if a.keep else Path(tempfile.mkdtemp(prefix="scons_scale."))
    if base.exists() and a.keep:
        shutil.rmtree(base)
    archs = a.archs
    more = archs + "," + a.add_arch
    jobs = f"-j{a.jobs}"
    results = {}
    for name, sc in (("usual", USUAL_SCONSTRUCT.format(clang=a.clang, clangxx=clangxx, llvmlib=llvmlib)),
                     ("offload", OFFLOAD_SCONSTRUCT.format(clang=a.clang))):
        root = base / name
        generate(root, a.sources, sc)
        r = {}
        r["full"] = scons(root, jobs, f"archs={archs}")
        r["null"] = scons(root, jobs, f"archs={archs}")
        r["uptodate"] = scons(root, "-q", f"archs={archs}")
        r["add"] = scons(root, jobs, f"archs={more}")
        results[name] = r
        print(f"{name:8s} full {r['full'][0]:7.2f} s (cpu {r['full'][3]:7.2f} s)  [{fmt_counts(r['full'][1])}]",
              flush=True)
        print(f"{name:8s} null {r['null'][0]:7.2f} s (cpu {r['null'][3]:7.2f} s)  [{fmt_counts(r['null'][1])}]  "
              f"(scons -q exit {r['uptodate'][2]})", flush=True)
        print(f"{name:8s} +{a.add_arch:6s}{r['add'][0]:7.2f} s (cpu {r['add'][3]:7.2f} s)  "
              f"[{fmt_counts(r['add'][1])}]", flush=True)
    u, o = results["usual"], results["offload"]
    print()
    print(f"project: {a.sources + 1} OpenMP C sources x {len(archs.split(','))} archs ({archs}), "
          f"+{a.add_arch}, {jobs}, {a.clang}")
    print(f"{'':14s}{'usual':>10s}{'offload':>10s}{'ratio':>8s}{'cpu ratio':>10s}  target")
    rows = [("full build", "full", "<= 1.00"), ("null build", "null", "<= 2.00 and offload < 3 s"),
            (f"add {a.add_arch}", "add", "<= 0.35")]
    for label, key, target in rows:
        ut, ot = u[key][0], o[key][0]
        uc, oc = u[key][3], o[key][3]
        print(f"{label:14s}{ut:9.2f}s{ot:9.2f}s{ot / ut:8.2f}{oc / max(uc, 1e-9):10.2f}  {target}")
    if not a.keep:
        shutil.rmtree(base, ignore_errors=True)
    else:
        print(f"projects kept in {base}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
