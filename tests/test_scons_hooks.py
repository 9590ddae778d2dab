"""SCons's internals behind one door (`_scons_hooks`): no other module of the SCons tool uses a
private or internal SCons name, and every hook degrades, says so once, and leaves the build
working when what it hooks is gone (in process for each hook; in real builds for the progress
walk and the report's CPU times)."""

from __future__ import annotations

import ast
import json
import re
import sys
from pathlib import Path

import pytest

from conftest import REPO, need_tool
from scons_helpers import Project
from scons_samples import KERN_CPP, MAIN_C

TOOL = REPO / "site_scons" / "site_tools" / "offload"
sys.path.insert(0, str(TOOL.parent))

from offload.scons import hooks as _scons_hooks  # noqa: E402

# Uses still to move behind `_scons_hooks` (none now). A new one fails.
PENDING: set[tuple[str, str]] = set()
DUNDERS_OK = {"__version__", "__file__", "__name__", "__doc__"}


def _chain(node: ast.AST) -> list[str] | None:
    """`SCons.X.y` as ['SCons', 'X', 'y'], or None when the expression is not a dotted name."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        return [node.id] + parts[::-1]
    return None


def internal_uses(path: Path) -> list[str]:
    """`line: what` for each private or internal SCons name `path` uses (see `_scons_hooks`)."""
    found = []
    tree = ast.parse(path.read_text(), str(path))
    for node in ast.walk(tree):
        what = None
        if isinstance(node, ast.Attribute):
            chain = _chain(node)
            if chain and chain[0] == "SCons" and any(p.startswith("_") and p not in DUNDERS_OK for p in chain[1:]):
                what = ".".join(chain)
            elif node.attr in _scons_hooks.INTERNAL_NAMES:
                what = node.attr
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
            for name in names:
                parts = name.split(".")
                if parts[0] == "SCons" and (set(parts) & _scons_hooks.INTERNAL_NAMES
                                            or any(p.startswith("_") for p in parts)):
                    what = name
        elif isinstance(node, ast.keyword) and node.arg in _scons_hooks.INTERNAL_NAMES:
            what = node.arg + "="
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("getattr", "hasattr",
                                                                                                  "setattr")
              and len(node.args) >= 2 and isinstance(node.args[1], ast.Constant) and isinstance(node.args[1].value, str)):
            name = node.args[1].value
            if name in _scons_hooks.INTERNAL_NAMES or (name.startswith("__") and name not in DUNDERS_OK):
                what = f"{node.func.id}(..., {name!r})"
        if what is not None and (path.name, what) not in PENDING:
            found.append(f"{node.lineno}: {what}")
    return found


def test_internal_names_only_in_the_hooks_module():
    door = TOOL / "scons"
    offenders = {str(p.relative_to(TOOL)): internal_uses(p) for p in sorted(TOOL.rglob("*.py")) if door not in p.parents}
    offenders = {k: v for k, v in offenders.items() if v}
    assert not offenders, f"SCons internals outside scons/ (move them behind a hook there): {offenders}"


def test_the_scan_finds_what_it_looks_for(tmp_path):
    sample = tmp_path / "_sample.py"
    sample.write_text(
        "import SCons.Script.Main\nimport SCons.Tool.compilation_db as cdb\n"
        "x = SCons.Script.Main.BuildTask\ny = SCons.Script._build_plus_default\n"
        "z = getattr(cdb, '__COMPILATION_DB_ENTRIES', None)\nn.changed(allowcache=True)\n"
        "ok = SCons.__version__, SCons.Script.GetOption, SCons.Util.CLVar\n")
    found = internal_uses(sample)
    whats = {f.split(": ", 1)[1] for f in found}
    assert whats >= {"SCons.Tool.compilation_db", "BuildTask", "SCons.Script._build_plus_default",
                     "getattr(..., '__COMPILATION_DB_ENTRIES')", "allowcache="}, found
    assert not any("GetOption" in w or "CLVar" in w or "__version__" in w for w in whats)


# --------------------------------------------------------------------------------------------
# Each hook without its target: the fallback, said once

@pytest.fixture
def said(monkeypatch, capsys):
    """The warnings said so far are forgotten; returns a function giving the `offload: warning:`
    lines on standard error since."""
    monkeypatch.setattr(_scons_hooks, "_said", set())

    def lines() -> list[str]:
        return [ln for ln in capsys.readouterr().err.splitlines() if ln.startswith("offload: warning:")]
    return lines


def test_task_timer_without_build_task(monkeypatch, said):
    import SCons.Script.Main
    monkeypatch.delattr(SCons.Script.Main, "BuildTask")
    assert _scons_hooks.time_build_tasks(lambda t: None, lambda *a: None) is False
    assert _scons_hooks.time_build_tasks(lambda t: None, lambda *a: None) is False
    out = said()
    assert len(out) == 1 and "build report off" in out[0] and "BuildTask" in out[0], out


def test_task_timer_with_a_changed_build_task(monkeypatch, said):
    import SCons.Script.Main
    monkeypatch.setattr(SCons.Script.Main, "BuildTask", object())  # not a class any more
    assert _scons_hooks.time_build_tasks(lambda t: None, lambda *a: None) is False
    assert len(said()) == 1


def test_task_timer_installs_a_subclass(monkeypatch, said):
    import SCons.Script.Main
    base = SCons.Script.Main.BuildTask
    monkeypatch.setattr(SCons.Script.Main, "BuildTask", base)
    assert _scons_hooks.time_build_tasks(lambda t: None, lambda *a: None) is True
    assert issubclass(SCons.Script.Main.BuildTask, base) and SCons.Script.Main.BuildTask is not base
    assert _scons_hooks.time_build_tasks(lambda t: None, lambda *a: None) is True  # not wrapped twice
    assert SCons.Script.Main.BuildTask.__mro__[1] is base
    assert not said()


def test_default_spawn_gone(monkeypatch, said):
    import SCons.Platform.posix
    assert _scons_hooks.default_spawn() is SCons.Platform.posix.subprocess_spawn
    monkeypatch.delattr(SCons.Platform.posix, "subprocess_spawn")
    assert _scons_hooks.default_spawn() is None and _scons_hooks.default_spawn() is None
    out = said()
    assert len(out) == 1 and "CPU times unknown" in out[0], out


def test_previous_progress_unreadable(monkeypatch, said):
    import SCons.Script.Main
    monkeypatch.setattr(SCons.Script.Main, "ProgressObject", None)
    assert _scons_hooks.previous_progress() is None and not said()
    monkeypatch.delattr(SCons.Script.Main, "ProgressObject")
    assert _scons_hooks.previous_progress() is None and _scons_hooks.previous_progress() is None
    assert len(said()) == 1


def test_progress_walk_without_node_states_or_aliases(monkeypatch, said):
    import SCons.Node
    import SCons.Node.Alias
    monkeypatch.delattr(SCons.Node, "pending")
    assert _scons_hooks.out_of_date_actions([], lambda n: True) is None
    monkeypatch.delattr(SCons.Node.Alias, "default_ans")
    assert _scons_hooks.build_roots() is None
    out = said()
    assert len(out) == 1 and "progress: total unknown" in out[0], out  # one feature, said once


def test_action_sources_without_executor():
    class Node:
        sources = ["a.c"]

        def get_executor(self):
            raise AttributeError("get_executor")
    assert _scons_hooks.action_sources(Node()) == ["a.c"]
    assert _scons_hooks.action_key(Node()) is None


def test_sconscript_reading_unknown(monkeypatch, said):
    import SCons.Script
    monkeypatch.setattr(SCons.Script, "sconscript_reading", 0)
    assert _scons_hooks.reading_sconscripts() is False
    monkeypatch.delattr(SCons.Script, "sconscript_reading")
    assert _scons_hooks.reading_sconscripts() is True and _scons_hooks.reading_sconscripts() is True
    out = said()
    assert len(out) == 1 and "signature memo off" in out[0], out


def test_compilation_db_in_neither_form(monkeypatch, said):
    import SCons.Tool.compilation_db as cdb
    monkeypatch.delattr(cdb, "make_emit_compilation_DB_entry", raising=False)
    monkeypatch.delattr(cdb, "__COMPILATION_DB_ENTRIES", raising=False)
    assert _scons_hooks.compilation_db_record(None, [], "a.c", "X") is False
    assert _scons_hooks.compilation_db_record(None, [], "a.c", "X") is False
    out = said()
    assert len(out) == 1 and "compile_commands.json" in out[0], out


# --------------------------------------------------------------------------------------------
# Real builds with a hook's target taken away in the SConstruct

SCONSTRUCT = """
import SCons.Node, SCons.Platform.posix
if ARGUMENTS.get('hide') == 'states':
    del SCons.Node.pending  # the progress walk's node states (SCons's taskmaster keeps its own copy)
env = Environment(tools=['default'])
if ARGUMENTS.get('hide') == 'spawn':
    DefaultEnvironment()  # (made now: SCons's posix platform module sets it up with that function)
    del SCons.Platform.posix.subprocess_spawn  # the report's CPU measurement
env.Tool('offload', OFFLOAD_CLANG='clang-19', OFFLOAD_ARCHS=['sm_75'])
env.OffloadProgram('app', ['src/main.c', 'src/kern.cpp'])
"""


def _build(tmp_path, *args, progress="off"):
    need_tool("clang-19")
    p = Project(tmp_path, {"SConstruct": SCONSTRUCT, "src/main.c": MAIN_C, "src/kern.cpp": KERN_CPP})
    return p, p.scons(*args, env={"OFFLOAD_PROGRESS": progress}, timeout=600)


@pytest.mark.slow
def test_progress_without_the_walk_still_numbers_lines(tmp_path):
    _, cp = _build(tmp_path, "-j2", "hide=states", progress="on")
    warnings = [ln for ln in cp.stderr.splitlines() if ln.startswith("offload: warning:")]
    assert len(warnings) == 1 and "progress: total unknown" in warnings[0], cp.stderr
    lines = [ln for ln in cp.stdout.splitlines() if re.match(r"^\[\d+/\?\] ", ln)]
    assert len(lines) == 9 and sorted(int(ln[1:ln.index("/")]) for ln in lines) == list(range(1, 10)), cp.stdout


@pytest.mark.slow
def test_report_without_the_posix_spawn(tmp_path):
    p, cp = _build(tmp_path, "hide=spawn", "--offload-report=out/report.html")
    warnings = [ln for ln in cp.stderr.splitlines() if ln.startswith("offload: warning:")]
    assert len(warnings) == 1 and "CPU times unknown" in warnings[0], cp.stderr
    report = json.loads((p.root / "out/report.json").read_text())
    assert len(report["actions"]) == 9 and all(a["status"] == "built" and a["wall_s"] > 0 for a in report["actions"])
    assert all(a["cpu_s"] is None for a in report["actions"] if a["kind"] != "package+embed") and report["binaries"]


@pytest.mark.slow
def test_hooks_are_installed_only_when_asked_for(tmp_path):
    """Progress off and no report: SCons's build task and Progress are SCons's own."""
    p, cp = _build(tmp_path)
    assert "offload: warning" not in cp.stderr
    probe = p.root / "probe.py"
    probe.write_text(
        "import SCons.Script.Main as m\n"
        "import atexit\n"
        "atexit.register(lambda: print('TASK', m.BuildTask.__name__, 'PROGRESS', type(m.ProgressObject).__name__))\n")
    (p.root / "SConstruct").write_text("exec(open('probe.py').read())\n" + SCONSTRUCT)
    out = p.scons(check=False, env={"OFFLOAD_PROGRESS": "off"}, timeout=600)
    assert "TASK BuildTask PROGRESS NoneType" in out.stdout, out.stdout + out.stderr
    out = p.scons("--offload-report=r.html", check=False, env={"OFFLOAD_PROGRESS": "on"}, timeout=600)
    assert "TASK ReportingBuildTask PROGRESS Progressor" in out.stdout, out.stdout + out.stderr


def test_cache_copy_path_and_its_fallback(tmp_path, monkeypatch, said):
    """With a CacheDir, a node's copy lies under it, named by the node's build signature; an
    environment that cannot say where gives None, said once (the damaged copy is then kept)."""
    import SCons.Environment
    monkeypatch.chdir(tmp_path)
    (tmp_path / "in.txt").write_text("x")
    env = SCons.Environment.Environment(tools=[])
    node = env.Command(env.File(str(tmp_path / "out.txt")), env.File(str(tmp_path / "in.txt")),
                       "cp $SOURCE $TARGET")[0]
    assert _scons_hooks.cache_copy_path(node) is None  # no CacheDir: nothing to drop, nothing said
    env.CacheDir(str(tmp_path / "cache"))
    path = _scons_hooks.cache_copy_path(node)
    assert path is not None and path.startswith(str(tmp_path / "cache") + "/"), path
    assert not said()

    class Env:
        pass

    class Node:
        def get_build_env(self):
            return Env()
    assert _scons_hooks.cache_copy_path(Node()) is None and _scons_hooks.cache_copy_path(Node()) is None
    out = said()
    assert len(out) == 1 and "damaged CacheDir copies are not dropped" in out[0], out


def test_cache_dir_in_use_and_its_fallback(tmp_path, monkeypatch, said):
    """Whether a CacheDir answers for a node's build: not without one, nor with `--cache-disable`;
    an environment that cannot say gives None, said once (the report then turns the cache off in
    the commands it gives)."""
    import SCons.CacheDir
    import SCons.Environment
    monkeypatch.chdir(tmp_path)
    (tmp_path / "in.txt").write_text("x")
    env = SCons.Environment.Environment(tools=[])
    node = env.Command(env.File(str(tmp_path / "out.txt")), env.File(str(tmp_path / "in.txt")),
                       "cp $SOURCE $TARGET")[0]
    assert _scons_hooks.cache_dir_in_use([node]) is False
    env.CacheDir(str(tmp_path / "cache"))
    assert _scons_hooks.cache_dir_in_use([node]) is True
    monkeypatch.setattr(SCons.CacheDir, "cache_enabled", False)  # --cache-disable
    assert _scons_hooks.cache_dir_in_use([node]) is False
    assert not said()

    class Node:
        def get_build_env(self):
            return object()
    assert _scons_hooks.cache_dir_in_use([Node()]) is None and _scons_hooks.cache_dir_in_use([Node()]) is None
    out = said()
    assert len(out) == 1 and "whether a CacheDir is in use is unknown" in out[0], out
