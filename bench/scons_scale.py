#!/usr/bin/env python3
"""Scale benchmark of the offload SCons tool against the usual way of building offload code.

Generates a project of N OpenMP C sources x M offload archs (default 100 x 4) twice:
  - "offload": `env.OffloadProgram(...)` (host once + one device node per (source, arch); one
    DEVICELINK per AMD arch; one carrier of the device images; then the link);
  - "usual":   one `clang -fopenmp --offload-arch=a,b,c,d -c` per source under SCons, then the link
    (what CMake, Meson and friends do).
and measures, for each: the full build at -jJOBS, the null build, and the rebuild after adding one
arch. Prints times, action counts and the ratios the tool aims for:
  full build <= 0.8x the usual way's; add-arch rebuild <= 0.35x the usual way's;
  null build <= 1.0x the usual way's at 100 x 4.

`--heavy` makes the sources C++ with the standard library's heavy headers and some templates
(<vector>, <algorithm>, <map>, <string>, <iostream>, <functional>, <memory>, <numeric>): there the
host front end is a large part of every compile, which is what OpenMP's host IR made once per
source (rather than once per device compile) saves.

`--large 1000` adds a project pair of 1,000 generated sources, built once, whose null build is a
row of its own (target <= 1.2x the usual way's), with the memory SCons holds for its graph (peak
RSS of the scons process). Building it takes a while; with `--keep DIR` the built trees stay, and
`--null-only --keep DIR` later re-runs only the null builds on them (median of `--repeat` runs).
`--fill` brings the usual way's large project up to date in minutes instead of an hour: each
command copies the main project's output of the same kind instead of compiling (see FILL); its
null builds are real. The tool's large project is built for real all the same (a copied object's
offload entries are another source's, so its program would not be the program the sources make),
its program checked with `offload-tool verify`, at `--large-jobs` (default: --jobs) with the
memory budget `--link-memory` (`OFFLOAD_LINK_MEMORY`, default 'auto') and the build report on, so
the run shows the device links' peaks and whether any ran together.

Null-build times are medians; CPU time (user + sys of scons and everything it runs) is printed
beside wall time because wall time on a shared machine is noisy.

Usage: python3 bench/scons_scale.py [--sources N] [--archs sm_75,sm_80,gfx90a,gfx1030]
                                    [--add-arch sm_90] [--jobs 2] [--clang clang-19] [--keep DIR]
                                    [--large N [--fill] [--large-jobs J] [--link-memory SIZE]]
                                    [--null-only] [--repeat 3] [--heavy] [--no-add]"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
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

HEAVY_SOURCE = """\
#include <algorithm>
#include <cstddef>
#include <functional>
#include <iostream>
#include <map>
#include <memory>
#include <numeric>
#include <string>
#include <vector>

namespace k{i} {{
template <typename T> struct Table {{
  std::vector<T> values;
  std::map<std::string, T> named;
  std::function<T(T)> scale = [](T a) {{ return a * T({i}); }};
  T total() const {{ return std::accumulate(values.begin(), values.end(), T()); }}
  void add(const std::string &k, T v) {{ named[k] = scale(v); values.push_back(v); }}
  T largest() const {{ return values.empty() ? T() : *std::max_element(values.begin(), values.end()); }}
}};
}}  // namespace k{i}

extern "C" double kern_{i}(double *x, size_t n) {{
  auto t = std::make_unique<k{i}::Table<double>>();
  for (size_t k = 0; k < 4 && k < n; k++) t->add(std::to_string(k), x[k]);
  std::sort(t->values.begin(), t->values.end());
  if (t->total() < 0) std::cerr << "negative\\n";
  double s = 0;
#pragma omp target teams distribute parallel for reduction(+:s) map(to: x[0:n]) map(tofrom: s)
  for (size_t k = 0; k < n; k++) s += x[k] * {i}.0 + (double)k;
  return s + 0 * t->largest();
}}
"""

OFFLOAD_SCONSTRUCT = """\
DefaultEnvironment(tools=[])
env = Environment(tools=['default', 'offload'], OFFLOAD_CLANG={clang!r},
                  OFFLOAD_ARCHS=ARGUMENTS['archs'].split(','), OFFLOAD_HOSTFLAGS=['-O2'],
                  OFFLOAD_DEVICEFLAGS=['-O2'], OFFLOAD_LINK_MEMORY=ARGUMENTS.get('link_memory', 'auto'))
env.OffloadProgram('app', Glob('src/*{ext}'))
{fill}"""

USUAL_SCONSTRUCT = """\
DefaultEnvironment(tools=[])
import os
archs = ARGUMENTS['archs']
env = Environment(tools=['default'], CC={clang!r}, CXX={clangxx!r}, LINK={clangxx!r},
                  CCFLAGS=['-O2', '-fopenmp', '--offload-arch=' + archs,
                           '--libomptarget-nvptx-bc-path={llvmlib}', '--cuda-path=/usr/local/cuda',
                           '--rocm-device-lib-path=/usr/lib/x86_64-linux-gnu/amdgcn/bitcode'],
                  LINKFLAGS=['-fopenmp', '--offload-arch=' + archs, '--libomptarget-nvptx-bc-path={llvmlib}',
                             '--cuda-path=/usr/local/cuda',
                             '--rocm-device-lib-path=/usr/lib/x86_64-linux-gnu/amdgcn/bitcode'],
                  CCCOMSTR='CC $SOURCE', CXXCOMSTR='CC $SOURCE', LINKCOMSTR='LINK $TARGET')
env.Program('app', Glob('src/*{ext}'))
{fill}"""

# Bringing a large project up to date without compiling it (`--large N --fill`): with
# `bench_fill=<built project>`, every command the build would start instead copies the file of the same
# kind from the built 100-source project (`src/k0123.sm_80.o` <- `src/k0000.sm_80.o`). The tool's
# in-process steps (package + embed) run for real on those copies. Signatures do not include how a
# command is run (SCons's SPAWN), so .sconsign holds what a real build would, every file has the
# size a real one has, and the null builds that follow run exactly as after a real build.
FILL = """\
if ARGUMENTS.get('bench_fill'):
    import sys
    sys.path.insert(0, {bench!r})
    import scons_scale
    env['SPAWN'] = scons_scale.fill_spawn(ARGUMENTS['bench_fill'])
"""


def fill_spawn(reference: str):
    """The SPAWN of a `bench_fill` run (see FILL)."""
    import re

    def spawn(sh, escape, cmd, args, env):
        while "&&" in args:           # a command of several jobs: the last one writes the output
            args = args[args.index("&&") + 1:]
        if "--output-file" in args:   # ptxas
            out = args[args.index("--output-file") + 1]
        elif "-o" in args:
            out = args[args.index("-o") + 1]
        elif len(args) > 2 and args[1].endswith("_device_link.py"):
            # `_device_link.py [--option=value ...] TARGET ...`: the first word that is no option
            out = next(a for a in args[2:] if not a.startswith("--"))
        else:
            sys.stderr.write(f"scons_scale: fill: no output in {' '.join(args)[:200]}\n")
            return 1
        out = out.strip("'\"")
        ref = os.path.join(reference, re.sub(r"k\d{4}(\.[^/]*)$", r"k0000\1", out))
        shutil.copyfile(ref, out)
        return 0
    return spawn


ACTION_WORDS = ("HOSTIR", "HOST", "DEVICE", "DEVICELINK", "PACKAGE", "EMBED", "PACKAGE+EMBED", "LINK", "CC")


def generate(root: Path, n: int, sconstruct: str, heavy: bool = False) -> None:
    (root / "src").mkdir(parents=True, exist_ok=True)
    ext = ".cpp" if heavy else ".c"
    for i in range(n):
        (root / "src" / f"k{i:04d}{ext}").write_text((HEAVY_SOURCE if heavy else SOURCE).format(i=i))
    extern = 'extern "C" ' if heavy else ""
    decls = "\n".join(f"{extern}double kern_{i}(double *x, size_t n);" for i in range(n))
    calls = "\n".join(f"  t += kern_{i}(x, 64);" for i in range(n))
    (root / "src" / f"main{ext}").write_text(MAIN.format(decls=decls, calls=calls))
    (root / "SConstruct").write_text(sconstruct)


# `python -m SCons`, which then reports the peak RSS of the scons process itself (the graph; the
# processes it starts are not counted).
_SCONS_WITH_RSS = ("import atexit, resource, runpy, sys; atexit.register(lambda: sys.stderr.write("
                   "'scons_scale: maxrss %d\\n' % resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)); "
                   "sys.argv[0] = 'scons'; runpy.run_module('SCons', run_name='__main__', alter_sys=True)")


def scons(root: Path, *args) -> tuple[float, dict[str, int], int, float, int]:
    """Run scons; (wall seconds, action counts, exit status, CPU seconds of all its processes,
    peak RSS in KiB of the scons process). CPU time is reported too because wall time on a shared
    2-core machine is noisy."""
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    env["PATH"] = env.get("PATH", "") + os.pathsep + "/usr/local/cuda/bin"
    env.pop("OFFLOAD_VERBOSE", None)
    # Python as users run it: caching its bytecode (a sandbox may set this off; both ways then pay
    # for compiling their modules on every run, the tool's more than SCons's own).
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    cmd = [sys.executable, "-c", _SCONS_WITH_RSS, "-Q", f"--site-dir={REPO / 'site_scons'}", *args]
    t0 = time.perf_counter()
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        proc = subprocess.Popen(cmd, cwd=root, stdout=out, stderr=err, text=True, env=env)
        _, status, ru = os.wait4(proc.pid, 0)
        dt = time.perf_counter() - t0
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read(), err.read()
    cpu = ru.ru_utime + ru.ru_stime
    if proc.returncode not in (0, 1) or (proc.returncode == 1 and "-q" not in args):
        sys.exit(f"scons {' '.join(args)} failed in {root}:\n{stdout[-3000:]}\n{stderr[-3000:]}")
    counts: dict[str, int] = {}
    for line in stdout.splitlines():
        word = line.split(" ", 1)[0]
        if word in ACTION_WORDS:
            counts[word] = counts.get(word, 0) + 1
    rss = [int(line.split()[-1]) for line in stderr.splitlines() if line.startswith("scons_scale: maxrss ")]
    return dt, counts, proc.returncode, cpu, rss[-1] if rss else 0


def null_builds(root: Path, jobs: str, archs: str, repeat: int) -> tuple[float, dict[str, int], int, float, int]:
    """`repeat` null builds: median wall and CPU time, the counts of the last (nothing should run)."""
    runs = [scons(root, jobs, f"archs={archs}") for _ in range(repeat)]
    counts = {}
    for r in runs:
        for k, v in r[1].items():
            counts[k] = max(counts.get(k, 0), v)
    return (statistics.median(r[0] for r in runs), counts, runs[-1][2], statistics.median(r[3] for r in runs),
            max(r[4] for r in runs))


def large_build_summary(root: Path) -> str:
    """The tool's large build, as its report recorded it: each memory-budgeted step (device links,
    the link) with its time span and peak memory, whether any two of them ran together, and
    `offload-tool verify` of the program. A program that does not verify stops the benchmark."""
    import json
    report = json.loads((root / "report.json").read_text())
    heavy = [r for r in report["actions"] if r.get("kind") in ("device-link", "link") and r.get("start_s") is not None]
    lines = []
    for r in sorted(heavy, key=lambda r: r["start_s"]):
        peak = r.get("peak_rss_bytes")
        lines.append(f"    {r['label']}: {r['start_s']:8.1f}-{r['end_s']:8.1f} s, peak "
                     f"{peak / (1 << 30):.2f} GiB" if peak else f"    {r['label']}: {r['start_s']:8.1f}-{r['end_s']:8.1f} s")
    # The most memory the budgeted steps held at once: the largest sum of the peaks of steps
    # whose spans overlap (each step's peak taken for its whole span: an upper bound).
    events = sorted([(r["start_s"], 1, r.get("peak_rss_bytes") or 0) for r in heavy]
                    + [(r["end_s"], 0, r.get("peak_rss_bytes") or 0) for r in heavy])
    held = most = running = most_running = 0
    for _, starts, peak in events:  # ends sort before starts at the same instant
        held += peak if starts else -peak
        running += 1 if starts else -1
        most, most_running = max(most, held), max(most_running, running)
    lines.append(f"    memory-heavy steps at once: at most {most_running}, holding at most "
                 f"{most / (1 << 30):.2f} GiB (the sum of their peaks)")
    cp = subprocess.run([sys.executable, "-m", "offload_tool.cli.tool", "verify", "app"], cwd=root,
                        capture_output=True, text=True, env=dict(os.environ, PYTHONPATH=str(REPO)))
    verdict = (cp.stdout.strip().splitlines() or [cp.stderr.strip()])[-1]
    lines.append(f"    offload-tool verify app: exit {cp.returncode}: {verdict}")
    if cp.returncode:
        sys.exit(f"scons_scale: error: the large project's program does not verify:\n{cp.stdout}{cp.stderr}")
    return "\n".join(lines)


def fmt_counts(c: dict[str, int]) -> str:
    return " ".join(f"{k}={v}" for k, v in sorted(c.items())) or "-"


def sconstructs(a) -> dict[str, str]:
    clang = shutil.which(a.clang)
    if not clang:
        sys.exit(f"scons_scale: error: {a.clang} not found (install the Debian package clang-19)")
    llvmlib = os.path.join(os.path.dirname(os.path.dirname(os.path.realpath(clang))), "lib")
    clangxx = a.clang.replace("clang", "clang++", 1)
    fill = FILL.format(bench=str(Path(__file__).resolve().parent))
    ext = ".cpp" if a.heavy else ".c"
    return {"usual": USUAL_SCONSTRUCT.format(clang=a.clang, clangxx=clangxx, llvmlib=llvmlib, fill=fill, ext=ext),
            "offload": OFFLOAD_SCONSTRUCT.format(clang=a.clang, fill=fill, ext=ext)}


def project(base: Path, n: int, default_n: int) -> Path:
    """Where the project pair of `n` sources lives: `base` itself for the main one (as before),
    `base/large<n>` for the `--large` one."""
    return base if n == default_n else base / f"large{n}"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sources", type=int, default=100)
    ap.add_argument("--archs", default="sm_75,sm_80,gfx90a,gfx1030")
    ap.add_argument("--add-arch", default="sm_90")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--clang", default="clang-19")
    ap.add_argument("--keep", help="build in this directory and keep it")
    ap.add_argument("--large", type=int, default=0, metavar="N",
                    help="also a project of N sources (e.g. 1000), for its null-build row")
    ap.add_argument("--null-only", action="store_true",
                    help="only the null builds, on the projects already built in --keep DIR")
    ap.add_argument("--repeat", type=int, default=3, help="null builds per project (median)")
    ap.add_argument("--fill", action="store_true",
                    help="bring the usual way's --large project up to date by copying the built main "
                         "project's outputs instead of compiling (see FILL); the tool's is built for real")
    ap.add_argument("--large-jobs", type=int, default=0, metavar="J",
                    help="-j of the tool's --large build (default: --jobs)")
    ap.add_argument("--link-memory", default="auto", metavar="SIZE",
                    help="OFFLOAD_LINK_MEMORY of the tool's --large build (default auto)")
    ap.add_argument("--heavy", action="store_true",
                    help="C++ sources with the standard library's heavy headers and templates")
    ap.add_argument("--no-add", action="store_true", help="skip the add-an-arch rebuild")
    a = ap.parse_args()
    if a.null_only and not a.keep:
        sys.exit("scons_scale: error: --null-only needs --keep DIR (the projects built before)")
    scs = sconstructs(a)
    base = Path(a.keep) if a.keep else Path(tempfile.mkdtemp(prefix="scons_scale."))
    main_built = all((base / name / ".sconsign.dblite").exists() for name in scs)
    if a.fill and a.large and main_built:
        pass  # the main pair, built before, is the reference the large pair is filled from
    elif base.exists() and a.keep and not a.null_only:
        shutil.rmtree(base)
        main_built = False
    archs = a.archs
    more = archs + "," + a.add_arch
    jobs = f"-j{a.jobs}"
    sizes = [a.sources] + ([a.large] if a.large else [])
    results: dict[tuple[int, str], dict] = {}
    for n in sizes:
        for name, sc in scs.items():
            root = project(base, n, a.sources) / name
            r = {}
            if a.null_only or (n == a.sources and a.fill and main_built):
                if not (root / ".sconsign.dblite").exists():
                    sys.exit(f"scons_scale: error: {root} was not built (run without --null-only first)")
                r["null"] = null_builds(root, jobs, archs, a.repeat)
                results[(n, name)] = r
                print(f"{n:5d} {name:8s} null {r['null'][0]:7.2f} s (cpu {r['null'][3]:6.2f} s, "
                      f"scons max rss {r['null'][4] / 1024:6.1f} MiB)  [{fmt_counts(r['null'][1])}]", flush=True)
                continue
            if n != a.sources:
                shutil.rmtree(root, ignore_errors=True)  # built afresh (an earlier fill is no build)
            generate(root, n, sc, a.heavy)
            filled = ""
            if a.fill and n != a.sources and name == "usual":
                ref = project(base, a.sources, a.sources) / name
                r["full"] = scons(root, jobs, f"archs={archs}", f"bench_fill={ref}")
                filled = " (filled by copying, not compiled)"
            elif n != a.sources and name == "offload":
                large_jobs = f"-j{a.large_jobs or a.jobs}"
                r["full"] = scons(root, large_jobs, f"archs={archs}", f"link_memory={a.link_memory}",
                                  "--offload-report=report.html")
                filled = f" ({large_jobs}, OFFLOAD_LINK_MEMORY={a.link_memory})"
                print(large_build_summary(root), flush=True)
            else:
                r["full"] = scons(root, jobs, f"archs={archs}")
            r["null"] = null_builds(root, jobs, archs, a.repeat)
            r["uptodate"] = scons(root, "-q", f"archs={archs}")
            print(f"{n:5d} {name:8s} full{filled} {r['full'][0]:7.2f} s (cpu {r['full'][3]:7.2f} s)  "
                  f"[{fmt_counts(r['full'][1])}]", flush=True)
            print(f"{n:5d} {name:8s} null {r['null'][0]:7.2f} s (cpu {r['null'][3]:6.2f} s, "
                  f"scons max rss {r['null'][4] / 1024:6.1f} MiB)  [{fmt_counts(r['null'][1])}]  "
                  f"(scons -q exit {r['uptodate'][2]})", flush=True)
            if n == a.sources and not a.no_add:
                # Adding an arch leaves the tree built for more archs: a project kept for
                # --null-only is put back to the archs its null build uses.
                r["add"] = scons(root, jobs, f"archs={more}")
                print(f"{n:5d} {name:8s} +{a.add_arch:6s}{r['add'][0]:7.2f} s (cpu {r['add'][3]:7.2f} s)  "
                      f"[{fmt_counts(r['add'][1])}]", flush=True)
                if a.keep:
                    scons(root, jobs, f"archs={archs}")
            results[(n, name)] = r
    print()
    kind = "C++ (heavy headers)" if a.heavy else "C"
    print(f"projects: N OpenMP {kind} sources + main x {len(archs.split(','))} archs ({archs}), "
          f"+{a.add_arch}, {jobs}, {a.clang}; times are wall (null builds: median of {a.repeat})")
    print(f"{'':20s}{'usual':>10s}{'offload':>10s}{'ratio':>8s}{'cpu usual':>11s}{'cpu offload':>12s}"
          f"{'cpu ratio':>10s}  target")
    null_only_main = a.null_only or (a.fill and main_built)
    rows = [] if null_only_main else [(a.sources, "full build", "full", "<= 0.80")] + \
        ([] if a.no_add else [(a.sources, f"add {a.add_arch}", "add", "<= 0.35")])
    rows.insert(0 if null_only_main else 1, (a.sources, "null build", "null", "<= 1.00"))
    if a.large:
        rows.append((a.large, "null build", "null", "<= 1.20"))
    for n, label, key, target in rows:
        u, o = results[(n, "usual")][key], results[(n, "offload")][key]
        print(f"{f'{n} src {label}':20s}{u[0]:9.2f}s{o[0]:9.2f}s{o[0] / u[0]:8.2f}{u[3]:10.2f}s{o[3]:11.2f}s"
              f"{o[3] / max(u[3], 1e-9):10.2f}  {target}")
    for n in sizes:
        u, o = results[(n, "usual")]["null"], results[(n, "offload")]["null"]
        print(f"{n} src null build, peak RSS of scons: usual {u[4] / 1024:.1f} MiB, offload {o[4] / 1024:.1f} MiB")
    if not a.keep:
        shutil.rmtree(base, ignore_errors=True)
    else:
        print(f"projects kept in {base}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
