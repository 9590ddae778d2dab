"""A callable construction variable is registered one way: named in `settings.variables.CALLABLES`
(its function lives in the module it is about). A builder module's `COMMANDS` holds command
strings only, so a reader finds every computed variable in one table."""

from __future__ import annotations

import sys

from conftest import REPO

sys.path.insert(0, str(REPO / "site_scons" / "site_tools"))

from offload import BUILDER_MODULES  # noqa: E402
from offload.settings import variables  # noqa: E402


def test_commands_are_strings_and_callables_are_in_one_table():
    for module in BUILDER_MODULES:
        computed = {k: v for k, v in module.COMMANDS.items() if not isinstance(v, str)}
        assert not computed, f"{module.__name__}.COMMANDS holds callables (name them in CALLABLES): {sorted(computed)}"
    assert all(callable(fn) for fn in variables.CALLABLES.values())
    commands = {k for m in BUILDER_MODULES for k in m.COMMANDS}
    assert not commands & set(variables.CALLABLES), commands & set(variables.CALLABLES)


def test_every_callable_reaches_the_environment(tmp_path):
    """Each named callable is a default of a new environment (the table is what `generate` sets)."""
    import SCons.Environment
    env = SCons.Environment.Environment(tools=[], OFFLOAD_CLANG="clang-19")
    import offload
    offload.generate(env)
    for name, fn in variables.CALLABLES.items():
        assert env[name] is fn, name
