"""A way of building like the built-in ones is one module in `flavours/` plus its registration and
nothing else: a copy of the tool gets `flavours/toy.py` (HIP on SPIR-V as a `Clang` subclass with
its facts as fields: language, runtime, split device link, sccache-dist policy) and the module
named in `flavours/registry.py`, and a project builds with it; no other file of the tool changes
(the SConstruct declares the language record and the arch rule, as a user's would)."""

from __future__ import annotations

import filecmp
import re
import shutil
from pathlib import Path

import pytest

from conftest import REPO, inspect_json, need_tool
from scons_helpers import Project, actions

pytestmark = pytest.mark.slow

TOOL = REPO / "site_scons" / "site_tools" / "offload"

TOY = '''"""`hip-spirv-clang`: HIP on SPIR-V with clang (`amdgcnspirv`): per-arch bitcode packaged and
embedded, as HIP's new driver does; its objects need libamdhip64."""

from __future__ import annotations

from ..dist.sccache import Policy
from .clang import Clang
from .runtimes import HIP_RUNTIME


class HipSpirv(Clang):
    name = "hip-spirv-clang"
    language = "hip-spirv"
    runtime = HIP_RUNTIME
    split_device_link = False
    dist = Policy(stays="HIP on SPIR-V compiles run here", why="their CUID reaches clang through -Xclang")


FLAVOUR = HipSpirv()
FLAVOURS = (FLAVOUR,)
'''

SRC = """#ifdef __HIP_DEVICE_COMPILE__
#define __global__ __attribute__((global))
#else
#include <hip/hip_runtime.h>
#endif
__global__ void k(int *p) { *p = 1; }
"""


def _registered(registry: str) -> str:
    """`registry.py` with the toy module imported beside the built-in ones and named in `MODULES`."""
    imports = re.compile(r"^from \. import (.*)$", re.M)
    modules = re.compile(r"^MODULES = \((.*)\)$", re.M)
    assert len(imports.findall(registry)) == 1 and len(modules.findall(registry)) == 1
    registry = imports.sub(lambda m: f"from . import {m.group(1)}, toy", registry)
    return modules.sub(lambda m: f"MODULES = ({m.group(1)}, toy)", registry)


def _changed(a: Path, b: Path) -> list[str]:
    """The files that differ between two trees (added, removed or changed), caches left out."""
    out = []

    def walk(cmp: filecmp.dircmp, rel: str) -> None:
        out.extend(f"{rel}{n}" for n in cmp.left_only + cmp.right_only + cmp.diff_files if n != "__pycache__")
        for name, sub in cmp.subdirs.items():
            if name != "__pycache__":
                walk(sub, f"{rel}{name}/")

    walk(filecmp.dircmp(a, b, ignore=["__pycache__"]), "")
    return sorted(out)


def test_a_flavour_is_one_module_and_its_registration(tmp_path):
    need_tool("clang-19")
    tools = tmp_path / "tools"
    tool = tools / "offload"
    shutil.copytree(TOOL, tool, ignore=shutil.ignore_patterns("__pycache__"))
    (tool / "flavours" / "toy.py").write_text(TOY)
    registry = tool / "flavours" / "registry.py"
    registry.write_text(_registered(registry.read_text()))
    assert _changed(TOOL, tool) == ["flavours/registry.py", "flavours/toy.py"]
    diff = [ln for ln in registry.read_text().splitlines() if "toy" in ln]
    assert len(diff) == 2, diff   # the import and the name in MODULES

    p = Project(tmp_path / "p")
    p.write("SConstruct", f"""
        env = Environment(tools=['default', 'offload'], toolpath=[{str(tools)!r}], OFFLOAD_CLANG='clang-19',
                          OFFLOAD_ARCHS=['sm_80', 'amdgcnspirv'])
        env.OffloadAddArchs('amd-spirv', ['amdgcnspirv'], triple='spirv64-amd-amdhsa')
        env.OffloadAddLanguage('hip-spirv', suffixes=['.hipspv'], offload_kind='hip', vendors=['amd-spirv'],
            host_flags='-x hip --offload-new-driver -fgpu-rdc -Xclang -cuid=$_OFFLOAD_CUID $_OFFLOAD_ROCMFLAGS',
            device_flags='-x hip --offload-new-driver -fgpu-rdc -Xclang -cuid=$_OFFLOAD_CUID -nogpuinc -nogpulib',
            flavours=[('clang', 'hip-spirv-clang')])
        obj = env.OffloadObject('src/k.hipspv')
        if GetOption('no_exec'):
            env.OffloadProgram('app', obj)
        """)
    p.write("src/k.hipspv", SRC)
    # The tool the build loaded is the copy: its toy flavour built the object.
    cp = p.scons("src/k.o")
    assert [(kind, rest.split()[0]) for kind, rest in actions(cp) if kind == "DEVICE"] == [("DEVICE", "amdgcnspirv")]
    images = [(i["triple"], i["arch"], i["image_kind"]) for i in inspect_json(p.root / "src/k.o")]
    assert images == [("spirv64-amd-amdhsa", "amdgcnspirv", "llvm ir")]
    # The flavour's runtime reaches the link; its language keeps the OpenMP runtime out.
    cp = p.scons("-n", "app", env={"OFFLOAD_VERBOSE": "1"})
    link = [ln for ln in cp.stdout.splitlines() if " -o app " in ln]
    assert len(link) == 1 and "-lamdhip64" in link[0] and "-fopenmp" not in link[0], cp.stdout
