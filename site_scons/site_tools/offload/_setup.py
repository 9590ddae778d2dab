"""`generate`/`exists` of the offload tool: defaults, builders, methods, gathered from the builder
modules (each declares its own `COMMANDS`, `COMSTRS`, `builders()` and `PSEUDO_BUILDERS`)."""

from __future__ import annotations

import os

import SCons
import SCons.Errors

from . import (_archs, _bundling, _compile, _dist, _flavours, _languages, _link, _nvcc, _nvcc_link, _objects, _progress,
               _report, _settings_check, _toolchain, _variables)
from ._scons_hooks import MIN_SCONS, scons_version
BUILDER_MODULES = (_compile, _objects, _link, _bundling, _nvcc, _nvcc_link, _dist)


def _library_pythonpath() -> str:
    import offload_tool
    return os.path.dirname(os.path.dirname(os.path.abspath(offload_tool.__file__)))


def generate(env, **kw) -> None:
    if scons_version() < MIN_SCONS:
        raise SCons.Errors.UserError(f"offload: needs SCons {MIN_SCONS[0]}.{MIN_SCONS[1]} or later, "
                                     f"this is {SCons.__version__}")
    for k, v in kw.items():
        env[k] = v
    commands, comstrs = {}, {}
    for m in BUILDER_MODULES:
        commands.update(m.COMMANDS)
        comstrs.update(m.COMSTRS)
    _variables.set_defaults(env, commands, comstrs)
    # Library CLIs run as `$OFFLOAD_PYTHON -m offload_tool.cli.<cli>`: make the library importable in
    # the action's environment even when it is used from a checkout rather than installed.
    libdir = _library_pythonpath()
    env["ENV"] = dict(env["ENV"])
    pp = env["ENV"].get("PYTHONPATH", "")
    if libdir not in pp.split(os.pathsep):
        env["ENV"]["PYTHONPATH"] = libdir + (os.pathsep + pp if pp else "")
    builders = env["BUILDERS"]
    for m in BUILDER_MODULES:
        for name, b in m.builders().items():
            if name not in builders:
                builders[name] = b
        for fn in m.PSEUDO_BUILDERS:
            env.AddMethod(_settings_check.user_frames(fn), fn.__name__)
    env.AddMethod(_settings_check.user_frames(_languages.OffloadAddLanguage), "OffloadAddLanguage")
    env.AddMethod(_settings_check.user_frames(_flavours.OffloadAddFlavour), "OffloadAddFlavour")
    env.AddMethod(_settings_check.user_frames(_archs.OffloadAddArchs), "OffloadAddArchs")
    # Build insight: action lines with their position, and the cost report (opt-in).
    _progress.install(env)
    _report.install(env)


def exists(env) -> bool:
    return bool(env.get("OFFLOAD_CLANG") or _toolchain.find_clang(env))
