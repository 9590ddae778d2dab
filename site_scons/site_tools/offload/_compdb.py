"""Our compiles in SCons's `compilation_db` tool (`env.CompilationDatabase()`), when it is loaded.

That tool records an entry per object through emitters it adds to the `Object` builders; our
compiles are made by builders of their own, so each one is added as that tool's emitter adds its
own: the module list `__COMPILATION_DB_ENTRIES` of `(target, source, env, action)`, a shape
SCons has kept since the tool appeared (tests/test_scons_tool.py builds a database with it)."""

from __future__ import annotations

import SCons.Action


def record(env, targets, sources, com: str) -> None:
    """Chain the compiles that made `targets` into the compilation database's entries."""
    if "compilation_db" not in (env.get("TOOLS") or []):
        return
    import SCons.Tool.compilation_db as cdb
    entries = getattr(cdb, "__COMPILATION_DB_ENTRIES", None)
    if entries is None:
        return
    act = SCons.Action.Action("$" + com)
    for t in targets:
        entries.append((t, sources[0], env, act))
