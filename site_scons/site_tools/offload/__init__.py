"""SCons tool `offload`: heterogeneous (CPU + GPU) builds with one node per (source, offload arch).

Load with `Environment(tools=['default', 'offload'])` from a project that has this `site_scons`, or
`Environment(tools=['default', 'offload'], toolpath=[PyPackageDir('offload_scons')])` once
offload-tool is pip-installed. Reference: docs/scons-tool.md.

The package tree, lowest layer first: `scons/` (the one door to SCons's internals and the action
signatures), `settings/` (construction variables, languages, archs, the checks of settings),
`toolchain/` (finding and asking compilers, their answers kept between runs), `flavours/` (the
ways of building offload code), `graph/` (the nodes: compiles, host IR, links, bundling, the
checks of consumed device files, nvcc's steps in `graph/nvcc/`), `dist/` (launchers and
sccache-dist), `insight/` (progress, the cost report, the compilation database). The scripts the
build runs by path (`_package_embed.py`, `_device_link.py`) and the header its compiles include
(`offload_ids.h`) stay at the top. docs/architecture.md has the module table."""

from __future__ import annotations

import os
import sys

try:
    import offload_tool  # noqa: F401
except ImportError:  # running from a checkout that is not installed: the library is beside site_scons
    _root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    if os.path.isfile(os.path.join(_root, "offload_tool", "__init__.py")):
        sys.path.insert(0, _root)

import SCons  # noqa: E402
import SCons.Errors  # noqa: E402

from .settings import archs as _archs
from .graph import bundling as _bundling
from .graph import collector as _collector
from .graph import compile as _compile
from .dist import sccache as _dist
from .flavours import registry as _flavours
from .settings import languages as _languages
from .graph import link as _link
from .graph.nvcc import builders as _nvcc
from .graph.nvcc import device_link as _nvcc_link
from .graph import objects as _objects
from .insight import progress as _progress
from .insight import report as _report
from .settings import checks as _settings_check
from .toolchain import discovery as _toolchain
from .settings import variables as _variables
from .scons.hooks import MIN_SCONS, scons_version
BUILDER_MODULES = (_compile, _objects, _link, _bundling, _nvcc, _nvcc_link, _dist)


def _library_pythonpath() -> str:
    import offload_tool
    return os.path.dirname(os.path.dirname(os.path.abspath(offload_tool.__file__)))


@_settings_check.user_frames
def generate(env, **kw) -> None:
    """Add the offload builders and construction variables (idempotent; never clobbers settings):
    defaults, builders and methods gathered from the builder modules (each declares its own
    `COMMANDS`, `COMSTRS`, `builders()` and `PSEUDO_BUILDERS`)."""
    if scons_version() < MIN_SCONS:
        raise SCons.Errors.UserError(f"offload: needs SCons {MIN_SCONS[0]}.{MIN_SCONS[1]} or later, "
                                     f"this is {SCons.__version__}")
    for k, v in kw.items():
        env[k] = v
    _collector.install(env)
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
    """True when a usable clang (19 or later) is found."""
    return bool(env.get("OFFLOAD_CLANG") or _toolchain.find_clang(env))
