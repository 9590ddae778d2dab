"""The vendor installations of the SCons tool (`toolchain/installations.py`): what the CUDA and
ROCm installation objects answer for the compilers here (clang 19, clang 22, nvcc) and for a
user's folders, that the commands take their flags from them, and that the flag words naming an
installation's folders are written in that module only (so no step can name another CUDA or
other device libraries than the rest of the build)."""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import need_tool
from scons_helpers import SITE_TOOLS

import SCons.Environment
import SCons.Node.FS

sys.path.insert(0, str(SITE_TOOLS))
from offload.toolchain import installations as _installations  # noqa: E402

CUDA = "/usr/local/cuda"
ROCM_BITCODE = "/usr/lib/x86_64-linux-gnu/amdgcn/bitcode"
FLAG_WORDS = ("--cuda-path", "--rocm-path", "--rocm-device-lib-path", "--libomptarget-nvptx-bc-path")


@pytest.fixture
def mkenv(tmp_path, monkeypatch):
    """A fresh SCons environment with the offload tool, run in `tmp_path`."""
    monkeypatch.chdir(tmp_path)

    def make(**kw):
        SCons.Node.FS.default_fs = None
        kw.setdefault("ENV", {"PATH": os.environ["PATH"] + os.pathsep + "/usr/local/cuda/bin"})
        kw.setdefault("OFFLOAD_CLANG", "clang-19")
        return SCons.Environment.Environment(tools=["default", "offload"], toolpath=[str(SITE_TOOLS)], **kw)

    return make


def _nvptx_bitcode_dir(clang: str) -> str:
    """Where `clang` keeps the OpenMP NVIDIA device bitcode, found as a user would: the folder of
    the runtime it names (`-print-file-name=`), when that folder holds `libomptarget-nvptx*.bc`."""
    for name in ("libomptarget.so", "libomptarget.devicertl.a", "libompdevice.a"):
        said = subprocess.run([clang, f"-print-file-name={name}"], capture_output=True, text=True).stdout.strip()
        folder = os.path.dirname(os.path.normpath(said)) if os.path.isabs(said) and os.path.exists(said) else ""
        if folder and any(n.startswith("libomptarget-nvptx") and n.endswith(".bc") for n in os.listdir(folder)):
            return folder
    return ""


@pytest.mark.parametrize("clang", ["clang-19", "clang-22"])
def test_cuda_of_a_clang_is_the_setting_and_its_bitcode(mkenv, clang):
    need_tool(clang)
    env = mkenv(OFFLOAD_CLANG=clang)
    cuda = _installations.cuda(env)
    here = CUDA if os.path.isdir(CUDA) else ""   # the setting's default
    assert cuda.folder == here
    assert cuda.path_flag == ("--cuda-path=$OFFLOAD_CUDA_PATH" if here else "")
    assert env.subst(cuda.path_flag) == (f"--cuda-path={CUDA}" if here else "")
    assert cuda.path_argv() == ([f"--cuda-path={CUDA}"] if here else [])
    bitcode = _nvptx_bitcode_dir(clang)
    assert cuda.bitcode_dir == bitcode
    assert cuda.bitcode_flag == (f"--libomptarget-nvptx-bc-path={bitcode}" if bitcode else "")
    assert env.subst("$_OFFLOAD_NVPTX_BCFLAG") == cuda.bitcode_flag
    # Asked once per clang and setting: the same object, for a copy of the environment too.
    assert _installations.cuda(env.Clone()) is cuda


def test_clang_19_is_told_its_nvptx_bitcode(mkenv):
    need_tool("clang-19")
    if not list(Path("/usr/lib/llvm-19/lib").glob("libomptarget-nvptx*.bc")):
        pytest.skip("no libomptarget-nvptx bitcode for clang 19 (install libomp-19-dev)")
    assert _installations.cuda(mkenv()).bitcode_flag == "--libomptarget-nvptx-bc-path=/usr/lib/llvm-19/lib"


def test_a_users_cuda_folder(mkenv, tmp_path):
    need_tool("clang-19")
    env = mkenv(OFFLOAD_CUDA_PATH="/opt/cuda-12.4")
    cuda = _installations.cuda(env)
    assert (cuda.folder, cuda.path_flag) == ("/opt/cuda-12.4", "--cuda-path=$OFFLOAD_CUDA_PATH")
    assert env.subst(cuda.path_flag) == "--cuda-path=/opt/cuda-12.4"
    assert cuda.path_argv() == ["--cuda-path=/opt/cuda-12.4"]
    assert cuda.lib_dir == "$OFFLOAD_CUDA_PATH/lib64" and cuda.runtime_library() is None
    # A folder through another variable: each environment's own folder, not the first one asked.
    a = _installations.cuda(mkenv(OFFLOAD_CUDA_PATH="$MYCUDA", MYCUDA="/a"))
    b = _installations.cuda(mkenv(OFFLOAD_CUDA_PATH="$MYCUDA", MYCUDA="/b"))
    assert (a.folder, b.folder) == ("/a", "/b")
    # An installation with the CUDA runtime: the file a static library's ld script names.
    (tmp_path / "cuda" / "lib64").mkdir(parents=True)
    (tmp_path / "cuda" / "lib64" / "libcudart.so").write_bytes(b"")
    cuda = _installations.cuda(mkenv(OFFLOAD_CUDA_PATH=str(tmp_path / "cuda")))
    assert cuda.runtime_library() == str(tmp_path / "cuda" / "lib64" / "libcudart.so")
    # None named: no flag, clang's own search.
    none = _installations.cuda(mkenv(OFFLOAD_CUDA_PATH=""))
    assert (none.folder, none.path_flag, none.path_argv(), none.lib_dir) == ("", "", [], "")
    assert none.runtime_library() is None


def test_cuda_of_nvcc_is_what_nvcc_names(mkenv, tmp_path):
    """nvcc's toolkit is asked of nvcc (`TOP=`), never read off where the command lives: a wrapper
    script in a folder of its own belongs to the toolkit it runs."""
    nvcc = need_tool("nvcc")
    cuda = _installations.nvcc_cuda(mkenv(OFFLOAD_NVCC="nvcc"))
    assert Path(cuda.folder, "bin", "nvcc").exists() and Path(cuda.folder, "include", "cuda_runtime.h").exists()
    assert cuda.path_flag == f"--cuda-path={cuda.folder}" and cuda.bitcode_flag == ""
    wrapper = tmp_path / "wrap" / "nvcc"
    wrapper.parent.mkdir()
    wrapper.write_text(f'#!/bin/sh\nexec {nvcc} "$@"\n')
    wrapper.chmod(0o755)
    assert _installations.nvcc_cuda(mkenv(OFFLOAD_NVCC=str(wrapper))).folder == cuda.folder
    assert _installations.nvcc_cuda(mkenv(OFFLOAD_NVCC="")).path_flag == ""


def test_rocm_of_the_settings(mkenv):
    env = mkenv()
    rocm = _installations.rocm(env)
    here = os.path.isdir(ROCM_BITCODE)   # Debian's rocm-device-libs: the settings' defaults
    assert rocm.folder == ("/usr" if os.path.isdir("/usr/lib/x86_64-linux-gnu/amdgcn") else "")
    assert env.subst(rocm.path_flag) == (f"--rocm-path={rocm.folder}" if rocm.folder else "")
    assert rocm.device_lib_folder == (ROCM_BITCODE if here else "")
    assert env.subst(rocm.device_lib_flag) == (f"--rocm-device-lib-path={ROCM_BITCODE}" if here else "")
    assert _installations.rocm(env.Clone()) is rocm
    env = mkenv(OFFLOAD_ROCM_PATH="/opt/rocm-6.3", OFFLOAD_ROCM_DEVICE_LIB_PATH="/opt/rocm-6.3/amdgcn/bitcode")
    rocm = _installations.rocm(env)
    assert (rocm.path_flag, rocm.device_lib_flag) == ("--rocm-path=$OFFLOAD_ROCM_PATH",
                                                      "--rocm-device-lib-path=$OFFLOAD_ROCM_DEVICE_LIB_PATH")
    assert env.subst(f"{rocm.path_flag} {rocm.device_lib_flag}") == \
        "--rocm-path=/opt/rocm-6.3 --rocm-device-lib-path=/opt/rocm-6.3/amdgcn/bitcode"
    assert rocm.device_lib_argv() == ["--rocm-device-lib-path=/opt/rocm-6.3/amdgcn/bitcode"]
    none = _installations.rocm(mkenv(OFFLOAD_ROCM_PATH="", OFFLOAD_ROCM_DEVICE_LIB_PATH=""))
    assert (none.path_flag, none.device_lib_flag, none.device_lib_argv()) == ("", "", [])


def test_default_folders_are_the_installed_ones(mkenv):
    """Without a setting, the folders NVIDIA's installer and Debian's packages use, when there."""
    env = mkenv()
    assert {v: env[v] for v in ("OFFLOAD_CUDA_PATH", "OFFLOAD_ROCM_PATH", "OFFLOAD_ROCM_DEVICE_LIB_PATH")} == {
        "OFFLOAD_CUDA_PATH": CUDA if os.path.isdir(CUDA) else "",
        "OFFLOAD_ROCM_PATH": "/usr" if os.path.isdir(os.path.dirname(ROCM_BITCODE)) else "",
        "OFFLOAD_ROCM_DEVICE_LIB_PATH": ROCM_BITCODE if os.path.isdir(ROCM_BITCODE) else ""}
    assert mkenv(OFFLOAD_CUDA_PATH="/opt/cuda")["OFFLOAD_CUDA_PATH"] == "/opt/cuda"


def test_device_flags_per_vendor(mkenv):
    need_tool("clang-19")
    env = mkenv(OFFLOAD_CUDA_PATH="/c", OFFLOAD_ROCM_DEVICE_LIB_PATH="/r")
    nvidia, amd = "--cuda-path=$OFFLOAD_CUDA_PATH", "--rocm-device-lib-path=$OFFLOAD_ROCM_DEVICE_LIB_PATH"
    assert _installations.device_flags(env, ("nvidia",)) == [nvidia]
    assert _installations.device_flags(env, ("amd",)) == [amd]
    assert _installations.device_flags(env, {"amd", "nvidia"}) == [nvidia, amd]   # as links pass them
    assert _installations.device_flags(env, (None,)) == []
    # A device compile's vendor flags: its language's, then its installation's.
    assert env.Override({"OFFLOAD_ARCH": "gfx90a", "_OFFLOAD_LANG": "openmp"}).subst(
        "$_OFFLOAD_VENDORFLAGS") == "--rocm-device-lib-path=/r"
    said = env.Override({"OFFLOAD_ARCH": "sm_80", "_OFFLOAD_LANG": "openmp"}).subst("$_OFFLOAD_VENDORFLAGS")
    assert said == " ".join(filter(None, [_installations.cuda(env).bitcode_flag, "--cuda-path=/c"]))


def _docstrings(tree) -> set[int]:
    """The ids of the docstring nodes of a module, its classes and functions."""
    return {id(node.body[0].value) for node in ast.walk(tree)
            if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
            and node.body and isinstance(node.body[0], ast.Expr) and isinstance(node.body[0].value, ast.Constant)}


def _writes_flag(path: Path) -> bool:
    """Whether a string of the module's code (an f-string's text included) holds one of the flag
    words as a command takes it. Prose that names a flag, a docstring or a word in backquotes
    (`--cuda-path=`, as the tool's descriptions quote flags), writes none."""
    tree = ast.parse(path.read_text())
    skip = _docstrings(tree)
    words = re.compile("(?<!`)(?:" + "|".join(re.escape(w) for w in FLAG_WORDS) + r")\b")
    return any(isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in skip and words.search(n.value)
               for n in ast.walk(tree))


def test_flag_words_are_written_in_installations_only(tmp_path):
    """Every flag naming an installation's folder comes from `toolchain/installations.py`: no
    other module of the tool writes one into a command or an argv."""
    tool = SITE_TOOLS / "offload"
    found = {str(p.relative_to(tool)) for p in tool.rglob("*.py") if _writes_flag(p)}
    assert found == {"toolchain/installations.py"}
    # The check sees a flag however a module would write it, and no prose that names one.
    probe = tmp_path / "probe.py"
    for text, writes in (('x = "--cuda-path=$OFFLOAD_CUDA_PATH"', True), ('x = f"-x hip --rocm-path={p}"', True),
                         ('x = ["--rocm-device-lib-path=" + p]', True), ('x = "--libomptarget-nvptx-bc-path"', True),
                         ('"""Passes --cuda-path."""', False), ('x = {"W": "`--rocm-path=` of ROCm"}', False)):
        probe.write_text(text + "\n")
        assert _writes_flag(probe) == writes, text
