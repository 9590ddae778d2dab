"""Our compiles in SCons's `compilation_db` tool (`env.CompilationDatabase()`), when it is loaded.

That tool records an entry per object through emitters it adds to the `Object` builders; our
compiles are made by builders of their own, so each one is recorded as that tool records its own.
How it does so changed between SCons releases, and both forms are tested:
- SCons 4.5 to 4.8 expose the emitter factory, `make_emit_compilation_DB_entry(comstr)`, whose
  emitter makes an entry node (tests/test_scons_min_version.py, with the oldest SCons allowed);
- later releases keep `(target, source, env, action)` tuples in the module list
  `__COMPILATION_DB_ENTRIES` (tests/test_scons_openmp.py, with the SCons installed)."""

from __future__ import annotations

import SCons.Action


def record(env, targets, sources, com: str) -> None:
    """Chain the compiles that made `targets` into the compilation database's entries."""
    if "compilation_db" not in (env.get("TOOLS") or []):
        return
    import SCons.Tool.compilation_db as cdb
    make_emitter = getattr(cdb, "make_emit_compilation_DB_entry", None)
    if make_emitter is not None:
        emit = make_emitter("$" + com)
        for t in targets:
            emit([t], [sources[0]], env)
        return
    entries = getattr(cdb, "__COMPILATION_DB_ENTRIES", None)
    if entries is None:
        return
    act = SCons.Action.Action("$" + com)
    for t in targets:
        entries.append((t, sources[0], env, act))
