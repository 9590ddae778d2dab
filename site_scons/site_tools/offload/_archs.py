"""`OFFLOAD_ARCHS` validation and the per-language arch selection.

Validation runs when a builder is called, i.e. while the SConscripts are read, so a bad arch
fails before anything is built. The canonical forms come from `offload_tool.target_id`, which
mirrors clang's own rules (aliases, feature order, conflicts)."""

from __future__ import annotations

import os
import re

import SCons.Errors
import SCons.Util

from offload_tool.errors import OffloadError

# Source suffix -> language. OpenMP offload for C/C++, CUDA for .cu, HIP for .hip.
LANGUAGES = {
    ".c": "openmp", ".cc": "openmp", ".cpp": "openmp", ".cxx": "openmp", ".C": "openmp", ".c++": "openmp",
    ".cu": "cuda", ".hip": "hip",
}
C_SUFFIXES = {".c"}

# Which vendors each language can target.
LANGUAGE_VENDORS = {"openmp": ("nvidia", "amd"), "cuda": ("nvidia",), "hip": ("amd",)}

_memo: dict[tuple, list[str]] = {}


def language_of(node) -> str:
    suffix = os.path.splitext(node.name)[1]
    lang = LANGUAGES.get(suffix)
    if lang is None:
        raise SCons.Errors.UserError(
            f"offload: cannot tell the offload language of '{node}' from its suffix "
            f"(known: {', '.join(sorted(LANGUAGES))})")
    return lang


def raw_archs(env) -> list[str]:
    """OFFLOAD_ARCHS as a flat list of strings (a list, a comma/space separated string, or nested)."""
    value = env.get("OFFLOAD_ARCHS") or []
    if SCons.Util.is_String(value):
        value = env.subst(value)
        items = re.split(r"[,\s]+", value)
    else:
        items = []
        for v in SCons.Util.flatten(value):
            items.extend(re.split(r"[,\s]+", env.subst(str(v))))
    return [i for i in items if i]


def canonical_archs(env, llvm_version: int) -> list[str]:
    """OFFLOAD_ARCHS canonicalised and de-duplicated (first spelling wins, order kept); a
    `UserError` naming the bad arch, or the conflicting pair, otherwise."""
    from offload_tool import target_id

    raw = tuple(raw_archs(env))
    key = (raw, llvm_version)
    if key in _memo:
        return _memo[key]
    out: list[str] = []
    for arch in raw:
        try:
            canon = target_id.canonical_offload_arch(arch, llvm_version=llvm_version)
        except OffloadError as exc:
            raise SCons.Errors.UserError(f"offload: OFFLOAD_ARCHS: '{arch}': {exc}") from None
        if target_id.offload_arch_vendor(canon) is None:
            raise SCons.Errors.UserError(
                f"offload: OFFLOAD_ARCHS: '{arch}' is neither an NVIDIA (sm_*) nor an AMD (gfx*) offload arch")
        if canon not in out:
            out.append(canon)
    try:
        pair = target_id.conflicting_target_ids(out)
    except OffloadError as exc:
        raise SCons.Errors.UserError(f"offload: OFFLOAD_ARCHS: {exc}") from None
    if pair:
        raise SCons.Errors.UserError(
            f"offload: OFFLOAD_ARCHS: invalid offload arch combinations: '{pair[0]}' and '{pair[1]}' "
            "(for a specific processor, a feature should either exist in all offload archs, or not exist "
            "in any offload archs)")
    _memo[key] = out
    return out


def vendor(arch: str) -> str:
    from offload_tool import target_id
    return target_id.offload_arch_vendor(arch)


def triple(arch: str) -> str:
    from offload_tool import target_id
    return target_id.offload_triple(arch)


def archs_for(lang: str, archs: list[str]) -> list[str]:
    """The subset of `archs` a source of language `lang` is built for."""
    vendors = LANGUAGE_VENDORS[lang]
    return [a for a in archs if vendor(a) in vendors]


def file_safe(arch: str) -> str:
    """An arch as a file-name component: `gfx90a:xnack+` -> `gfx90a_xnack+` (':' is awkward in
    file names and would be read as a drive on Windows)."""
    return arch.replace(":", "_")
