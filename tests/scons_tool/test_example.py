"""The example project builds, its programs run and check their results, and a second build does nothing.

This is what `make example` runs; keeping it in the suite keeps the README's first command honest."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys

import pytest

from conftest import REPO, need_tool


@pytest.fixture(scope="module")
def example(tmp_path_factory):
    for tool in ("clang-19", "clang-offload-bundler-19", "nvcc", "hipcc"):
        need_tool(tool)
    root = tmp_path_factory.mktemp("example")
    shutil.copytree(REPO / "example_project", root / "example_project",
                    ignore=shutil.ignore_patterns("build", ".sconsign*"))
    shutil.copytree(REPO / "site_scons", root / "site_scons", ignore=shutil.ignore_patterns("__pycache__"))
    return root / "example_project"


def test_example_builds_runs_and_reports(example):
    res = subprocess.run([sys.executable, "run_example.py", "--jobs", "2"], cwd=example,
                         capture_output=True, text=True, timeout=900)
    out = res.stdout + res.stderr
    assert res.returncode == 0, out
    assert "All example programs built, ran and checked their results." in out
    for program in ("build/bin/zaxpy", "build/bin/app", "build/bin/saxpy_cuda", "build/bin/vadd_hip"):
        assert f"[ok] {program}" in out
    # The fat program carries every default arch, read back from the file itself.
    zaxpy_line = next(line for line in out.splitlines() if line.strip().startswith("build/bin/zaxpy "))
    assert zaxpy_line.split(None, 1)[1] == "gfx90a, sm_80, sm_90"
    # The build's per-arch cost summary, and the report page with its records.
    assert "offload: build report:" in out and re.search(r"^  gfx90a\s+\d+\s+\d+\s", out, re.M), out
    assert (example / "build/report.html").exists() and "build/report.html" in out
    report = json.loads((example / "build/report.json").read_text())
    # nvcc's steps on the per-arch graph count under their archs (not one sm_80+sm_90 compile).
    assert {"gfx90a", "sm_80", "sm_90"} <= set(report["per_arch"])
    assert not [g for g in report["per_arch"] if "+" in g], report["per_arch"]


def test_example_null_build_runs_nothing(example):
    res = subprocess.run([sys.executable, "-m", "SCons", "-Q", "-q"], cwd=example, capture_output=True, text=True)
    assert res.returncode == 0, res.stdout + res.stderr
