"""OpenMP offload through sccache-dist, with the real engine: a scheduler and two overlay build
servers on 127.0.0.1 (tests/sccache_dist_cluster.py), `OFFLOAD_LAUNCHER` set to sccache and the
cluster's client configuration in the build's `SCCACHE_CONF`.

clang names an OpenMP source's offload entries after the device and inode of the file on the
machine that compiles it, so the tool sends each source as one job (host object and every
arch's image, `FAT`): a build server makes host and device code from one copy of the file. The
kernels are written as users write them: math (`sin`, `exp`), `declare target` globals, printf in
a target region, a template kernel in a header, a device function from another file, and two
sources with a static function of one name whose target regions sit at one line (7).

Checked here: every compile goes to the build servers; the program runs (host fallback) and
`offload-tool verify` accepts it; no two objects share a region's entry name; a header re-created
with the same bytes, then an added arch, still give a consistent program; a name met twice on the
servers makes the tool compile that source here; a build server killed mid-compile costs nothing
but time."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import console_script, need_tool
from scons_helpers import REPO, Project, actions, scons_env
from sccache_dist_cluster import SCONSTRUCT_SCCACHE_ENV, SccacheDistCluster, stop_tool_servers, tool_sccache, tool_servers, unavailable_reason

sys.path.insert(0, str(REPO))
from offload_tool.ops.verify import host_offload_entries  # noqa: E402

pytestmark = pytest.mark.slow

CLUSTER_LIFETIME = 900
SCONS_TIMEOUT = 500

SCONSTRUCT = SCONSTRUCT_SCCACHE_ENV + """env = Environment(tools=['default', 'offload'], ENV=penv, OFFLOAD_CLANG='clang-19',
                  OFFLOAD_ARCHS=ARGUMENTS.get('archs', 'sm_80').split(','),
                  OFFLOAD_HOSTFLAGS=['-O2'], OFFLOAD_DEVICEFLAGS=['-O2'],
                  OFFLOAD_LAUNCHER=ARGUMENTS.get('launcher', ''), CPPPATH=['include'])
env.OffloadProgram('app', Glob('src/*.c') + Glob('src/*.cpp'), LIBS=['m'])
"""

MAIN_C = """
#include <stdio.h>
double left(void);
double right(void);
double tmpl(void);
#pragma omp declare target
double twice(double);
#pragma omp end declare target
int main(void) {
  double t = 0;
#pragma omp target map(tofrom: t)
  {
    t = twice(1.25);
    printf("in target %g\\n", t);
  }
  printf("left %g right %g tmpl %.6f twice %g\\n", left(), right(), tmpl(), t);
  return 0;
}
"""

DEV_C = """
#pragma omp declare target
double twice(double x) { return 2.0 * x; }
#pragma omp end declare target
"""

# Two sources whose static function `scale` holds a target region at the same line (7): on one
# machine their entries differ by file identity; two server sandboxes may give them one.
SIDE_C = """
#include <math.h>
#pragma omp declare target
static double weights[4] = {{1, 2, 3, 4}};
#pragma omp end declare target
static double scale(double f) {{ double s = 0;
#pragma omp target teams distribute parallel for reduction(+:s) map(tofrom: s)
  for (int i = 0; i < 64; i++) s += f * weights[i % 4] + exp(0.0);
  return s;
}}
double {name}(void) {{ return scale({factor}); }}
"""

OPS_HPP = """
#pragma once
#include <cmath>
template <typename T> T sine_sum(int n) {
  T s = 0;
#pragma omp target teams distribute parallel for reduction(+:s) map(tofrom: s)
  for (int i = 0; i < n; i++) s += std::sin(T(i) * T(0.01));
  return s;
}
"""

TMPL_CPP = """
#include "ops.hpp"
extern "C" double tmpl(void) { return sine_sum<double>(100) + sine_sum<float>(10); }
"""

SOURCES = ("src/main.c", "src/dev.c", "src/left.c", "src/right.c", "src/tmpl.cpp")


def _expected() -> str:
    import math
    w = [1, 2, 3, 4]
    side = lambda f: sum(f * w[i % 4] + 1.0 for i in range(64))  # noqa: E731
    tm = sum(math.sin(i * 0.01) for i in range(100)) + sum(math.sin(i * 0.01) for i in range(10))
    return f"in target 2.5\nleft {side(1.0):g} right {side(3.0):g} tmpl {tm:.6f} twice 2.5\n"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    reason = unavailable_reason()
    if reason:
        pytest.skip(reason)
    need_tool("clang-19")
    with SccacheDistCluster(tmp_path_factory.mktemp("cluster"), servers=2, lifetime=CLUSTER_LIFETIME) as c:
        yield c


def _project(root: Path) -> Project:
    return Project(root, {"SConstruct": SCONSTRUCT, "src/main.c": MAIN_C, "src/dev.c": DEV_C,
                          "src/left.c": SIDE_C.format(name="left", factor="1.0"),
                          "src/right.c": SIDE_C.format(name="right", factor="3.0"),
                          "include/ops.hpp": OPS_HPP, "src/tmpl.cpp": TMPL_CPP})


def _build_env(cluster: SccacheDistCluster, cache: Path) -> dict:
    return dict(scons_env(), **cluster.tool_env(cache))


def _launcher() -> str:
    return f"launcher={Path(sys.executable).parent / 'sccache'}"


def _scons(p: Project, *args, env: dict, check: bool = True) -> subprocess.CompletedProcess:
    return p.scons(*args, check=check, env=env, jobs=2, timeout=SCONS_TIMEOUT)


def _stats(p: Project, env: dict) -> dict:
    """The counts of the tool's sccache servers, summed (an added arch packs a toolchain, and
    starts a server, of its own)."""
    out = {"dist_compiles": {}, "dist_errors": 0, "compile_fails": 0}
    for srv in tool_servers(p.root):
        st = json.loads(tool_sccache(srv, "--show-stats", "--stats-format", "json", env=env).stdout)["stats"]
        for addr, n in (st.get("dist_compiles") or {}).items():
            out["dist_compiles"][addr] = out["dist_compiles"].get(addr, 0) + n
        out["dist_errors"] += st["dist_errors"]
        out["compile_fails"] += st["compile_fails"]
    return out


def _zero(p: Project, env: dict) -> None:
    for srv in tool_servers(p.root):
        tool_sccache(srv, "-z", env=env)


def _region_names(path: Path) -> set[str]:
    return {e.name for e in host_offload_entries(path.read_bytes()) if e.name.startswith("__omp_offloading_")}


def _check_program(p: Project, archs: str) -> None:
    cp = subprocess.run([str(p.root / "app")], capture_output=True, text=True, timeout=120)
    assert cp.returncode == 0 and cp.stdout == _expected(), (cp.stdout, cp.stderr)
    cp = subprocess.run([console_script("offload-tool"), "verify", f"--require={archs}", str(p.root / "app")],
                        capture_output=True, text=True, timeout=120)
    assert cp.returncode == 0, cp.stdout + cp.stderr
    # No region's entry is named alike in two objects (left.c and right.c: `scale` at line 7).
    seen: dict[str, str] = {}
    for src in SOURCES:
        obj = p.root / (os.path.splitext(src)[0] + ".o")
        for name in _region_names(obj):
            assert name not in seen, f"{name} in {obj} and {seen[name]}"
            seen[name] = str(obj)
    assert sum("_scale_l7" in n for n in seen) == 2, seen


def test_openmp_sources_compile_whole_on_the_build_servers(cluster, tmp_path):
    p = _project(tmp_path / "proj")
    env = _build_env(cluster, tmp_path / "cache")
    try:
        cp = _scons(p, _launcher(), env=env)
        kinds = [k for k, _ in actions(cp)]
        assert kinds.count("FAT") == len(SOURCES) and "DEVICE" not in kinds and "HOSTIR" not in kinds, cp.stdout
        out = cp.stdout + cp.stderr
        assert "for its OpenMP compiles" in out and "OpenMP compiles run here" not in out, out
        st = _stats(p, env)
        assert sum(st["dist_compiles"].values()) == len(SOURCES) and st["dist_errors"] == 0, st
        _check_program(p, "sm_80")

        # Up to date: nothing runs again.
        cp = _scons(p, _launcher(), env=env)
        assert not actions(cp), cp.stdout

        # A header re-created with the same bytes: whatever runs, the program stays consistent.
        header = p.root / "include/ops.hpp"
        data = header.read_bytes()
        header.unlink()
        header.write_bytes(data)
        _scons(p, _launcher(), env=env)
        _check_program(p, "sm_80")

        # An added arch: every source again, on the servers, and the program has the new arch.
        _zero(p, env)
        cp = _scons(p, _launcher(), "archs=sm_80,sm_90", env=env)
        assert [k for k, _ in actions(cp)].count("FAT") == len(SOURCES), cp.stdout
        st = _stats(p, env)
        assert sum(st["dist_compiles"].values()) == len(SOURCES) and st["dist_errors"] == 0, st
        _check_program(p, "sm_80,sm_90")
    finally:
        stop_tool_servers(p.root, env)


def test_an_entry_name_met_twice_is_compiled_here(cluster, tmp_path):
    """The servers' file identities meet by chance (two sandboxes' copies of `left.c` and
    `right.c` do get one device and inode: seen here), so the meeting is made certain. `left.o` is
    made again from sccache's cache (what a server made of it); unless those names already meet
    `right.c`'s, they are put in the project's table as another file's; then `left.o` is made again,
    the same object from the cache. The tool compiles it here, where the file's own device and
    inode name its entries, and says so."""
    p = _project(tmp_path / "proj")
    env = _build_env(cluster, tmp_path / "cache")
    try:
        _scons(p, _launcher(), env=env)
        left = p.root / "src/left.o"
        st = os.stat(p.root / "src/left.c")
        here = f"__omp_offloading_{st.st_dev:x}_{st.st_ino:x}_"
        left.unlink()
        _scons(p, _launcher(), env=env)
        names = _region_names(left)
        assert names
        if not all(n.startswith(here) for n in names):   # a server's names, not met: claim them elsewhere
            table = p.root / ".offload-dist/openmp-entries.json"
            entries = json.loads(table.read_text())
            entries.update({n: str(p.root / "elsewhere/other.c") for n in names})
            table.write_text(json.dumps(entries))
        left.unlink()
        cp = _scons(p, _launcher(), env=env)
        out = cp.stdout + cp.stderr
        assert "src/left.c': its offload entry names meet those of" in out and "compiled here" in out, out
        assert _region_names(left) and all(n.startswith(here) for n in _region_names(left)), (_region_names(left), here)
        _check_program(p, "sm_80")
    finally:
        stop_tool_servers(p.root, env)


def test_a_build_server_killed_mid_compile_costs_nothing_but_time(cluster, tmp_path):
    p = _project(tmp_path / "proj")
    env = _build_env(cluster, tmp_path / "cache")
    cmd = [sys.executable, "-m", "SCons", "-Q", "-j2", f"--site-dir={REPO / 'site_scons'}", _launcher()]
    try:
        rc, out, killed = cluster.run_killing_server(cmd, p.root, env, SCONS_TIMEOUT)
        assert rc == 0, out
        assert killed is not None, "no compile ran on server 0:\n" + out
        st = _stats(p, env)
        assert st["dist_errors"] >= 1 and st["compile_fails"] == 0, st
        _check_program(p, "sm_80")
    finally:
        stop_tool_servers(p.root, env)
