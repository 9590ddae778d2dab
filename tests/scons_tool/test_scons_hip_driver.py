"""HIP on both offload drivers (`OFFLOAD_HIP_DRIVER`): the new driver's per-arch bitcode packaged
and embedded in `.llvm.offloading` (kind hip), linked through clang-linker-wrapper, relocatably and
from static libraries; the old one with hipcc; and 'auto' asking the compiler, tried with wrapper
scripts around clang 19 whose default driver differs (one adds `--offload-new-driver`)."""

from __future__ import annotations

import os
import re
import subprocess

import pytest

from conftest import inspect_json, need_tool
from scons_helpers import Project, counts, device_archs, run_built

pytestmark = pytest.mark.slow

KERNEL = """
#include <hip/hip_runtime.h>
static __device__ int bias;
__global__ void vadd(float *a) { a[threadIdx.x] += bias; }
int launch() {
  float *d;
  if (hipMalloc(&d, 64) != hipSuccess) return 1;
  hipLaunchKernelGGL(vadd, dim3(1), dim3(16), 0, 0, d);
  return 0;
}
"""

MAIN = """
#include <cstdio>
int launch();
int main() { std::printf(launch() ? "no device\\n" : "ok\\n"); return 0; }
"""

SCONSTRUCT = """
env = Environment(tools=['default', 'offload'], OFFLOAD_CLANG=ARGUMENTS.get('clang', 'clang-19'),
                  OFFLOAD_ARCHS=['gfx90a', 'gfx1030', 'sm_80'],
                  OFFLOAD_HIP_COMPILER=ARGUMENTS.get('hip', 'clang'),
                  OFFLOAD_HIP_DRIVER=ARGUMENTS.get('driver', 'auto'))
main = env.OffloadObject('src/main.cpp', OFFLOAD_LANG='host')
env.OffloadProgram('vadd', ['src/vadd.hip', main])
env.OffloadStaticLibrary('lib/vadd', ['src/vadd.hip'])
env.OffloadArchive('lib/vaddfat', ['src/vadd.hip'])
"""


def _project(root) -> Project:
    return Project(root, {"SConstruct": SCONSTRUCT, "src/vadd.hip": KERNEL, "src/main.cpp": MAIN})


def _runs(exe) -> None:
    out = run_built(exe)
    assert out.returncode == 0 and out.stdout in ("ok\n", "no device\n"), out


def _links_static_library(p: Project, name: str) -> None:
    """A plain `g++` link of main.o against the library, then run."""
    exe = p.root / f"with_{name}"
    cp = subprocess.run(["g++", "-o", exe, p.root / "src/main.o", f"-L{p.root / 'lib'}", f"-l{name}"],
                        capture_output=True, text=True)
    assert cp.returncode == 0, cp.stderr
    _runs(exe)


def test_new_driver_program_and_libraries(tmp_path):
    need_tool("clang-19")
    p = _project(tmp_path / "p")
    cp = p.scons("driver=new")
    c = counts(cp)
    assert device_archs(cp) == {"gfx90a": 1, "gfx1030": 1}, cp.stdout
    assert (c["EMBED"], c["BUNDLE"]) == (1, 0), cp.stdout
    assert (p.root / "src/vadd.gfx90a.bc").is_file()
    # The fat object carries an OffloadBinary per arch, of kind hip, as clang 19 writes them.
    images = inspect_json(p.root / "src/vadd.o")
    assert sorted(i["arch"] for i in images) == ["gfx1030", "gfx90a"]
    out = subprocess.run([need_tool("llvm-objdump-19"), "--offloading", p.root / "src/vadd.o"],
                         capture_output=True, text=True).stdout
    assert re.findall(r"producer\s+(\S+)", out) == ["hip", "hip"], out
    _runs(p.root / "vadd")
    # The program's device code went through the linker wrapper into a `.hip_fatbin`.
    assert sorted(i["arch"] for i in inspect_json(p.root / "vadd")) == ["gfx1030", "gfx90a"]
    _links_static_library(p, "vadd")
    # The archive of fat objects links with clang's new-driver link.
    exe = p.root / "from_archive"
    cp = subprocess.run([need_tool("clang++-19"), "--offload-link", "-o", exe, p.root / "src/main.o",
                         p.root / "lib/libvaddfat.a", "-lamdhip64"], capture_output=True, text=True,
                        env=dict(os.environ, HIP_PLATFORM="amd"))
    assert cp.returncode == 0, cp.stderr
    _runs(exe)
    assert p.up_to_date("driver=new")
    # Switching to the old driver rebuilds the object the old way (bundle included by the host compile).
    cp = p.scons("driver=old")
    assert counts(cp)["BUNDLE"] == 1, cp.stdout
    _runs(p.root / "vadd")


def test_old_driver_with_hipcc(tmp_path):
    need_tool("clang-19")
    need_tool("hipcc")
    p = _project(tmp_path / "p")
    cp = p.scons("hip=hipcc")   # auto: hipcc says it bundles
    c = counts(cp)
    assert (c["BUNDLE"], c["EMBED"]) == (1, 0), cp.stdout
    assert (p.root / "src/vadd.gfx90a.co").is_file()
    _runs(p.root / "vadd")
    _links_static_library(p, "vadd")


def _wrapper(root, name: str, extra: str) -> str:
    """A compiler that is clang 19 with `extra` always added: with `--offload-new-driver` its
    `-###` of a HIP compile runs the packager, as upstream clang 23's does by default."""
    path = root / name
    path.write_text(f'#!/bin/sh\nexec {need_tool("clang-19")} {extra} "$@"\n')
    path.chmod(0o755)
    return str(path)


@pytest.mark.parametrize("default", ["new", "old"])
def test_auto_asks_the_compiler(tmp_path, default):
    need_tool("clang-19")
    p = _project(tmp_path / "p")
    clang = _wrapper(tmp_path, f"clang-{default}", "--offload-new-driver" if default == "new" else "")
    cp = p.scons(f"clang={clang}", "vadd")
    c = counts(cp)
    if default == "new":
        assert (c["EMBED"], c["BUNDLE"]) == (1, 0), cp.stdout
        assert sorted(i["arch"] for i in inspect_json(p.root / "src/vadd.o")) == ["gfx1030", "gfx90a"]
    else:
        assert (c["EMBED"], c["BUNDLE"]) == (0, 1), cp.stdout
    _runs(p.root / "vadd")


def test_driver_setting_is_checked(tmp_path):
    need_tool("clang-19")
    p = _project(tmp_path / "p")
    cp = p.scons("driver=newest", check=False)
    assert cp.returncode != 0
    assert "OFFLOAD_HIP_DRIVER must be 'new', 'old' or 'auto', not 'newest'" in cp.stderr + cp.stdout


def test_auto_without_an_answer_says_what_to_set(tmp_path):
    need_tool("clang-19")
    p = _project(tmp_path / "p")
    silent = tmp_path / "silent-cc"
    silent.write_text(f'#!/bin/sh\ncase "$*" in *-###*) exit 0;; esac\nexec {need_tool("clang-19")} "$@"\n')
    silent.chmod(0o755)
    cp = p.scons(f"clang={silent}", check=False)
    assert cp.returncode != 0
    assert "set OFFLOAD_HIP_DRIVER='new' or 'old'" in cp.stderr + cp.stdout
