"""Progress for long builds: each action line carries its position and the number of actions
still to run, `[ 37/505] DEVICE gfx90a src/x.c`.

`OFFLOAD_PROGRESS` (construction variable, or the environment variable of that name) is `auto`
(the default: on when standard output is a terminal, off otherwise, so logs and tools that read
the lines see them unchanged), `on` or `off`.

Hooked in through SCons's public interfaces only:

* `PRINT_CMD_LINE_FUNC` of the environments the tool is loaded into prints the prefix (any action
  of those environments, the tool's own, `env.Program`'s, "Retrieved ... from cache" lines);
* `Progress(...)`, which SCons calls for every task it is about to decide on, counts what is left
  to run. On its first call (before any action runs, so no node is being built while it looks)
  it walks the dependency graph of the build targets once and counts the actions of those
  environments that are out of date: a node whose inputs are all up to date is asked
  `changed(allowcache=True)`, the question the build asks next anyway, whose answer SCons then
  reuses; a node with an input still to build is counted without asking (its inputs will change).
  Nodes later found up to date after all (an input rebuilt to identical content) are taken off the
  total as SCons decides them. A null build runs no action and prints nothing; the walk does the
  up-to-date checks the build does anyway, no more (`bench/insight.py` measures it).

Counted per action (an action writing two targets is one), not per node."""

from __future__ import annotations

import os
import sys
import threading

import SCons.Errors
import SCons.Node
import SCons.Node.Alias
import SCons.Node.FS
import SCons.Script
import SCons.Script.Main
import SCons.Util

MODES = ("auto", "on", "off")


def mode(env) -> str:
    """The progress mode of `env`: OFFLOAD_PROGRESS, else $OFFLOAD_PROGRESS in the environment."""
    value = env.get("OFFLOAD_PROGRESS")
    if value is None or value == "":
        value = os.environ.get("OFFLOAD_PROGRESS", "auto")
    if value is True:
        return "on"
    if value is False:
        return "off"
    text = str(value).strip().lower()
    text = {"1": "on", "yes": "on", "true": "on", "0": "off", "no": "off", "false": "off"}.get(text, text)
    if text not in MODES:
        raise SCons.Errors.UserError(f"offload: OFFLOAD_PROGRESS='{value}': expected auto, on or off")
    return text


def enabled(env) -> bool:
    m = mode(env)
    if m == "auto":
        return sys.stdout.isatty()
    return m == "on"


class Counter:
    """Position and total of this build's actions (one per process; thread-safe for `-j`)."""

    def __init__(self):
        self.lock = threading.Lock()
        self.position = 0
        self.total: int | None = None
        self.counted: set[int] = set()   # executors (id) counted in the total, not yet printed
        self.printed: dict[int, int] = {}  # executor (id) -> its position
        self.last_decided: list = []
        self.chained = None
        self.envs: list = []     # environments the tool was loaded into
        self.off = False         # no environment shows progress: the callback does nothing

    # -- SCons's Progress callback (taskmaster context: no action runs concurrently on its first call)

    def __call__(self, node) -> None:
        if self.chained is not None:
            self.chained(node)
        if self.off:
            return
        with self.lock:
            if self.total is None:
                if not any(enabled(e) for e in self.envs):
                    self.off, self.envs = True, []
                    return
                self.envs = []
                self.total = self._count(node)
            else:
                self._uncount_up_to_date()
            # Its executor now: SCons lets go of an up-to-date node's executor once decided.
            self.last_decided.append((node, _executor_key(node) if node.has_builder() else None))

    def _uncount_up_to_date(self) -> None:
        for n, key in self.last_decided:
            if n.get_state() == SCons.Node.up_to_date:
                if key in self.counted:
                    self.counted.discard(key)
                    self.total -= 1
        self.last_decided = []

    def _count(self, first) -> int:
        if SCons.Script.GetOption("clean") or SCons.Script.GetOption("question"):
            return 0
        roots = _build_roots() or [first]
        self.counted = count_out_of_date(roots, _prints_progress)
        return len(self.counted)

    # -- PRINT_CMD_LINE_FUNC (action context: any worker thread)

    def emit(self, s: str, target, emit) -> None:
        """`emit(prefixed line)` under the counter's lock, so that lines come out in position order."""
        node = target[0] if isinstance(target, (list, tuple)) and target else target
        key = _executor_key(node) if isinstance(node, SCons.Node.Node) else None
        with self.lock:
            if key is not None and key in self.printed:
                pos = self.printed[key]
            else:
                self.position += 1
                pos = self.position
                if key is not None:
                    self.printed[key] = pos
                    self.counted.discard(key)
            total = max(self.total or 0, self.position)
            width = len(str(total))
            emit(f"[{pos:>{width}}/{total}] {s}")


COUNTER = Counter()


def _executor_key(node) -> int | None:
    try:
        return id(node.get_executor())
    except Exception:  # a node without builder has no executor
        return None


def _prints_progress(node) -> bool:
    try:
        env = node.get_build_env()
    except Exception:
        return False
    return env.get("PRINT_CMD_LINE_FUNC") is print_cmd_line and enabled(env)


def _build_roots() -> list:
    """The nodes this run builds: the command-line targets, else the default ones, else '.'."""
    names = list(SCons.Script.BUILD_TARGETS) or ["."]
    fs = SCons.Node.FS.get_default_fs()
    roots = []
    for name in names:
        if isinstance(name, SCons.Node.Node):
            roots.append(name)
            continue
        alias = SCons.Node.Alias.default_ans.lookup(str(name))
        roots.append(alias if alias is not None else fs.Entry(str(name)))
    return roots


def _children(node) -> list:
    try:
        kids = list(node.children())
    except Exception:  # the build will report it; count the node as to run
        return []
    return kids + list(node.prerequisites or ())


def count_out_of_date(roots, counts) -> set[int]:
    """The executors (by id) of the out-of-date nodes under `roots` for which `counts(node)`.

    Post-order walk: a node is out of date when an input is, or (all inputs up to date) when SCons
    says so; `changed(allowcache=True)` keeps the answer for the build's own question."""
    up_to_date_state = SCons.Node.up_to_date
    run: dict[int, bool] = {}
    visiting: set[int] = set()
    counted: set[int] = set()
    stack = [(n, False) for n in reversed(roots)]
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
        elif state > SCons.Node.pending:
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
                    except Exception:
                        out = True
                if out and counts(n):
                    k = _executor_key(n)
                    if k is not None:
                        counted.add(k)
        run[key] = out
    return counted


def print_cmd_line(s, target, source, env) -> None:
    """SCons's default printing with the progress prefix, when progress is on for `env`."""
    user = env.get("_OFFLOAD_USER_PRINT_CMD_LINE_FUNC")

    def emit(line: str) -> None:
        if user is not None:
            user(line, target, source, env)
        else:
            sys.stdout.write(line + "\n")
            sys.stdout.flush()

    if enabled(env):
        COUNTER.emit(s, target, emit)
    else:
        emit(s)


_installed = False


def install(env) -> None:
    """Print action lines through `print_cmd_line` in `env` (a function the user set there is kept
    and called with the prefixed line), and count the build once per run."""
    global _installed
    mode(env)  # a bad value is an error at SConscript time, not in the middle of the build
    current = env.get("PRINT_CMD_LINE_FUNC")
    if current is not print_cmd_line:
        if current is not None:
            env["_OFFLOAD_USER_PRINT_CMD_LINE_FUNC"] = current
        env["PRINT_CMD_LINE_FUNC"] = print_cmd_line
    COUNTER.envs.append(env)
    if _installed:
        return
    _installed = True
    previous = getattr(SCons.Script.Main, "ProgressObject", None)
    if previous is not None and not isinstance(previous, SCons.Util.Null):
        COUNTER.chained = previous
    SCons.Script.Progress(COUNTER)
