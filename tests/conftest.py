"""Shared test helpers: locating the real LLVM / CUDA / ROCm tools (skip with a reason when absent)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

# CUDA lives outside PATH on these machines.
if os.path.isdir("/usr/local/cuda/bin") and "/usr/local/cuda/bin" not in os.environ.get("PATH", ""):
    os.environ["PATH"] = os.environ.get("PATH", "") + os.pathsep + "/usr/local/cuda/bin"


def find_tool(name: str) -> str | None:
    """Path of an external tool, e.g. 'clang-offload-bundler-19', or None."""
    return shutil.which(name)


def need_tool(name: str) -> str:
    """Path of an external tool; skips the calling test (with the Debian package to install) if absent."""
    path = find_tool(name)
    if path is None:
        pkg = {
            "clang-offload-bundler-19": "clang-tools-19", "clang-offload-packager-19": "clang-tools-19",
            "clang-offload-bundler-22": "clang-tools-22", "llvm-offload-binary-22": "llvm-22",
            "clang-linker-wrapper-19": "clang-tools-19",
            "llvm-objdump-19": "llvm-19", "llvm-objcopy-19": "llvm-19", "llvm-readelf-19": "llvm-19", "llvm-objdump-22": "llvm-22", "llvm-ar-19": "llvm-19",
            "clang-19": "clang-19", "clang-22": "clang-22", "hipcc": "hipcc", "nvcc": "CUDA toolkit",
        }.get(name, "?")
        pytest.skip(f"{name} not found (install {pkg})")
    return path


def oracle_crashed(proc: subprocess.CompletedProcess) -> bool:
    """True when an LLVM tool used as an oracle died on a signal (LLVM 19 segfaults on some bad
    target IDs on some machines): its answer is unknown then, and the test's own stated expectation
    stands alone. Compare with the oracle only when this is False."""
    return proc.returncode < 0 or proc.returncode > 128


def run(cmd, **kw) -> subprocess.CompletedProcess:
    """Run a command, capture output as bytes, never raise on failure."""
    kw.setdefault("capture_output", True)
    return subprocess.run([str(c) for c in cmd], **kw)


def run_cli(module: str, *args, **kw) -> subprocess.CompletedProcess:
    """Run one of our CLIs (`python -m offload_tool.cli.<module>`) from the working tree."""
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    kw.setdefault("env", env)
    return run([sys.executable, "-m", f"offload_tool.cli.{module}", *args], **kw)


def inspect_json(path) -> list[dict]:
    """The device images `offload-tool inspect --json --hash` lists in `path`, each with its
    sha256 (the command must succeed)."""
    cp = run_cli("tool", "inspect", "--json", "--hash", str(path))
    assert cp.returncode == 0, cp.stderr
    return json.loads(cp.stdout)


@pytest.fixture
def repo() -> Path:
    return REPO


def console_script(name: str) -> str | None:
    """An installed console script of this project: beside the running interpreter (a venv's bin/,
    which need not be on PATH), else on PATH."""
    beside = Path(sys.executable).parent / name
    return str(beside) if beside.exists() else shutil.which(name)
