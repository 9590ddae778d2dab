"""What a build server's one-job OpenMP compile misses of clang's OpenMP header wrappers, and what
the tool does about each.

Through sccache-dist an OpenMP source goes to a build server as one driver job
(`graph.compile.fat_object`), compiled there from its text with every include inlined here
(`-frewrite-includes`), as the host side reads them. clang's OpenMP wrappers include some device
definitions only inside a test of the device's own macro (`#ifdef __AMDGCN__`, `#ifdef __NVPTX__`),
which the host side does not define, so the inlined text leaves those headers out:

- **the AMD math functions** (`__clang_hip_math.h`, `__clang_hip_cmath.h`, from the wrappers of
  `<math.h>` and `<cmath>`): an AMD image would call `sin` itself, undefined at its device link.
  The tool's header `openmp_amd_math.h`, given with `-include` to one-job compiles for an AMD
  arch, includes them outside that test in the wrappers' own `declare variant`, so their text
  is inlined. It is used only when this clang's wrappers include exactly those headers there
  (`amd_math_header`); otherwise such sources stay here, said with the policy's reason.
- **complex arithmetic's runtime functions** (`__muldc3` and kin, `__clang_cuda_complex_builtins.h`
  from the wrappers of `<complex>` and `<complex.h>`, for NVIDIA and AMD alike): these are plain
  `declare target` functions, which no header can give the device without giving them to the
  host too. A fat object whose host code calls one (its device code then may, and would not
  link) is compiled again here from the files, said in one line (`needs_files`): only time is
  lost, that source's each time it is compiled."""

from __future__ import annotations

import os
import re

from offload_tool.errors import OffloadError

from ..toolchain import discovery as _toolchain

#: The header given to one-job compiles for an AMD arch (see the module docstring), beside the
#: tool's other files.
AMD_MATH_HEADER = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "openmp_amd_math.h")

#: For each wrapper of clang's `include/openmp_wrappers`, the headers it includes for AMD only,
#: with their include guards: what `AMD_MATH_HEADER` includes in their place.
AMD_MATH_WRAPPERS = {"math.h": {"__clang_hip_math.h": "__CLANG_HIP_MATH_H__"},
                     "cmath": {"__clang_hip_cmath.h": "__CLANG_HIP_CMATH_H__"}}

#: The runtime functions of complex multiplication and division (compiler-rt's names), which
#: clang's wrappers define for device code only from the files (see the module docstring).
COMPLEX_RUNTIME = frozenset(f"__{op}{t}c3" for op in ("mul", "div") for t in "sdxt")

_AMD_BLOCK = re.compile(r"^[ \t]*#[ \t]*ifdef[ \t]+__AMDGCN__\b(.*?)^[ \t]*#[ \t]*endif", re.M | re.S)
_INCLUDE = re.compile(r'^[ \t]*#[ \t]*include[ \t]*[<"]([^>"]+)[>"]', re.M)
_GUARD = re.compile(r"^[ \t]*#[ \t]*ifndef[ \t]+(\w+)", re.M)
_FITS: dict[str, bool] = {}


def _read(path: str | None) -> str | None:
    try:
        with open(path or "", encoding="utf-8", errors="replace") as f:
            return f.read()
    except OSError:
        return None


def _fits(wrappers: str, include: str) -> bool:
    for wrapper, headers in AMD_MATH_WRAPPERS.items():
        text = _read(os.path.join(wrappers, wrapper))
        if text is None:
            return False
        found = {name for block in _AMD_BLOCK.findall(text) for name in _INCLUDE.findall(block)}
        if found != set(headers):
            return False
        for name, guard in headers.items():
            m = _GUARD.search(_read(os.path.join(include, name)) or "")
            if not m or m.group(1) != guard:
                return False
    return True


def amd_math_header(env) -> str | None:
    """`AMD_MATH_HEADER` when the clang of `env` (`OFFLOAD_CLANG`) takes it: its OpenMP wrappers
    include for AMD exactly the headers it names, guarded as it expects (asked of clang with
    `-print-file-name=`, read once per build); else None, and AMD OpenMP compiles stay here."""
    wrappers = _toolchain.print_file_name(env, env.subst("$OFFLOAD_CLANG"), "include/openmp_wrappers")
    if not wrappers:
        return None
    if wrappers not in _FITS:
        _FITS[wrappers] = _fits(wrappers, os.path.dirname(wrappers))
    return AMD_MATH_HEADER if _FITS[wrappers] else None


def needs_files(obj_path: str) -> set[str]:
    """The complex-arithmetic runtime functions the host code of fat object `obj_path` calls: not
    empty when its device code, made from inlined text, may call them undefined."""
    from elftools.common.exceptions import ELFError

    from offload_tool.formats.elf import open_elffile

    with open(obj_path, "rb") as f:
        data = f.read()
    try:
        elf = open_elffile(data)
        found = set()
        for sec in elf.iter_sections():
            if sec["sh_type"] == "SHT_SYMTAB":
                found.update(s.name for s in sec.iter_symbols()
                             if s["st_shndx"] == "SHN_UNDEF" and s.name in COMPLEX_RUNTIME)
        return found
    except (ELFError, OffloadError, ValueError, KeyError):
        return set()
