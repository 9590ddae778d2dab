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


FREEZING = """
import atexit, gc, sys
# Registered before the tool loads, so it runs after the tool's exit handler.
# What the collector would still pass over then (not frozen):
atexit.register(lambda: print('at exit: tracked', len(gc.get_objects()), flush=True))
env = Environment(tools=['default', 'offload'], {args})
print('reading: frozen', gc.get_freeze_count())

def show(target, source, env):
    gc.collect(0)  # a collection after the SConscripts were read
    print('building: frozen', gc.get_freeze_count())
    with open(str(target[0]), 'w') as f:
        f.write('x')

env.Command('out.txt', [], show)
"""


def _frozen(p: Project, **env) -> dict[str, int]:
    cp = p.scons(".", env=env or None, unset=() if env else ("OFFLOAD_GC",))
    return {ln.split(":")[0]: int(ln.split()[-1]) for ln in cp.stdout.splitlines()
            if ": frozen " in ln or ": tracked " in ln}


def test_the_graph_is_frozen_once_read_and_everything_at_exit(tmp_path):
    """Tuned: nothing frozen while the SConscripts are read; the first collection after them
    freezes what is tracked (the graph); the exit handler freezes the rest before Python tears
    the interpreter down. Python's own mode freezes nothing."""
    p = Project(tmp_path / "a", {"SConstruct": FREEZING.format(args="")})
    seen = _frozen(p)
    assert seen["reading"] == 0, seen
    assert seen["building"] > 1000, seen
    assert seen["at exit"] < 100, seen
    q = Project(tmp_path / "b", {"SConstruct": FREEZING.format(args="")})
    python = _frozen(q, OFFLOAD_GC="python")
    assert python["reading"] == python["building"] == 0 and python["at exit"] > 1000, python


def test_a_process_that_loads_the_tool_itself_is_not_frozen():
    """Outside SCons's reading of SConscripts (a script or test that makes an environment with
    the tool), the thresholds are the tool's but nothing is frozen: there is no graph to keep."""
    import subprocess
    code = (f"import gc, sys; sys.path.insert(0, {str(SITE_TOOLS)!r})\n"
            "import SCons.Environment\n"
            f"SCons.Environment.Environment(tools=['default', 'offload'], toolpath=[{str(SITE_TOOLS)!r}])\n"
            "from offload.graph import collector\n"
            "gc.collect()\n"
            "print(gc.get_threshold() == collector.THRESHOLDS, gc.get_freeze_count(),"
            " collector._freeze_when_read in gc.callbacks)\n")
    env = {k: v for k, v in __import__("os").environ.items() if k != "OFFLOAD_GC"}
    cp = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert cp.returncode == 0, cp.stderr
    assert cp.stdout.split() == ["True", "0", "False"], cp.stdout
