"""`openmp-clang`: OpenMP offload with clang: per-arch device objects (NVIDIA) or bitcode (AMD)
read from the source's host IR, packaged and embedded beside the host object; the link's
`-fopenmp` brings the OpenMP runtimes, so it names no runtime of its own."""

from __future__ import annotations

from ..dist import openmp_wrappers as _dist_wrappers
from ..dist import sccache as _dist
from ..dist.sccache import Policy
from ..graph import compile as _compile
from ..graph.common import canonical
from ..settings import archs as _archs
from ..settings import checks as _settings_check
from ..toolchain import discovery as _toolchain
from .clang import Clang

#: The first clang whose one-job OpenMP compiles go to build servers: it takes every device flag
#: through `-Xarch_device` (tested with clang 19 and 22; older ones are not installed here).
WHOLE_SINCE = 19


def _one_job_refused(env) -> bool:
    """Whether this environment's OpenMP sources cannot be sent as one job each (the `why` of the
    policy says the three reasons)."""
    if _toolchain.clang_major(env) < WHOLE_SINCE or _compile.fat_xarch_words(env) is None:
        return True
    return any(_archs.vendor(a) == "amd" for a in canonical(env)) and _dist_wrappers.amd_math_header(env) is None


class OpenMPClang(Clang):
    """OpenMP offload with clang. Built here: the per-arch graph (host IR, host object, a device
    compile per arch). Built through sccache-dist: one driver job per source (`whole`), which a
    build server runs whole, host and device code naming their entries after the same file."""

    name = "openmp-clang"
    language = "openmp"
    # With NVIDIA archs only, a program's images go into one carrier too (two files fewer per
    # source); its images are the ones the wrapper links from fat objects.
    carrier_without_device_link = True
    checks = (_settings_check.openmp_runtime, _settings_check.amd_device_libs, _settings_check.openmp_nvidia_cubins)
    dist = Policy(
        stays="OpenMP compiles run here, without sccache",
        why=f"their offload entry names come from the source file's device and inode on the machine that compiles "
            f"it, so host and device code must be one job on the server, which clang older than {WHOLE_SINCE} cannot "
            "make, nor one given host and device flags its -Xarch_device refuses (a device optimisation level other "
            "than -O0 or -O3 beside another host one, a device-only flag whose value is the next word), nor one for "
            "an AMD arch whose clang's OpenMP math wrappers include other AMD headers than the tool's header gives "
            "in their place (the source the server gets is preprocessed as the host reads it, which leaves out "
            "clang's AMD math wrappers: math functions would reach the AMD device link undefined)",
        packed=True, whole=True, stays_if=lambda env: _one_job_refused(env))

    def whole(self, senv) -> bool:
        """Its sources compile as one job each: when the build distributes through sccache-dist
        with a clang that allows it."""
        return _dist.client(senv) is not None and not self.dist.all_stay(senv)

    def compile(self, env, senv, s, fat, lang, archs, kw, pic):
        if not self.whole(senv):
            return super().compile(env, senv, s, fat, lang, archs, kw, pic)
        return _compile.fat_object(env, s, fat, archs, kw, pic)


FLAVOUR = OpenMPClang()
FLAVOURS = (FLAVOUR,)
