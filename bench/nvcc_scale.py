#!/usr/bin/env python3
"""Benchmark of the offload SCons tool's nvcc graph against the usual nvcc build.

Generates a CUDA project of N `.cu` sources (default 50) built with nvcc for M archs (default
sm_80,sm_86,sm_90) twice, in one run:
  - "split": `OFFLOAD_CUDA_COMPILER='nvcc'` with `OFFLOAD_NVCC_SPLIT=True` (nvcc's own steps as
    nodes: front end (host preprocess + cudafe++), per virtual arch a preprocess and cicc + ptxas,
    fatbinary, host compile);
  - "usual": one `nvcc -c` per source with a `-gencode` per arch (`OFFLOAD_NVCC_SPLIT=False`,
    what CMake and Meson do).
and measures, for each, at -jJOBS: the full build, the null build, the rebuild after adding one
arch, and the rebuild after editing one source's kernel. Prints wall and CPU times (user + system
of SCons and every process it started: on a shared machine the wall time moves with the load,
the CPU time much less), the steps SCons ran and the ratios split / usual (targets: add an arch
<= 0.5x, full build <= 1.0x).

Usage: python3 bench/nvcc_scale.py [--sources 50] [--archs sm_80,sm_86,sm_90] [--add-arch sm_89]
                                   [--jobs N (default: CPUs)] [--keep DIR]"""

from __future__ import annotations

import argparse
import collections
import os
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

SOURCE = """\
__global__ void kern_{i}(float *x, int n) {{
  int k = blockIdx.x * blockDim.x + threadIdx.x;
  if (k < n) x[k] = x[k] * {i}.0f + sqrtf((float)k) * {v};
}}
void launch_{i}(float *x, int n) {{ kern_{i}<<<(n + 255) / 256, 256>>>(x, n); }}
"""

MAIN = """\
#include <cstdio>
{decls}
int main() {{
  float *d;
  if (cudaMalloc(&d, 1024 * sizeof(float)) != cudaSuccess) {{ std::printf("host\\n"); return 0; }}
{calls}
  std::printf("gpu\\n");
  return 0;
}}
"""

SCONSTRUCT = """\
import os
env = Environment(tools=['default', 'offload'], ENV={{'PATH': os.environ['PATH']}},
                  OFFLOAD_ARCHS=ARGUMENTS['archs'].split(','), OFFLOAD_CUDA_COMPILER='nvcc',
                  OFFLOAD_NVCC_SPLIT={split}, CXXFLAGS=['-O2'])
env.OffloadProgram('app', Glob('src/*.cu'))
"""

_STEP = re.compile(r"^(NVCC-FE|NVCC-PP|NVCC-DEVICE|NVCC-FATBIN|NVCC-HOST|NVCC|LINK)\b")


def generate(root: Path, n: int, split: bool) -> None:
    (root / "src").mkdir(parents=True, exist_ok=True)
    (root / "SConstruct").write_text(SCONSTRUCT.format(split=split))
    for i in range(n):
        (root / "src" / f"k{i:03d}.cu").write_text(SOURCE.format(i=i, v="1.0f"))
    decls = "\n".join(f"void launch_{i}(float *x, int n);" for i in range(n))
    calls = "\n".join(f"  launch_{i}(d, 1024);" for i in range(n))
    (root / "src" / "main.cu").write_text(MAIN.format(decls=decls, calls=calls))


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def scons(root: Path, jobs: int, archs: str) -> tuple[float, float, dict[str, int]]:
    env = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    cmd = [sys.executable, "-m", "SCons", "-Q", f"-j{jobs}", f"--site-dir={REPO / 'site_scons'}", f"archs={archs}"]
    c0, t0 = _cpu(), time.perf_counter()
    cp = subprocess.run(cmd, cwd=root, capture_output=True, text=True, env=env)
    dt, dc = time.perf_counter() - t0, _cpu() - c0
    if cp.returncode:
        sys.exit(f"nvcc_scale: scons failed in {root}:\n{cp.stdout[-2000:]}\n{cp.stderr[-2000:]}")
    c = collections.Counter(m.group(1) for m in map(_STEP.match, cp.stdout.splitlines()) if m)
    return dt, dc, dict(c)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sources", type=int, default=50)
    ap.add_argument("--archs", default="sm_80,sm_86,sm_90")
    ap.add_argument("--add-arch", default="sm_89")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 2)
    ap.add_argument("--keep", help="build in this directory and keep it")
    args = ap.parse_args()
    if not shutil.which("nvcc") and not os.path.exists("/usr/local/cuda/bin/nvcc"):
        print("nvcc_scale: nvcc not found (install the CUDA toolkit)")
        return 0
    base = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="nvcc_scale."))
    added = args.archs + "," + args.add_arch
    rows = []
    try:
        roots = {"split": base / "split", "usual": base / "usual"}
        for name, root in roots.items():
            shutil.rmtree(root, ignore_errors=True)
            generate(root, args.sources, split=(name == "split"))
        results: dict[str, dict[str, tuple[float, float, dict]]] = {n: {} for n in roots}
        for name, root in roots.items():
            r = results[name]
            r["full"] = scons(root, args.jobs, args.archs)
            r["null"] = scons(root, args.jobs, args.archs)
            r["add arch"] = scons(root, args.jobs, added)
            (root / "src" / "k007.cu").write_text(SOURCE.format(i=7, v="2.0f"))
            r["edit one source"] = scons(root, args.jobs, added)
        print(f"nvcc graph vs one nvcc -c per source: {args.sources} sources + main, archs {args.archs} "
              f"(+{args.add_arch}), -j{args.jobs}")
        print(f"{'build':<16} {'split s':>9} {'usual s':>9} {'ratio':>6}  {'split cpu':>9} {'usual cpu':>9} "
              f"{'ratio':>6}  steps (split | usual)")
        for what in ("full", "null", "add arch", "edit one source"):
            (ts, ps, cs), (tu, pu, cu) = results["split"][what], results["usual"][what]
            steps = " ".join(f"{k}={v}" for k, v in sorted(cs.items())) + " | " + \
                " ".join(f"{k}={v}" for k, v in sorted(cu.items()))
            rows.append((what, ts, tu))
            print(f"{what:<16} {ts:9.2f} {tu:9.2f} {ts / tu:6.2f}  {ps:9.2f} {pu:9.2f} {ps / pu:6.2f}  {steps}")
    finally:
        if not args.keep:
            shutil.rmtree(base, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
