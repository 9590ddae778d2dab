"""Which offload driver builds a language that has two (HIP): `OFFLOAD_HIP_DRIVER`.

- 'old': per-arch code objects bundled into a `.hipfb` that the host compile includes (what
  ROCm's clang and `hipcc` do, and upstream clang up to 22 by default);
- 'new': per-arch bitcode in an OffloadBinary package embedded in `.llvm.offloading`
  (`--offload-new-driver -fgpu-rdc`), linked by clang-linker-wrapper (upstream clang 23's default);
- 'auto' (the default): the driver the compiler in use picks when not told, as its `-###` says
  (`_toolchain.hip_default_driver`), never inferred from a version number."""

from __future__ import annotations

import SCons.Errors

from . import checks as _settings_check
from ..toolchain import discovery as _toolchain

CHOICES = ("new", "old", "auto")


def driver_of(env, lang, compiler: str) -> str:
    """'new' or 'old' for sources of `lang` built in `env` by `compiler` ('clang' or 'hipcc')."""
    var = lang.driver_var
    value = env.subst("$" + var).strip() if env.get(var) else "auto"
    if value not in CHOICES:
        raise SCons.Errors.UserError(f"offload: {var} must be 'new', 'old' or 'auto', not '{value}'")
    if value != "auto":
        return value
    command_var = "OFFLOAD_HIPCC" if compiler == "hipcc" else "OFFLOAD_CLANG"
    _toolchain.require(env, command_var, compiler)
    if command_var == "OFFLOAD_CLANG":
        _settings_check.clang_is_clang(env)
    command = env.subst("$" + command_var)
    found = _toolchain.hip_default_driver(env, command)
    if found is None:
        raise SCons.Errors.UserError(
            f"offload: {var}='auto' cannot tell which offload driver '{command}' uses for {lang.name.upper()} "
            "(its `-###` of an RDC compile runs neither clang-offload-packager nor clang-offload-bundler); "
            f"set {var}='new' or 'old'")
    return found
