"""nvcc's device link of relocatable device code (`-rdc=true`) as nodes.

Objects nvcc compiled with `-rdc=true` hold relocatable device code: a kernel in one may call a
`__device__` function of another, and nothing runs until the device code of all of them is
linked. nvcc's own `-dlink` does it in steps, which its `--dryrun` shows and which become nodes
here, next to the link that needs them (`OffloadProgram`, `OffloadSharedLibrary`,
`OffloadRelocatableObject` and so `OffloadStaticLibrary`):

    objects, archives --NVCC-NVLINK sm_NN--> <program>.sm_NN.dlink.cubin + .sm_NN.dlink.reg.c
                                                            (nvlink, one node per SASS arch)
    cubins + one reg.c --NVCC-DLINK--> <program>.dlink.o    (fatbinary -link, then the host
                                                            compile of nvcc's link stub)

and `<program>.dlink.o` is linked with the objects. nvlink reads each object's device code from
its fat binary and the object's module ID from its `__nv_module_id` section, so its inputs are the
objects themselves (given a bare cubin it names the module after the file, and the host side's
registration would not find it): adding an arch reruns every arch's nvlink, as the objects
changed, but no device compile of the other archs. A PTX-only arch (`compute_NN`) has no nvlink
step, as in nvcc's own device link. A plan of another shape, `OFFLOAD_NVCC_SPLIT=False`, a
compiler launcher or a script as `$OFFLOAD_NVCC` give one `nvcc -dlink` node instead (the first
with a one-line note)."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass

import SCons.Action

from ...scons import actions as _actions
from ...scons import nodes as _nodes
from ...flavours import registry as _flavours
from ...settings import archs as _archs
from .. import consume as _consume
from .. import memory_budget as _memory
from . import cleaning as _nvcc_cleaning
from . import flags as _nvcc_flags
from . import plan as _nvcc_plan
from . import steps as _nvcc_steps
from .shell_words import shell_words
from ..common import builder, pic_overrides, settings
from .builders import StepAction
from .plan import Step, PlanShape, is_host_cc
from .steps import step_command, step_signature, step_word

_OUT = "offload_nvcc_plan_dlink.o"
_INS = ("offload_nvcc_plan_in1.o", "offload_nvcc_plan_in2.o")   # two, to see where a step puts its inputs
_TMP = _nvcc_plan.temporaries("offload_nvcc_plan_dlink")

COMMANDS = {
    "_OFFLOAD_NVCCDLINKSTEPCOM": "$_OFFLOAD_NVCC_STEP",
    # nvlink's step: nvcc's own line for it (as `OFFLOAD_NVCCDEVICECOM`).
    "OFFLOAD_NVCCNVLINKCOM": "$_OFFLOAD_NVCCDLINKSTEPCOM",
    # The one-action device link (no plan, or split off).
    "OFFLOAD_NVCCDLINKCOM": "$OFFLOAD_NVCC -dlink -o $_OFFLOAD_NVCC_TARGET $_OFFLOAD_NVCC_GENCODE "
                            "$_OFFLOAD_NVCC_DLINKFLAGS $_OFFLOAD_NVCC_HOSTFLAGS $_OFFLOAD_NVCC_SOURCES",
}

COMSTRS = {
    "OFFLOAD_NVCCNVLINKCOMSTR": "NVCC-NVLINK ${_OFFLOAD_NVCC_RARCH} ${_OFFLOAD_NVCC_PROGRAM}",
    "OFFLOAD_NVCCDLINKCOMSTR": "NVCC-DLINK ${TARGETS[0]}",
}


def dlink_flags(target, source, env, for_signature) -> str:
    """`$OFFLOAD_NVCCFLAGS` as `nvcc -dlink` takes them: without the compile-mode options (`-c`,
    `-dc`, which nvcc refuses next to `-dlink`)."""
    flags = shell_words(env, "$OFFLOAD_NVCCFLAGS", target, source, for_signature)
    return _nvcc_flags.command_words(f for f in flags if f not in ("-c", "--compile", "-dc", "--device-c"))


#: What the split device link writes beside `<program>.dlink.o` (`<program>.<name>`; any arch).
_STEP_FILES = re.compile(r"(?:sm|compute)_\d+[a-z]?\.dlink\.(?:cubin|reg\.c)|dlink\.fatbin\.c|dlink\.fatbin")


# --------------------------------------------------------------------------------------------
# The plan: `nvcc --dryrun -dlink`

@dataclass
class LinkPlan:
    env: dict[str, str]
    nvlinks: list[Step]     # one per SASS arch (`real`): outputs [cubin, reg.c]
    fatbin: Step            # outputs [fatbin.c]
    host: Step              # the link stub's host compile, writing the plan's output


def parse(text: str) -> LinkPlan:
    """The graph plan of `nvcc --dryrun -dlink` output, or `PlanShape` naming what is not recognised."""
    env, argvs = _nvcc_plan.plan_lines(text)
    nvlinks, fatbins, hosts = [], [], []
    for argv in argvs:
        base = os.path.basename(argv[0])
        if base == "nvlink":
            real = next((a.split("=", 1)[1] for a in argv if a.startswith("--arch=")), "")
            reg = next((a.split("=", 1)[1] for a in argv if a.startswith("--register-link-binaries=")), "")
            at = [i for i, a in enumerate(argv) if a in _INS]
            if not real or not _TMP.fullmatch(reg) or len(at) != 2 or at[1] != at[0] + 1:
                raise PlanShape("an nvlink step without an --arch, its register file and the link's inputs in a row")
            nvlinks.append(Step(kind="nvlink", argv=argv, real=real, outputs=[_nvcc_plan.option_value(argv, "-o"), reg]))
        elif base == "fatbinary" and "-link" in argv:
            images = [a.split("file=", 1)[1] for a in argv if a.startswith("--image3=")]
            emb = next((a.split("=", 1)[1] for a in argv if a.startswith("--embedded-fatbin=")), "")
            if not emb.endswith(".c"):
                raise PlanShape("a fatbinary step without its --embedded-fatbin")
            fatbins.append(Step(kind="fatbin", argv=argv, inputs=images, outputs=[emb]))
        elif is_host_cc(argv[0]) and "-c" in argv and _nvcc_plan.option_value(argv, "-o") == _OUT:
            hosts.append(Step(kind="host", argv=argv))
        else:
            raise PlanShape(f"an unknown step '{base}'")
    if not nvlinks or len(fatbins) != 1 or len(hosts) != 1:
        raise PlanShape("not nvlink per arch, one fatbinary and one host compile")
    written = [s.outputs[0] for s in nvlinks]
    if fatbins[0].inputs != written:
        raise PlanShape("the fatbinary step does not take the nvlink steps' images")
    host = " ".join(hosts[0].argv)
    if fatbins[0].outputs[0] not in host or nvlinks[0].outputs[1] not in host:
        raise PlanShape("the host compile does not include the fat binary and the register file")
    return LinkPlan(env=env, nvlinks=nvlinks, fatbin=fatbins[0], host=hosts[0])


def plan_for(env, o: dict, target=None, source=None) -> LinkPlan | None:
    return _nvcc_plan.dryrun(env, o, "$OFFLOAD_NVCC --dryrun -dlink -o " + _OUT + " $_OFFLOAD_NVCC_GENCODE "
                        "$_OFFLOAD_NVCC_DLINKFLAGS $_OFFLOAD_NVCC_HOSTFLAGS " + " ".join(_INS), parse,
                        "nvcc's device link is not split per arch", "one nvcc -dlink instead", target, source)


# --------------------------------------------------------------------------------------------
# The graph

def builders() -> dict:
    # Each step first checks the device code it takes (`_consume.with_device_check`): nvlink and
    # the one `nvcc -dlink` read the objects' relocatable device code, the fat binary step the
    # cubins nvlink wrote; none of them would say which input was damaged.
    # nvlink and `nvcc -dlink` run within the memory budget (`_memory`: OFFLOAD_LINK_MEMORY).
    def check(act, word):
        return _actions.budgeted(_consume.with_device_check(act), _memory.hold(word))
    return {
        "_OffloadNvccNvlink": builder(action=check(StepAction("OFFLOAD_NVCCNVLINKCOM",
                                                               cmdstr="$OFFLOAD_NVCCNVLINKCOMSTR"), "NVCC-NVLINK"),
                                      report_kind="device-link"),
        "_OffloadNvccDlinkSteps": builder(action=check(StepAction("_OFFLOAD_NVCCDLINKSTEPCOM",
                                                                   cmdstr="$OFFLOAD_NVCCDLINKCOMSTR"), "NVCC-DLINK"),
                                          report_kind="device-link"),
        "_OffloadNvccDlink": builder(action=check(SCons.Action.Action(
            "$OFFLOAD_NVCCDLINKCOM", "$OFFLOAD_NVCCDLINKCOMSTR", varlist=["_OFFLOAD_NVCC_ID"]), "NVCC-DLINK"),
                                     report_kind="device-link"),
    }


PSEUDO_BUILDERS: list = []


def _rdc_archs(nodes) -> list[str]:
    """The archs of the relocatable device code `nodes` carry (`offload_nvcc_rdc`), in order."""
    return list(dict.fromkeys(a for n in nodes for a in getattr(_nodes.marks(n), "offload_nvcc_rdc", None) or []))


def rdc_inputs(env, objs) -> list:
    """The link inputs nvcc's device link reads: nvcc objects and archives of relocatable device
    code (`offload_nvcc_rdc`), and objects and archives not built by the offload builders (nvlink
    passes over those without device code); none unless one input is known to be relocatable."""
    if not _rdc_archs(objs):
        return []
    suffixes = (env.subst("$OBJSUFFIX"), env.subst("$SHOBJSUFFIX"), env.subst("$LIBSUFFIX"))
    return [n for n in objs if getattr(_nodes.marks(n), "offload_nvcc_rdc", None)
            or (not getattr(_nodes.marks(n), "offload_lang", "") and str(n).endswith(suffixes))]


def carry(made, objs) -> None:
    """An archive of nvcc objects with relocatable device code is one too (its device link is the
    program's)."""
    archs = _rdc_archs(objs)
    if archs:
        for n in made:
            _nodes.marks(n).offload_nvcc_rdc = archs


def device_link(env, target, objs, kw, pic=False) -> list:
    """`[<target>.dlink.o]`, the device link of the link inputs `objs` that carry nvcc's
    relocatable device code, or [] when none does. Its archs: those the objects were built for."""
    inputs = rdc_inputs(env, objs)
    if not inputs:
        return []
    senv = settings(env, kw)
    archs = _rdc_archs(inputs)
    flavour = _flavours.NVCC_DEVICE_LINK
    o = dict(kw, _OFFLOAD_NVCC_ARCHS=archs, _OFFLOAD_LANG=flavour.language)
    if pic:
        pic_overrides(senv, o)
    d, name = target.dir, target.name
    out = d.File(name + ".dlink.o")
    plan = plan_for(senv, o, [out], inputs)
    flavour.mark([out])   # a CUDA link's input (its runtime, no OpenMP's)
    _nvcc_cleaning.clean_leftovers(env, [out], d, name + ".", _STEP_FILES)
    if plan is None:
        return list(env._OffloadNvccDlink(out, inputs, **o))
    step_env = _nvcc_steps.step_environment(senv, plan.env)
    nvcc_id = senv.subst("$_OFFLOAD_NVCC_ID")
    base = dict(o, ENV=step_env, _OFFLOAD_NVCC_PROGRAM=str(target).replace("$", "$$"))
    # File names relative to the top directory, where SCons runs commands, written into the
    # commands (quoted: any file name); the inputs as SCons's `$SOURCES` gives them.
    top = env.Dir("#")
    with _nvcc_plan.from_top(env):
        ins = [str(n) for n in inputs]

    def step(b, t, sources, cmd: str, sig: str | None = None, **more):
        return b(t, sources, _OFFLOAD_NVCC_STEP=cmd, _OFFLOAD_NVCC_STEPSIG=step_signature(sig or cmd, nvcc_id),
                 **more, **base)

    linked = []
    for st in plan.nvlinks:
        real = _archs.file_safe(st.real)
        cubin, regc = d.File(f"{name}.{real}.dlink.cubin"), d.File(f"{name}.{real}.dlink.reg.c")
        files = {_INS[0]: ins, _INS[1]: [], st.outputs[0]: _nodes.path(cubin, top), st.outputs[1]: _nodes.path(regc, top)}
        made = step(env._OffloadNvccNvlink, [cubin, regc], inputs, step_command(st, files), _OFFLOAD_NVCC_RARCH=st.real)
        linked.append(made)
    # fatbinary -link of the linked images, then the host compile of nvcc's link stub, which
    # includes the fat binary and the register file by the names given in -D options: the
    # command runs with their absolute paths, its signature holds them relative to the top.
    reg = linked[0][1]
    fatbin_c = d.File(name + ".dlink.fatbin.c")
    files = {tmp: _nodes.path(linked[i][0], top) for i, tmp in enumerate(plan.fatbin.inputs)}
    files[plan.fatbin.outputs[0]] = _nodes.path(fatbin_c, top)
    fatbin = step_command(plan.fatbin, files)
    emb, reg_tmp = plan.fatbin.outputs[0], plan.nvlinks[0].outputs[1]

    def host(path):
        return step_command(plan.host, {_OUT: _nodes.path(out, top), emb: path(fatbin_c), reg_tmp: path(reg)})

    # fatbinary also writes the fat binary itself beside the .c (nvcc removes it): removed too.
    cmd = " && ".join([fatbin, "rm -f " + step_word(_nodes.path(fatbin_c, top)[:-2]), host(lambda n: _nodes.abspath(n))])
    sig = " && ".join([fatbin, host(lambda n: _nodes.path(n, top))])
    made = step(env._OffloadNvccDlinkSteps, [out, fatbin_c], [m[0] for m in linked] + [reg], cmd, sig)
    return [made[0]]
