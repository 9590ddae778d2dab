"""Settings that would reach the wrong command, or none: said when the SConscript is read.

The flag variables each feed one kind of step: `OFFLOAD_HOSTFLAGS` every host compile (clang's,
the environment's own for plain host sources, nvcc's host compiler through `-Xcompiler=`),
`OFFLOAD_DEVICEFLAGS` clang's device compiles, `OFFLOAD_NVCCFLAGS` nvcc itself. Two mistakes are
common and silent otherwise:

- nvcc's own options in `OFFLOAD_HOSTFLAGS` or `OFFLOAD_DEVICEFLAGS` (where they went before
  `OFFLOAD_NVCCFLAGS` existed): a `UserError` naming `OFFLOAD_NVCCFLAGS`, since no host compiler
  and no clang device compile takes them;
- a flag variable that no step of a program or library uses (`OFFLOAD_DEVICEFLAGS` in a program
  whose device code nvcc compiles, `OFFLOAD_NVCCFLAGS` where clang compiles the `.cu` sources):
  a note once per variable and link, naming where the flags belong."""

from __future__ import annotations

import sys

import SCons.Errors
import SCons.Util

from . import _signatures

# Options only nvcc takes (long and short spellings; `=value` forms are matched by the name).
_NVCC_ONLY = {
    "-Xcompiler", "--compiler-options", "-Xptxas", "--ptxas-options", "-Xnvlink", "--nvlink-options",
    "-Xcudafe", "-Xfatbinary", "--fatbin-options", "--extended-lambda", "--expt-extended-lambda",
    "-expt-extended-lambda", "--expt-relaxed-constexpr", "-expt-relaxed-constexpr", "-rdc",
    "--relocatable-device-code", "-dc", "--device-c", "-dlink", "--device-link", "-lineinfo",
    "--generate-line-info", "-use_fast_math", "--use_fast_math", "-gencode", "--generate-code", "-ccbin",
    "--compiler-bindir", "--default-stream", "-default-stream", "-maxrregcount", "--maxrregcount",
    "--diag-suppress", "-diag-suppress", "--keep", "-keep", "--resource-usage", "-res-usage",
    "--gpu-architecture", "--gpu-code", "-Wno-deprecated-gpu-targets", "--threads", "--ftz", "-ftz",
    "--prec-div", "-prec-div", "--prec-sqrt", "-prec-sqrt", "--fmad", "-fmad",
}

_WHERE = {
    "OFFLOAD_HOSTFLAGS": "host compile flags reach the host compiler as they are (nvcc's host compiler gets "
                         "each through -Xcompiler)",
    "OFFLOAD_DEVICEFLAGS": "it holds clang's device-compile flags",
}


def _flags(senv, var: str) -> list[str]:
    return [str(f) for f in SCons.Util.flatten([senv.get(var) or []])]


def _nvcc_option(flag: str) -> str | None:
    name = flag.split("=", 1)[0]
    return name if name in _NVCC_ONLY else None


_checked: dict[tuple, object] = {}


def check(env, kw: dict, senv) -> None:
    """Refuse nvcc's options in the host and device flag variables of `senv` (`env` with the
    caller's overrides `kw`), once per (environment, overrides)."""
    try:
        key = (id(env), _signatures.frozen(dict(kw)))
    except TypeError:
        key = None
    if key is not None and key in _checked:
        return
    for var, why in _WHERE.items():
        for flag in _flags(senv, var):
            name = _nvcc_option(flag)
            if name:
                raise SCons.Errors.UserError(
                    f"offload: {var} holds nvcc's option '{flag}', which no step given {var} takes ({why}): "
                    f"put nvcc's options in OFFLOAD_NVCCFLAGS")
    if key is not None:
        _checked[key] = env   # (holds `env`: its id stays its own)


_noted: set[tuple[str, str]] = set()


def unused_in_link(senv, target, objects) -> None:
    """Note the flag variables set for a link's objects that none of their steps used (by the
    flavours the objects were built with, `_flavours`)."""
    flavours = {getattr(o.attributes, "offload_flavour", None) for o in objects}
    unused = []
    if _flags(senv, "OFFLOAD_DEVICEFLAGS") and "cuda-nvcc" in flavours and flavours <= {"cuda-nvcc", "host"}:
        unused.append(("OFFLOAD_DEVICEFLAGS", "nvcc compiles its device code: nvcc's options go in "
                                              "OFFLOAD_NVCCFLAGS"))
    if _flags(senv, "OFFLOAD_NVCCFLAGS") and "cuda-clang" in flavours and "cuda-nvcc" not in flavours:
        unused.append(("OFFLOAD_NVCCFLAGS", "clang compiles its CUDA sources (OFFLOAD_CUDA_COMPILER='nvcc' "
                                            "for nvcc; clang's flags go in OFFLOAD_HOSTFLAGS / OFFLOAD_DEVICEFLAGS)"))
    for var, why in unused:
        if (var, str(target)) not in _noted:
            _noted.add((var, str(target)))
            sys.stderr.write(f"offload: note: {var} reaches no step of '{target}': {why}\n")
