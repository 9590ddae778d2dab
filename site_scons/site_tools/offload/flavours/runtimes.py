"""The language runtimes the built-in flavours' links need: CUDA's (libcudart, with clang or
nvcc) and HIP's (libamdhip64, on either offload driver, with clang or hipcc)."""

from __future__ import annotations

from ..toolchain import installations as _installations
from .base import Runtime


def _cuda_link(env):
    # libcudart.so lives outside the default search path (/usr/local/cuda/lib64): the CUDA
    # installation's folder; a relocatable link takes no shared library (the static library's
    # script names it).
    lib = _installations.cuda(env).lib_dir
    return [f"-L{lib} -Wl,-rpath,{lib} -lcudart"] if lib else []


def _cuda_library(senv):
    cudart = _installations.cuda(senv).runtime_library()
    return [cudart] if cudart else []


CUDA_RUNTIME = Runtime(_cuda_link, _cuda_library)
HIP_RUNTIME = Runtime(lambda env: ["-lamdhip64"], lambda senv: ["-lamdhip64"])
