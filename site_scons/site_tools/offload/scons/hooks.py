"""The uses of SCons's internals that need a version check and a fallback, behind one door.

The rule. The tool's modules outside `scons/` use only SCons's public API: what SCons's reference
manual and user guide document for SConscripts and tools, listed with where in `public_api`
(SConscript functions such as `GetOption`, `Progress`, `GetBuildFailures`; `Action()`,
`Builder()`, `Scanner()`; environment methods; a node's `path`, `abspath`, `srcnode()`, `dir`,
`name`; ...). SCons calls everything else its internal API, which may change in any release, and
`scons/` alone uses it: `nodes` (a node's other names and marks, environments with overrides, a
decider of the tool's own), `actions` (the action classes the tool derives, command-line words,
substitution modes, scanners), `signatures` (signatures per group of nodes), and this module,
for the internals that are not stable enough to use without a check: module state SCons updates
while it runs (`SCons.Script.sconscript_reading`, `SCons.Script.Main.ProgressObject`,
`SCons.Node.Alias.default_ans`, `SCons.Node.FS.get_default_fs`), classes it instantiates itself
(`SCons.Script.Main.BuildTask`), the default values of construction variables
(`SCons.Platform.posix.subprocess_spawn`), another tool's module (`SCons.Tool.compilation_db`),
the taskmaster's book-keeping (node states `SCons.Node.up_to_date`/`pending`, `get_state()`,
`changed(allowcache=)`, `disambiguate()`, `always_build`, `prerequisites`, a node's `cached`),
executors fetched from nodes (`node.get_executor()`) and the cache's layout. `INTERNAL_NAMES`
lists those names. tests/scons_tool/test_scons_hooks.py fails on a SCons name outside `public_api` anywhere
outside `scons/`, and on an `INTERNAL_NAMES` one or a private one (`SCons.Script._x`,
`node._memo`, a module's `__ENTRIES`) there.

Each hook here
- is installed only when its feature is asked for (the task timer only with a report,
  `--offload-report` or `OffloadBuildReport`; the progress walk only with progress on);
- first checks the SCons version (`MIN_SCONS`, the oldest the tool supports) and that what it
  touches is there and has the shape it expects;
- has a fallback when it is absent or changed: the feature degrades, the build goes on, and the
  tool says so once per feature (`offload: warning: <feature>: ...` on standard error).

| hook | internal it uses | feature | without it |
|---|---|---|---|
| `time_build_tasks` | `SCons.Script.Main.BuildTask` (a subclass times `execute()`), a node's `cached` | build report | no report is written |
| `default_spawn` | `SCons.Platform.posix.subprocess_spawn` | build report (CPU time) | `cpu_s` is null |
| `previous_progress` | `SCons.Script.Main.ProgressObject` | progress | a `Progress()` set before the tool loaded is replaced, not chained |
| `build_roots`, `out_of_date_actions`, `decided_up_to_date`, `action_key` | `default_ans`, `get_default_fs`, node states, `changed(allowcache=True)`, `get_executor()` | progress | the total is unknown: `[ n/?]` |
| `built_this_run` | node states (`executed`), `get_state()` | the tool's files judged by timestamp (`nodes.decide_by_timestamp_then_content`): a file rewritten in this run is compared by content | every such file is compared by content (null builds hash them again) |
| `action_sources` | `node.get_executor()` | build report | the node's own `sources` |
| `reading_sconscripts` | `SCons.Script.sconscript_reading` | group signatures (`_signatures`) | SCons computes every signature itself (slower null builds) |
| `cache_copy_path` | an environment's `get_CacheDir()`, its `cachepath(node)` (from the node's `get_cachedir_bsig()`) | a damaged device object's `CacheDir` copy is dropped (`_consume`) | the copy stays: each clean build fetches it again and stops, until the user empties the cache |
| `cache_dir_in_use` | an environment's `get_CacheDir()`, its `is_enabled()` | build report: `--cache-disable` in the commands that record missing timings only where a `CacheDir` is set | `--cache-disable` is always given |
| `compilation_db_record` | `compilation_db`'s `make_emit_compilation_DB_entry` (4.5-4.8), `__COMPILATION_DB_ENTRIES` (later) | our compiles in `compile_commands.json` | they are left out of it |

Tested with the oldest SCons supported (tests/scons_tool/test_scons_min_version.py) and the newest installed,
and each fallback with its name taken away (tests/scons_tool/test_scons_hooks.py)."""

from __future__ import annotations

import sys
import threading
import time

import SCons
import SCons.Script

#: The oldest SCons the tool supports (pyproject.toml's `scons>=4.5`).
MIN_SCONS = (4, 5)

#: SCons's internal names (see the module docstring): no other module of the tool may use them.
INTERNAL_NAMES = frozenset({
    "BuildTask", "ProgressObject", "sconscript_reading", "default_ans", "get_default_fs", "subprocess_spawn",
    "compilation_db", "make_emit_compilation_DB_entry", "Taskmaster", "Executor", "get_executor", "get_state",
    "up_to_date", "pending", "executed", "allowcache", "disambiguate", "always_build", "prerequisites", "cached",
    "get_CacheDir", "cachepath", "get_cachedir_bsig", "is_enabled",
})


def scons_version() -> tuple[int, ...]:
    return tuple(int(x) for x in SCons.__version__.split(".")[:2] if x.isdigit())


_SUPPORTED = scons_version() >= MIN_SCONS


def supported() -> bool:
    """This SCons is one the hooks were written for (`MIN_SCONS` or later)."""
    return _SUPPORTED


_said: set[str] = set()
_said_lock = threading.Lock()


def degraded(feature: str, why: str) -> None:
    """Say once per process that `feature` is degraded because of `why` (the build goes on)."""
    with _said_lock:
        if feature in _said:
            return
        _said.add(feature)
    sys.stderr.write(f"offload: warning: {feature}: {why} (SCons {SCons.__version__}); the build goes on\n")
    sys.stderr.flush()


def _module(name: str):
    """SCons's module `name`, or None when this SCons has none by that name."""
    try:
        __import__(name)
    except ImportError:
        return None
    return sys.modules.get(name)


# --------------------------------------------------------------------------------------------
# The build report: timing SCons's build tasks, and CPU time of spawned commands

thread_state = threading.local()  # `children_cpu`: CPU seconds of the commands this thread waited for


def time_build_tasks(on_prepare, on_done) -> bool:
    """Have SCons build with a subclass of its build task that calls `on_prepare(targets)` for every
    task it considers and `on_done(targets, start, end, cpu_s, status)` for every action it runs
    (`status`: built, cached or failed; `cpu_s` the thread's CPU plus that of the commands it
    waited for, see `thread_state`). False, said once, where this SCons's task cannot be
    subclassed as expected."""
    main = _module("SCons.Script.Main")
    base = getattr(main, "BuildTask", None)
    if not (supported() and isinstance(base, type)
            and all(callable(getattr(base, m, None)) for m in ("prepare", "execute"))):
        degraded("build report off", "no SCons.Script.Main.BuildTask with prepare() and execute() to time actions by")
        return False
    if getattr(base, "_offload_reporting", False):
        return True
    import SCons.Node.FS

    class ReportingBuildTask(base):
        _offload_reporting = True

        def prepare(self):
            on_prepare(self.targets)
            return base.prepare(self)

        def execute(self):
            if isinstance(self.targets[0], SCons.Node.FS.Dir):  # SCons making a folder: not an action
                return base.execute(self)
            start = time.monotonic()
            cpu0 = time.thread_time()
            thread_state.children_cpu = 0.0
            status = "built"
            try:
                base.execute(self)
                if all(getattr(t, "cached", 0) for t in self.targets):
                    status = "cached"
            except BaseException:
                status = "failed"
                raise
            finally:
                end = time.monotonic()
                on_done(self.targets, start, end, time.thread_time() - cpu0 + thread_state.children_cpu, status)

    main.BuildTask = ReportingBuildTask
    return True


def default_spawn():
    """SCons's POSIX `SPAWN` (the default value the report's own spawn stands in for), or None,
    said once, where this SCons has none by that name."""
    posix = _module("SCons.Platform.posix")
    spawn = getattr(posix, "subprocess_spawn", None)
    if spawn is None or not callable(spawn):
        degraded("build report: CPU times unknown", "no SCons.Platform.posix.subprocess_spawn to stand in for")
        return None
    return spawn


def action_sources(node) -> list:
    """All sources of the action that builds `node` (its executor's, for a multi-target action)."""
    try:
        return list(node.get_executor().get_all_sources())
    except Exception:
        return list(getattr(node, "sources", None) or [])


# --------------------------------------------------------------------------------------------
# Progress: chaining a Progress() set earlier, and counting what will run

def previous_progress():
    """The `Progress()` callback set before ours (None when none was); said once where it cannot
    be read (ours then replaces it, as a later `Progress()` call would)."""
    main = _module("SCons.Script.Main")
    if main is None or not hasattr(main, "ProgressObject"):
        degraded("progress", "cannot read SCons.Script.Main.ProgressObject; an earlier Progress() is replaced")
        return None
    previous = main.ProgressObject
    import SCons.Util
    if previous is None or isinstance(previous, getattr(SCons.Util, "Null", ())):
        return None
    return previous


def action_key(node) -> int | None:
    """One key per action (its executor's identity: targets of one action share it), or None."""
    try:
        return id(node.get_executor())
    except Exception:  # a node without builder has no executor
        return None


def decided_up_to_date(node) -> bool:
    """SCons has decided `node` is up to date (the taskmaster's state)."""
    import SCons.Node
    state = getattr(SCons.Node, "up_to_date", None)
    return state is not None and node.get_state() == state


def built_this_run(node) -> bool:
    """SCons ran the action that writes `node` in this run (the taskmaster's state `executed`).
    True when the state cannot be read: the caller, which trusts a timestamp only for a file
    this run did not rewrite, then compares content, which is always right."""
    import SCons.Node
    state = getattr(SCons.Node, "executed", None)
    get_state = getattr(node, "get_state", None)
    if state is None or get_state is None:
        degraded("timestamps of the tool's files", "no SCons.Node.executed node state: they are compared by "
                 "content, as SCons's 'content' decider does")
        return True
    return get_state() == state


def build_roots() -> list | None:
    """The nodes this run builds: the command-line targets, else the default ones, else '.'
    (looked up as SCons does: an alias first, else a file system entry), or None, said once,
    where this SCons cannot be asked."""
    import SCons.Node
    import SCons.Node.Alias
    import SCons.Node.FS
    ans = getattr(SCons.Node.Alias, "default_ans", None)
    get_fs = getattr(SCons.Node.FS, "get_default_fs", None)
    if ans is None or get_fs is None or not hasattr(ans, "lookup"):
        degraded("progress: total unknown", "no SCons.Node.Alias.default_ans / SCons.Node.FS.get_default_fs")
        return None
    fs = get_fs()
    roots = []
    for name in list(SCons.Script.BUILD_TARGETS) or ["."]:
        if isinstance(name, SCons.Node.Node):
            roots.append(name)
            continue
        alias = ans.lookup(str(name))
        roots.append(alias if alias is not None else fs.Entry(str(name)))
    return roots


def _children(node) -> list:
    try:
        kids = list(node.children())
    except Exception:  # the build will report it; count the node as to run
        return []
    return kids + list(getattr(node, "prerequisites", None) or ())


def out_of_date_actions(roots, counts) -> set[int] | None:
    """The actions (`action_key`) of the out-of-date nodes under `roots` for which `counts(node)`,
    or None, said once, where this SCons's nodes cannot be asked.

    Post-order walk: a node is out of date when an input is, or (all inputs up to date) when SCons
    says so; `changed(allowcache=True)` keeps the answer for the build's own question, so the
    walk does the up-to-date checks the build does anyway, no more."""
    import SCons.Node
    import SCons.Node.FS
    up_to_date_state = getattr(SCons.Node, "up_to_date", None)
    pending_state = getattr(SCons.Node, "pending", None)
    if not (supported() and isinstance(up_to_date_state, int) and isinstance(pending_state, int)):
        degraded("progress: total unknown", "no SCons.Node.up_to_date / pending node states")
        return None
    run: dict[int, bool] = {}
    visiting: set[int] = set()
    counted: set[int] = set()
    stack = [(n, False) for n in reversed(roots)]
    try:
        while stack:
            n, expanded = stack.pop()
            key = id(n)
            if key in run:
                continue
            if not expanded:
                if key in visiting:
                    continue  # a cycle: SCons reports it
                visiting.add(key)
                stack.append((n, True))
                stack.extend((c, False) for c in _children(n) if id(c) not in run)
                continue
            visiting.discard(key)
            state = n.get_state()
            if state == up_to_date_state:
                out = False
            elif state > pending_state:
                out = True  # executing, executed or failed already
            elif not n.has_builder():
                out = False
            else:
                out = any(run.get(id(c), False) for c in _children(n))
                if isinstance(n, SCons.Node.FS.Entry):
                    n = n.disambiguate()  # what SCons does before building it
                if isinstance(n, SCons.Node.FS.File):
                    if not out:
                        try:
                            out = bool(n.always_build) or not n.exists() or n.changed(allowcache=True)
                        except TypeError:
                            raise  # changed() without allowcache: this SCons is not the one expected
                        except Exception:
                            out = True
                    if out and counts(n):
                        k = action_key(n)
                        if k is not None:
                            counted.add(k)
            run[key] = out
    except (AttributeError, TypeError) as exc:
        degraded("progress: total unknown", f"its nodes cannot be asked what is out of date ({exc})")
        return None
    return counted


# --------------------------------------------------------------------------------------------
# Signatures

def reading_sconscripts() -> bool:
    """SConscripts are being read (environments may still change), or this SCons cannot say, which
    is taken as yes (said once): then nothing is memoised and SCons computes every signature."""
    reading = getattr(SCons.Script, "sconscript_reading", None)
    if reading is None or not supported():
        degraded("signature memo off", "no SCons.Script.sconscript_reading; SCons signs each node itself")
        return True
    return bool(reading)


def sconscript_phase() -> str | None:
    """'reading' while SCons reads SConscripts, 'read' once it has none left to read (the build
    phase, or help, follows; also a process that never read any, such as a test loading the tool
    itself), None where this SCons cannot say."""
    reading = getattr(SCons.Script, "sconscript_reading", None)
    if reading is None or not supported():
        return None
    return "reading" if reading else "read"


# --------------------------------------------------------------------------------------------
# CacheDir

def cache_copy_path(node) -> str | None:
    """The file in which `CacheDir` keeps the copy of `node` that its current build signature
    names (it may not exist), or None when the build has no `CacheDir` or this SCons cannot say
    (said once).

    Why: SCons fetches a target from the cache by its build signature and never looks at the
    bytes, so a damaged copy there is fetched again by every clean build; the consumer that finds
    it damaged needs its place in the cache to drop it. SCons documents `CacheDir()` and
    `CACHEDIR_CLASS` but not where a node's copy lies: the environment's `get_CacheDir()` and
    the cache's `cachepath(node)` answer it (SCons 4.5 to 4.11 alike)."""
    try:
        env = node.get_build_env()
    except Exception:
        return None
    get = getattr(env, "get_CacheDir", None)
    try:
        cache = get() if supported() and callable(get) else None
        where = getattr(cache, "cachepath", None)
        if not callable(where):
            raise AttributeError("no get_CacheDir().cachepath")
        _folder, path = where(node)
    except Exception as exc:
        degraded("damaged CacheDir copies are not dropped",
                 f"cannot ask this SCons where a node's CacheDir copy lies ({type(exc).__name__}: {exc})")
        return None
    return path if isinstance(path, str) and path else None


def cache_dir_in_use(nodes) -> bool | None:
    """Whether a `CacheDir` answers for the build of any of `nodes` (set, and not turned off by
    `--cache-disable`), or None when this SCons cannot say (said once).

    Why: the build report gives the commands that record the times of actions that have none, a
    clean and a rebuild; a cache would hand the targets back without running their actions, so
    where one is in use those commands turn it off. SCons documents `CacheDir()` but not how to
    ask an environment for its cache: its `get_CacheDir()` and the cache's `is_enabled()` answer
    (SCons 4.5 to 4.11 alike)."""
    asked = set()
    try:
        if not supported():
            raise AttributeError(f"SCons older than {'.'.join(map(str, MIN_SCONS))}")
        for n in nodes:
            env = n.get_build_env()
            if env is None or id(env) in asked:
                continue
            asked.add(id(env))
            if env.get_CacheDir().is_enabled():
                return True
    except Exception as exc:
        degraded("build report: whether a CacheDir is in use is unknown",
                 f"cannot ask this SCons for an environment's CacheDir ({type(exc).__name__}: {exc}); "
                 "the commands that record missing timings turn the cache off")
        return None
    return False


# --------------------------------------------------------------------------------------------
# The compilation database

def compilation_db_record(env, targets, source, com: str) -> bool:
    """Record the compiles of `targets` from `source` (command `$com`) as SCons's `compilation_db`
    tool records its own; False, said once, where that tool's form is not one known:
    - SCons 4.5 to 4.8 expose the emitter factory `make_emit_compilation_DB_entry(comstr)`, whose
      emitter makes an entry node (tests/scons_tool/test_scons_min_version.py);
    - later releases keep `(target, source, env, action)` tuples in the module list
      `__COMPILATION_DB_ENTRIES` (tests/scons_tool/test_scons_openmp.py)."""
    cdb = _module("SCons.Tool.compilation_db")
    make_emitter = getattr(cdb, "make_emit_compilation_DB_entry", None)
    if supported() and callable(make_emitter):
        emit = make_emitter("$" + com)
        for t in targets:
            emit([t], [source], env)
        return True
    entries = getattr(cdb, "__COMPILATION_DB_ENTRIES", None)
    if supported() and isinstance(entries, list):
        import SCons.Action
        act = SCons.Action.Action("$" + com)
        for t in targets:
            entries.append((t, source, env, act))
        return True
    degraded("compile_commands.json without the offload compiles",
             "SCons.Tool.compilation_db has neither make_emit_compilation_DB_entry nor __COMPILATION_DB_ENTRIES")
    return False
