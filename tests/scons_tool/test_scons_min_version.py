"""The oldest SCons that pyproject.toml accepts (`scons>=4.5`) runs the tool: a mixed OpenMP + HIP
project builds, null-builds, and its compile_commands.json lists the host and per-arch device
compiles (the compilation-database hook is the part most tied to SCons's internals). Installs that
SCons into a private virtual environment from the package index; skipped when the index cannot be
reached."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REPO, need_tool
from scons_helpers import counts, hook_warnings

pytestmark = pytest.mark.slow


def _declared_minimum() -> str:
    text = (REPO / "pyproject.toml").read_text()
    m = re.search(r'"scons>=([0-9.]+)"', text)
    assert m, "pyproject.toml must declare scons>=X.Y"
    return m.group(1)


@pytest.fixture(scope="module")
def old_scons(tmp_path_factory) -> Path:
    version = _declared_minimum()
    venv = tmp_path_factory.mktemp("scons-min") / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    py = venv / "bin" / "python"
    cp = subprocess.run([str(py), "-m", "pip", "install", "-q", f"scons=={version}.*", "pyelftools", "zstandard"],
                        capture_output=True, text=True, timeout=600)
    if cp.returncode:
        pytest.skip(f"cannot install scons=={version}.* from the package index: {cp.stderr.strip()[-200:]}")
    out = subprocess.run([str(py), "-c", "import SCons; print(SCons.__version__)"], capture_output=True, text=True)
    assert out.stdout.startswith(version), out.stdout
    return py


def test_minimum_scons_builds_a_mixed_project(old_scons, tmp_path):
    need_tool("clang-19")
    (tmp_path / "src").mkdir()
    (tmp_path / "SConstruct").write_text(
        "env = Environment(tools=['default', 'compilation_db', 'offload'], OFFLOAD_CLANG='clang-19',\n"
        "                  OFFLOAD_ARCHS=['sm_80', 'gfx90a'])\n"
        "env.CompilationDatabase('compile_commands.json')\n"
        "env.OffloadProgram('app', ['src/a.c', 'src/v.hip'])\n")
    (tmp_path / "src" / "a.c").write_text(
        "int v(void);\nint main(void) { int s = 0;\n#pragma omp target map(tofrom: s)\n s = 1;\n return s - 1; }\n")
    (tmp_path / "src" / "v.hip").write_text(
        "#include <hip/hip_runtime.h>\n__global__ void k(int *p) { p[0] = 1; }\n")
    env = {"PATH": "/usr/local/bin:/usr/bin:/bin:/usr/local/cuda/bin", "PYTHONPATH": str(REPO)}
    cmd = [str(old_scons), "-m", "SCons", "-Q", f"--site-dir={REPO / 'site_scons'}"]
    cp = subprocess.run(cmd + [".", "compile_commands.json"], cwd=tmp_path, capture_output=True, text=True,
                        env=env, timeout=600)
    assert cp.returncode == 0, cp.stdout + cp.stderr
    c = counts(cp)
    assert c["HOST"] == 2 and c["DEVICE"] == 3 and c["LINK"] == 1, c
    entries = json.loads((tmp_path / "compile_commands.json").read_text())
    outputs = sorted(e["output"] for e in entries)
    # (OpenMP: the host compile of the source is the one that writes its host IR)
    assert outputs == ["src/a.gfx90a.bc", "src/a.host.bc", "src/a.sm_80.o", "src/v.gfx90a.co", "src/v.o"], outputs
    # (SCons 4.5 always rebuilds its compilation-database entries: check the program)
    cp = subprocess.run(cmd + ["-q", "app"], cwd=tmp_path, capture_output=True, text=True, env=env, timeout=300)
    assert cp.returncode == 0, cp.stdout + cp.stderr


def test_minimum_scons_progress_and_report(old_scons, tmp_path):
    """Build insight's hooks (`_scons_hooks`) on the oldest SCons: progress counts what runs, the
    report times every action, and nothing says a hook is degraded."""
    need_tool("clang-19")
    (tmp_path / "src").mkdir()
    (tmp_path / "SConstruct").write_text(
        "env = Environment(tools=['default', 'offload'], OFFLOAD_CLANG='clang-19', OFFLOAD_ARCHS=['sm_80'])\n"
        "env.OffloadProgram('app', ['src/a.c'])\n")
    (tmp_path / "src" / "a.c").write_text(
        "int main(void) { int s = 0;\n#pragma omp target map(tofrom: s)\n s = 1;\n return s - 1; }\n")
    env = {"PATH": "/usr/local/bin:/usr/bin:/bin:/usr/local/cuda/bin", "PYTHONPATH": str(REPO),
           "OFFLOAD_PROGRESS": "on"}
    cmd = [str(old_scons), "-m", "SCons", "-Q", f"--site-dir={REPO / 'site_scons'}", "-j2",
           "--offload-report=out/report.html"]
    cp = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, env=env, timeout=600)
    assert cp.returncode == 0, cp.stdout + cp.stderr
    # (clang 19's OpenMP runtime against a CUDA 13 ptxas is said, whatever the SCons: not a hook)
    assert not hook_warnings(cp.stderr), cp.stderr
    # host IR, host, device, package+embed, link
    lines = [m.groups() for m in map(re.compile(r"^\[\s*(\d+)/(\d+)\] ").match, cp.stdout.splitlines()) if m]
    assert sorted(lines) == [(str(i), "5") for i in range(1, 6)], cp.stdout
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    assert len(report["actions"]) == 5 and all(a["status"] == "built" for a in report["actions"]), report["actions"]
    assert all(a["cpu_s"] is not None for a in report["actions"]) and report["binaries"]
    assert "offload: build report:" in cp.stdout and (tmp_path / "out" / "trace.json").is_file()
