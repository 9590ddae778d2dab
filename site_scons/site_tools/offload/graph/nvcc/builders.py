"""The builders of nvcc's steps: their actions (signed by the step's command, `StepAction`),
the target names each step writes beside the object (emitters), their command strings, and the
commands and flag variables (`flags`) the tool sets as defaults."""

from __future__ import annotations

import SCons.Action
import SCons.Script

from offload_tool.rules import offload_arch

from .. import consume as _consume
from ...scons import actions as _actions
from ...scons import nodes as _nodes
from ..common import builder, stem
from . import flags as _flags
from .arch_list import record_arch_list_use


COMMANDS = {
    "_OFFLOAD_NVCCSTEPCOM": "$_OFFLOAD_NVCC_STEP",
    # Each kind of step's command: nvcc's own line for the step (its `--dryrun` plan), which a
    # user may wrap (`'time $_OFFLOAD_NVCCSTEPCOM'`) as any `*COM`.
    "OFFLOAD_NVCCFECOM": "$_OFFLOAD_NVCCSTEPCOM",
    "OFFLOAD_NVCCPPCOM": "$_OFFLOAD_NVCCSTEPCOM",
    "OFFLOAD_NVCCDEVICECOM": "$_OFFLOAD_NVCCSTEPCOM",
    "OFFLOAD_NVCCFATBINCOM": "$_OFFLOAD_NVCCSTEPCOM",
    "OFFLOAD_NVCCHOSTCOM": "$_OFFLOAD_NVCCSTEPCOM",
    # compile_commands.json: the nvcc compile as a clang CUDA command clangd reads.
    "OFFLOAD_NVCCDBCOM": "clang++ -x cuda $_OFFLOAD_NVCCDB_FLAGS -c -o $TARGET $CCFLAGS $CXXFLAGS $OFFLOAD_HOSTFLAGS "
                         "$_CCCOMCOM $SOURCE",
}
COMMANDS.update(_flags.COMMANDS)


COMSTRS = {
    "OFFLOAD_NVCCFECOMSTR": "NVCC-FE ${_OFFLOAD_NVCC_SRC}",
    "OFFLOAD_NVCCPPCOMSTR": "NVCC-PP ${_OFFLOAD_NVCC_VARCH} ${_OFFLOAD_NVCC_SRC}",
    "OFFLOAD_NVCCDEVICECOMSTR": "NVCC-DEVICE ${_OFFLOAD_NVCC_VARCH} ${_OFFLOAD_NVCC_SRC}",
    "OFFLOAD_NVCCFATBINCOMSTR": "NVCC-FATBIN ${TARGET}",
    "OFFLOAD_NVCCHOSTCOMSTR": "NVCC-HOST ${TARGET}",
}


# --------------------------------------------------------------------------------------------
# Target names (each builder names its own, from the object the source becomes)

def _beside(obj, suffix: str):
    return obj.dir.File(stem(obj) + suffix)


def _fe_emitter(target, source, env):
    obj = target[0]
    return [_beside(obj, ".cudafe1.cpp"), _beside(obj, ".module_id"), _beside(obj, ".cpp4.archlist")], source


def _pp_emitter(target, source, env):
    v = env["_OFFLOAD_NVCC_VARCH"]
    return [_beside(target[0], f".{v}.cpp1.ii"), _beside(target[0], f".{v}.archlist")], source


def _device_emitter(target, source, env):
    v = env["_OFFLOAD_NVCC_VARCH"]
    obj = target[0]
    return ([_beside(obj, f".{v}.ptx"), _beside(obj, f".{v}.cudafe1.stub.c")]
            + [_beside(obj, cubin_name(v, r)) for r in env["_OFFLOAD_NVCC_RARCHS"]]), source


def cubin_name(virtual: str, real: str) -> str:
    return f".{real}.cubin" if virtual.split("_")[1] == real.split("_")[1] else f".{virtual}.{real}.cubin"


def _fatbin_emitter(target, source, env):
    return [_beside(target[0], ".fatbin.c")], source


def _host_emitter(target, source, env):
    obj = target[0]
    _nodes.marks(obj).offload_lang = "cuda"
    return [obj, _beside(obj, ".cudafe1.stub.c")], source


# Sources of the steps after the front end are files nvcc's own steps wrote: their includes are
# those steps' inputs already, so they are not scanned (a `.cudafe1.cpp` is a megabyte of
# preprocessed text).
_NOT_SCANNED = SCons.Script.Scanner(lambda node, env, path: [], "offload-nvcc-none")


def StepAction(com_variable: str, **kw):
    """One of nvcc's steps. Its signature is the step's command as the plan gives it, with every
    file name relative to the top directory (the source's absolute path too: a moved tree or a
    clone signs as this one does) and `__CUDA_ARCH_LIST__` left out, plus nvcc's identity,
    computed once when the node is made (`_OFFLOAD_NVCC_STEPSIG`) rather than substituted per
    node on every run: a source has two such nodes per arch and three more, and a null build
    signs them all. A `com_variable` the user set to more than nvcc's line (a wrapper) is signed
    too."""
    return _actions.VariableSignedAction(com_variable, "_OFFLOAD_NVCC_STEPSIG", **kw)


def step_arch(env) -> str | None:
    """The arch a node of nvcc's steps works for, for the build report: a device link's SASS arch;
    a device preprocess or compile's SASS arch when its virtual arch has that one only (`sm_NN`
    for `compute_NN`), else its virtual arch; None for the other steps."""
    real = env.get("_OFFLOAD_NVCC_RARCH")
    if real:
        return real
    virtual = env.get("_OFFLOAD_NVCC_VARCH")
    if not virtual:
        return None
    sass = offload_arch.sass_of_ptx(virtual)
    return sass if sass in (env.get("_OFFLOAD_NVCC_ARCHS") or []) else virtual


def builders() -> dict:
    def b(comstr, kind, emitter, scanner=_NOT_SCANNED, record=False, check=False):
        act = StepAction(comstr[:-3], cmdstr="$" + comstr)
        if record:
            act = _actions.sequence([act, SCons.Action.Action(record_arch_list_use, None)])
        if check:  # the cubins and PTX it takes, checked first (`_consume`)
            act = _consume.with_device_check(act)
        return builder(action=act, emitter=emitter, source_scanner=scanner, report_kind=kind)

    return {
        "_OffloadNvccFrontEnd": b("OFFLOAD_NVCCFECOMSTR", "host-compile", _fe_emitter, _actions.c_scanner(), True),
        "_OffloadNvccPreprocess": b("OFFLOAD_NVCCPPCOMSTR", "device-compile", _pp_emitter, _actions.c_scanner(), True),
        "_OffloadNvccDevice": b("OFFLOAD_NVCCDEVICECOMSTR", "device-compile", _device_emitter),
        "_OffloadNvccFatbinary": b("OFFLOAD_NVCCFATBINCOMSTR", "bundle", _fatbin_emitter, check=True),
        "_OffloadNvccHost": b("OFFLOAD_NVCCHOSTCOMSTR", "host-compile", _host_emitter),
    }


PSEUDO_BUILDERS: list = []
