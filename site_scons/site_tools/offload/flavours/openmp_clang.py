"""`openmp-clang`: OpenMP offload with clang: per-arch device objects (NVIDIA) or bitcode (AMD)
read from the source's host IR, packaged and embedded beside the host object; the link's
`-fopenmp` brings the OpenMP runtimes, so it names no runtime of its own."""

from __future__ import annotations

from ..dist.sccache import Policy
from ..settings import checks as _settings_check
from .clang import Clang


class OpenMPClang(Clang):
    name = "openmp-clang"
    language = "openmp"
    checks = (_settings_check.openmp_runtime, _settings_check.amd_device_libs)
    dist = Policy(
        stays="OpenMP compiles run here, without sccache",
        why="their offload entry names come from the source file's device and inode on the machine that compiles "
            "it, so a build server's copy would name them differently from the host object",
        unlaunched=True)


FLAVOUR = OpenMPClang()
FLAVOURS = (FLAVOUR,)
