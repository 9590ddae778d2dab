"""`OFFLOAD_ARCHS` validation and the per-language arch selection.

Languages themselves are records in `_languages`; this module only knows archs: which vendor an
arch belongs to (a language is built for the archs of its vendors) and its device triple, by a
table of rules (`RULES`): NVIDIA's (`sm_*`) and AMD's (`gfx*`, and the names any LLVM release
knows, such as `fiji`: `offload_tool.rules.offload_arch` decides the vendor), and any a way of
building adds (`add_rule`, `env.OffloadAddArchs`: `amdgcnspirv` as a vendor of its own for HIP on
SPIR-V, `spirv64` for a SYCL-like language).

Which vendor an arch is comes from its name; whether it exists is the compiler's to say: archs
come and go between releases (LLVM 20 dropped gfx940 and gfx941, which clang 19 builds; CUDA 13
dropped sm_70), so the compiler that builds a source is asked which archs it knows
(`_toolchain.offload_archs`, checked where a source is made: `Flavour.check_archs`), not the
newest LLVM this tool knows of.

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
from offload_tool.rules import offload_arch

from ..scons import nodes as _nodes

_memo: dict[tuple, list[str]] = {}

#: The LLVM releases whose arch tables the library knows, newest first (`offload_arch`): where a
#: name's canonical form (aliases, target features) is read when the compiler in use's own
#: release does not have it.
LLVM_TABLES = offload_arch.LLVM_RELEASES
NEWEST_LLVM = offload_arch.NEWEST_LLVM


@dataclasses.dataclass(frozen=True)
class ArchRule:
    """The offload archs of one vendor: which archs (`claims`, asked of a canonical arch) and the
    device triple of each. `added`: a rule a way of building added, which names its archs exactly
    (no target features) and vouches for them whatever the clang in use."""

    vendor: str
    claims: Callable[[str], bool]
    triple: Callable[[str], str]
    added: bool = False


#: NVIDIA or AMD by the processor's name (`offload_arch.vendor_by_name`): not whether a compiler
#: knows it (`known_to`).
_library_vendor = functools.lru_cache(maxsize=None)(offload_arch.vendor_by_name)


_library_triple = offload_arch.triple


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
    if _nodes.is_string(value):
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


def ptx_only(arch: str) -> bool:
    """True for `compute_NN`: PTX for that virtual arch and no SASS (nvcc's `code=compute_NN`,
    which the driver compiles for the GPU it runs on)."""
    return offload_arch.is_ptx(arch)


def canonical_arch(arch: str, llvm_version: int, var: str) -> str:
    """One offload arch, canonical (`fiji` -> `gfx803`, features sorted); a `UserError` naming
    it and `var` otherwise. NVIDIA archs take no target features (clang refuses `sm_80:xnack+`).
    `compute_NN` (PTX only, nvcc) is valid when `sm_NN` is."""
    from offload_tool.rules import target_id

    sass = offload_arch.sass_of_ptx(arch)
    if sass is not None:
        try:
            return offload_arch.ptx_of_sass(canonical_arch(sass, llvm_version, var))
        except SCons.Errors.UserError:
            raise SCons.Errors.UserError(f"offload: {var}: '{arch}': no NVIDIA arch {sass}") from None
    if _added(arch):
        return arch

    try:
        canon = target_id.canonical_offload_arch(arch, llvm_version=llvm_version)
    except OffloadError as exc:
        # An arch the clang in use lacks (sm_120 with clang 19, gfx940 with clang 22) is still an
        # arch: nvcc or another clang may build it; whether the compiler of a source knows it is
        # asked where the source is made (`Flavour.check_archs`).
        canon = _canonical_elsewhere(arch, llvm_version)
        if canon is None:
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


def _canonical_elsewhere(arch: str, llvm_version: int) -> str | None:
    """The canonical form of an arch the library's table of `llvm_version` lacks: another
    release's (`gfx940:xnack+` with clang 22), else, for a name no release has but of a vendor's
    form (`gfx9999`, a processor newer than the library), the name with its features in clang's
    order; the compiler says later whether it knows it. None when neither (a processor some release
    knows with a feature it lacks, a malformed target ID, a name of no vendor)."""
    from offload_tool.rules import target_id

    for version in LLVM_TABLES:
        if version != llvm_version:
            try:
                return target_id.canonical_offload_arch(arch, llvm_version=version)
            except OffloadError:
                continue
    processor = arch.partition(":")[0]
    if offload_arch.vendor(processor):
        return None
    parsed = target_id.parse_target_id_format(arch)
    if parsed is None or not any(p.fullmatch(processor) for _, p in offload_arch.NAME_FORMS):
        return None
    return target_id.TargetID(processor, tuple(sorted(parsed[1].items()))).canonical


def is_offload_arch_file_part(part: str) -> bool:
    """True when `part` is an offload arch as `file_safe` writes it (`sm_80`, `gfx90a_xnack+`),
    of any release (the files of `gfx940`, built by clang 19, are cleaned under clang 22 too)."""
    if _added(part):
        return True
    arch = part.replace("_", ":")
    if arch.startswith("sm:"):  # the '_' of an NVIDIA arch's name
        arch = arch.replace(":", "_", 1)
    from offload_tool.rules import target_id
    return target_id.parse_target_id_format(arch) is not None and rule_of(arch) is not None


def vendor(arch: str) -> str | None:
    """The vendor of a canonical arch (`RULES`); a PTX-only arch is NVIDIA's."""
    if ptx_only(arch):
        return "nvidia"
    rule = rule_of(arch)
    return rule.vendor if rule else None


def triple(arch: str) -> str:
    """The device triple of a canonical arch (a PTX-only arch: its SASS arch's)."""
    arch = offload_arch.sass_of_ptx(arch) or arch
    rule = rule_of(arch)
    return rule.triple(arch) if rule else _library_triple(arch)


def known_to(arch: str, known: dict[str, frozenset[str]] | None, llvm_version: int | None = None) -> bool:
    """Whether a compiler knows `arch` (canonical): its processor is among the names the compiler
    listed for its vendor (`known`, `_toolchain.offload_archs`; a PTX-only arch by its own name).
    An added rule's archs are its own: they are taken as known. A compiler that could not say
    (`known` None) is judged by the library's table of its LLVM release, when it has one, else
    left to say so itself when it compiles."""
    from offload_tool.rules import target_id
    if _added(arch):
        return True
    if known is None:
        if llvm_version is None or ptx_only(arch):
            return True
        try:
            target_id.canonical_offload_arch(arch, llvm_version=llvm_version)
            return True
        except OffloadError:
            return False
    names = known.get(vendor(arch) or "")
    return names is None or arch.partition(":")[0] in names


def known_names(known: dict[str, frozenset[str]], vendor_: str) -> list[str]:
    """The archs of `vendor_` a compiler listed, in release order (`gfx600 ... gfx1201`), without
    aliases or what is no offload arch (`generic`, `generic-hsa`), for a message."""
    pattern = next((p for v, p in offload_arch.NAME_FORMS if v == vendor_), None)
    names = [n for n in known.get(vendor_, ()) if pattern is None or pattern.fullmatch(n)]
    return sorted(names, key=_release_order)


def _release_order(name: str) -> tuple:
    """`sm_90` < `sm_90a` < `sm_100`; `gfx90a` < `gfx9-generic` < `gfx1010` (AMD's major version is
    all digits but the last two, minor and stepping; a generic target after its family)."""
    m = re.fullmatch(r"gfx(\d+)([0-9a-f]{2})", name) or re.fullmatch(r"gfx(\d+)(.*-generic)", name) \
        or re.fullmatch(r"\w+?_(\d+)(\w*)", name)
    return (int(m.group(1)), m.group(2).endswith("-generic"), m.group(2)) if m else (0, False, name)


def releases_knowing(arch: str) -> list[int]:
    """The LLVM releases whose table (the library's) has `arch`, oldest first: a hint only."""
    return offload_arch.releases_knowing(arch)


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
