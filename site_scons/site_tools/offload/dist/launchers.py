"""Which launcher a compile runs under (`OFFLOAD_LAUNCHER`: ccache, sccache, distcc, ...).

A compile whose offload entry names come from the file's identity (OpenMP: `_compile`'s source
IDs, from the file's device and inode) must run on this machine, so it takes
`$OFFLOAD_LOCAL_LAUNCHER`, which drops a launcher that sends compiles elsewhere; the others take
`$OFFLOAD_LAUNCHER`, run through the tool's own sccache server when it distributes (`_dist`).
Both are construction variables (`_variables.CALLABLES`)."""

from __future__ import annotations

import os

from . import sccache as _dist
from ..scons import nodes as _nodes
from ..settings import languages as _languages

_DISTRIBUTING_LAUNCHERS = {"distcc", "pump", "distcc-pump", "icecc", "icerun"}


def local_launcher(target, source, env, for_signature):
    """Default of `OFFLOAD_LOCAL_LAUNCHER`: `$OFFLOAD_LAUNCHER`, unless that launcher sends
    compiles to other machines (distcc, icecream), which a compile that must stay here cannot use."""
    launcher = env.subst("$OFFLOAD_LAUNCHER").split()
    if launcher and os.path.basename(launcher[0]) in _DISTRIBUTING_LAUNCHERS:
        return ""
    if launcher and _dist.client(env) is not None:  # sccache-dist
        return ""
    return "$OFFLOAD_LAUNCHER"


def launch(target, source, env, for_signature):
    """The launcher of a compile: sources whose offload entry names come from the file identity
    (OpenMP) take `$OFFLOAD_LOCAL_LAUNCHER`, unless host and device code are one job (a fat
    object through sccache-dist), the others `$OFFLOAD_LAUNCHER`."""
    lang = _languages.LANGUAGES.get(env.get("_OFFLOAD_LANG", "openmp"))
    whole = bool(target) and getattr(_nodes.marks(target[0]), "offload_fat_job", False)
    if (lang is None or lang.file_identity) and not whole:
        return "$OFFLOAD_LOCAL_LAUNCHER"
    return _dist.launcher(env, target)
