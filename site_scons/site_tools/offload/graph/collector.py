"""Python's cyclic garbage collector over the graph the SConscripts make: run less often.

Why: the tool makes several nodes per source (host IR, host object, one device object per arch,
their executors and environments), hundreds of thousands of Python objects at 1,000 sources, and
they live until SCons exits. Python's collector runs a young-generation pass every 700 new
container objects and a pass over everything it holds as the old generation grows; none of those
passes finds garbage among the graph's objects, since they are all still in use. With
`OFFLOAD_GC='tuned'` (the default) the first environment that loads the tool raises the
thresholds once for the SCons process (`THRESHOLDS`): measured on a 1,000-source, 4-arch OpenMP
project, the collector's time while the SConscripts are read fell from 0.6-0.7 s (343 young,
32 middle and 2 full passes) to 0.2-0.3 s (26 young passes), 3-5% of reading them. Garbage is still collected: the passes run, fewer of them.

The same mode also freezes the collector's generations (`gc.freeze`: what Python tracks then is
left out of every later pass) twice:
- once the SConscripts are read, at the first collection after that (`_freeze_when_read`, a
  collector callback): the graph is then made, and every object of it stays in use until SCons
  exits. Left tracked, the graph moved to the middle generation, and each middle pass of the
  build phase traversed all of it: measured on a null build of 1,000 OpenMP sources x 4 archs,
  two middle passes took 0.48-0.58 s (of a 6-8 s build); frozen, 0.002 s. Only what the build
  phase allocates is collected after that. Garbage in reference cycles that no pass had found
  by then stays until SCons exits: at most what the SConscripts left since the last young pass.
- when the SCons process exits (this tool's exit handler): tearing down, Python runs a full pass
  over every object still tracked, to find cycles it can free, only for the process to end.
  Measured on a null build of 100 OpenMP sources x 4 archs, the time from SCons's last exit
  handler to the process's end fell from 0.16-0.23 s to ~0.05 s (the usual build's, with a
  third of the nodes: ~0.1 s), ~15% of the null build. Objects still in use at exit are not
  finalised by a pass that never runs; Python does not promise to finalise them at exit either,
  and SCons has written `.sconsign` and closed its files by then.

`OFFLOAD_GC='python'` leaves Python's own thresholds (set it in the first environment that
loads the tool, or run `scons` with `OFFLOAD_GC=python` in the process environment)."""

from __future__ import annotations

import atexit
import gc
import os

import SCons.Errors

from ..scons import hooks as _scons_hooks

#: The collector's thresholds with `OFFLOAD_GC='tuned'`: a young pass per 10,000 new container
#: objects (Python: 700), a middle pass per 50 young ones, a full one per 1,000 middle ones.
THRESHOLDS = (10_000, 50, 1_000)

MODES = ("tuned", "python")

_applied: str | None = None
_frozen = False  # the graph was frozen once the SConscripts were read


def mode(env) -> str:
    """`OFFLOAD_GC` of `env`, else of the process environment, else 'tuned'; another value is an
    error naming the ones there are."""
    value = env.get("OFFLOAD_GC") or os.environ.get("OFFLOAD_GC") or "tuned"
    if value not in MODES:
        raise SCons.Errors.UserError(f"offload: OFFLOAD_GC={value!r}: expected one of {', '.join(MODES)}")
    return value


def install(env) -> None:
    """Apply `env`'s mode to the SCons process, once: the first environment that loads the tool
    decides (the collector is the process's, not an environment's)."""
    global _applied
    wanted = mode(env)
    if _applied is not None:
        return
    _applied = wanted
    if wanted == "tuned":
        gc.set_threshold(*THRESHOLDS)
        if _scons_hooks.sconscript_phase() != "reading":
            return  # a process loading the tool itself (a test), not SCons reading SConscripts
        gc.callbacks.append(_freeze_when_read)
        # Registered when the tool loads: handlers registered later (the build report's) run
        # before it, SCons's own (registered as it starts) after, and freeze nothing they need.
        atexit.register(gc.freeze)


def _freeze_when_read(phase: str, info: dict) -> None:
    """A collector callback: at the start of the first collection once the SConscripts are read,
    freeze what is tracked (the graph); that collection then passes over nothing of it (the
    collector reads its generations after its callbacks return). It stays in `gc.callbacks`,
    doing nothing more: leaving the list while the collector walks it would skip the next
    callback's call."""
    global _frozen
    if _frozen or phase != "start" or _scons_hooks.sconscript_phase() != "read":
        return
    _frozen = True
    gc.freeze()
