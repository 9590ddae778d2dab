#!/usr/bin/env python3
"""Build insight benchmark: what progress and the cost report add to a null build, and how the cost
estimate of an added arch compares with the time really spent adding it.

1. Null build of N sources x the archs, `OFFLOAD_PROGRESS=off` against `on` (the up-front count of
   what is left to run) and against `--offload-report` (the report written from the previous one),
   alternating, REPEAT times each: median wall and CPU seconds, and the ratios (the aim: progress
   within noise of off, i.e. a ratio of about 1.00).
2. `offload-tool cost --add ARCH` after a build of the reference archs, then the build that adds
   ARCH: predicted against measured action time (the sum of the new arch's action times, as the
   report records them) and CPU time, side by side with their ratio. Times vary with the machine's
   load; the test suite checks the predicted actions and bytes, this prints the times.

Usage: python3 bench/insight.py [--sources 40] [--archs sm_75,gfx90a] [--add-arch gfx1030]
                                [--reference gfx90a,gfx908] [--jobs 2] [--repeat 5]"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from scons_scale import OFFLOAD_SCONSTRUCT, REPO, generate, scons  # noqa: E402


def null_builds(root: Path, jobs: str, archs: str, repeat: int) -> None:
    variants = {"progress off": ("off", []), "progress on": ("on", []),
                "report": ("off", ["--offload-report=out/report.html"])}
    times: dict[str, list[tuple[float, float]]] = {k: [] for k in variants}
    for _ in range(repeat):
        for name, (progress, extra) in variants.items():
            os.environ["OFFLOAD_PROGRESS"] = progress
            dt, counts, _, cpu = scons(root, jobs, f"archs={archs}", *extra)
            if counts:
                sys.exit(f"insight: the null build ran actions: {counts}")
            times[name].append((dt, cpu))
    os.environ.pop("OFFLOAD_PROGRESS", None)
    base_wall = statistics.median(t for t, _ in times["progress off"])
    base_cpu = statistics.median(c for _, c in times["progress off"])
    print(f"{'null build':<16} {'wall s':>8} {'cpu s':>8} {'wall ratio':>11} {'cpu ratio':>10}")
    for name, ts in times.items():
        wall, cpu = statistics.median(t for t, _ in ts), statistics.median(c for _, c in ts)
        print(f"{name:<16} {wall:8.3f} {cpu:8.3f} {wall / base_wall:11.2f} {cpu / base_cpu:10.2f}")


def prediction(root: Path, jobs: str, reference: str, add: str) -> None:
    report = root / "out" / "report.json"
    scons(root, jobs, f"archs={reference}", "--offload-report=out/report.html")
    env = dict(os.environ, PYTHONPATH=str(REPO))
    est = json.loads(subprocess.run([sys.executable, "-m", "offload_tool.cli.tool", "cost", f"--add={add}", "--json",
                                     str(report)], capture_output=True, text=True, env=env, check=True).stdout)[0]
    scons(root, jobs, f"archs={reference},{add}", "--offload-report=out/report.html")
    after = json.loads(report.read_text())
    mine = [a for a in after["actions"] if a["arch"] == add]
    wall = sum(a["wall_s"] for a in mine)
    cpu = sum(a["cpu_s"] or 0.0 for a in mine)
    print(f"\nadding {add} (estimated from {', '.join(est['reference_archs'])}):")
    print(f"{'':<22} {'predicted':>10} {'measured':>10} {'ratio':>7}")
    print(f"{'new actions':<22} {sum(1 for a in est['actions'] if not a['grows']):>10} {len(mine):>10}")
    print(f"{'action time s':<22} {est['wall_s'] - sum(a['wall_s'] for a in est['actions'] if a['grows']):10.2f} "
          f"{wall:10.2f} {wall / max(1e-9, est['wall_s'] - sum(a['wall_s'] for a in est['actions'] if a['grows'])):7.2f}")
    if est["cpu_s"] is not None:
        pcpu = est["cpu_s"] - sum(a["cpu_s"] for a in est["actions"] if a["grows"])
        print(f"{'action CPU s':<22} {pcpu:10.2f} {cpu:10.2f} {cpu / max(1e-9, pcpu):7.2f}")
    for path, b in est["binaries"].items():
        real = next((x["archs"].get(add, {}).get("bytes", 0) for x in after["binaries"] if x["path"] == path), 0)
        print(f"{'bytes in ' + path:<22} {b['bytes']:10d} {real:10d} {real / max(1, b['bytes']):7.2f}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sources", type=int, default=40)
    ap.add_argument("--archs", default="sm_75,gfx90a")
    ap.add_argument("--reference", default="gfx90a,gfx908")
    ap.add_argument("--add-arch", default="gfx1030")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--clang", default="clang-19")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="insight.") as tmp:
        root = Path(tmp) / "null"
        generate(root, a.sources, OFFLOAD_SCONSTRUCT.format(clang=a.clang))
        print(f"{a.sources} sources x {a.archs}, -j{a.jobs}; building once ...", flush=True)
        os.environ["OFFLOAD_PROGRESS"] = "off"
        scons(root, f"-j{a.jobs}", f"archs={a.archs}", "--offload-report=out/report.html")
        null_builds(root, f"-j{a.jobs}", a.archs, a.repeat)
        root2 = Path(tmp) / "predict"
        generate(root2, max(4, a.sources // 4), OFFLOAD_SCONSTRUCT.format(clang=a.clang))
        prediction(root2, f"-j{a.jobs}", a.reference, a.add_arch)
    return 0


if __name__ == "__main__":
    sys.exit(main())
