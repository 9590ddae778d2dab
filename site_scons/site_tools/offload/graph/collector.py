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

`OFFLOAD_GC='python'` leaves Python's own thresholds (set it in the first environment that
loads the tool, or run `scons` with `OFFLOAD_GC=python` in the process environment)."""

from __future__ import annotations

import gc
import os

import SCons.Errors

#: The collector's thresholds with `OFFLOAD_GC='tuned'`: a young pass per 10,000 new container
#: objects (Python: 700), a middle pass per 50 young ones, a full one per 1,000 middle ones.
THRESHOLDS = (10_000, 50, 1_000)

MODES = ("tuned", "python")

_applied: str | None = None


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
