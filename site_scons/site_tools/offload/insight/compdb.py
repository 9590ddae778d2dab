"""Our compiles in SCons's `compilation_db` tool (`env.CompilationDatabase()`), when it is loaded.

That tool records an entry per object through emitters it adds to the `Object` builders; our
compiles are made by builders of their own, so each one is recorded as that tool records its own.
How it does so is that tool's internals and changed between SCons releases:
`_scons_hooks.compilation_db_record` knows both forms (and leaves our compiles out of
`compile_commands.json`, said once, where it finds neither)."""

from __future__ import annotations

from ..scons import hooks as _scons_hooks


def record(env, targets, sources, com: str) -> None:
    """Chain the compiles that made `targets` into the compilation database's entries."""
    if "compilation_db" not in (env.get("TOOLS") or []):
        return
    _scons_hooks.compilation_db_record(env, targets, sources[0], com)
