"""The collector's thresholds the tool sets for the SCons process (`graph/collector.py`): raised by
default, Python's own with `OFFLOAD_GC='python'` (a construction variable of the first environment
that loads the tool, or the process environment's variable), a wrong value refused by name."""

from __future__ import annotations

import gc
import sys

import pytest

from scons_helpers import SITE_TOOLS, Project, refused

sys.path.insert(0, str(SITE_TOOLS))

from offload.graph import collector  # noqa: E402

SCONSTRUCT = """
import gc
env = Environment(tools=['default', 'offload'], {args})
print('thresholds', *gc.get_threshold())
"""


def _thresholds(p: Project, **env) -> tuple[int, ...]:
    cp = p.scons("-n", env=env or None, unset=() if env else ("OFFLOAD_GC",))
    line = next(ln for ln in cp.stdout.splitlines() if ln.startswith("thresholds "))
    return tuple(int(w) for w in line.split()[1:])


def test_tuned_by_default_and_pythons_own_when_asked(tmp_path):
    python = gc.get_threshold() if gc.get_threshold() != collector.THRESHOLDS else (700, 10, 10)
    p = Project(tmp_path / "a", {"SConstruct": SCONSTRUCT.format(args="")})
    assert _thresholds(p) == collector.THRESHOLDS
    assert _thresholds(p, OFFLOAD_GC="python") == python
    q = Project(tmp_path / "b", {"SConstruct": SCONSTRUCT.format(args="OFFLOAD_GC='python'")})
    assert _thresholds(q) == python


def test_a_wrong_value_is_refused_by_name(tmp_path):
    p = Project(tmp_path / "p", {"SConstruct": SCONSTRUCT.format(args="OFFLOAD_GC='off'")})
    line = refused(p, line=3)
    assert "OFFLOAD_GC='off': expected one of tuned, python" in line, line


@pytest.mark.parametrize("value, expected", [(None, "tuned"), ("python", "python"), ("tuned", "tuned")])
def test_mode_reads_the_environment_then_the_process(monkeypatch, value, expected):
    monkeypatch.delenv("OFFLOAD_GC", raising=False)
    assert collector.mode({"OFFLOAD_GC": value} if value else {}) == expected
    monkeypatch.setenv("OFFLOAD_GC", "python")
    assert collector.mode({}) == "python"
