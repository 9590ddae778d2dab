#!/usr/bin/env python3
"""What the offload SCons tool sends to sccache-dist build servers, beside a local build.

Generates a project of N sources (default 100) split evenly over three kinds, each kind one
`env.OffloadProgram` with a `main` of its own (not counted in N) and two offload archs, 4 archs
overall:
  - hip:  HIP compiled with clang (old offload driver), gfx90a + gfx1030;
  - cuda: CUDA compiled with nvcc, sm_80 + sm_90;
  - omp:  OpenMP C compiled with clang, sm_80 + gfx90a.
It builds the project locally (no launcher), then cleans it, starts a loopback cluster (a
scheduler and two overlay build servers on 127.0.0.1: tests/sccache_dist_cluster.py) and builds
the same tree with `OFFLOAD_LAUNCHER=<sccache>`, the cluster's client configuration in the
build's `SCCACHE_CONF` and an empty `SCCACHE_DIR`, so that nothing is a cache hit. Both builds
build one kind's program at a time: sccache counts distributed compiles per build server only,
not per kind, so the tool's sccache server's statistics are zeroed before each kind and read
after it.

Per kind it prints: the device compiles (one per source and arch; for the distributed nvcc build,
the cicc runs sccache saw), the compiles sccache ran on the build servers, the distributed
compiles that failed (`dist_errors`: run here instead), and wall and CPU time beside the local
build's, with ratios. The CPU of the distributed build is what runs here: scons and everything it
waited for, plus the tool's sccache server (a daemon that preprocesses and runs nvcc's local
steps; read from /proc, and only the server alive at the end of the kind's build is counted). The
build servers' CPU is not counted: their compiles run under bubblewrap, whose sandboxed
processes' time does not reach the server's reaped-children time. The build servers share this machine's cores, so on a 2-core machine
the point is what distributes, not speed. The distributed nvcc build is one `nvcc` per source
(the tool splits nvcc into nodes only without a launcher), the local one is split.

Both builds' programs must run (host fallback, no GPU needed) and pass `offload-tool verify`.
The tool's sccache server and the cluster are stopped at the end, also on error.

Needs root (the build servers' sandbox), bubblewrap, sccache and sccache-dist in the venv,
clang-19 and nvcc.

Usage: python3 bench/sccache_dist.py [--sources 100] [--jobs 2] [--kinds hip,cuda,omp] [--keep DIR]"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))

from sccache_dist_cluster import SccacheDistCluster, tool_sccache, tool_servers, unavailable_reason  # noqa: E402

CLUSTER_LIFETIME = 3600     # s; the bound on every process of the cluster
SCONS_TIMEOUT = 1800
N_LOOP = 64                 # elements the generated kernels' host fallbacks loop over

CUDA_SOURCE = """\
__global__ void kern_{i}(float *x, int n) {{
  int k = blockIdx.x * blockDim.x + threadIdx.x;
  if (k < n) x[k] = x[k] * {i}.0f + sqrtf((float)k);
}}
int host_{i}(int s) {{ return s * {i}; }}
"""
HIP_SOURCE = "#include <hip/hip_runtime.h>\n" + CUDA_SOURCE

# The main of a CUDA or HIP program: `{api}` is cuda or hip (its runtime's malloc says whether a
# GPU is there).
_GPU_MAIN = """\
{include}#include <cstdio>
{{decls}}
int main() {{{{
  long t = 0;
{{calls}}
  float *d;
  if ({api}Malloc(&d, 64) != {api}Success) {{{{ std::printf("{api} host %ld\\n", t); return 0; }}}}
  std::printf("{api} gpu %ld\\n", t);
  return 0;
}}}}
"""
HIP_MAIN = _GPU_MAIN.format(include="#include <hip/hip_runtime.h>\n", api="hip")
CUDA_MAIN = _GPU_MAIN.format(include="", api="cuda")

OMP_SOURCE = """\
#include <stddef.h>
double kern_{i}(double *x, size_t n) {{
  double s = 0;
#pragma omp target teams distribute parallel for reduction(+:s) map(to: x[0:n]) map(tofrom: s)
  for (size_t k = 0; k < n; k++) s += x[k] * {i}.0 + x[k];
  return s;
}}
"""

OMP_MAIN = """\
#include <stdio.h>
#include <stddef.h>
{decls}
int main(void) {{
  double x[{n}]; double t = 0;
  for (int i = 0; i < {n}; i++) x[i] = i;
{calls}
  printf("omp %.0f\\n", t);
  return 0;
}}
"""

SCONSTRUCT = """\
import os
penv = {'PATH': os.environ['PATH']}
for k in ('SCCACHE_CONF', 'SCCACHE_DIR', 'SCCACHE_IDLE_TIMEOUT', 'SCCACHE_ERROR_LOG', 'SCCACHE_LOG'):
    if k in os.environ:
        penv[k] = os.environ[k]
env = Environment(tools=['default', 'offload'], ENV=penv, OFFLOAD_CLANG='clang-19',
                  OFFLOAD_HOSTFLAGS=['-O2'], OFFLOAD_DEVICEFLAGS=['-O2'], CXXFLAGS=['-O2'],
                  OFFLOAD_LAUNCHER=ARGUMENTS.get('launcher', ''))
kinds = ARGUMENTS.get('kinds', 'hip,cuda,omp').split(',')
if 'hip' in kinds:
    env.OffloadProgram('hip_app', Glob('src/hip/*.hip'), OFFLOAD_ARCHS=['gfx90a', 'gfx1030'])
if 'cuda' in kinds:
    env.OffloadProgram('cuda_app', Glob('src/cuda/*.cu'), OFFLOAD_ARCHS=['sm_80', 'sm_90'],
                       OFFLOAD_CUDA_COMPILER='nvcc')
if 'omp' in kinds:
    env.OffloadProgram('omp_app', Glob('src/omp/*.c'), OFFLOAD_ARCHS=['sm_80', 'gfx90a'])
"""

KINDS = {
    # kind: (folder and extension, program, archs, what builds it)
    "hip": ("hip", "hip_app", "gfx90a,gfx1030", "HIP, clang-19"),
    "cuda": ("cu", "cuda_app", "sm_80,sm_90", "CUDA, nvcc"),
    "omp": ("c", "omp_app", "sm_80,gfx90a", "OpenMP C, clang-19"),
}

ACTION_RE = re.compile(r"^(?:\[\s*\d+/\d+\] )?([A-Z][A-Z+]*(?:-[A-Z]+)?)(?: |$)")


def split(n: int, kinds: list[str]) -> dict[str, int]:
    """N sources spread evenly over the kinds (the first ones get the remainder)."""
    return {k: n // len(kinds) + (1 if i < n % len(kinds) else 0) for i, k in enumerate(kinds)}


def generate(root: Path, counts: dict[str, int]) -> dict[str, str]:
    """Write the project; returns each program's expected output (host fallback)."""
    expect = {}
    for kind, n in counts.items():
        ext, prog, _, _ = KINDS[kind]
        d = root / "src" / kind
        d.mkdir(parents=True, exist_ok=True)
        idx = range(n)
        if kind == "omp":
            for i in idx:
                (d / f"k{i:04d}.c").write_text(OMP_SOURCE.format(i=i))
            decls = "\n".join(f"double kern_{i}(double *x, size_t n);" for i in idx)
            calls = "\n".join(f"  t += kern_{i}(x, {N_LOOP});" for i in idx)
            (d / "main.c").write_text(OMP_MAIN.format(decls=decls, calls=calls, n=N_LOOP))
            expect[prog] = f"omp {sum((i + 1) * sum(range(N_LOOP)) for i in idx)}\n"
        else:
            for i in idx:
                (d / f"k{i:04d}.{ext}").write_text((HIP_SOURCE if kind == "hip" else CUDA_SOURCE).format(i=i))
            decls = "\n".join(f"int host_{i}(int s);" for i in idx)
            calls = "\n".join(f"  t += host_{i}(1);" for i in idx)
            (d / f"main.{ext}").write_text((HIP_MAIN if kind == "hip" else CUDA_MAIN).format(decls=decls, calls=calls))
            expect[prog] = f"{kind} host {sum(idx)}\n"
    (root / "SConstruct").write_text(SCONSTRUCT)
    return expect


def sccache() -> str:
    return str(Path(sys.executable).parent / "sccache")


def scons(root: Path, env: dict, *args) -> tuple[float, float, dict[str, int], str]:
    """Run scons; (wall seconds, CPU seconds of scons and every process it waited for, action
    counts, output). CPU beside wall because wall time on a shared 2-core machine is noisy."""
    cmd = [sys.executable, "-m", "SCons", "-Q", f"--site-dir={REPO / 'site_scons'}", *args]
    t0 = time.perf_counter()
    with tempfile.TemporaryFile("w+") as out:
        proc = subprocess.Popen(cmd, cwd=root, stdout=out, stderr=subprocess.STDOUT, text=True, env=env)
        _, status, ru = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - t0
        out.seek(0)
        text = out.read()
    rc = os.waitstatus_to_exitcode(status)
    if rc:
        raise RuntimeError(f"scons {' '.join(args)} failed ({rc}) in {root}:\n{text[-4000:]}")
    counts: dict[str, int] = {}
    for line in text.splitlines():
        m = ACTION_RE.match(line.strip())
        if m and m.group(1) != "SCONS":
            counts[m.group(1)] = counts.get(m.group(1), 0) + 1
    return wall, ru.ru_utime + ru.ru_stime, counts, text


def device_compiles(text: str, ext: str) -> int:
    """DEVICE (nvcc split into nodes: NVCC-DEVICE) lines of sources with this extension: one per
    source and arch."""
    n = 0
    for line in text.splitlines():
        m = ACTION_RE.match(line.strip())
        if m and m.group(1) in ("DEVICE", "NVCC-DEVICE") and line.strip().endswith("." + ext):
            n += 1
    return n


_TICK = os.sysconf("SC_CLK_TCK")


def _cpu_of(pid: int) -> float:
    """User + system time of a process and of the children it has reaped, from /proc (0 when it
    is gone)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return 0.0
    f = stat[stat.rindex(")") + 2:].split()
    return sum(int(x) for x in f[11:15]) / _TICK      # utime stime cutime cstime


def _tool_server_pid(srv: dict) -> int | None:
    """The daemon serving the tool's socket: the sccache process whose environment names it."""
    want = f"SCCACHE_SERVER_UDS={srv['socket']}".encode()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if os.path.basename(os.readlink(entry / "exe")) != "sccache":
                continue
            if want in (entry / "environ").read_bytes().split(b"\0"):
                stat = (entry / "stat").read_text()
                ppid = int(stat[stat.rindex(")") + 2:].split()[1])
                if ppid == 1 or not (Path(f"/proc/{ppid}/exe").exists()
                                     and os.path.basename(os.readlink(f"/proc/{ppid}/exe")) == "sccache"):
                    return int(entry.name)
        except OSError:
            continue
    return None


def _tool_cpu(root: Path) -> float:
    pids = [_tool_server_pid(s) for s in tool_servers(root)]
    return sum(_cpu_of(p) for p in pids if p)


def _stats(root: Path, env: dict) -> dict:
    """The tool's sccache servers' statistics, summed (one server per environment; here one)."""
    total = {"dist_compiles": {}, "dist_errors": 0, "compile_fails": 0, "adv_misses": {}}
    for srv in tool_servers(root):
        cp = tool_sccache(srv, "--show-stats", "--stats-format", "json", env=env)
        st = json.loads(cp.stdout)["stats"]
        for addr, n in (st.get("dist_compiles") or {}).items():
            total["dist_compiles"][addr] = total["dist_compiles"].get(addr, 0) + n
        total["dist_errors"] += st.get("dist_errors", 0)
        total["compile_fails"] += st.get("compile_fails", 0)
        for k, n in (st.get("cache_misses") or {}).get("adv_counts", {}).items():
            total["adv_misses"][k] = total["adv_misses"].get(k, 0) + n
    return total


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def _packed_toolchains(log: Path, offset: int) -> list[str]:
    """The compilers sccache packed a toolchain of itself (its log's "Generating toolchain"
    lines after `offset`): which programs' compiles it sent."""
    try:
        with open(log, "rb") as f:
            f.seek(offset)
            text = f.read().decode(errors="replace")
    except OSError:
        return []
    return [os.path.basename(p) for p in re.findall(r"Generating toolchain (\S+)", text)]


def _zero(root: Path, env: dict) -> None:
    for srv in tool_servers(root):
        cp = tool_sccache(srv, "--zero-stats", env=env)
        if cp.returncode:
            raise RuntimeError(f"sccache --zero-stats failed: {cp.stderr}")


def _stop_tool_servers(root: Path, env: dict) -> None:
    for srv in tool_servers(root):
        try:
            tool_sccache(srv, "--stop-server", env=env)
        except (OSError, subprocess.TimeoutExpired) as exc:
            print(f"sccache_dist: could not stop the tool's sccache server on {srv['socket']}: {exc}", file=sys.stderr)


def check(root: Path, expect: dict[str, str], label: str) -> None:
    """Each program prints what its host fallback computes, and `offload-tool verify` accepts all."""
    for prog, out in expect.items():
        cp = subprocess.run([str(root / prog)], capture_output=True, text=True, timeout=120)
        if cp.stdout != out:
            raise RuntimeError(f"{label}: {prog} printed {cp.stdout!r} (expected {out!r}); {cp.stderr[-2000:]}")
    # The CLI of this checkout (as the build's tool is), whatever an installed offload-tool is.
    tool = [sys.executable, "-c", "import sys; from offload_tool.cli.tool import main; sys.exit(main())"]
    cp = subprocess.run([*tool, "verify", *(str(root / p) for p in expect)], capture_output=True, text=True,
                        timeout=600, cwd=REPO)
    if cp.returncode:
        raise RuntimeError(f"{label}: offload-tool verify failed ({cp.returncode}):\n{cp.stdout[-3000:]}{cp.stderr[-3000:]}")
    print(f"{label}: {', '.join(expect)} run (host fallback) and pass offload-tool verify", flush=True)


def fmt_counts(c: dict[str, int]) -> str:
    return " ".join(f"{k}={v}" for k, v in sorted(c.items())) or "-"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sources", type=int, default=100, help="sources over all kinds (each kind adds a main)")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--kinds", default="hip,cuda,omp", help="of hip, cuda, omp")
    ap.add_argument("--servers", type=int, default=2, help="build servers in the cluster")
    ap.add_argument("--keep", help="build in this directory (emptied first) and keep it")
    a = ap.parse_args()
    kinds = [k for k in a.kinds.split(",") if k]
    if not kinds or any(k not in KINDS for k in kinds):
        sys.exit(f"sccache_dist: error: --kinds takes some of {','.join(KINDS)}")
    reason = unavailable_reason()
    if reason:
        sys.exit(f"sccache_dist: error: {reason}")
    for prog, why in (("clang-19", "install the Debian package clang-19"), ("nvcc", "install the CUDA toolkit")):
        if "cuda" not in kinds and prog == "nvcc":
            continue
        if not shutil.which(prog, path=os.environ.get("PATH", "") + os.pathsep + "/usr/local/cuda/bin"):
            sys.exit(f"sccache_dist: error: {prog} not found ({why})")

    if a.keep:
        base = Path(a.keep)
        shutil.rmtree(base, ignore_errors=True)
        base.mkdir(parents=True)
    else:
        base = Path(tempfile.mkdtemp(prefix="sccd."))     # short: the tool's socket lives in the build
    root = base / "proj"
    counts = split(a.sources, kinds)
    expect = generate(root, counts)
    jobs = f"-j{a.jobs}"
    kind_arg = "kinds=" + ",".join(kinds)

    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    env["PATH"] = env.get("PATH", "") + os.pathsep + "/usr/local/cuda/bin"
    env.pop("OFFLOAD_VERBOSE", None)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env = {k: v for k, v in env.items() if not k.startswith("SCCACHE_")}

    print(f"project: {a.sources} sources ({fmt_counts(counts)}) + a main per kind, {jobs}, in {root}", flush=True)
    local: dict[str, tuple] = {}
    for kind in kinds:
        ext, prog, _, _ = KINDS[kind]
        wall, cpu, acts, text = scons(root, env, jobs, kind_arg, prog)
        local[kind] = (wall, cpu, acts, device_compiles(text, ext))
        print(f"local  {kind:5s} {wall:8.2f} s (cpu {cpu:8.2f} s)  [{fmt_counts(acts)}]", flush=True)
    check(root, expect, "local build")
    scons(root, env, "-c", kind_arg)

    dist: dict[str, dict] = {}
    cluster = SccacheDistCluster(base / "cluster", servers=a.servers, lifetime=CLUSTER_LIFETIME)
    denv = dict(env)
    try:
        cluster.start()
        print(f"cluster: scheduler and {a.servers} build servers on 127.0.0.1, up in {cluster.startup_seconds:.1f} s",
              flush=True)
        denv.update({k: v for k, v in cluster.client_env().items() if k.startswith("SCCACHE_")})
        denv.pop("SCCACHE_SERVER_PORT", None)
        denv["SCCACHE_DIR"] = str(base / "sccache-cache")
        launcher = f"launcher={sccache()}"
        daemon_log = Path(denv["SCCACHE_ERROR_LOG"])     # where the tool's sccache server logs
        for kind in kinds:
            ext, prog, _, _ = KINDS[kind]
            _zero(root, denv)
            tool0 = _tool_cpu(root)
            log0 = _size(daemon_log)
            wall, cpu, acts, text = scons(root, denv, jobs, kind_arg, launcher, prog)
            tool1 = _tool_cpu(root)
            packed = _packed_toolchains(daemon_log, log0)
            st = _stats(root, denv) if tool_servers(root) else {"dist_compiles": {}, "dist_errors": 0,
                                                                   "compile_fails": 0, "adv_misses": {}}
            dev = device_compiles(text, ext) if kind != "cuda" else st["adv_misses"].get("ptx [cicc]", 0)
            dist[kind] = {"wall": wall, "cpu": cpu, "here": cpu + tool1 - tool0,
                          "acts": acts, "dev": dev, "stats": st, "packed": packed,
                          "notes": sorted({line for line in text.splitlines() if line.startswith("offload: note: sccache-dist")})}
            print(f"dist   {kind:5s} {wall:8.2f} s (cpu: scons {cpu:8.2f} s, tool's sccache server {tool1 - tool0:7.2f} s)"
                  f"  [{fmt_counts(acts)}]", flush=True)
            print(f"       sent: {fmt_counts(st['dist_compiles'])}; dist_errors={st['dist_errors']} "
                  f"compile_fails={st['compile_fails']}; misses by kind: {fmt_counts(st['adv_misses'])}"
                  + (f"; toolchains sccache packed itself: {', '.join(packed)}" if packed else ""), flush=True)
        check(root, expect, "distributed build")
    finally:
        _stop_tool_servers(root, denv)
        cluster.stop()

    print()
    print(f"{a.sources} sources + a main per kind, {jobs}, 2 loopback build servers sharing this machine's "
          f"{os.cpu_count()} cores; CPU here = scons + the tool's sccache server (the build servers' is not counted)")
    head = (f"{'kind':22s}{'device':>7s}{'sent':>6s}{'errs':>5s}{'wall local':>11s}{'wall dist':>10s}{'ratio':>7s}"
            f"{'cpu local':>10s}{'cpu here':>9s}{'ratio':>7s}")
    print(head)
    tot = [0.0] * 4
    for kind in kinds:
        _, _, archs, what = KINDS[kind]
        lw, lc, _, ldev = local[kind]
        d = dist[kind]
        sent = sum(d["stats"]["dist_compiles"].values())
        label = f"{kind} ({archs})"
        print(f"{label:22s}{d['dev']:7d}{sent:6d}{d['stats']['dist_errors']:5d}{lw:10.1f}s{d['wall']:9.1f}s"
              f"{d['wall'] / lw:7.2f}{lc:9.1f}s{d['here']:8.1f}s{d['here'] / max(lc, 1e-9):7.2f}")
        for i, v in enumerate((lw, d["wall"], lc, d["here"])):
            tot[i] += v
    print(f"{'all':22s}{'':18s}{tot[0]:10.1f}s{tot[1]:9.1f}s{tot[1] / tot[0]:7.2f}{tot[2]:9.1f}s{tot[3]:8.1f}s"
          f"{tot[3] / max(tot[2], 1e-9):7.2f}")
    print("device: compiles per (source, arch) (cuda, distributed: the cicc runs sccache saw); sent: compiles "
          "sccache ran on the build servers; errs: distributed compiles that failed and ran here")
    for kind in kinds:
        print(f"local {kind}: [{fmt_counts(local[kind][2])}] device compiles {local[kind][3]}")
    notes = sorted({n for d in dist.values() for n in d["notes"]})
    for n in notes:
        print(n)
    if a.keep:
        print(f"project kept in {base}")
    else:
        shutil.rmtree(base, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
