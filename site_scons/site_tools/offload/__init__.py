"""SCons tool `offload`: heterogeneous (CPU + GPU) builds with one node per (source, offload arch).

Load with `Environment(tools=['default', 'offload'])` from a project that has this `site_scons`, or
`Environment(tools=['default', 'offload'], toolpath=[PyPackageDir('offload_scons')])` once
offload-tool is pip-installed. Reference: docs/scons-tool.md."""

from __future__ import annotations

import os
import sys

try:
    import offload_tool  # noqa: F401
except ImportError:  # running from a checkout that is not installed: the library is beside site_scons
    _root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    if os.path.isfile(os.path.join(_root, "offload_tool", "__init__.py")):
        sys.path.insert(0, _root)

from . import _setup  # noqa: E402


def generate(env, **kw):
    """Add the offload builders and construction variables (idempotent; never clobbers settings)."""
    _setup.generate(env, **kw)


def exists(env):
    """True when a usable clang (19 or later) is found."""
    return _setup.exists(env)
