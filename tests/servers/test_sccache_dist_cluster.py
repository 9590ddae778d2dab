"""The sccache-dist cluster harness (tests/sccache_dist_cluster.py) against the real programs: a
scheduler and two overlay build servers on 127.0.0.1 with token auth, and clang-19 compiles sent
through `sccache`. These pin what sccache 0.16 does, which later tests and the bench rely on:
where a compile ran is read from the client's stats (`dist_compiles`: build server address ->
count; `dist_errors`: distributed attempts that failed and were compiled locally instead); a build
server that dies, idle or in the middle of a compile, costs no compile its result; a HIP compile
is sent to a build server with a toolchain that has no clang-offload-bundler, and fails there.

Each test starts a cluster of its own (a fraction of a second; the first distributed compile of
a client then packages the clang toolchain, several seconds) whose processes are all killed after
CLUSTER_LIFETIME seconds whatever happens, and every command is bounded by a timeout."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import pytest

from conftest import find_tool, need_tool
from sccache_dist_cluster import HOST, SccacheDistCluster, unavailable_reason

pytestmark = pytest.mark.slow

CLUSTER_LIFETIME = 240     # s; the bound on every process a test starts
COMPILE_TIMEOUT = 120      # s; one compile, the toolchain's packaging and upload included


@pytest.fixture
def cluster(tmp_path):
    reason = unavailable_reason()
    if reason:
        pytest.skip(reason)
    need_tool("clang-19")
    with SccacheDistCluster(tmp_path / "cluster", servers=2, lifetime=CLUSTER_LIFETIME) as c:
        yield c
    assert not c.pids(), f"processes outlived stop(): {c.pids()}"


def _compile(c: SccacheDistCluster, src: Path, *flags: str) -> subprocess.CompletedProcess:
    obj = src.with_suffix(".o")
    return c.sccache("clang-19", *flags, "-c", src, "-o", obj, timeout=COMPILE_TIMEOUT)


def _source(d: Path, name: str, body: str) -> Path:
    d.mkdir(parents=True, exist_ok=True)
    path = d / name
    path.write_text(body)
    return path


def _defines(obj: Path, symbol: str) -> bool:
    nm = find_tool("llvm-nm-19") or pytest.skip("llvm-nm-19 not found (install llvm-19)")
    out = subprocess.run([nm, str(obj)], capture_output=True, text=True, timeout=30).stdout
    return any(line.split()[-1] == symbol for line in out.splitlines() if line.strip())


def test_cluster_registers_both_servers_and_runs_a_c_compile_remotely(cluster, tmp_path):
    """Both build servers are registered once the harness returns; a plain C compile is run by a
    build server (its address in `dist_compiles`), not locally; everything listens on
    127.0.0.1 only."""
    status = cluster.dist_status()["SchedulerStatus"][1]
    assert status["num_servers"] == 2, status
    assert status["num_cpus"] >= 2, status
    assert cluster.startup_seconds is not None and cluster.startup_seconds < 30

    listening = cluster.listening()
    assert {port for _, _, port in listening} >= {cluster.scheduler_port, cluster.client_port, *cluster.server_ports}, listening
    assert all(addr == HOST for _, addr, _ in listening), listening

    src = _source(tmp_path / "src", "twice.c", "int twice(int x) { return 2 * x; }\n")
    cp = _compile(cluster, src)
    assert cp.returncode == 0, cp.stdout + cp.stderr + cluster.log_tails()
    assert _defines(src.with_suffix(".o"), "twice")
    st = cluster.stats()
    assert sum(st["dist_compiles"].values()) == 1, st
    assert set(st["dist_compiles"]) <= set(cluster.server_addrs()), st
    assert st["dist_errors"] == 0 and st["compile_fails"] == 0, st
    assert st["cache_misses"]["counts"] == {"C/C++": 1}, st


def test_compiles_go_on_after_the_busy_server_is_killed(cluster, tmp_path):
    """SIGKILL of the build server that ran the first compile (idle when killed): the scheduler
    still lists it (it forgets a server after 90 s without heartbeats), yet every later compile
    succeeds, on the other server or, where the dead one was picked, locally (`dist_errors`)."""
    first = _compile(cluster, _source(tmp_path / "src", "warm.c", "int warm(void) { return 1; }\n"))
    assert first.returncode == 0, first.stdout + first.stderr
    (busy,) = cluster.stats()["dist_compiles"]
    cluster.kill_server(cluster.server_index(busy))
    cluster.zero_stats()

    n = 4
    for i in range(n):
        src = _source(tmp_path / "src", f"after{i}.c", f"int after{i}(int x) {{ return x + {i}; }}\n")
        cp = _compile(cluster, src)
        assert cp.returncode == 0, cp.stdout + cp.stderr + cluster.log_tails()
        assert _defines(src.with_suffix(".o"), f"after{i}")
    st = cluster.stats()
    assert busy not in st["dist_compiles"], st
    assert st["compile_fails"] == 0, st
    assert sum(st["dist_compiles"].values()) + st["dist_errors"] == n, st
    assert sum(st["dist_compiles"].values()) >= 1, st        # the survivor takes over
    print(f"after killing {busy}: remote {st['dist_compiles']}, local fallbacks {st['dist_errors']}")


def test_a_compile_whose_server_dies_mid_build_is_compiled_locally(cluster, tmp_path):
    """A compile of several seconds is running on a build server when that server is killed:
    the client's request breaks ("connection closed before message completed"), sccache compiles
    the file locally and the compile succeeds, counted in `dist_errors`, not `dist_compiles`."""
    warm = _compile(cluster, _source(tmp_path / "src", "warm.c", "int warm(void) { return 1; }\n"))
    assert warm.returncode == 0, warm.stdout + warm.stderr      # the toolchain is packaged now
    already = set(cluster.started_jobs())
    cluster.zero_stats()

    body = "\n".join(f"double f{i}(double *a, int n) {{ double s = 0; for (int j = 0; j < n; j++) "
                     f"for (int k = 0; k < j; k++) s += a[j] * a[k] * {i}.5 / (k + 1); return s; }}"
                     for i in range(1500)) + "\n"
    src = _source(tmp_path / "src", "slow.c", body)
    proc = subprocess.Popen([cluster.programs.sccache, "clang-19", "-O2", "-c", str(src), "-o",
                             str(src.with_suffix(".o"))], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=cluster.client_env())
    try:
        victim = None
        deadline = time.monotonic() + 60
        while victim is None and time.monotonic() < deadline and proc.poll() is None:
            new = {j: a for j, a in cluster.started_jobs().items() if j not in already}
            victim = next(iter(new.values()), None)
            time.sleep(0.05)
        assert victim is not None, "the slow compile never started on a build server\n" + cluster.log_tails()
        time.sleep(0.5)
        if proc.poll() is not None:
            pytest.skip("the slow compile finished before its build server could be killed")
        cluster.kill_server(cluster.server_index(victim))
        out, err = proc.communicate(timeout=COMPILE_TIMEOUT)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)
    assert proc.returncode == 0, out + err + cluster.log_tails()
    assert _defines(src.with_suffix(".o"), "f1499")
    st = cluster.stats()
    assert st["dist_errors"] == 1 and st["dist_compiles"] == {}, st
    log = (cluster.workdir / "client-daemon.log").read_text(errors="replace")
    assert "falling back to local" in log, log[-2000:]


def test_hip_device_compile_is_dispatched_and_fails_without_the_bundler(cluster, tmp_path):
    """`sccache clang-19 -x hip --offload-device-only -c` is distributed like any C compile, but
    the toolchain sccache packages for clang-19 holds no clang-offload-bundler, which the driver
    runs to bundle the device object: the build server's compile fails and sccache returns that
    failure (no local retry). sccache 0.16 reads the remote exit code 1 as a raw wait status, so
    it prints "Compiler killed by signal 1" and exits 254, where the local compiler would have
    exited 1. Distributing HIP needs a toolchain archive of its own
    (`toolchains=[{"type": "path_override", ...}]`). Pinned so that a change either way shows."""
    need_tool("clang-offload-bundler-19")
    src = _source(tmp_path / "src", "k.hip", "__global__ void k() {}\n")
    cp = _compile(cluster, src, "-x", "hip", "--offload-arch=gfx90a", "--offload-device-only",
                  "-nogpulib", "-nogpuinc")
    assert cp.returncode == 254, cp.stdout + cp.stderr
    assert 'Executable "clang-offload-bundler" doesn\'t exist' in cp.stderr, cp.stderr
    assert "Job failed on server" in cp.stderr, cp.stderr
    st = cluster.stats()
    assert sum(st["dist_compiles"].values()) == 1 and st["dist_errors"] == 0, st
    assert st["compile_fails"] == 1, st
    print(f"HIP through the cluster: exit {cp.returncode}; stdout {cp.stdout.strip()!r}")
