"""`offload-tool verify --runs-on`: can a named GPU run a binary's device code, and how?

The rules, from NVIDIA's and LLVM's documented compatibility:

NVIDIA (a GPU is `sm_XY`: compute capability X.Y, `sm_100` is 10.0, `sm_121` is 12.1):

* SASS (a cubin) for `sm_XY` runs on `sm_XZ` with Z >= Y: binary compatibility holds within a
  major revision, upwards only (CUDA C++ Programming Guide, "Binary Compatibility",
  https://docs.nvidia.com/cuda/cuda-c-programming-guide/index.html#binary-compatibility).  The
  same section limits that promise to desktop GPUs: it is not given on Tegra (integrated, Jetson
  and DRIVE) GPUs, nor from desktop to Tegra or back.  So SASS for a Tegra SM (`TEGRA_SMS`:
  `sm_32`, `sm_53`, `sm_62`, `sm_72`, `sm_87`, `sm_101`, `sm_110`) is taken to run only on that
  very SM, and desktop SASS never on a Tegra SM (`sm_80` SASS does not run on Orin's `sm_87`,
  `sm_50` SASS not on `sm_53`).  PTX is not binary code: the driver compiles it for a Tegra GPU
  as for any other (below).
* Arch-specific SASS `sm_XYa` (`sm_90a`, `sm_100a`: features that later GPUs need not have)
  runs only on exactly `sm_XY`.
* Family-specific SASS `sm_XYf` (CUDA 12.9+) runs on the GPUs of its family, the same major X
  with minor >= Y (`sm_100f`: 10.0 and 10.3; `sm_120f`: 12.0 and 12.1); Tegra SMs stay apart as
  above (`sm_100f` does not cover `sm_101`).
* PTX `compute_XY` is JIT-compiled by the driver for any GPU of compute capability >= X.Y;
  `compute_XYa` PTX only for exactly X.Y, `compute_XYf` PTX for its family as above.
* clang's NVPTX images (OpenMP offload, CUDA with the new driver) are cubins, i.e. SASS for
  their `sm_XY`; PTX is there only where the image says so (`--cuda-include-ptx`, a fat
  binary's PTX entry).  An LLVM IR image (`-foffload-lto`, an object not yet linked) becomes
  SASS for its arch when the program is linked.

AMD (a GPU is a processor, `gfx90a`, optionally with its XNACK/SRAMECC modes, `gfx90a:xnack+`):

* A code object for processor gfxNNN runs only on that processor (LLVM AMDGPUUsage, "Target
  ID"), except generic targets (code object v6), which run on each processor of their list
  (AMDGPUUsage, "AMDGPU Generic Processors"; `GENERIC_PROCESSORS` below).
* Target features: code built with `xnack+` runs only where XNACK is on, `xnack-` only where it
  is off, and code that leaves XNACK unspecified ("any") on both; the same for `sramecc`.  A GPU
  named without a mode can be in either: code that needs one mode then runs "only if XNACK is
  on", which is not a yes (name the GPU's mode to decide), unless the binary has code for every
  mode.
* `amdgcnspirv` (SPIR-V for AMD GPUs) is finalised by the runtime for whichever AMD GPU loads
  it.

A binary runs on a GPU when each unit of device code in it (an object's or archive member's
images, one fat binary of a CUDA program, a program's `.llvm.offloading` images) has an image
that the GPU runs: a kernel of a unit without one could not be launched.  Images for neither
vendor (host-fallback OpenMP images, images without an arch) are not device code here."""

from __future__ import annotations

import itertools
import re

from ..errors import UsageError
from ..rules import offload_arch, openmp_runtime
from ..records import FrozenRecord, Record

__all__ = ["Gpu", "Code", "Verdict", "parse_gpu", "code_of", "nvidia_runs", "amd_runs", "runs_on",
           "GENERIC_PROCESSORS", "TEGRA_SMS"]

#: LLVM AMDGPUUsage, table "AMDGPU Generic Processors" (LLVM 20-22): each generic target and the
#: processors its code objects run on.  gfx940 and gfx941 left LLVM in 21; code for them is still
#: listed here, for old binaries.
GENERIC_PROCESSORS: dict[str, tuple[str, ...]] = {
    "gfx9-generic": ("gfx900", "gfx902", "gfx904", "gfx906", "gfx909", "gfx90c"),
    "gfx9-4-generic": ("gfx940", "gfx941", "gfx942", "gfx950"),
    "gfx10-1-generic": ("gfx1010", "gfx1011", "gfx1012", "gfx1013"),
    "gfx10-3-generic": ("gfx1030", "gfx1031", "gfx1032", "gfx1033", "gfx1034", "gfx1035", "gfx1036"),
    "gfx11-generic": ("gfx1100", "gfx1101", "gfx1102", "gfx1103", "gfx1150", "gfx1151", "gfx1152", "gfx1153"),
    "gfx12-generic": ("gfx1200", "gfx1201"),
}

#: Tegra (integrated) SMs: NVIDIA's binary compatibility does not hold on them or between them and
#: desktop GPUs. Tegra K1 3.2, X1 5.3, X2 6.2, Xavier 7.2, Orin 8.7, Thor 10.1 as CUDA 12.8/12.9
#: named it and 11.0 as CUDA 13 does.
TEGRA_SMS = frozenset({32, 53, 62, 72, 87, 101, 110})

_FEATURES = ("sramecc", "xnack")
_FEATURE_WORDS = {"xnack": "XNACK", "sramecc": "SRAMECC"}


class Gpu(FrozenRecord):
    """A GPU named by --runs-on: NVIDIA `sm` (86 for sm_86), or AMD `processor` with the modes
    given (`features`: name -> on), `settable` the modes that processor has."""

    __slots__ = ("text", "vendor", "sm", "processor", "features", "settable")

    def __init__(self, text: str, vendor: str, sm: int = 0, processor: str = "",
                 features: tuple[tuple[str, bool], ...] = (), settable: tuple[str, ...] = ()) -> None:
        self._set("text", text)
        self._set("vendor", vendor)
        self._set("sm", sm)
        self._set("processor", processor)
        self._set("features", features)
        self._set("settable", settable)


class Code(FrozenRecord):
    """One device image as --runs-on sees it: `form` is 'sass', 'ptx' or 'ir' (NVIDIA), 'code'
    or 'ir' (AMD), 'spirv' (amdgcnspirv); `arch` is `sm_90a` / a target ID `gfx90a:xnack+`."""

    __slots__ = ("vendor", "form", "arch")

    def __init__(self, vendor: str, form: str, arch: str) -> None:
        self._set("vendor", vendor)
        self._set("form", form)
        self._set("arch", arch)

    @property
    def label(self) -> str:
        if self.vendor == "nvidia":
            if self.form == "ptx":
                return "PTX " + offload_arch.ptx_of_sass(self.arch)
            return ("LLVM IR " if self.form == "ir" else "SASS ") + self.arch
        if self.form == "spirv":
            return "SPIR-V amdgcnspirv"
        return ("LLVM IR " if self.form == "ir" else "") + self.arch


class Verdict(Record):
    """The answer for one (binary, GPU): `ok` only for an unconditional yes; `line` is what is
    printed after 'BINARY: GPU: '."""

    __slots__ = ("gpu", "ok", "line", "ways")

    def __init__(self, gpu: Gpu, ok: bool, line: str, ways: list[str] | None = None) -> None:
        self.gpu = gpu
        self.ok = ok
        self.line = line
        self.ways = [] if ways is None else ways


# --------------------------------------------------------------------------------------------
# Naming GPUs and images

def _sm(arch: str) -> tuple[int, str] | None:
    """`sm_90a` -> (90, 'a'); None when not an SM name."""
    m = re.fullmatch(r"(?:sm|compute)_(\d{2,3})([af]?)", arch)
    return (int(m.group(1)), m.group(2)) if m else None


def _cc(sm: int) -> tuple[int, int]:
    return divmod(sm, 10)


def parse_gpu(text: str) -> Gpu:
    """A --runs-on value: `sm_86`, or an AMD processor with optional modes `gfx90a:xnack+`."""
    text = text.strip()
    if not text or any(c.isspace() for c in text) or text.startswith("-"):
        raise UsageError(f"invalid --runs-on GPU '{text}'")
    sm = _sm(text)
    if sm is not None and text.startswith("sm_"):
        if sm[1]:
            raise UsageError(f"--runs-on names a GPU, and '{text}' names code: the GPU is sm_{sm[0]}")
        return Gpu(text, "nvidia", sm=sm[0])
    if text.startswith(("compute_", "sm_")):
        raise UsageError(f"--runs-on names a GPU: sm_XY (e.g. sm_86), not '{text}'")
    tid = offload_arch.parse_target_id(text)
    if tid is None:
        raise UsageError(f"unknown --runs-on GPU '{text}' (expected e.g. sm_86, gfx90a, gfx90a:xnack+)")
    row = offload_arch.amd_row(tid.processor)
    if row is None or row.get("generic"):
        raise UsageError(f"--runs-on names a GPU: '{text}' is a generic target, not a processor "
                         f"(one of {', '.join(GENERIC_PROCESSORS.get(tid.processor, ()))})")
    settable = tuple(f for f in _FEATURES if row.get(f))
    return Gpu(text, "amd", processor=tid.processor, features=tid.features, settable=settable)


def code_of(image) -> Code | None:
    """The Code of an inspected DeviceImage, or None when it is no GPU code (host images,
    unknown triples, no arch)."""
    triple, arch, kind = image.triple or "", image.arch or "", image.image_kind or ""
    if triple.startswith("nvptx"):
        if _sm(arch) is None or not arch.startswith("sm_"):
            return None
        if kind == "ptx":
            return Code("nvidia", "ptx", arch)
        if kind in ("cubin", "elf"):
            return Code("nvidia", "sass", arch)
        if kind == "llvm ir":
            return Code("nvidia", "ir", arch)
        return None
    if triple.startswith("spirv64-amd"):
        return Code("amd", "spirv", "amdgcnspirv")
    if triple.startswith("amdgcn") and arch:
        if kind not in ("elf", "llvm ir"):
            return None
        return Code("amd", "ir" if kind == "llvm ir" else "code", arch)
    return None


# --------------------------------------------------------------------------------------------
# The rules

def nvidia_runs(code: Code, gpu_sm: int) -> tuple[bool, str]:
    """(runs, how) for NVIDIA code on GPU sm_<gpu_sm>; `how` says why not when it does not."""
    sm, suffix = _sm(code.arch)
    (major, minor), (gmajor, gminor) = _cc(sm), _cc(gpu_sm)
    label = code.label
    if code.form == "ptx":
        if suffix == "a":
            return (sm == gpu_sm, f"{label} (JIT)" if sm == gpu_sm else f"{label} is for sm_{sm} only")
        if suffix == "f":
            ok = major == gmajor and gminor >= minor
            return ok, f"{label} (JIT, same family)" if ok else f"{label} is for sm_{major}x, minor >= {minor} only"
        ok = (gmajor, gminor) >= (major, minor)
        return ok, f"{label} (JIT)" if ok else f"{label} needs compute capability {major}.{minor} or higher"
    later = " at link" if code.form == "ir" else ""
    if sm == gpu_sm:
        return True, label + (" (SASS at link)" if later else "")
    if suffix == "a":
        return False, f"{label} runs on sm_{sm} only"
    if sm in TEGRA_SMS or gpu_sm in TEGRA_SMS:
        return False, f"{label} only (Tegra and desktop SASS do not mix)"
    if major == gmajor and gminor >= minor:
        return True, f"{label}, same {'family' if suffix == 'f' else 'major'}" + (", SASS at link" if later else "")
    if major == gmajor:
        return False, f"{label} only (major {major}, minor >= {minor})"
    return False, f"{label} only (major {major})"


def _mode_word(name: str, on: bool) -> str:
    return f"{_FEATURE_WORDS.get(name, name)} {'on' if on else 'off'}"


def _mode_is(name: str, on: bool) -> str:
    return f"{_FEATURE_WORDS.get(name, name)} is {'on' if on else 'off'}"


def amd_runs(code: Code, gpu: Gpu, modes: dict[str, bool]) -> tuple[bool, str]:
    """(runs, how/why) for AMD code on `gpu` in the modes `modes` (every settable feature)."""
    if code.form == "spirv":
        return True, "SPIR-V amdgcnspirv (JIT)"
    from ..rules.target_id import parse_target_id_format
    parsed = parse_target_id_format(code.arch)
    if parsed is None:
        return False, f"'{code.arch}' is no target ID"
    processor = offload_arch.canonical_processor(parsed[0]) or parsed[0]
    label = code.label
    how = label
    if processor != gpu.processor:
        members = GENERIC_PROCESSORS.get(processor)
        if members is None:
            return False, f"{label} is for {processor} only"
        if gpu.processor not in members:
            return False, f"{label} does not cover {gpu.processor}"
        how += ", generic"
    for name, on in sorted(parsed[1].items()):
        if name not in gpu.settable:
            return False, f"{label} needs {_mode_word(name, on)}, which {gpu.processor} has no setting for"
        if modes.get(name) != on:
            return False, f"{label} needs {_mode_word(name, on)}"
    if code.form == "ir":
        how += ", code object at link"
    return True, how


# --------------------------------------------------------------------------------------------
# A binary

def _unit_key(image) -> tuple:
    """Which unit of device code an image belongs to (see the module doc)."""
    prefix = image.path.rsplit("[", 1)[0] if image.path.endswith("]") else image.path
    return (image.file, prefix, (image.details or {}).get("fatbin_offset"))


def _gpu_modes(gpu: Gpu) -> list[dict[str, bool]]:
    """Every mode setting the GPU may be in: what it was named with, either value otherwise."""
    given = dict(gpu.features)
    free = [f for f in gpu.settable if f not in given]
    out = []
    for values in itertools.product((True, False), repeat=len(free)):
        modes = dict(given)
        modes.update(zip(free, values))
        out.append(modes)
    return out


def _describe_modes(working: list[dict[str, bool]], all_modes: list[dict[str, bool]]) -> str:
    """'XNACK on', 'XNACK on and SRAMECC off', or a list of settings, for the working modes."""
    fixed = {}
    for name in working[0]:
        values = {m[name] for m in working}
        if len(values) == 1:
            fixed[name] = values.pop()
    spanned = [m for m in all_modes if all(m[k] == v for k, v in fixed.items())]
    if len(spanned) == len(working) and fixed:
        return " and ".join(_mode_is(k, v) for k, v in sorted(fixed.items()))
    return " or ".join(" and ".join(_mode_is(k, v) for k, v in sorted(m.items())) for m in working)


def _unit_verdict(codes: list[Code], gpu: Gpu) -> tuple[str, str]:
    """('yes'|'maybe'|'no', text) for one unit's codes on `gpu`."""
    mine = [c for c in codes if c.vendor == gpu.vendor]
    if not mine:
        other = ", ".join(dict.fromkeys(c.label for c in codes))
        vendor = "NVIDIA" if gpu.vendor == "nvidia" else "AMD"
        return "no", f"no {vendor} GPU code ({other})"
    if gpu.vendor == "nvidia":
        rank = {"sass": 0, "ir": 1, "ptx": 2}
        results = [(c, *nvidia_runs(c, gpu.sm)) for c in mine]
        yes = [r for r in results if r[1]]
        if yes:
            yes.sort(key=lambda r: (rank[r[0].form], r[0].arch != f"sm_{gpu.sm}", -_sm(r[0].arch)[0]))
            return "yes", yes[0][2]
        why = [r[2] for r in results]
        if not any(c.form == "ptx" for c in mine):
            why.append("no PTX")
        return "no", ", ".join(dict.fromkeys(why))
    all_modes = _gpu_modes(gpu)
    picks: list[tuple[dict, str | None]] = []
    why: list[str] = []
    for modes in all_modes:
        oks = []
        for c in mine:
            ok, text = amd_runs(c, gpu, modes)
            if ok:
                oks.append(text)
            elif text not in why:
                why.append(text)
        # code for the processor itself before generic code, as the runtime picks it
        found = next((t for t in oks if ", generic" not in t), oks[0] if oks else None)
        picks.append((modes, found))
    working = [m for m, f in picks if f is not None]
    ways = list(dict.fromkeys(f for _, f in picks if f is not None))
    if len(working) == len(all_modes):
        if len(ways) == 1:
            return "yes", ways[0]
        return "yes", "; ".join(f"{way} where {_describe_modes([m for m, f in picks if f == way], all_modes)}"
                                for way in ways)
    if working:
        return "maybe", f"only if {_describe_modes(working, all_modes)} ({', '.join(ways)})"
    return "no", ", ".join(why)


def runs_on(images, name: str, gpu: Gpu, runtime: openmp_runtime.Runtime | None = None) -> Verdict:
    """Can `gpu` run the binary whose inspected images are `images`?  (See the module doc.)
    `runtime`: the OpenMP offload runtime the binary loads, when it names one: an image that
    runtime refuses to load is no code for the GPU (`openmp_runtime.refusal`)."""
    units: dict[tuple, list[Code]] = {}
    refused: dict[tuple, dict[str, list[str]]] = {}   # unit -> why -> labels of the images refused
    for img in images:
        code = code_of(img)
        if code is None:
            continue
        key = _unit_key(img)
        units.setdefault(key, [])
        why = openmp_runtime.refusal(runtime, producer=img.producer, triple=img.triple or "", data=img.data)
        if why is not None and code.vendor == gpu.vendor:
            refused.setdefault(key, {}).setdefault(why, []).append(code.label)
        else:
            units[key].append(code)
    if not units:
        return Verdict(gpu, False, "no: no GPU device code")

    def unit_verdict(key, codes):
        # The vendor's images all refused by the runtime: that, not their absence, is the reason.
        if key in refused and not any(c.vendor == gpu.vendor for c in codes):
            return "no", "; ".join(f"{', '.join(labels)}: {why}" for why, labels in refused[key].items())
        return _unit_verdict(codes, gpu)

    results = [(key, *unit_verdict(key, codes)) for key, codes in units.items()]
    many = len(results) > 1

    def where(key) -> str:
        return f"{key[1]}" + (f" (fat binary at {key[2]:#x})" if key[2] is not None else "") + ": " if many else ""

    bad = [r for r in results if r[1] == "no"]
    if bad:
        return Verdict(gpu, False, "no: " + "; ".join(where(k) + t for k, _, t in bad))
    maybe = [r for r in results if r[1] == "maybe"]
    if maybe:
        return Verdict(gpu, False, "; ".join(where(k) + t for k, _, t in maybe))
    ways = list(dict.fromkeys(t for _, _, t in results))
    return Verdict(gpu, True, f"yes ({'; '.join(ways)})", ways)
