#!/usr/bin/env python3
"""`make example`: build example_project/ with SCons, run what it built, and print a report.

The report says which programs and libraries were built, for which offload archs (read back
from the built files with `offload-tool inspect`, via the manifest the SConstruct writes), and
each program's checked output. The build writes a cost report (`--offload-report`): its per-arch
summary is printed at the end of the build, the page is build/report.html. Exit status 1 if the
build or any check fails."""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
from collections import defaultdict

HERE = os.path.dirname(os.path.abspath(__file__))
REPORT = "build/report.html"

# (program, what it shows, how to run it)
PROGRAMS = [
    ("build/bin/zaxpy", "OpenMP offload C++ (ZAXPY) + C (SAXPY), one fat executable"),
    ("build/bin/app", "plain g++ program linking the offload static library libvecsum.a"),
    ("build/bin/saxpy_cuda", "CUDA kernel built with nvcc"),
    ("build/bin/vadd_hip", "HIP kernel built with clang (per-arch device objects, .hipfb bundle)"),
]


def tool_env() -> dict[str, str]:
    env = dict(os.environ)
    path = env.get("PATH", "")
    if os.path.isdir("/usr/local/cuda/bin") and "/usr/local/cuda/bin" not in path.split(os.pathsep):
        env["PATH"] = path + os.pathsep + "/usr/local/cuda/bin"
    # libomptarget is not on the default library path on Debian; OpenMP offload programs fall
    # back to the host when no GPU is present.
    libdirs = [d for d in ("/usr/lib/llvm-19/lib",) if os.path.isdir(d)]
    if libdirs:
        env["LD_LIBRARY_PATH"] = os.pathsep.join(libdirs + [env.get("LD_LIBRARY_PATH", "")]).rstrip(os.pathsep)
    return env


def build(jobs: int, extra: list[str], env: dict[str, str]) -> bool:
    cmd = [sys.executable, "-m", "SCons", "-Q", f"-j{jobs}", *extra]
    print(f"$ cd example_project && scons -Q -j{jobs} {' '.join(extra)}".rstrip(), flush=True)
    started = time.monotonic()
    result = subprocess.run(cmd, cwd=HERE, env=env)
    print(f"(build finished in {time.monotonic() - started:.1f} s, exit status {result.returncode})\n", flush=True)
    return result.returncode == 0


def run_programs(env: dict[str, str]) -> list[tuple[str, str, bool, str]]:
    results = []
    for rel, what in PROGRAMS:
        path = os.path.join(HERE, rel)
        if not os.path.exists(path):
            results.append((rel, what, False, "not built"))
            continue
        try:
            proc = subprocess.run([path], cwd=HERE, env=env, capture_output=True, text=True, timeout=120)
            out = (proc.stdout + proc.stderr).strip()
            ok = proc.returncode == 0 and out.splitlines()[-1:] == ["PASS"]
        except (OSError, subprocess.TimeoutExpired) as exc:
            out, ok = str(exc), False
        results.append((rel, what, ok, out))
    return results


def archs_by_file(manifest_path: str) -> dict[str, list[str]]:
    """Group the manifest's images by the built file they were found in
    (`path` is `file`, `file:section[i]`, `file[bundle entry]` or `archive(member)...`)."""
    with open(manifest_path, encoding="utf-8") as f:
        images = json.load(f)
    grouped: dict[str, set[str]] = defaultdict(set)
    for image in images:
        where = re.match(r"[^\[(:]+", image["path"]).group(0)
        grouped[where].add(image.get("arch") or "?")
    return {k: sorted(v) for k, v in sorted(grouped.items())}


def split_outputs() -> list[tuple[str, list[str]]]:
    """The device-specific archives split from the heterogeneous archive, and the files unbundled
    from the HIP fat binary: raw device code, so listed by name (archive members by member name)."""
    from offload_tool.formats.archive import read_archive

    found = []
    hda = os.path.join(HERE, "build", "hda")
    for name in sorted(os.listdir(hda)) if os.path.isdir(hda) else []:
        if name.startswith("libvecsum_hda-") and name.endswith(".a"):
            with open(os.path.join(hda, name), "rb") as f:
                members = [f"{m.name} ({len(m.data)} bytes)" for m in read_archive(f.read())]
            found.append((f"build/hda/{name}", members or ["(empty)"]))
    src = os.path.join(HERE, "build", "src")
    for name in sorted(os.listdir(src)) if os.path.isdir(src) else []:
        if name.startswith("vadd-") and name.endswith(".hipfb"):
            found.append((f"build/src/{name}", [f"{os.path.getsize(os.path.join(src, name))} bytes"]))
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", "-j", type=int, default=2)
    parser.add_argument("scons_args", nargs="*", help="extra scons arguments, e.g. archs=sm_80,gfx90a")
    args = parser.parse_args(argv)

    env = tool_env()
    built = build(args.jobs, [f"--offload-report={REPORT}", *args.scons_args], env)
    results = run_programs(env) if built else []

    print("=" * 78)
    print("offload-tool example: report")
    print("=" * 78)
    manifest = os.path.join(HERE, "build", "manifest.json")
    if os.path.exists(manifest):
        print("\nBuilt outputs and the device images inside them (offload-tool inspect):")
        for where, archs in archs_by_file(manifest).items():
            print(f"  {where:<34} {', '.join(archs)}")
    splits = split_outputs()
    if splits:
        print("\nSplit back out (device-specific archives, unbundled HIP fat binary):")
        for where, what in splits:
            print(f"  {where}")
            for item in what:
                print(f"      {item}")
    if os.path.exists(os.path.join(HERE, REPORT)):
        print(f"\nBuild cost report (per arch: time, bytes in each binary, slowest sources): example_project/{REPORT}")
        print("  records: example_project/build/report.json; timeline: example_project/build/trace.json "
              "(Perfetto or chrome://tracing)")
        print("  what one more arch would cost: offload-tool cost --add gfx1030 example_project/build/report.json")
    print("\nPrograms:")
    for rel, what, ok, out in results:
        print(f"  [{'ok' if ok else 'FAILED'}] {rel}: {what}")
        for line in out.splitlines():
            print(f"        {line}")
    failed = (not built) or not all(ok for *_, ok, _ in results)
    print("\n" + ("FAILED: see above" if failed else "All example programs built, ran and checked their results."))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
