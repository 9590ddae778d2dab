"""`cuda-clang`: CUDA with clang on the new offload driver with relocatable device code: per-arch
device objects packaged and embedded beside the host object, linked by the linker wrapper; its
objects need libcudart."""

from __future__ import annotations

import types

from ..dist.sccache import Policy
from ..settings import checks as _settings_check
from .clang import Clang
from .runtimes import CUDA_RUNTIME


class CudaClang(Clang):
    name = "cuda-clang"
    language = "cuda"
    runtime = CUDA_RUNTIME
    checks = (_settings_check.cuda_for_clang,)
    misplaced_flags = types.MappingProxyType({
        "OFFLOAD_NVCCFLAGS": "clang compiles its CUDA sources (OFFLOAD_CUDA_COMPILER='nvcc' for nvcc; clang's "
                             "flags go in OFFLOAD_HOSTFLAGS / OFFLOAD_DEVICEFLAGS)"})
    dist = Policy(stays="CUDA compiles with clang run here",
                  why="sccache never sends clang CUDA compiles; it caches them where the driver takes the CUID "
                      "(-cuid=, clang 20 on), not through -Xclang (clang 19)")


FLAVOUR = CudaClang()
FLAVOURS = (FLAVOUR,)
