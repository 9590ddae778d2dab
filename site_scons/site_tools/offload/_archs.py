"""`OFFLOAD_ARCHS` validation and the per-language arch selection.

Languages themselves are records in `_languages`; this module only knows archs: which vendor an
arch belongs to (a language is built for the archs of its vendors) and its device triple, by a
table of rules (`RULES`): NVIDIA's and AMD's as `offload_tool.rules.target_id` knows them, and
any a way of building adds (`add_rule`, `env.OffloadAddArchs`: `amdgcnspirv` as a vendor of its
own for HIP on SPIR-V, `spirv64` for a SYCL-like language).

Validation runs when a builder is called, i.e. while the SConscripts are read, so a bad arch
fails before anything is built. The canonical forms come from `offload_tool.rules.target_id`, which
mirrors clang's own rules (aliases, feature order, conflicts)."""

from __future__ import annotations

import dataclasses
import functools
import re
from typing import Callable

import SCons.Errors
import SCons.Util

from offload_tool.errors import OffloadError

_memo: dict[tuple, list[str]] = {}

#: The newest LLVM whose arch tables the library knows: what makes an arch an arch at all.
NEWEST_LLVM = 22


@dataclasses.dataclass(frozen=True)
class ArchRule:
    """The offload archs of one vendor: which archs (`claims`, asked of a canonical arch) and the
    device triple of each. `added`: a rule a way of building added, which names its archs exactly
    (no target features) and vouches for them whatever the clang in use."""

    vendor: str
    claims: Callable[[str], bool]
    triple: Callable[[str], str]
    added: bool = False


@functools.lru_cache(maxsize=None)
def _library_vendor(arch: str) -> str | None:
    from offload_tool.rules import target_id
    return target_id.offload_arch_vendor(arch, NEWEST_LLVM)


def _library_triple(arch: str) -> str:
    from offload_tool.rules import target_id
    return target_id.offload_triple(arch, NEWEST_LLVM)


#: The rules, the first that claims an arch deciding; added rules come before the library's.
RULES: list[ArchRule] = [ArchRule("nvidia", lambda a: _library_vendor(a) == "nvidia", _library_triple),
                         ArchRule("amd", lambda a: _library_vendor(a) == "amd", _library_triple)]


def add_rule(vendor: str, archs, triple: str) -> ArchRule:
    """Archs (exact names) that are `vendor`'s, with their device triple, ahead of the rules
    already known: `add_rule('amd-spirv', ['amdgcnspirv'], 'spirv64-amd-amdhsa')` takes
    `amdgcnspirv` from AMD's archs (a language of vendor `amd` no longer builds it) for a language
    whose vendors name `amd-spirv`."""
    names = frozenset(archs)
    rule = ArchRule(vendor, names.__contains__, lambda a: triple, added=True)
    RULES.insert(0, rule)
    _memo.clear()
    return rule


def OffloadAddArchs(env, vendor: str, archs, triple: str) -> ArchRule:
    """`env.OffloadAddArchs('amd-spirv', ['amdgcnspirv'], triple='spirv64-amd-amdhsa')`: archs of a
    vendor of their own (see `add_rule`), which a language record names in its `vendors`."""
    return add_rule(str(vendor), [str(a) for a in SCons.Util.flatten([archs])], str(triple))


def rule_of(arch: str) -> ArchRule | None:
    """The rule an arch (canonical, not PTX only) belongs to, or None."""
    return next((r for r in RULES if r.claims(arch)), None)


def _added(arch: str) -> bool:
    rule = rule_of(arch)
    return rule is not None and rule.added


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
    from offload_tool.rules import target_id

    raw = tuple(raw_archs(env))
    key = (raw, llvm_version)
    if key in _memo:
        return _memo[key]
    out: list[str] = []
    for arch in raw:
        canon = canonical_arch(arch, llvm_version, "OFFLOAD_ARCHS")
        if canon not in out:
            out.append(canon)
    try:
        pair = target_id.conflicting_target_ids([a for a in out if not ptx_only(a)])
    except OffloadError as exc:
        raise SCons.Errors.UserError(f"offload: OFFLOAD_ARCHS: {exc}") from None
    if pair:
        raise SCons.Errors.UserError(
            f"offload: OFFLOAD_ARCHS: invalid offload arch combinations: '{pair[0]}' and '{pair[1]}' "
            "(for a specific processor, a feature should either exist in all offload archs, or not exist "
            "in any offload archs)")
    _memo[key] = out
    return out


_PTX_ONLY = re.compile(r"compute_(\w+)")


def ptx_only(arch: str) -> bool:
    """True for `compute_NN`: PTX for that virtual arch and no SASS (nvcc's `code=compute_NN`,
    which the driver compiles for the GPU it runs on)."""
    return _PTX_ONLY.fullmatch(arch) is not None


def canonical_arch(arch: str, llvm_version: int, var: str) -> str:
    """One offload arch, canonical (`fiji` -> `gfx803`, features sorted); a `UserError` naming
    it and `var` otherwise. NVIDIA archs take no target features (clang refuses `sm_80:xnack+`).
    `compute_NN` (PTX only, nvcc) is valid when `sm_NN` is."""
    from offload_tool.rules import target_id

    m = _PTX_ONLY.fullmatch(arch)
    if m:
        try:
            return "compute_" + canonical_arch(f"sm_{m.group(1)}", llvm_version, var)[3:]
        except SCons.Errors.UserError:
            raise SCons.Errors.UserError(f"offload: {var}: '{arch}': no NVIDIA arch sm_{m.group(1)}") from None
    if _added(arch):
        return arch

    try:
        canon = target_id.canonical_offload_arch(arch, llvm_version=llvm_version)
    except OffloadError as exc:
        # An arch newer than the clang in use (sm_120 with clang 19) is still an arch: nvcc may
        # build it; the clang flavours refuse it for their sources (`known_to`).
        try:
            canon = target_id.canonical_offload_arch(arch, llvm_version=NEWEST_LLVM)
        except OffloadError:
            raise SCons.Errors.UserError(f"offload: {var}: '{arch}': {exc}") from None
    rule = rule_of(canon)
    v = rule.vendor if rule else None
    if v is None:
        raise SCons.Errors.UserError(
            f"offload: {var}: '{arch}' is neither an NVIDIA (sm_*) nor an AMD (gfx*) offload arch")
    if v == "nvidia" and ":" in arch:
        raise SCons.Errors.UserError(
            f"offload: {var}: '{arch}': NVIDIA offload archs take no target features "
            f"(features such as xnack and sramecc are AMD's); use '{canon.split(':')[0]}'")
    return canon


def is_offload_arch_file_part(part: str) -> bool:
    """True when `part` is an offload arch as `file_safe` writes it (`sm_80`, `gfx90a_xnack+`)."""
    from offload_tool.rules import target_id

    if _added(part):
        return True
    arch = part.replace("_", ":")
    if arch.startswith("sm:"):
        arch = "sm_" + arch[3:]
    try:
        return rule_of(target_id.canonical_offload_arch(arch, llvm_version=NEWEST_LLVM)) is not None
    except (OffloadError, TypeError):
        return False


def vendor(arch: str) -> str | None:
    """The vendor of a canonical arch (`RULES`); a PTX-only arch is NVIDIA's."""
    if ptx_only(arch):
        return "nvidia"
    rule = rule_of(arch)
    return rule.vendor if rule else None


def triple(arch: str) -> str:
    """The device triple of a canonical arch (a PTX-only arch: its SASS arch's)."""
    if ptx_only(arch):
        arch = "sm_" + arch[8:]
    rule = rule_of(arch)
    return rule.triple(arch) if rule else _library_triple(arch)


def known_to(arch: str, llvm_version: int) -> bool:
    """Whether a clang of `llvm_version` knows `arch` (a canonical arch, not PTX only; an added
    rule's archs are its own: they are taken as known)."""
    from offload_tool.rules import target_id
    if _added(arch):
        return True
    try:
        target_id.canonical_offload_arch(arch, llvm_version=llvm_version)
        return True
    except OffloadError:
        return False


def refuse_ptx_only(archs: list[str], compiler: str, lang_name: str) -> None:
    """A `UserError` when PTX-only entries reach a compiler other than nvcc (clang's CUDA and
    OpenMP paths build one device object per SASS arch; `OFFLOAD_CUDA_PTX` is nvcc's too)."""
    bad = [a for a in archs if ptx_only(a)]
    if bad:
        raise SCons.Errors.UserError(
            f"offload: OFFLOAD_ARCHS: '{bad[0]}' (PTX only) is for CUDA built with nvcc "
            f"(OFFLOAD_CUDA_COMPILER='nvcc'); {lang_name} with {compiler} takes sm_NN")


def archs_for(lang, archs: list[str]) -> list[str]:
    """The subset of `archs` a source of language `lang` (a `_languages.Language`) is built for."""
    return [a for a in archs if vendor(a) in lang.vendors]


def file_safe(arch: str) -> str:
    """An arch as a file-name component: `gfx90a:xnack+` -> `gfx90a_xnack+` (':' is awkward in
    file names and would be read as a drive on Windows)."""
    return arch.replace(":", "_")
