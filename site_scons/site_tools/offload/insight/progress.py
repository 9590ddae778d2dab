"""Progress for long builds: each action line carries its position and the number of actions
still to run, `[ 37/505] DEVICE gfx90a src/x.c`.

`OFFLOAD_PROGRESS` (construction variable, or the environment variable of that name) is `auto`
(the default: on when standard output is a terminal, off otherwise, so logs and tools that read
the lines see them unchanged), `on` or `off`.

How it hooks in:

* `PRINT_CMD_LINE_FUNC` (a construction variable) of the environments the tool is loaded into
  prints the prefix (any action of those environments, the tool's own, `env.Program`'s,
  "Retrieved ... from cache" lines);
* `Progress(...)` (SCons's public function), which SCons calls for every task it is about to
  decide on, counts what is left to run. It is installed only when progress is on in an
  environment the tool is loaded into (a callback set by an earlier `Progress()` is chained:
  `_scons_hooks.previous_progress`). On its first call (before any action runs, so no node is
  being built while it looks) the dependency graph of the build targets is walked once
  (`_scons_hooks.out_of_date_actions`, which asks SCons's taskmaster-level node interface) and
  the out-of-date actions of those environments are counted; a node whose inputs are all up to
  date is asked `changed(allowcache=True)`, the question the build asks next anyway, whose
  answer SCons then reuses; a node with an input still to build is counted without asking.
  Nodes later found up to date after all (an input rebuilt to identical content) are taken off
  the total as SCons decides them. A null build runs no action and prints nothing; the walk does
  the up-to-date checks the build does anyway, no more (`bench/insight.py` measures it).
  Where this SCons cannot be walked so (or progress was turned on in an environment after the
  tool was loaded there), lines carry their position and `?` for the total: `[3/?]`.

Counted per action (an action writing two targets is one), not per node."""

from __future__ import annotations

import os
import sys
import threading

import SCons.Errors
import SCons.Script

from ..scons import nodes as _nodes
from ..scons import hooks as _scons_hooks

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
        self.total: int | None = None  # None: unknown (not counted, or not countable here)
        self.started = False     # the first Progress call has come
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
            if not self.started:
                self.started = True
                if not any(enabled(e) for e in self.envs):
                    self.off, self.envs = True, []
                    return
                self.envs = []
                self.total = self._count(node)
            elif self.total is not None:
                self._uncount_up_to_date()
            else:
                return
            # Its executor now: SCons lets go of an up-to-date node's executor once decided.
            self.last_decided.append((node, _scons_hooks.action_key(node) if _nodes.has_builder(node) else None))

    def _uncount_up_to_date(self) -> None:
        for n, key in self.last_decided:
            if _scons_hooks.decided_up_to_date(n):
                if key in self.counted:
                    self.counted.discard(key)
                    self.total -= 1
        self.last_decided = []

    def _count(self, first) -> int | None:
        if SCons.Script.GetOption("clean") or SCons.Script.GetOption("question"):
            return 0
        roots = _scons_hooks.build_roots()
        if roots is None:
            return None
        counted = _scons_hooks.out_of_date_actions(roots or [first], _prints_progress)
        if counted is None:
            return None
        self.counted = counted
        return len(counted)

    # -- PRINT_CMD_LINE_FUNC (action context: any worker thread)

    def emit(self, s: str, target, emit) -> None:
        """`emit(prefixed line)` under the counter's lock, so that lines come out in position order."""
        node = target[0] if isinstance(target, (list, tuple)) and target else target
        key = _scons_hooks.action_key(node) if _nodes.is_node(node) else None
        with self.lock:
            if key is not None and key in self.printed:
                pos = self.printed[key]
            else:
                self.position += 1
                pos = self.position
                if key is not None:
                    self.printed[key] = pos
                    self.counted.discard(key)
            if self.total is None:  # not counted (see the module docstring)
                emit(f"[{pos}/?] {s}")
                return
            total = max(self.total, self.position)
            width = len(str(total))
            emit(f"[{pos:>{width}}/{total}] {s}")


COUNTER = Counter()


def _prints_progress(node) -> bool:
    try:
        env = _nodes.build_env(node)
    except Exception:
        return False
    return env.get("PRINT_CMD_LINE_FUNC") is print_cmd_line and enabled(env)


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
    and called with the prefixed line); with progress on in `env`, count the build once per run
    (SCons's `Progress`, installed once, by the first such environment)."""
    global _installed
    mode(env)  # a bad value is an error at SConscript time, not in the middle of the build
    current = env.get("PRINT_CMD_LINE_FUNC")
    if current is not print_cmd_line:
        if current is not None:
            env["_OFFLOAD_USER_PRINT_CMD_LINE_FUNC"] = current
        env["PRINT_CMD_LINE_FUNC"] = print_cmd_line
    COUNTER.envs.append(env)
    if _installed or not enabled(env):
        return
    _installed = True
    COUNTER.chained = _scons_hooks.previous_progress()
    SCons.Script.Progress(COUNTER)
