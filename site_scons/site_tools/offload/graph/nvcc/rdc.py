"""Relocatable device code: whether an nvcc compile makes it (`is_rdc`), and the mark on its
object (`mark`) by which the links that take the object give it nvcc's device link
(`device_link`)."""

from __future__ import annotations

import re

from ...scons import nodes as _nodes
from .plan import Plan


# Relocatable device code: nvcc's options that ask for it (`-dc` is `-rdc=true -c`).
_RDC = re.compile(r"^(?:-rdc(?:=|\s+)true|--relocatable-device-code(?:=|\s+)true|-dc|--device-c)$")


def is_rdc(env, o: dict, plan: Plan | None) -> bool:
    """Whether a compile with overrides `o` makes relocatable device code: its plan says so
    (`cudafe++ --device-c`); without a plan, its flags do."""
    if plan is not None:
        return any(s.kind == "fe" and "--device-c" in s.argv for s in plan.steps)
    flags = _nodes.override(env, o).subst("$OFFLOAD_NVCCFLAGS").split()
    joined = [f"{a} {b}" for a, b in zip(flags, flags[1:])]
    return any(_RDC.match(f) for f in flags + joined)


def mark(made, env, o: dict, plan: Plan | None) -> None:
    """Record on nvcc's object what a device link needs: relocatable device code, for which archs."""
    if is_rdc(env, o, plan):
        for n in made:
            _nodes.marks(n).offload_nvcc_rdc = list(o.get("_OFFLOAD_NVCC_ARCHS") or [])
