"""Construction variables: the user-facing defaults, and the table of callable variables
(`CALLABLES`: `OFFLOAD_CLANGXX`, the launchers, the `_OFFLOAD_*` words commands substitute).

The callables live with what they are about, and this module only names them: the compiler's
answers in `toolchain.discovery`, the launchers in `dist.launchers`, a language's vendor flags in
`settings.languages`, the library steps' shared words in `graph.common`, and a builder module's
own words in that module (`graph.compile`, `graph.bundling`, `graph.link`). No module of the tool
but `generate` (the package's `__init__`) imports this one, so it may import any of them."""

from __future__ import annotations

import os
import sys

import SCons.Util

from ..graph import common as _builders
from ..graph import bundling as _bundling
from ..graph import compile as _compile
from . import languages as _languages
from ..dist import launchers as _launchers
from ..graph import link as _link
from ..graph.nvcc import device_link as _nvcc_link
from ..graph.nvcc import flags as _nvcc_flags
from ..toolchain import discovery as _toolchain
from ..toolchain import installations as _installations
from ..scons import actions as _actions

# --------------------------------------------------------------------------------------------
# The table

CALLABLES = {
    "OFFLOAD_CLANGXX": _toolchain.clangxx,
    "OFFLOAD_LINK_JOBS": _link.link_jobs,
    "OFFLOAD_LOCAL_LAUNCHER": _launchers.local_launcher,
    "_OFFLOAD_LAUNCH": _launchers.launch,
    "_OFFLOAD_CLANG_ID": _toolchain.clang_id,
    "_OFFLOAD_NVCC_ID": _toolchain.nvcc_id,
    "_OFFLOAD_LIBRARY_ID": _builders.library_id,
    "_OFFLOAD_VENDORFLAGS": _languages.vendor_flags,
    "_OFFLOAD_NVPTX_BCFLAG": _installations.nvptx_bc_flag,
    "_OFFLOAD_FATBIN_ID": _compile.fatbin_id,
    "_OFFLOAD_FATFLAGS": _compile.fat_flags,
    "_OFFLOAD_FAT_XARCHFLAGS": _compile.fat_xarch_flags,
    "_OFFLOAD_PACKAGERFLAGS": _builders.packager_flags,
    "_OFFLOAD_LLVMVERSIONFLAG": _bundling.llvm_version_flag,
    "_OFFLOAD_IMAGES": _builders.image_flags,
    "_OFFLOAD_EMBED_IMAGES": _compile.embed_images,
    "_OFFLOAD_LINK_OPTFLAG": _link.link_opt_flag,
    "_OFFLOAD_HIPFB_TARGETS": _compile.hipfb_targets,
    "_OFFLOAD_COMPRESSFLAG": _builders.compress_flag,
    "_OFFLOAD_INPUTFLAGS": _builders.input_flags,
    "_OFFLOAD_OUTPUTFLAGS": _bundling.output_flags,
    "_OFFLOAD_INPUTFLAG": _bundling.input_flag,
    "_OFFLOAD_OUTPUTFLAG": _builders.output_flag,
    "_OFFLOAD_TARGET_TMP": _bundling.target_tmp,
    "_OFFLOAD_BUNDLETARGETS": _bundling.bundle_targets,
    "_OFFLOAD_BUNDLETYPE": _bundling.bundle_type,
    "_OFFLOAD_VERIFY_CMDS": _bundling.verify_cmds,
    "_OFFLOAD_DEVICE_RUNTIME": _link.device_runtime_flags,
    "_OFFLOAD_LINKFLAGS": _link.link_flags,
    "_OFFLOAD_SOURCE_ID": _compile.source_id_flags,
    "_OFFLOAD_NVCCDB_FLAGS": _nvcc_flags.clangd_flags,
    "_OFFLOAD_NVCC_GENCODE": _nvcc_flags.nvcc_gencode,
    "_OFFLOAD_NVCC_HOSTFLAGS": _nvcc_flags.nvcc_host_flags,
    "_OFFLOAD_NVCC_DLINKFLAGS": _nvcc_link.dlink_flags,
    "_OFFLOAD_NVCC_CPPFLAGS": _nvcc_flags.nvcc_cpp_flags,
    "_OFFLOAD_NVCC_TARGET": _nvcc_flags.nvcc_target_file,
    "_OFFLOAD_NVCC_SOURCES": _nvcc_flags.nvcc_source_files,
}


def user_defaults() -> dict:
    """The documented variables' defaults (docs/scons-tool.md lists each)."""
    d = {
        "OFFLOAD_ARCHS": [],
        "OFFLOAD_LANG": "",
        "OFFLOAD_CUDA_COMPILER": "clang",
        "OFFLOAD_HIP_COMPILER": "clang",
        "OFFLOAD_HIP_DRIVER": "auto",
        "OFFLOAD_HOSTFLAGS": SCons.Util.CLVar(""),
        "OFFLOAD_DEVICEFLAGS": SCons.Util.CLVar(""),
        "OFFLOAD_NVCCFLAGS": SCons.Util.CLVar(""),
        "OFFLOAD_CUDA_PTX": False,
        "OFFLOAD_NVCC_SPLIT": True,
        "OFFLOAD_LINKFLAGS": SCons.Util.CLVar(""),
        "OFFLOAD_BUNDLERFLAGS": SCons.Util.CLVar(""),
        "OFFLOAD_COMPRESS": False,
        "OFFLOAD_LAUNCHER": "",
        "OFFLOAD_VERBOSE": False,
        "OFFLOAD_PYTHON": sys.executable,
        "OFFLOAD_AR": "ar",
        "OFFLOAD_ARFLAGS": SCons.Util.CLVar("rcsD"),
        **_installations.default_settings(),
        "OFFLOAD_SPLIT_DEVICE_LINK": True,
    }
    d.update(CALLABLES)
    return d


def set_defaults(env, commands: dict, comstrs: dict) -> None:
    """Set every construction variable the user has not set (idempotent; never clobbers):
    the user variables, the builders' `*COM` commands and `*COMSTR` messages, and the programs."""
    defaults = user_defaults()
    defaults.update(commands)
    _actions.DEFAULTS.update(commands)
    if "OFFLOAD_CLANG" not in env:
        defaults["OFFLOAD_CLANG"] = _toolchain.find_clang(env)
    if "OFFLOAD_NVCC" not in env:
        defaults["OFFLOAD_NVCC"] = _toolchain.find_program(env, ["nvcc"])
    if "OFFLOAD_HIPCC" not in env:
        defaults["OFFLOAD_HIPCC"] = _toolchain.find_program(env, ["hipcc"])
    verbose = env.get("OFFLOAD_VERBOSE") or os.environ.get("OFFLOAD_VERBOSE", "") not in ("", "0")
    for k, v in comstrs.items():
        defaults[k] = "" if verbose else v
    _actions.DEFAULTS.update((k, defaults[k]) for k in comstrs)
    for k, v in defaults.items():
        if k not in env:
            env[k] = v
    # hipcc picks its platform from the environment.
    env["ENV"].setdefault("HIP_PLATFORM", "amd")
