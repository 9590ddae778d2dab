"""SCons's internals behind one door (`scons/`): outside it, the SCons tool uses only the SCons
names SCons documents (an allowlist, `scons/public_api.py`, each name with where SCons documents
it), never a private or internal one; and every hook (`scons/hooks.py`) degrades, says so once,
and leaves the build working when what it hooks is gone (in process for each hook; in real builds
for the progress walk and the report's CPU times)."""

from __future__ import annotations

import ast
import json
import re
import sys
from pathlib import Path

import pytest

from conftest import REPO, need_tool
from scons_helpers import Project, hook_warnings
from scons_samples import KERN_CPP, MAIN_C

TOOL = REPO / "site_scons" / "site_tools" / "offload"
sys.path.insert(0, str(TOOL.parent))

from offload.scons import hooks as _scons_hooks  # noqa: E402

from offload.scons import public_api  # noqa: E402

# Uses still to move behind `scons/` (none now). A new one fails.
PENDING: set[tuple[str, str]] = set()
DUNDERS_OK = {"__version__", "__file__", "__name__", "__doc__"}

# --------------------------------------------------------------------------------------------
# What SCons defines, and what Python does

#: SCons's modules whose objects reach a tool (nodes, environments, executors, actions,
#: builders, scanners, the cache, the taskmaster's tasks), read for the names they define.
_SCONS_CORE = ("Action", "Builder", "CacheDir", "Defaults", "Environment", "Errors", "Executor", "Memoize", "Node",
               "PathList", "Scanner", "Script", "Subst", "Taskmaster", "Util", "SConsign", "SConf")


def _scons_members() -> set[str]:
    """Every attribute name SCons's classes define or set on their objects (methods, class
    attributes, slots, `self.x = ...`), read from SCons's source."""
    import SCons
    root = Path(SCons.__file__).parent
    out: set[str] = set()
    for path in root.rglob("*.py"):
        rel = path.relative_to(root)
        if rel.parts[0].removesuffix(".py") not in _SCONS_CORE or path.name.endswith("Tests.py"):
            continue
        for c in ast.walk(ast.parse(path.read_text(), str(path))):
            if not isinstance(c, ast.ClassDef):
                continue
            for b in c.body:
                if isinstance(b, (ast.FunctionDef, ast.ClassDef)):
                    out.add(b.name)
                elif isinstance(b, ast.Assign):
                    for t in b.targets:
                        out.update(e.id for e in ast.walk(t) if isinstance(e, ast.Name))
                        if isinstance(t, ast.Name) and t.id == "__slots__":
                            out.update(e.value for e in ast.walk(b.value)
                                       if isinstance(e, ast.Constant) and isinstance(e.value, str))
                elif isinstance(b, ast.AnnAssign) and isinstance(b.target, ast.Name):
                    out.add(b.target.id)
            out.update(n.attr for n in ast.walk(c) if isinstance(n, ast.Attribute) and isinstance(n.ctx, ast.Store)
                       and isinstance(n.value, ast.Name) and n.value.id == "self")
    return out


def _python_names() -> set[str]:
    """The attribute names of Python's own objects the tool handles (strings, containers, files,
    processes, matches, locks, archives): `x.get`, `f.write`, `cp.stdout` are Python's, whatever
    SCons also calls a member of its classes."""
    import collections
    import io
    import os
    import subprocess
    import tarfile
    import threading
    out: set[str] = set()
    kinds = (str, bytes, bytearray, list, dict, set, frozenset, tuple, object, int, float, type, memoryview,
             BaseException, OSError, collections.UserList, collections.UserDict, collections.UserString,
             collections.OrderedDict, collections.defaultdict, collections.deque, io.TextIOWrapper,
             io.BufferedReader, io.BufferedWriter, io.BytesIO, io.StringIO, subprocess.Popen, os.stat_result,
             type(re.match("", "")), type(re.compile("")), threading.Thread, type(threading.Lock()), threading.local,
             tarfile.TarFile, tarfile.TarInfo)
    for kind in kinds:
        out.update(dir(kind))
    out.update(dir(subprocess.CompletedProcess([], 0, "", "")))
    return out


SCONS_MEMBERS = _scons_members()
PYTHON_NAMES = _python_names()

#: Names the tool's own objects use that SCons's classes also define: each is the tool's, where
#: it says (the test checks that a class of the tool defines it).
OWN_NAMES = {
    "command": "toolchain.discovery.Compiler.command (the command line that runs a compiler)",
    "config": "dist.sccache.Server.config (an sccache server's configuration file)",
    "env": "the nvcc plans' `env` (graph.nvcc.plan.Plan, graph.nvcc.device_link.LinkPlan)",
    "jobs": "graph.host_ir's plan of the driver's device jobs",
    "key": "graph.common's registry entries",
    "lock": "insight.progress / insight.report: their own locks",
    "suffixes": "settings.languages.Language.suffixes",
    "entries": "the library's bundles (offload_tool.formats.bundle: a bundle's entries)",
    "data": "the library's ELF sections (offload_tool.formats.elf: a section's bytes)",
    "method": "the library's cost estimates (offload_tool.ops.cost: how one was made)",
}

# --------------------------------------------------------------------------------------------
# The scan


def _chain(node: ast.AST) -> list[str] | None:
    """`SCons.X.y` as ['SCons', 'X', 'y'], or None when the expression is not a dotted name."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        return [node.id] + parts[::-1]
    return None


def _module_name(chain: list[str]) -> str | None:
    """The SCons name a dotted chain uses: its longest prefix that is a module, and the name after
    it (`SCons.Tool.CScanner.path` uses `SCons.Tool.CScanner`); None for a module itself."""
    import importlib
    for i in range(len(chain), 0, -1):
        name = ".".join(chain[:i])
        try:
            importlib.import_module(name)
        except ImportError:
            continue
        return ".".join(chain[:i + 1]) if i < len(chain) else None
    return None


def _own_members(paths) -> set[str]:
    """Attribute names the classes in `paths` define or set."""
    out: set[str] = set()
    for path in paths:
        for c in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(c, ast.ClassDef):
                for b in c.body:
                    if isinstance(b, (ast.FunctionDef, ast.ClassDef)):
                        out.add(b.name)
                    elif isinstance(b, ast.AnnAssign) and isinstance(b.target, ast.Name):
                        out.add(b.target.id)
                    elif isinstance(b, ast.Assign):
                        out.update(t.id for t in b.targets if isinstance(t, ast.Name))
            elif isinstance(c, ast.Attribute) and isinstance(c.ctx, ast.Store) and isinstance(c.value, ast.Name) \
                    and c.value.id == "self":
                out.add(c.attr)
    return out


def _imports(tree) -> tuple[dict[str, str], set[str]]:
    """({name: SCons module or name it is bound to}, {names bound to other modules}) of a file."""
    scons: dict[str, str] = {}
    other: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name.split(".")[0] == "SCons":
                    scons[a.asname or "SCons"] = a.name if a.asname else "SCons"
                else:
                    other.add((a.asname or a.name).split(".")[0])
        elif isinstance(node, ast.ImportFrom):
            for a in node.names:
                if node.level == 0 and (node.module or "").split(".")[0] == "SCons":
                    scons[a.asname or a.name] = f"{node.module}.{a.name}"
                else:
                    other.add(a.asname or a.name)
    return scons, other


def internal_uses(path: Path) -> list[str]:
    """`line: what` for each SCons name `path` uses that is not SCons's public API
    (`scons.public_api`): a module attribute not in `MODULE_NAMES`; an attribute or method, read,
    set or defined, that SCons's classes define and `MEMBER_NAMES` does not list (neither a
    Python name, nor one of the tool's own, `OWN_NAMES`); a class derived from one of SCons's;
    besides, any private name of SCons's and the internals `hooks.INTERNAL_NAMES` lists.

    What it cannot see: the type of an object. `x.name` is allowed whatever `x` is, and a name
    both SCons and Python (or the tool) use is taken as Python's (or the tool's)."""
    found = []
    tree = ast.parse(path.read_text(), str(path))
    scons, other = _imports(tree)
    in_chain: set[int] = set()
    for node in ast.walk(tree):
        what = None
        chain = _chain(node) if isinstance(node, ast.Attribute) else None
        if chain and chain[0] in scons:
            for sub in ast.walk(node):
                in_chain.add(id(sub))
            full = scons[chain[0]].split(".") + chain[1:]
            if any(p.startswith("_") and p not in DUNDERS_OK for p in full[1:]):
                what = ".".join(full)
            elif node.attr in _scons_hooks.INTERNAL_NAMES:
                what = node.attr
            else:
                name = _module_name(full)
                if name is not None and name not in public_api.MODULE_NAMES and name.rsplit(".", 1)[1] not in DUNDERS_OK:
                    what = name
        elif isinstance(node, ast.Attribute) and id(node) not in in_chain:
            root = node.value
            while isinstance(root, ast.Attribute):
                root = root.value
            if not (isinstance(root, ast.Name) and root.id in other):  # a module's name: `os.path`
                what = _member(node.attr)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
            for name in names:
                parts = name.split(".")
                if parts[0] == "SCons" and (set(parts) & _scons_hooks.INTERNAL_NAMES
                                            or any(p.startswith("_") for p in parts)):
                    what = name
            if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "SCons":
                for a in node.names:
                    if f"{node.module}.{a.name}" not in public_api.MODULE_NAMES:
                        what = f"{node.module}.{a.name}"
        elif isinstance(node, ast.keyword) and node.arg in _scons_hooks.INTERNAL_NAMES:
            what = node.arg + "="
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("getattr", "hasattr",
                                                                                                  "setattr")
              and len(node.args) >= 2 and isinstance(node.args[1], ast.Constant) and isinstance(node.args[1].value, str)):
            name = node.args[1].value
            if name in _scons_hooks.INTERNAL_NAMES or (name.startswith("__") and name not in DUNDERS_OK):
                what = f"{node.func.id}(..., {name!r})"
            elif _member(name):
                what = f"{node.func.id}(..., {name!r})"
        elif isinstance(node, ast.ClassDef):
            for base in node.bases:
                chain = _chain(base)
                if chain and (chain[0] in scons or chain[-1] in _SCONS_DERIVED):
                    what = f"class {node.name}({'.'.join(chain)})"
        if what is not None and (path.name, what) not in PENDING:
            found.append(f"{node.lineno}: {what}")
    return found


def _member(name: str) -> str | None:
    """`name` when it is an attribute of SCons's objects outside its public API, else None."""
    if name in SCONS_MEMBERS and name not in public_api.MEMBER_NAMES and name not in PYTHON_NAMES \
            and name not in OWN_NAMES and name not in DUNDERS_OK and not name.startswith("offload_"):
        return name
    return None


def _scons_derived() -> set[str]:
    """The door's classes derived from SCons's, directly or through another of them (a class
    derived from one of them derives from SCons's)."""
    classes = {c.name: [(_chain(b) or [""]) for b in c.bases] for p in (TOOL / "scons").glob("*.py")
               for c in ast.walk(ast.parse(p.read_text())) if isinstance(c, ast.ClassDef)}
    derived: set[str] = set()
    while True:
        more = {name for name, bases in classes.items()
                if name not in derived and any(b[0] == "SCons" or b[-1] in derived for b in bases)}
        if not more:
            return derived
        derived |= more


_SCONS_DERIVED = _scons_derived()


def _outside_the_door() -> list[Path]:
    door = TOOL / "scons"
    return [p for p in sorted(TOOL.rglob("*.py")) if door not in p.parents]


def test_internal_names_only_in_the_hooks_module():
    offenders = {str(p.relative_to(TOOL)): internal_uses(p) for p in _outside_the_door()}
    offenders = {k: v for k, v in offenders.items() if v}
    assert not offenders, ("SCons names outside its public API (scons/public_api.py) outside scons/ "
                           f"(move them behind scons/, or cite where SCons documents them): {offenders}")


def test_the_public_api_says_where_each_name_is_documented():
    for table in (public_api.MODULE_NAMES, public_api.MEMBER_NAMES):
        for name, where in table.items():
            assert where.startswith(("man page", "user guide")), (name, where)
    import importlib

    import SCons.Environment
    import SCons.Script
    for dotted, script_name in public_api.ALIASES.items():
        module, name = dotted.rsplit(".", 1)
        assert getattr(importlib.import_module(module), name) is getattr(SCons.Script, script_name), dotted
    for dotted in public_api.MODULE_NAMES:
        module, name = dotted.rsplit(".", 1)
        assert hasattr(importlib.import_module(module), name), dotted
    # Flatten() is SCons.Util.flatten applied
    import SCons.Util
    nested = [["a", ["b"]], "c", ("d",)]
    assert SCons.Environment.Base.Flatten(nested) == SCons.Util.flatten(nested) == ["a", "b", "c", "d"]


def test_own_names_are_the_tools():
    own = _own_members(_outside_the_door() + sorted((REPO / "offload_tool").rglob("*.py")))
    assert set(OWN_NAMES) <= own, sorted(set(OWN_NAMES) - own)
    assert set(OWN_NAMES) <= SCONS_MEMBERS, sorted(set(OWN_NAMES) - SCONS_MEMBERS)  # else not needed here
    assert not set(public_api.MEMBER_NAMES) & set(OWN_NAMES)


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


def test_the_allowlist_scan_finds_what_is_not_documented(tmp_path):
    sample = tmp_path / "_sample.py"
    sample.write_text(
        "import os\nimport SCons.Action\nimport SCons.Subst\nfrom SCons.Util import NodeList\n"
        "from ..scons import actions as _actions\n"
        "class A(SCons.Action.CommandAction):\n    pass\n"
        "class B(_actions.CompileAction):\n    pass\n"
        "w = SCons.Subst.CmdStringHolder('x')\n"
        "p = node.get_abspath() + node.get_path(top) + env.Override({}).subst('$X')\n"
        "e = getattr(node, 'get_build_env')\n"
        "ok = node.abspath, node.srcnode().path, env.File('a').dir.name, os.path.join('a'), {}.get('x')\n"
        "ok2 = SCons.Action.Action('x'), _actions.word('a', None), plan.env, n.attributes.offload_lang\n")
    whats = {f.split(": ", 1)[1] for f in internal_uses(sample)}
    assert whats == {"SCons.Util.NodeList", "class A(SCons.Action.CommandAction)", "SCons.Action.CommandAction",
                     "class B(_actions.CompileAction)", "SCons.Subst.CmdStringHolder", "get_abspath", "get_path",
                     "Override", "getattr(..., 'get_build_env')", "attributes"}, whats


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


def test_built_this_run_without_node_states(monkeypatch, said):
    """Without the `executed` state a file's timestamp is never trusted: content is compared."""
    import SCons.Node

    class Node:
        def __init__(self, state):
            self.state = state

        def get_state(self):
            return self.state
    assert _scons_hooks.built_this_run(Node(SCons.Node.executed)) is True
    assert _scons_hooks.built_this_run(Node(SCons.Node.up_to_date)) is False
    assert not said()
    monkeypatch.delattr(SCons.Node, "executed")
    assert _scons_hooks.built_this_run(Node(SCons.Node.up_to_date)) is True
    assert _scons_hooks.built_this_run(Node(SCons.Node.up_to_date)) is True
    out = said()
    assert len(out) == 1 and "compared by content" in out[0], out


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
    warnings = hook_warnings(cp.stderr)
    assert len(warnings) == 1 and "progress: total unknown" in warnings[0], cp.stderr
    lines = [ln for ln in cp.stdout.splitlines() if re.match(r"^\[\d+/\?\] ", ln)]
    assert len(lines) == 8 and sorted(int(ln[1:ln.index("/")]) for ln in lines) == list(range(1, 9)), cp.stdout


@pytest.mark.slow
def test_report_without_the_posix_spawn(tmp_path):
    p, cp = _build(tmp_path, "hide=spawn", "--offload-report=out/report.html")
    warnings = hook_warnings(cp.stderr)
    assert len(warnings) == 1 and "CPU times unknown" in warnings[0], cp.stderr
    report = json.loads((p.root / "out/report.json").read_text())
    assert len(report["actions"]) == 8 and all(a["status"] == "built" and a["wall_s"] > 0 for a in report["actions"])
    assert all(a["cpu_s"] is None for a in report["actions"] if a["kind"] != "package+embed") and report["binaries"]


@pytest.mark.slow
def test_hooks_are_installed_only_when_asked_for(tmp_path):
    """Progress off and no report: SCons's build task and Progress are SCons's own."""
    p, cp = _build(tmp_path)
    assert not hook_warnings(cp.stderr), cp.stderr
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
