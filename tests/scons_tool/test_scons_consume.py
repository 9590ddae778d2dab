"""The SCons tool checks its own containers where a step consumes them: a damaged `.hipfb` (as a
CacheDir copy may be) stops the host compile with one line naming it, instead of being embedded
and linked silently by a partial build."""

from __future__ import annotations

import os
import sys

import pytest

from conftest import REPO, need_tool
from scons_helpers import Project, assert_clean_failure

sys.path.insert(0, str(REPO / "site_scons" / "site_tools"))

SCONSTRUCT = """
env = Environment(tools=['default', 'offload'], OFFLOAD_CLANG='clang-19', OFFLOAD_ARCHS=['gfx90a'])
env.OffloadProgram('vadd', ['src/vadd.hip'])
"""

HIP_SRC = """
#include <hip/hip_runtime.h>
__global__ void vadd(float *a) { a[threadIdx.x] += 1; }
int main() { return 0; }
"""


def _check_container():
    pytest.importorskip("SCons")
    from offload.graph.consume import check_container

    return check_container


def test_check_container_on_damaged_and_foreign_files(tmp_path):
    check = _check_container()
    (tmp_path / "x.hipfb").write_bytes(b"\x7fELF garbage that is no object")
    problem = check(str(tmp_path / "x.hipfb"))
    assert problem and problem.startswith(f"{tmp_path / 'x.hipfb'}: damaged offload container") and "\n" not in problem
    (tmp_path / "p.offload.o").write_bytes(b"")
    assert "no offload image" in check(str(tmp_path / "p.offload.o"))
    (tmp_path / "plain.o").write_bytes(b"anything")
    assert check(str(tmp_path / "plain.o")) is None  # not a container the tool made


@pytest.mark.slow
def test_damaged_hipfb_stops_the_build(tmp_path):
    need_tool("clang-19")
    _check_container()
    p = Project(tmp_path / "p")
    p.write("SConstruct", SCONSTRUCT)
    p.write("src/vadd.hip", HIP_SRC)
    cp = p.scons()
    hipfb = p.root / "src" / "vadd.hipfb"
    assert cp.returncode == 0 and hipfb.exists(), cp.stdout
    assert _check_container()(str(hipfb)) is None
    # What a damaged CacheDir copy looks like: the right size, wrong bytes.
    data = bytearray(hipfb.read_bytes())
    data[:64] = b"\0" * 64
    hipfb.write_bytes(bytes(data))
    os.utime(hipfb, (1, 1))
    cp = p.scons(check=False)
    out = assert_clean_failure(cp)
    assert "offload: error: " in out and "vadd.hipfb: damaged offload container" in out, out


def test_damaged_carrier_stops_the_link(tmp_path):
    """The split AMD device link's carrier (`<program>.offload.o`) is read back before the final
    link takes its images."""
    need_tool("clang-19")
    p = Project(tmp_path / "p")
    p.write("SConstruct", "env = Environment(tools=['default', 'offload'], OFFLOAD_CLANG='clang-19', "
                          "OFFLOAD_ARCHS=['gfx90a'])\nenv.OffloadProgram('app', ['src/main.c'])\n")
    p.write("src/main.c", "int main(void) { int x = 0;\n#pragma omp target map(tofrom: x)\n  x = 1;\n"
                          "  return x == 1 ? 0 : 1; }\n")
    p.scons()
    carrier = p.root / "app.offload.o"
    assert carrier.exists() and _check_container()(str(carrier)) is None
    carrier.write_bytes(b"\x7fELF" + b"\0" * 60)
    os.utime(carrier, (1, 1))
    (p.root / "app").unlink()  # a partial build that must link again: `scons app`
    cp = p.scons("app", check=False)
    out = assert_clean_failure(cp)
    assert "app.offload.o: damaged offload container" in out, out
