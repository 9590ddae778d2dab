"""The split graph: the nodes of one source's compile along nvcc's plan (`split_object`), each
step's command line with nvcc's temporaries renamed to the nodes' files (`step_command`) and its
signature (`step_signature`). The files between the steps are judged by timestamp, then content,
as every file the tool's builders write is (`common.builder`): with SCons's default decider every
null build would hash the megabytes of preprocessed text per source and arch again. Shared with
nvcc's device link (`device_link`)."""

from __future__ import annotations

import os
import re
import shlex

from ...scons import nodes as _nodes
from ..protocol import Parts
from ..common import stem
from .arch_list import ARCH_LIST_DEF, rerun_if_list_used
from .builders import cubin_name
from .plan import PLAN_OUT, PLAN_SRC, Plan, Step, option_value


def step_command(step: Step, files: dict, src: str = "", srcabs: str = "") -> str:
    """The step's command line for SCons: nvcc's temporaries replaced by the nodes' files
    (`files`: a temporary, or its base name where nvcc gives one for an `#include`, -> a file
    name, or a list of names for an argument that stands for several; in part of an argument
    too), the plan's source by `src` (`--orig_src_path_name` by `srcabs`, as nvcc writes it);
    each argument quoted for the shell, with `$` escaped for SCons, so that the step gets the
    words nvcc would give it whatever the file names hold."""
    parts, prev = [], ""
    partial = sorted((k for k, v in files.items() if isinstance(v, str) and k not in (PLAN_SRC, PLAN_OUT)),
                     key=len, reverse=True)
    for raw in step.argv:
        a = raw
        if a == PLAN_SRC and src:
            parts.append(step_word(srcabs if prev == "--orig_src_path_name" and srcabs else src))
        elif a in files:
            v = files[a]
            parts.extend(step_word(x) for x in ([v] if isinstance(v, str) else v))
        elif a.startswith(ARCH_LIST_DEF):
            parts.append(f"$( {step_word(a)} $)")     # in the signature only where used (see `_arch_list_use`)
        else:
            for tmp in partial:
                a = a.replace(tmp, files[tmp])
            parts.append(step_word(a))
        prev = raw
    return " ".join(parts)


def step_word(arg: str) -> str:
    """One argument on a step's command line: quoted for the shell, `$` escaped for SCons."""
    return shlex.quote(arg).replace("$", "$$")


def step_signature(cmd: str, nvcc_id: str) -> str:
    return re.sub(r"(?<!\$)\$\( \S+ \$\)", "", cmd) + "\0" + nvcc_id


def _out(step: Step) -> str:
    return step.argv[step.argv.index("-o") + 1]


def step_environment(senv, plan_env: dict[str, str]) -> dict:
    """The build's `ENV` with what nvcc sets for its own steps (`plan_env`, from `--dryrun`): the
    search paths of its tools and of `cicc`'s libdevice."""
    out = dict(senv["ENV"])
    out.update({k: plan_env[k] for k in ("PATH", "LD_LIBRARY_PATH", "NVVMIR_LIBRARY_DIR", "CICC_PATH") if k in plan_env})
    return out


def split_object(env, senv, s, fat, o: dict, plan: Plan) -> list:
    """The nodes of one source's compile along nvcc's plan; the object node returned. The parts
    are on the object as `offload_parts` (`Parts`: host: the host compile, devices: {arch: cubin or
    PTX}, package: the fat binary).

    Nodes: the front end (host preprocess + `cudafe++`); per virtual arch the device preprocess
    apart from `cicc` + `ptxas` (one node: nothing between them is reused), so a change that
    leaves the preprocessed text alone (a host-only flag) stops before `cicc`. The stub `cudafe++` names for the host compile is
    `<stem>.cudafe1.stub.c` whatever the archs (the host step copies the stub of the arch nvcc
    would include there), so adding an arch does not change the front end's command."""
    step_env = step_environment(senv, plan.env)
    # Paths relative to the top directory, where SCons runs commands (a node's plain `get_path()`
    # is relative to the SConscript being read), written into the commands (quoted: any file
    # name). The source is read as it is in the source tree (a variant directory with
    # `duplicate=0` has no copy of it), as SCons's `$SOURCE` gives it.
    top = env.Dir("#")
    src, srcabs = _nodes.path(s.srcnode(), top), _nodes.abspath(s.srcnode())

    folder = _nodes.path(fat.dir, top)
    folder = "" if folder == "." else folder + os.sep

    def path(suffix: str) -> str:
        return folder + stem(fat) + suffix

    def command(st: Step, files: dict, sign: bool = False) -> str:
        # nvcc gives cudafe++ and cicc the source's absolute path (`--orig_src_path_name`), and
        # so do the steps here: the module ID they write is a hash of it, as in `nvcc -c`. A
        # step's signature (`sign`) names the source relative to the top, as it names every
        # other file: a moved tree or a second clone signs its steps as this one does, so they
        # are up to date or taken from a `CacheDir`, and keep the module ID of where they were
        # first built (as the one `nvcc -c`'s object does under SCons), unique per source still.
        return step_command(st, files, src, "" if sign else srcabs)

    base = dict(o, ENV=step_env, _OFFLOAD_NVCC_SRC=src.replace("$", "$$"))
    nvcc_id = senv.subst("$_OFFLOAD_NVCC_ID")

    def step(b, sources, cmd: str, sig: str | None = None, **kw):
        return b(fat, sources, _OFFLOAD_NVCC_STEP=cmd, _OFFLOAD_NVCC_STEPSIG=step_signature(sig or cmd, nvcc_id),
                 **kw, **base)
    node_of: dict[str, object] = {}  # role -> node
    fe_step = next(st for st in plan.steps if st.kind == "fe")
    host_pp = next(st for st in plan.steps if st.kind == "host_pp")
    fatbin_step = next(st for st in plan.steps if st.kind == "fatbin")
    host_step = next(st for st in plan.steps if st.kind == "host")

    # Front end: host preprocess (its text a temporary of this node), then cudafe++.
    fatbin_c_name = f"{stem(fat)}.fatbin.c"
    arch_list = next((a[len(ARCH_LIST_DEF):] for a in host_pp.argv if a.startswith(ARCH_LIST_DEF)), "")
    base["_OFFLOAD_NVCC_ARCHLIST"] = arch_list
    ii = path(".cpp4.ii")
    fe_files = {fe_step.argv[-1]: ii,
                option_value(fe_step.argv, "--gen_c_file_name"): path(".cudafe1.cpp"),
                option_value(fe_step.argv, "--module_id_file_name"): path(".module_id"),
                os.path.basename(fe_step.stub): f"{stem(fat)}.cudafe1.stub.c"}
    cmd, sig = (command(host_pp, {_out(host_pp): ii}, sign) + " && " + command(fe_step, fe_files, sign)
                for sign in (False, True))
    fe = step(env._OffloadNvccFrontEnd, s, cmd, sig, _OFFLOAD_NVCC_II=os.path.join(_nodes.abspath(top), ii),
              _OFFLOAD_NVCC_II_TEMP=True)
    rerun_if_list_used(env, fe, arch_list)
    node_of.update({"cudafe1.cpp": fe[0], "module_id": fe[1]})

    # Per virtual arch: preprocess, then cicc and the ptxas of each of its SASS archs.
    devices = {}
    for st in plan.steps:
        if st.kind == "pp":
            v = st.virtual
            pp = step(env._OffloadNvccPreprocess, s, command(st, {_out(st): path(f".{v}.cpp1.ii")}),
                      _OFFLOAD_NVCC_VARCH=v, _OFFLOAD_NVCC_II=os.path.join(_nodes.abspath(top), path(f".{v}.cpp1.ii")))
            rerun_if_list_used(env, pp, arch_list)
            node_of[f"ii.{v}"] = pp[0]
        elif st.kind == "cicc":
            v = st.virtual
            ptx = path(f".{v}.ptx")
            files = {st.argv[st.argv.index("-o") - 1]: path(f".{v}.cpp1.ii"),
                     option_value(st.argv, "--module_id_file_name"): path(".module_id"),
                     _out(st): ptx,
                     option_value(st.argv, "--gen_c_file_name"): ptx + ".cudafe1.c",
                     option_value(st.argv, "--stub_file_name"): path(f".{v}.cudafe1.stub.c"),
                     option_value(st.argv, "--gen_device_file_name"): ptx + ".cudafe1.gpu",
                     os.path.basename(st.fatbin_c): fatbin_c_name}
            # cicc's own C and device files are read by no later step: removed, as nvcc does.
            cmds = [command(st, files), f"rm -f {step_word(ptx + '.cudafe1.c')} {step_word(ptx + '.cudafe1.gpu')}"]
            ptxas = [p for p in plan.steps if p.kind == "ptxas" and p.virtual == v]
            for p in ptxas:
                cmds.append(command(p, {_out(st): ptx, _out(p): path(cubin_name(v, p.real))}))
            cmds.extend(command(p, {_out(st): ptx}) for p in plan.steps if p.kind == "ptxas_check" and p.virtual == v)
            sig = " && ".join([command(st, files, sign=True)] + cmds[1:])
            made = step(env._OffloadNvccDevice, [node_of[f"ii.{v}"], node_of["module_id"]], " && ".join(cmds), sig,
                        _OFFLOAD_NVCC_VARCH=v, _OFFLOAD_NVCC_RARCHS=[p.real for p in ptxas])
            node_of.update({f"ptx.{v}": made[0], f"stub.{v}": made[1]})
            for i, p in enumerate(ptxas):
                node_of[p.outputs[0]] = made[2 + i]
                devices[p.real] = made[2 + i]

    images, files = [], {}
    for a in fatbin_step.argv:
        if a.startswith("--image3="):
            tmp = a.split("file=", 1)[1]
            role = _role_of(plan, tmp)
            files[tmp] = _nodes.path(node_of[role], top)
            images.append(node_of[role])
            if role.startswith("ptx."):
                devices.setdefault(role.split(".", 1)[1], node_of[role])
    emb = next(a.split("=", 1)[1] for a in fatbin_step.argv if a.startswith("--embedded-fatbin="))
    files[emb] = path(".fatbin.c")
    fatbin = step(env._OffloadNvccFatbinary, images, command(fatbin_step, files))

    # Host compile: the stub nvcc would include copied to the name cudafe++ wrote into the
    # .cudafe1.cpp, then nvcc's host compile of it (the stub includes the .fatbin.c).
    hfiles = {host_step.argv[host_step.argv.index("-o") - 1]: path(".cudafe1.cpp"), PLAN_OUT: _nodes.path(fat, top)}
    stub = path(f".{plan.host_stub_arch}.cudafe1.stub.c")
    cmd = f"cp -f {step_word(stub)} {step_word(path('.cudafe1.stub.c'))} && " + command(host_step, hfiles)
    made = step(env._OffloadNvccHost, [node_of["cudafe1.cpp"], node_of[f"stub.{plan.host_stub_arch}"], fatbin[0]], cmd)
    obj = made[0]
    _nodes.marks(obj).offload_parts = Parts(host=obj, devices=devices, package=fatbin[0])
    return [obj]


def _role_of(plan: Plan, tmp: str) -> str:
    for st in plan.steps:
        if st.kind in ("ptxas", "cicc") and _out(st) == tmp:
            return st.outputs[0]
    raise KeyError(tmp)
