"""The pieces of `llvm::Triple` (LLVM 19, llvm/lib/TargetParser/Triple.cpp) that the offload formats need.

Bundle entry IDs keep the *raw* positional fields of a triple (`Triple(str)` does not normalise), the bundler
validates a triple by its arch alone (`Triple::parseArch`), compares triples with `isCompatibleWith` (which
compares the *parsed* enums, so `amdgcn-amd-amdhsa-` and `amdgcn-amd-amdhsa-unknown` are the same), and the
driver de-duplicates triples by `Triple::normalize`.  This module reproduces exactly those rules.

Known simplifications (documented, none matter for offload triples): ARM/AArch64/Thumb sub-architecture
names (`armv7a`, `thumbv8m.main`, ...) are recognised by pattern rather than through the full
ARMTargetParser table, and the DXIL shader-model rewrite of `normalize` is not done.
"""

from __future__ import annotations

import re
from functools import lru_cache

from ..records import FrozenRecord

__all__ = [
    "KNOWN_ARCHS", "split_triple4", "parse_arch", "is_valid_arch", "normalize", "is_compatible_with",
    "ParsedTriple", "parse_triple", "is_amdgpu", "is_nvptx",
]

# Triple::parseArch's StringSwitch (LLVM 19): accepted name -> ArchType.
_ARCH_NAMES: dict[str, str] = {}


def _add(arch: str, *names: str) -> None:
    for n in names:
        _ARCH_NAMES[n] = arch


_add("x86", "i386", "i486", "i586", "i686", "i786", "i886", "i986")
_add("x86_64", "amd64", "x86_64", "x86_64h")
_add("ppc", "powerpc", "powerpcspe", "ppc", "ppc32")
_add("ppcle", "powerpcle", "ppcle", "ppc32le")
_add("ppc64", "powerpc64", "ppu", "ppc64")
_add("ppc64le", "powerpc64le", "ppc64le")
_add("arm", "xscale", "arm")
_add("armeb", "xscaleeb", "armeb")
_add("aarch64", "aarch64", "arm64", "arm64e", "arm64ec")
_add("aarch64_be", "aarch64_be")
_add("aarch64_32", "aarch64_32", "arm64_32")
_add("arc", "arc")
_add("thumb", "thumb")
_add("thumbeb", "thumbeb")
_add("avr", "avr")
_add("m68k", "m68k")
_add("msp430", "msp430")
_add("mips", "mips", "mipseb", "mipsallegrex", "mipsisa32r6", "mipsr6")
_add("mipsel", "mipsel", "mipsallegrexel", "mipsisa32r6el", "mipsr6el")
_add("mips64", "mips64", "mips64eb", "mipsn32", "mipsisa64r6", "mips64r6", "mipsn32r6")
_add("mips64el", "mips64el", "mipsn32el", "mipsisa64r6el", "mips64r6el", "mipsn32r6el")
_add("r600", "r600")
_add("amdgcn", "amdgcn")
_add("riscv32", "riscv32")
_add("riscv64", "riscv64")
_add("hexagon", "hexagon")
_add("systemz", "s390x", "systemz")
_add("sparc", "sparc")
_add("sparcel", "sparcel")
_add("sparcv9", "sparcv9", "sparc64")
_add("tce", "tce")
_add("tcele", "tcele")
_add("xcore", "xcore")
_add("nvptx", "nvptx")
_add("nvptx64", "nvptx64")
_add("le32", "le32")  # still accepted by 19 (removed later)
_add("le64", "le64")
_add("amdil", "amdil")
_add("amdil64", "amdil64")
_add("hsail", "hsail")
_add("hsail64", "hsail64")
_add("spir", "spir")
_add("spir64", "spir64")
_add("spirv", "spirv", "spirv1.5", "spirv1.6")
_add("spirv32", "spirv32", *(f"spirv32v1.{i}" for i in range(7)))
_add("spirv64", "spirv64", *(f"spirv64v1.{i}" for i in range(7)))
_add("lanai", "lanai")
_add("renderscript32", "renderscript32")
_add("renderscript64", "renderscript64")
_add("shave", "shave")
_add("ve", "ve")
_add("wasm32", "wasm32")
_add("wasm64", "wasm64")
_add("csky", "csky")
_add("loongarch32", "loongarch32")
_add("loongarch64", "loongarch64")
_add("dxil", "dxil", *(f"dxilv1.{i}" for i in range(9)))
_add("xtensa", "xtensa")
_add("bpfel", "bpf", "bpfel", "bpf_le")  # parseBPFArch: plain "bpf" is host-endian (little on x86)
_add("bpfeb", "bpfeb", "bpf_be")

#: Exact arch names `Triple::parseArch` accepts (plus `kalimba*` and ARM-family sub-arch spellings,
#: which `is_valid_arch` recognises by pattern).
KNOWN_ARCHS: frozenset[str] = frozenset(_ARCH_NAMES)

# ARM::parseArch sub-architecture spellings (after the arm/thumb/aarch64 prefix and the endian suffix).
_ARM_SUBARCH = re.compile(
    r"v(?:2a?|3m?|4t?|5t?e?j?|6(?:k|t2|kz|-?m|j)?|7(?:-?[arm]|e-?m|ve|s|k|l|hl)?|"
    r"8(?:\.(?:[1-9]|10))?(?:-?[ar])?|8-?m\.(?:base|main)|8\.1-?m\.main|9(?:\.[1-6])?(?:-?a)?)"
)
_ARM_PREFIX = re.compile(r"^(arm|thumb|aarch64)(eb|_be)?(.*?)(eb)?$")


def parse_arch(arch: str) -> str | None:
    """`Triple::parseArch`: the ArchType name for an arch component, or None for UnknownArch."""
    at = _ARCH_NAMES.get(arch)
    if at is not None:
        return at
    if arch.startswith("kalimba"):
        return "kalimba"
    if arch.startswith(("arm", "thumb", "aarch64")):
        return _parse_arm_arch(arch)
    return None


def _parse_arm_arch(arch: str) -> str | None:
    """Approximation of `parseARMArch` (ARMTargetParser): `<isa>[eb]v<version><profile>[eb]`."""
    m = _ARM_PREFIX.match(arch)
    if not m:
        return None
    isa, pre_eb, sub, post_eb = m.groups()
    big = bool(pre_eb or post_eb)
    if sub and not _ARM_SUBARCH.fullmatch(sub):
        return None
    if isa == "aarch64":
        if post_eb or pre_eb == "eb":
            return None
        if sub and not sub.startswith(("v8", "v9")):
            return None
        return "aarch64_be" if big else "aarch64"
    if isa == "thumb" and sub.startswith(("v2", "v3")):
        return None
    if sub in ("v6m", "v6-m"):
        return "thumbeb" if big else "thumb"
    return (isa + "eb") if big else isa


def is_valid_arch(arch: str) -> bool:
    """True when `Triple::parseArch(arch) != UnknownArch` (the bundler's triple validity test)."""
    return parse_arch(arch) is not None


def split_triple4(triple: str) -> tuple[str, str, str, str]:
    """The raw `(arch, vendor, os, environment)` fields of `Triple(triple)`: split at the first three '-',
    padded with "" (the environment keeps any further '-')."""
    parts = triple.split("-", 3)
    parts += [""] * (4 - len(parts))
    return parts[0], parts[1], parts[2], parts[3]


_VENDORS = {
    "apple": "Apple", "pc": "PC", "scei": "SCEI", "sie": "SCEI", "fsl": "Freescale", "ibm": "IBM",
    "img": "ImaginationTechnologies", "mti": "MipsTechnologies", "nvidia": "NVIDIA", "csr": "CSR",
    "amd": "AMD", "mesa": "Mesa", "suse": "SUSE", "oe": "OpenEmbedded",
}


def _parse_vendor(s: str) -> str | None:
    return _VENDORS.get(s)


# parseOS: StartsWith, first match wins (LLVM 19 order).
_OS_PREFIXES = (
    ("darwin", "Darwin"), ("dragonfly", "DragonFly"), ("freebsd", "FreeBSD"), ("fuchsia", "Fuchsia"),
    ("ios", "IOS"), ("kfreebsd", "KFreeBSD"), ("linux", "Linux"), ("lv2", "Lv2"), ("macos", "MacOSX"),
    ("netbsd", "NetBSD"), ("openbsd", "OpenBSD"), ("solaris", "Solaris"), ("uefi", "UEFI"),
    ("win32", "Win32"), ("windows", "Win32"), ("zos", "ZOS"), ("haiku", "Haiku"), ("rtems", "RTEMS"),
    ("nacl", "NaCl"), ("aix", "AIX"), ("cuda", "CUDA"), ("nvcl", "NVCL"), ("amdhsa", "AMDHSA"),
    ("ps4", "PS4"), ("ps5", "PS5"), ("elfiamcu", "ELFIAMCU"), ("tvos", "TvOS"), ("watchos", "WatchOS"),
    ("bridgeos", "BridgeOS"), ("driverkit", "DriverKit"), ("xros", "XROS"), ("visionos", "XROS"),
    ("mesa3d", "Mesa3D"), ("amdpal", "AMDPAL"), ("hermit", "HermitCore"), ("hurd", "Hurd"),
    ("wasi", "WASI"), ("emscripten", "Emscripten"), ("shadermodel", "ShaderModel"),
    ("liteos", "LiteOS"), ("serenity", "Serenity"), ("vulkan", "Vulkan"),
)


def _first_prefix(table: tuple[tuple[str, str], ...], s: str) -> str | None:
    """The value of the first entry of `table` whose prefix starts `s` (LLVM's StringSwitch order)."""
    return next((value for prefix, value in table if s.startswith(prefix)), None)


def _parse_os(s: str) -> str | None:
    return _first_prefix(_OS_PREFIXES, s)


# parseEnvironment: StartsWith, first match wins (LLVM 19 order).
_ENV_PREFIXES = (
    ("eabihf", "EABIHF"), ("eabi", "EABI"), ("gnuabin32", "GNUABIN32"), ("gnuabi64", "GNUABI64"),
    ("gnueabihf", "GNUEABIHF"), ("gnueabi", "GNUEABI"), ("gnuf32", "GNUF32"), ("gnuf64", "GNUF64"),
    ("gnusf", "GNUSF"), ("gnux32", "GNUX32"), ("gnu_ilp32", "GNUILP32"), ("code16", "CODE16"),
    ("gnu", "GNU"), ("android", "Android"), ("musleabihf", "MuslEABIHF"), ("musleabi", "MuslEABI"),
    ("muslx32", "MuslX32"), ("musl", "Musl"), ("msvc", "MSVC"), ("itanium", "Itanium"),
    ("cygnus", "Cygnus"), ("coreclr", "CoreCLR"), ("simulator", "Simulator"), ("macabi", "MacABI"),
    ("pixel", "Pixel"), ("vertex", "Vertex"), ("geometry", "Geometry"), ("hull", "Hull"),
    ("domain", "Domain"), ("compute", "Compute"), ("library", "Library"),
    ("raygeneration", "RayGeneration"), ("intersection", "Intersection"), ("anyhit", "AnyHit"),
    ("closesthit", "ClosestHit"), ("miss", "Miss"), ("callable", "Callable"), ("mesh", "Mesh"),
    ("amplification", "Amplification"), ("opencl", "OpenCL"), ("ohos", "OpenHOS"),
    ("pauthtest", "PAuthTest"),
)


def _parse_env(s: str) -> str | None:
    return _first_prefix(_ENV_PREFIXES, s)


# parseFormat: EndsWith, first match wins.
_FORMAT_SUFFIXES = (
    ("coff", "COFF"), ("elf", "ELF"), ("goff", "GOFF"), ("macho", "MachO"), ("wasm", "Wasm"),
    ("xcoff", "XCOFF"), ("dxcontainer", "DXContainer"), ("spirv", "SPIRV"),
)
_FORMAT_NAMES = {"COFF": "coff", "ELF": "elf", "GOFF": "goff", "MachO": "macho", "Wasm": "wasm",
                 "XCOFF": "xcoff", "DXContainer": "dxcontainer", "SPIRV": "spirv"}


def _parse_format(s: str) -> str | None:
    for suffix, fmt in _FORMAT_SUFFIXES:
        if s.endswith(suffix):
            return fmt
    return None


_APPLE_OSES = {"Darwin", "IOS", "MacOSX", "TvOS", "WatchOS", "BridgeOS", "DriverKit", "XROS"}


def _sub_arch(arch: str) -> str | None:
    """Rough `parseSubArch`: the spellings that carry a sub-architecture keep it, others have none."""
    if arch in ("arm64e", "arm64ec") or re.fullmatch(r"mips(isa)?(32|64|n32)?r6(el)?", arch):
        return arch
    if arch.startswith(("spirv", "dxilv", "kalimba")) and any(c.isdigit() for c in arch[5:]):
        return arch
    m = _ARM_PREFIX.match(arch)
    if m and m.group(1) in ("arm", "thumb") and m.group(3):
        return m.group(3).replace("-", "")
    return None


class ParsedTriple(FrozenRecord):
    """A `Triple(str)` as LLVM parses it: raw fields plus the recognised enum values (None = Unknown)."""

    __slots__ = ("arch_name", "vendor_name", "os_name", "environment_name", "arch", "sub_arch", "vendor", "os",
                 "environment", "object_format")

    def __init__(self, arch_name: str, vendor_name: str, os_name: str, environment_name: str, arch: str | None,
                 sub_arch: str | None, vendor: str | None, os: str | None, environment: str | None,
                 object_format: str) -> None:
        self._set("arch_name", arch_name)
        self._set("vendor_name", vendor_name)
        self._set("os_name", os_name)
        self._set("environment_name", environment_name)
        self._set("arch", arch)
        self._set("sub_arch", sub_arch)
        self._set("vendor", vendor)
        self._set("os", os)
        self._set("environment", environment)
        self._set("object_format", object_format)

    def __str__(self) -> str:
        return f"{self.arch_name}-{self.vendor_name}-{self.os_name}-{self.environment_name}"


def _default_format(arch: str | None, os: str | None) -> str:
    """`getDefaultFormat`, reduced to the cases that can occur."""
    if os in _APPLE_OSES:
        return "MachO"
    if arch in ("wasm32", "wasm64"):
        return "Wasm"
    if arch in ("spirv", "spirv32", "spirv64"):
        return "SPIRV"
    if arch == "dxil":
        return "DXContainer"
    if os == "Win32":
        return "COFF"
    if arch == "systemz" and os == "ZOS":
        return "GOFF"
    if arch in ("ppc", "ppc64") and os == "AIX":
        return "XCOFF"
    return "ELF"


@lru_cache(maxsize=1024)
def parse_triple(triple: str) -> ParsedTriple:
    """`Triple(triple)`: raw fields (split at the first three '-') and their parsed enum values."""
    a, v, o, e = split_triple4(triple)
    n = len(triple.split("-", 3))
    arch = parse_arch(a)
    env = _parse_env(e) if n > 3 else None
    fmt = _parse_format(e) if n > 3 else None
    if n == 1:
        # Triple ctor: a lone MIPS arch implies a GNU ABI environment.
        if a.startswith("mipsn32"):
            env = "GNUABIN32"
        elif a.startswith(("mips64", "mipsisa64")):
            env = "GNUABI64"
        elif a.startswith("mipsisa32") or a in ("mips", "mipsel", "mipsr6", "mipsr6el"):
            env = "GNU"
    vendor = _parse_vendor(v) if n > 1 else None
    os = _parse_os(o) if n > 2 else None
    return ParsedTriple(a, v, o, e, arch, _sub_arch(a), vendor, os, env, fmt or _default_format(arch, os))


def is_amdgpu(triple: str) -> bool:
    """`Triple::isAMDGPU()`: arch is amdgcn or r600."""
    return parse_triple(triple).arch in ("amdgcn", "r600")


def is_nvptx(triple: str) -> bool:
    """`Triple::isNVPTX()`."""
    return parse_triple(triple).arch in ("nvptx", "nvptx64")


_ARM_THUMB = {("thumb", "arm"), ("arm", "thumb"), ("thumbeb", "armeb"), ("armeb", "thumbeb")}


def is_compatible_with(a: str, b: str) -> bool:
    """`llvm::Triple::isCompatibleWith` (LLVM 19): the parsed enums must agree, so empty, `unknown` and
    unrecognised fields are all equal; Apple ignores the environment; ARM and Thumb mix."""
    x, y = parse_triple(a), parse_triple(b)
    if (x.arch, y.arch) in _ARM_THUMB:
        if x.vendor == "Apple":
            return x.sub_arch == y.sub_arch and x.vendor == y.vendor and x.os == y.os
        return (x.sub_arch == y.sub_arch and x.vendor == y.vendor and x.os == y.os
                and x.environment == y.environment and x.object_format == y.object_format)
    if x.vendor == "Apple":
        return x.arch == y.arch and x.sub_arch == y.sub_arch and x.vendor == y.vendor and x.os == y.os
    return (x.arch == y.arch and x.sub_arch == y.sub_arch and x.vendor == y.vendor and x.os == y.os
            and x.environment == y.environment and x.object_format == y.object_format)


def normalize(triple: str, components: int | None = None) -> str:
    """`llvm::Triple::normalize(str)` (the ANY form, identical in 19 and 22): recognise each '-' component
    as arch / vendor / OS / environment-or-format wherever it is, move it to its canonical position,
    fill gaps before recognised components with `unknown`, and apply the Windows/Android/SUSE rewrites.

    `components=3/4/5` is LLVM 20+'s `CanonicalForm::THREE_IDENT/FOUR_IDENT/FIVE_IDENT`: the ANY result
    padded with `unknown` or truncated to exactly that many components."""
    out = _normalize_any(triple)
    if components is None:
        return out
    if components not in (3, 4, 5):
        raise ValueError("components must be 3, 4 or 5")
    comps = out.split("-")[:components]
    comps += ["unknown"] * (components - len(comps))
    return "-".join(comps)


def _normalize_any(triple: str) -> str:
    comps = triple.split("-")
    arch = parse_arch(comps[0]) if len(comps) > 0 else None
    vendor = _parse_vendor(comps[1]) if len(comps) > 1 else None
    os = None
    is_cygwin = is_mingw = False
    if len(comps) > 2:
        os = _parse_os(comps[2])
        is_cygwin = comps[2].startswith("cygwin")
        is_mingw = comps[2].startswith("mingw")
    env = _parse_env(comps[3]) if len(comps) > 3 else None
    fmt = _parse_format(comps[4]) if len(comps) > 4 else None

    found = [arch is not None, vendor is not None, os is not None, env is not None]
    for pos in range(4):
        if found[pos]:
            continue
        for idx in range(len(comps)):
            if idx < 4 and found[idx]:
                continue
            comp = comps[idx]
            if pos == 0:
                arch = parse_arch(comp)
                valid = arch is not None
            elif pos == 1:
                vendor = _parse_vendor(comp)
                valid = vendor is not None
            elif pos == 2:
                os = _parse_os(comp)
                is_cygwin = comp.startswith("cygwin")
                is_mingw = comp.startswith("mingw")
                valid = os is not None or is_cygwin or is_mingw
            else:
                env = _parse_env(comp)
                valid = env is not None
                if not valid:
                    fmt = _parse_format(comp)
                    valid = fmt is not None
            if not valid:
                continue
            if pos < idx:
                # Insert left, pushing the components in between (not fixed ones) to the right.
                current = ""
                current, comps[idx] = comps[idx], current
                i = pos
                while current:
                    while i < 4 and found[i]:
                        i += 1
                    current, comps[i] = comps[i], current
                    i += 1
            elif pos > idx:
                # Push right by inserting empty components until the component reaches pos.
                while True:
                    current = ""
                    i = idx
                    while i < len(comps):
                        current, comps[i] = comps[i], current
                        if not current:
                            break
                        i += 1
                        while i < 4 and found[i]:
                            i += 1
                    if current:
                        comps.append(current)
                    idx += 1
                    while idx < 4 and found[idx]:
                        idx += 1
                    if idx >= pos:
                        break
            found[pos] = True
            break

    # "none" as the middle of a 3-component triple is the OS, not the vendor.
    if found[0] and not found[1] and not found[2] and found[3] and comps[1] == "none" and comps[2] == "":
        comps[1], comps[2] = comps[2], comps[1]

    comps = [c if c else "unknown" for c in comps]

    if env == "Android" and comps[3].startswith("androideabi"):
        comps[3] = "android" + comps[3][len("androideabi"):]
    if vendor == "SUSE" and env == "GNUEABI":
        comps[3] = "gnueabihf"

    def resize(n: int) -> None:
        del comps[n:]
        comps.extend([""] * (n - len(comps)))

    if os == "Win32":
        resize(4)
        comps[2] = "windows"
        if env is None:
            comps[3] = "msvc" if fmt in (None, "COFF") else _FORMAT_NAMES[fmt]
    elif is_mingw:
        resize(4)
        comps[2], comps[3] = "windows", "gnu"
    elif is_cygwin:
        resize(4)
        comps[2], comps[3] = "windows", "cygnus"
    if is_mingw or is_cygwin or (os == "Win32" and env is not None):
        if fmt not in (None, "COFF"):
            resize(5)
            comps[4] = _FORMAT_NAMES[fmt]
    return "-".join(comps)
