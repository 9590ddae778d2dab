"""Clang target IDs (`gfx90a:sramecc+:xnack-`) and offload-arch names, with clang 19-22's exact rules.

Sources: clang/lib/Basic/TargetID.cpp (parse, canonical form, compatibility, conflicts), clang/lib/Basic/Cuda.cpp
(`StringToOffloadArch`), clang/lib/Driver/Driver.cpp (`getCanonicalArchString`), llvm/lib/Object/OffloadBinary.cpp
(`areTargetsCompatible`).  The AMDGPU processor table is `offload_tool/data/amdgpu-processors.json`; which processors exist
depends on the LLVM release, hence the `llvm_version` arguments (versions below 19 use 19's table, above 22 use
22's).  A feature a target ID leaves out means *Any*; `name+` is On and `name-` is Off.
"""

from __future__ import annotations

import json
import os
from functools import lru_cache
from collections.abc import Iterable

from ..errors import TargetIDError
from .triple import is_amdgpu, parse_triple
from ..records import FrozenRecord

__all__ = [
    "TargetID", "parse_target_id", "parse_target_id_format", "canonical_processor", "allowed_features",
    "is_compatible_target_id", "conflicting_target_ids", "offload_arch_vendor",
    "is_offload_arch_name", "canonical_offload_arch", "offload_triple", "is_target_compatible_for_link",
    "BAD_TARGET_ID_MSG", "BAD_ARCH_COMBO_MSG",
]

AMDGCN_TRIPLE = "amdgcn-amd-amdhsa"
NVPTX_TRIPLE = "nvptx64-nvidia-cuda"
#: Each vendor's device triple, as the driver picks it for the vendor's archs (AMD's SPIR-V arch
#: `amdgcnspirv` aside: `offload_triple`).
DEVICE_TRIPLES = {"amd": AMDGCN_TRIPLE, "nvidia": NVPTX_TRIPLE}

#: clang's err_drv_bad_target_id text ('%s' is the target ID).
BAD_TARGET_ID_MSG = ("invalid target ID '%s'; format is a processor name followed by an optional colon-delimited "
                     "list of features followed by an enable/disable sign (e.g., 'gfx908:sramecc+:xnack-')")
_DEDUCE_MSG = ("failed to deduce triple for target architecture '%s'; specify the triple using '-fopenmp-targets' "
               "and '-Xopenmp-target' instead")
#: clang's err_drv_bad_offload_arch_combo text.
BAD_ARCH_COMBO_MSG = ("invalid offload arch combinations: '%s' and '%s' (for a specific processor, a feature should "
                      "either exist in all offload archs, or not exist in any offload archs)")


# --------------------------------------------------------------------------------------------------
# Tables


def _table_version(llvm_version: int) -> str:
    if llvm_version <= 19:
        return "19"
    if llvm_version >= 22:
        return "22"
    return str(llvm_version)


@lru_cache(maxsize=1)
def _processor_rows() -> tuple[dict, ...]:
    """The processor table, loaded once on first use."""
    # A plain file read: importlib.resources costs ~6 ms of imports on every CLI start.
    with open(os.path.join(os.path.dirname(os.path.dirname(__file__)), "data", "amdgpu-processors.json"),
              encoding="utf-8") as f:
        return tuple(json.load(f))


@lru_cache(maxsize=8)
def _amdgcn_names(version: str) -> dict[str, dict]:
    """`parseArchAMDGCN`'s accepted names (processors and aliases, exact case) -> table row."""
    names: dict[str, dict] = {}
    for row in _processor_rows():
        if version in row["llvm"]:
            names[row["name"]] = row
            for alias in row["aliases"]:
                names[alias] = row
    return names


# parseArchR600 names -> canonical name (TargetParser.cpp R600GPUs); none has target-ID features.
_R600_NAMES = {
    "r600": "r600", "rv630": "r600", "rv635": "r600", "r630": "r630", "rs780": "rs880", "rs880": "rs880",
    "rv610": "rs880", "rv620": "rs880", "rv670": "rv670", "rv710": "rv710", "rv730": "rv730", "rv740": "rv770",
    "rv770": "rv770", "cedar": "cedar", "palm": "cedar", "cypress": "cypress", "hemlock": "cypress",
    "juniper": "juniper", "redwood": "redwood", "sumo": "sumo", "sumo2": "sumo", "barts": "barts",
    "caicos": "caicos", "aruba": "cayman", "cayman": "cayman", "turks": "turks",
}

# StringToOffloadArch NVIDIA names (clang/lib/Basic/Cuda.cpp `arch_names`).
_SM_19 = ("sm_20", "sm_21", "sm_30", "sm_32", "sm_35", "sm_37", "sm_50", "sm_52", "sm_53", "sm_60", "sm_61",
          "sm_62", "sm_70", "sm_72", "sm_75", "sm_80", "sm_86", "sm_87", "sm_89", "sm_90", "sm_90a")
# 20 and 21 are not verified against a real binary: CUDA 12.8 archs arrived in 20, 12.9 ones in 21.
_SM_20 = _SM_19 + ("sm_100", "sm_100a", "sm_101", "sm_101a", "sm_120", "sm_120a")
_SM_21 = _SM_20 + ("sm_103", "sm_103a", "sm_121", "sm_121a")
_SM_22 = _SM_21 + ("sm_88", "sm_110", "sm_110a")
_SM_BY_VERSION = {"19": frozenset(_SM_19), "20": frozenset(_SM_20), "21": frozenset(_SM_21),
                  "22": frozenset(_SM_22)}
# OffloadArch values that are neither NVIDIA nor AMD.
_OTHER_ARCHS = {"19": frozenset({"", "generic"}), "20": frozenset({"", "generic"}),
                "21": frozenset({"", "generic"}), "22": frozenset({"", "generic", "graniterapids", "bmg_g21"})}


@lru_cache(maxsize=8)
def _amd_offload_archs(version: str) -> frozenset[str]:
    """AMD `OffloadArch` names: the table's processor names (no aliases) plus `amdgcnspirv`."""
    return frozenset({row["name"] for row in _processor_rows() if version in row["llvm"]} | {"amdgcnspirv"})


def _string_to_offload_arch(name: str, version: str) -> str | None:
    """`StringToOffloadArch` classified: 'nvidia', 'amd', 'other' (UNUSED "", generic, Intel), or None (UNKNOWN)."""
    if name in _SM_BY_VERSION[version]:
        return "nvidia"
    if name in _amd_offload_archs(version):
        return "amd"
    if name in _OTHER_ARCHS[version]:
        return "other"
    return None


# --------------------------------------------------------------------------------------------------
# Target IDs


class TargetID(FrozenRecord):
    """A parsed target ID: canonical processor name and its pinned features, sorted by name."""

    __slots__ = ("processor", "features")

    def __init__(self, processor: str, features: tuple[tuple[str, bool], ...] = ()) -> None:
        self._set("processor", processor)
        self._set("features", features)

    @property
    def canonical(self) -> str:
        """`getCanonicalTargetID`: processor then `:name±` for each feature in name order."""
        return self.processor + "".join(f":{name}{'+' if on else '-'}" for name, on in self.features)

    def feature(self, name: str) -> bool | None:
        """True (On), False (Off) or None (Any: not pinned)."""
        for n, on in self.features:
            if n == name:
                return on
        return None

    def __str__(self) -> str:
        return self.canonical


def parse_target_id_format(target_id: str) -> tuple[str, dict[str, bool]] | None:
    """`parseTargetIDWithFormatCheckingOnly`: (processor, features) or None when malformed.

    No name checks: "" gives ("", {}); the processor is split at the first ':'; a trailing ':' is allowed;
    every item must end in '+' or '-' and name a feature at most once."""
    if target_id == "":
        return "", {}
    processor, _, rest = target_id.partition(":")
    if processor == "":
        return None
    features: dict[str, bool] = {}
    while rest:
        item, _, rest = rest.partition(":")
        # C++ reads back() of an empty item ("gfx906::xnack+"): undefined, rejected in practice.
        if item == "" or item[-1] not in "+-":
            return None
        name = item[:-1]
        if name in features:
            return None
        features[name] = item[-1] == "+"
    return processor, features


def canonical_processor(name: str, triple: str = AMDGCN_TRIPLE, llvm_version: int = 19) -> str | None:
    """`getCanonicalProcessorName`: for an AMDGPU triple the table's name for a processor or alias
    (exact case), else the name unchanged; None when unknown or empty."""
    if name == "":
        return None
    t = parse_triple(triple)
    if t.arch == "amdgcn":
        row = _amdgcn_names(_table_version(llvm_version)).get(name)
        return row["name"] if row else None
    if t.arch == "r600":
        return _R600_NAMES.get(name)
    return name


def allowed_features(processor: str, triple: str = AMDGCN_TRIPLE, llvm_version: int = 19) -> tuple[str, ...]:
    """`getAllPossibleTargetIDFeatures`: the features a target ID of `processor` may pin, in name order."""
    if parse_triple(triple).arch != "amdgcn":
        return ()  # r600 processors and every non-AMDGPU target allow none
    row = _amdgcn_names(_table_version(llvm_version)).get(processor)
    if row is None:
        return ()
    return tuple(f for f in ("sramecc", "xnack") if row[f])


def parse_target_id(target_id: str, triple: str = AMDGCN_TRIPLE, llvm_version: int = 19) -> TargetID:
    """`clang::parseTargetID`: check the format, canonicalise the processor (alias -> gfx name; processors
    of non-AMDGPU triples are kept unvalidated) and check every feature is allowed for it.

    Raises TargetIDError with clang's err_drv_bad_target_id message."""
    parsed = parse_target_id_format(target_id)
    if parsed is not None:
        processor = canonical_processor(parsed[0], triple, llvm_version)
        if processor is not None:
            allowed = allowed_features(processor, triple, llvm_version)
            features = parsed[1]
            if all(name in allowed for name in features):
                return TargetID(processor, tuple(sorted(features.items())))
    raise TargetIDError(BAD_TARGET_ID_MSG % target_id)


def is_compatible_target_id(provided: str, requested: str) -> bool:
    """`clang::isCompatibleTargetID`: may a code object built for `provided` run on `requested`?

    One-way: every feature `provided` pins must be pinned to the same value in `requested`; processors are
    compared as raw strings (no alias canonicalisation).  C++ assumes well-formed IDs; a malformed one
    here is simply not compatible."""
    p = parse_target_id_format(provided)
    r = parse_target_id_format(requested)
    if p is None or r is None or p[0] != r[0]:
        return False
    return all(r[1].get(name) == on for name, on in p[1].items())


def conflicting_target_ids(ids: Iterable[str]) -> tuple[str, str] | None:
    """`getConflictTargetIDCombination` as in clang 19-22, one-way gap included.

    IDs are visited in sorted (byte) order; each is compared with the first ID seen for its processor
    (raw text before ':', not canonicalised), and a pair is returned when the later one pins a feature the
    first one does not.  C++ dereferences the parse result unchecked; malformed IDs are skipped here."""
    first_seen: dict[str, tuple[str, dict[str, bool]]] = {}
    for tid in sorted(set(ids), key=lambda s: s.encode("utf-8", "surrogateescape")):
        parsed = parse_target_id_format(tid)
        if parsed is None:
            continue
        processor, features = parsed
        if processor not in first_seen:
            first_seen[processor] = (tid, features)
        elif any(name not in first_seen[processor][1] for name in features):
            return first_seen[processor][0], tid
    return None


# --------------------------------------------------------------------------------------------------
# Offload archs (driver level)


def offload_arch_vendor(arch: str, llvm_version: int = 19) -> str | None:
    """'nvidia' or 'amd' for an offload arch or target ID, else None.

    As the driver deduces the toolchain: `StringToOffloadArch(getProcessorFromTargetID(T, arch))`, first
    with the NVPTX triple (raw processor), then the AMDGCN one (aliases canonicalised).  `amdgcnspirv`
    is AMD."""
    version = _table_version(llvm_version)
    proc = arch.partition(":")[0]
    if _string_to_offload_arch(proc, version) == "nvidia":
        return "nvidia"
    if proc == "amdgcnspirv":
        return "amd"
    canon = canonical_processor(proc, AMDGCN_TRIPLE, llvm_version)
    if canon is not None and _string_to_offload_arch(canon, version) == "amd":
        return "amd"
    return None


def is_offload_arch_name(name: str, llvm_version: int = 19) -> bool:
    """`StringToOffloadArch(name) != UNKNOWN`: exact, case-sensitive, no aliases or features.

    Note that "" (UNUSED) and "generic" are OffloadArch values, so they count as names here; this is
    what makes the LLVM 19 bundler take a trailing empty field of a bundle entry ID as its target ID."""
    return _string_to_offload_arch(name, _table_version(llvm_version)) is not None


def canonical_offload_arch(arch: str, llvm_version: int = 19, *, offload_kind: str | None = None) -> str:
    """The driver's `getCanonicalArchString` for one `--offload-arch` value.

    `sm_80` -> `sm_80`; `carrizo:xnack+` -> `gfx801:xnack+`; `gfx906:xnack-:sramecc+` ->
    `gfx906:sramecc+:xnack-`.  LLVM 19 silently drops features after an NVIDIA arch (`sm_90:foo+` ->
    `sm_90`, its new driver's behaviour); 22 rejects them.  Unknown names raise TargetIDError with clang's
    `unsupported CUDA/HIP gpu architecture: X` (CUDA when `offload_kind == 'cuda'` or the name starts with
    `sm_`; with `offload_kind == 'openmp'` the OpenMP driver's `failed to deduce triple ...`); a known AMD
    processor with bad features raises the `invalid target ID` message."""
    version = _table_version(llvm_version)
    proc = arch.partition(":")[0]
    if _string_to_offload_arch(proc, version) == "nvidia":
        if proc != arch and version == "22":
            raise TargetIDError(f"unsupported CUDA gpu architecture: {arch}")
        return proc
    if offload_kind != "cuda":
        if proc == "amdgcnspirv":
            return parse_target_id(arch, "spirv64-amd-amdhsa", llvm_version).canonical
        canon = canonical_processor(proc, AMDGCN_TRIPLE, llvm_version)
        if canon is not None and _string_to_offload_arch(canon, version) == "amd":
            return parse_target_id(arch, AMDGCN_TRIPLE, llvm_version).canonical
    if offload_kind == "openmp":
        raise TargetIDError(_DEDUCE_MSG % arch)
    if offload_kind == "cuda" or (offload_kind is None and arch.startswith("sm_")):
        raise TargetIDError(f"unsupported CUDA gpu architecture: {arch}")
    raise TargetIDError(f"unsupported HIP gpu architecture: {arch}")


def offload_triple(arch: str, llvm_version: int = 19) -> str:
    """The device triple the driver picks for an offload arch: sm_* -> `nvptx64-nvidia-cuda`, gfx* and
    aliases -> `amdgcn-amd-amdhsa`, `amdgcnspirv` -> `spirv64-amd-amdhsa`."""
    vendor = offload_arch_vendor(arch, llvm_version)
    if vendor == "nvidia":
        return NVPTX_TRIPLE
    if vendor == "amd":
        return "spirv64-amd-amdhsa" if arch.partition(":")[0] == "amdgcnspirv" else AMDGCN_TRIPLE
    raise TargetIDError(_DEDUCE_MSG % arch)


def is_target_compatible_for_link(lhs: tuple[str, str], rhs: tuple[str, str]) -> bool:
    """`llvm::object::areTargetsCompatible` on (triple, arch) pairs, as the 19/22 linker wrapper uses it.

    Symmetric, and *not* isCompatibleTargetID: identical pairs are not "compatible", triples compare as
    strings, `generic` matches anything, and only AMDGPU archs with no opposite xnack/sramecc settings
    (substring tests on the raw strings) match each other."""
    if lhs == rhs:
        return False
    if lhs[0] != rhs[0]:
        return False
    if lhs[1] == "generic" or rhs[1] == "generic":
        return True
    if not is_amdgpu(lhs[0]):
        return False
    if lhs[1].split(":")[0] != rhs[1].split(":")[0]:
        return False
    for f in ("xnack", "sramecc"):
        if (f + "+" in lhs[1] and f + "-" in rhs[1]) or (f + "-" in lhs[1] and f + "+" in rhs[1]):
            return False
    return True

