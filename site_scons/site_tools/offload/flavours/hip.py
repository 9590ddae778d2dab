"""HIP's four flavours: the old offload driver's (`hip-bundled`: per-arch code objects in a
`.hipfb` the host compile includes) and the new driver's (`hip-packaged`: per-arch bitcode
packaged and embedded, as CUDA's), each with clang or through hipcc (`-hipcc`: hipcc runs every
node). Their device code is linked whole by the linker wrapper or inside the host object, never
in the split AMD device link; their objects need libamdhip64."""

from __future__ import annotations

from ..dist.sccache import Policy
from ..graph import compile as _compile
from ..settings import checks as _settings_check
from .clang import Clang
from .runtimes import HIP_RUNTIME


class _Hip(Clang):
    language = "hip"
    runtime = HIP_RUNTIME
    split_device_link = False
    checks = (_settings_check.amd_device_libs,)


class HipBundled(_Hip):
    name = "hip-bundled"
    dist = Policy(
        stays="HIP host compiles run here, uncached",
        why="the host compile names its fat binary through -Xclang, which sccache does not take; the per-arch "
            "device compiles go to the build servers",
        packed=True)


class HipPackaged(_Hip):
    name = "hip-packaged"
    # With a clang whose driver forwards `-cuid=` (`_compile.cuid_flag`) sccache caches them and
    # they go through the tool's server as the old driver's, the device compiles with the toolchain
    # the tool packs: sent with sccache's own, a device compile fails on the server (no device
    # libraries) and sccache does not compile it here instead.
    dist = Policy(stays="HIP compiles with the new offload driver run here, uncached",
                  why="this clang drops the driver's -cuid=, so their CUID reaches -cc1 through -Xclang, which "
                      "sccache does not take (clang 20 on: cached, and sent with a packed toolchain)",
                  packed=True, stays_if=lambda env: not _compile.cuid_through_driver(env))


class _Hipcc:
    """hipcc runs every node (a script whose clang its environment picks: no checks of clang's)."""

    program_var = "OFFLOAD_HIPCC"
    compiler = ("OFFLOAD_HIPCC", "hipcc")
    checks = ()


class HipBundledHipcc(_Hipcc, HipBundled):
    name = "hip-bundled-hipcc"
    dist = Policy(stays="HIP compiles through hipcc run here",
                  why="sccache does not know hipcc as a compiler it can send")


class HipPackagedHipcc(_Hipcc, HipPackaged):
    name = "hip-packaged-hipcc"
    dist = Policy()


BUNDLED, PACKAGED = HipBundled(), HipPackaged()
BUNDLED_HIPCC, PACKAGED_HIPCC = HipBundledHipcc(), HipPackagedHipcc()
FLAVOURS = (BUNDLED, PACKAGED, BUNDLED_HIPCC, PACKAGED_HIPCC)
