"""The language runtimes the built-in flavours' links need: CUDA's (libcudart, with clang or
nvcc) and HIP's (libamdhip64, on either offload driver, with clang or hipcc)."""

from __future__ import annotations

import os

from ..toolchain import discovery as _toolchain
from .base import Runtime


def _cuda_link(env):
    # libcudart.so lives outside the default search path (/usr/local/cuda/lib64); a relocatable
    # link takes no shared library (the static library's script names it).
    lib = _toolchain.CUDA_LIBDIR
    return [f"-L{lib} -Wl,-rpath,{lib} -lcudart"] if env.get("OFFLOAD_CUDA_PATH") else []


def _cuda_library(senv):
    cudart = os.path.join(senv.subst(_toolchain.CUDA_LIBDIR), "libcudart.so")
    return [cudart] if senv.get("OFFLOAD_CUDA_PATH") and os.path.isfile(cudart) else []


CUDA_RUNTIME = Runtime(_cuda_link, _cuda_library)
HIP_RUNTIME = Runtime(lambda env: ["-lamdhip64"], lambda senv: ["-lamdhip64"])
