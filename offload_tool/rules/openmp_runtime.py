"""Which NVIDIA device images LLVM's OpenMP offload runtime loads, by the runtime's version.

A program that offloads with OpenMP loads LLVM's runtime `libomptarget.so.<major>[.<minor>]`, and
that runtime reads each NVIDIA image's ELF header before it hands the image to the driver: the SM
in `e_flags` must match the GPU's compute capability.  NVIDIA's cubins come in two ELF ABIs
(`e_ident[EI_ABIVERSION]`):

* ABI 7 (`ELFABIVERSION_CUDA_V1`): the SM in the low byte of `e_flags` (`0x5a` for sm_90).  CUDA 12
  and older write it for every SM below 100.
* ABI 8 (`ELFABIVERSION_CUDA_V2`): the SM in bits 8-15 (`0x5a00`), the low byte holding other
  flags.  CUDA 12.8 wrote it for Blackwell (sm_100 and later) only; **CUDA 13's ptxas and nvlink
  write it for every SM**, sm_80 and sm_90 included.

LLVM's runtime reads ABI 8 from LLVM 22 on and in LLVM 21.1's later releases (llvm-project issue
159088, "Offload to NVIDIA GPUs fails with CUDA 13.0 or newer"; fixed for every SM by pull request
159354, taken into release 21.1 by 159451).  LLVM 20 and older read the SM from the low byte of any
cubin (ABI 8's sm_90 reads as SM 4), find no image for the GPU and say "No images found compatible
with the installed hardware": the program falls back to the host, or stops where
`OMP_TARGET_OFFLOAD=MANDATORY`.  Seen on an H100: every OpenMP program that clang 19 built against
CUDA 13 stopped so under clang 19's own runtime, while CUDA programs with the same cubins ran.

The version comes from the runtime's soname, so a 21.1 runtime is taken to read ABI 8 (only its
first two releases did not)."""

from __future__ import annotations

import re

from ..records import FrozenRecord

__all__ = ["Runtime", "runtime_of", "cuda_elf_abi", "refusal", "CUDA_ELF_ABI_V1", "CUDA_ELF_ABI_V2",
           "FIRST_MAJOR_READING_ABI_V2", "REFUSES"]

#: `e_ident[EI_ABIVERSION]` of NVIDIA's two cubin ABIs (LLVM's `ELFABIVERSION_CUDA_V1` / `_V2`).
CUDA_ELF_ABI_V1 = 7
CUDA_ELF_ABI_V2 = 8
#: The first LLVM whose OpenMP runtime reads ABI 8 cubins for every SM (see the module doc).
FIRST_MAJOR_READING_ABI_V2 = 21

#: The words of every `refusal`, for a caller telling this reason from the others.
REFUSES = "refuses this cubin"

_EM_CUDA = 190
_EI_ABIVERSION = 8
_RUNTIME_NAME = re.compile(r"libomptarget\.so\.(\d+)(?:\.\d+)*")


class Runtime(FrozenRecord):
    """The OpenMP offload runtime a program loads: its soname as the program names it, and the
    LLVM major version that soname carries."""

    __slots__ = ("soname", "major")

    def __init__(self, soname: str, major: int) -> None:
        self._set("soname", soname)
        self._set("major", major)


def runtime_of(needed) -> Runtime | None:
    """The OpenMP offload runtime among a program's or library's `DT_NEEDED` names, or None (no
    runtime named, or one without a version: a plain `libomptarget.so` says nothing)."""
    for name in needed:
        m = _RUNTIME_NAME.fullmatch(name)
        if m:
            return Runtime(name, int(m.group(1)))
    return None


def cuda_elf_abi(data) -> int | None:
    """`EI_ABIVERSION` of a cubin (an ELF image whose `e_machine` is EM_CUDA), None for anything
    else (too short for an ELF header, not ELF, another machine)."""
    if len(data) < 20 or bytes(data[:4]) != b"\x7fELF":
        return None
    little = data[5] == 1
    machine = int.from_bytes(bytes(data[18:20]), "little" if little else "big")
    return data[_EI_ABIVERSION] if machine == _EM_CUDA else None


def refusal(runtime: Runtime | None, *, producer: str, triple: str, data) -> str | None:
    """Why `runtime` will not load this OpenMP image (a clause for `verify --runs-on`), or None
    when it will, or when that cannot be told (no runtime known, not an OpenMP NVIDIA cubin)."""
    if runtime is None or producer != "openmp" or not triple.startswith("nvptx"):
        return None
    abi = cuda_elf_abi(data)
    if abi != CUDA_ELF_ABI_V2 or runtime.major >= FIRST_MAJOR_READING_ABI_V2:
        return None
    return (f"the OpenMP runtime it loads ({runtime.soname}, LLVM {runtime.major}) {REFUSES}: its ELF "
            f"ABI is NVIDIA's new one (EI_ABIVERSION {CUDA_ELF_ABI_V2}, what CUDA 13's ptxas and nvlink write), "
            f"which LLVM's runtime reads from LLVM {FIRST_MAJOR_READING_ABI_V2} on (it finds 'No images found "
            "compatible with the installed hardware'); build the OpenMP device code against CUDA 12 or older "
            f"(OFFLOAD_CUDA_PATH, clang's --cuda-path) or with clang {FIRST_MAJOR_READING_ABI_V2} or later")
