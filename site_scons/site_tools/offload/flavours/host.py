"""`host`: a plain host source of an offload program (`main.cpp` of a CUDA program): no device
code, no runtime; its object is the environment's own C/C++ compile (`plain_host_object`)."""

from __future__ import annotations

import SCons.Util

from ..graph import compile as _compile
from ..graph.common import registry, settings, wants
from .base import Flavour


class Host(Flavour):
    """No flavour machinery: the object is made by `plain_host_object`."""

    name = "host"
    language = "host"
    compiler = None
    flag_vars = frozenset({"OFFLOAD_HOSTFLAGS"})


FLAVOUR = Host()
FLAVOURS = (FLAVOUR,)


def plain_host_object(env, s, target, kw, pic):
    """The `host` flavour's object of `s`: the environment's own C/C++ compile (`StaticObject` /
    `SharedObject`), with `$OFFLOAD_HOSTFLAGS` after `$CCFLAGS` as in every other host compile
    (`-march=native` there reaches `main.cpp` too)."""
    senv = settings(env, kw)
    build = env.SharedObject if pic else env.StaticObject
    o = {k: v for k, v in kw.items() if k != "OFFLOAD_LANG"}
    if senv.get("OFFLOAD_HOSTFLAGS"):
        o["CCFLAGS"] = SCons.Util.CLVar(senv.get("CCFLAGS", [])) + SCons.Util.CLVar(senv["OFFLOAD_HOSTFLAGS"])

    def make():
        made = build(target, s, **o) if target else build(s, **o)
        FLAVOUR.mark(made)
        return made

    return registry.get(env, _compile.request_key(env, s, target, "plain" + (" pic" if pic else "")), "plain",
                        wants(senv, FLAVOUR.language, kw=kw), make)
