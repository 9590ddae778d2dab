"""nvcc's plan: the steps `nvcc --dryrun` shows for a compile (`plan_for`, `parse`) or another
mode (`dryrun`, `plan_lines`, for the device link), read once per distinct command line, with
nvcc's temporary files as roles; None, with a one-line note, where the plan cannot be split
(another shape, nvcc failing, an `$OFFLOAD_NVCC` that is not nvcc itself)."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass, field

from ...scons import nodes as _nodes
from .shell_words import _NotSimple, sh_words, shell_words
from .variants import refuse_unbuilt_variants


PLAN_SRC = "offload_nvcc_plan_src.cu"
PLAN_OUT = "offload_nvcc_plan_out.o"
def temporaries(stem: str):
    """nvcc's temporary files of a plan whose source or output is named `<stem>.*`."""
    return re.compile(r"(?:/[^\s\"]*/)?tmpxft_[0-9a-f]+_[0-9a-f]+-\d+_" + stem + r"\.[A-Za-z0-9_.]+")


_TMP = temporaries("offload_nvcc_plan_src")


@dataclass
class Step:
    """One command of nvcc's plan: the program, its arguments, and the roles of the files it
    reads and writes (`argv` holds `{role}` where a temporary file name was)."""
    kind: str
    argv: list[str]
    inputs: list[str] = field(default_factory=list)
    outputs: list[str] = field(default_factory=list)
    virtual: str = ""   # compute_NN for device preprocess/cicc; sm_NN for ptxas (`real`)
    real: str = ""
    stub: str = ""      # the front end's `--stub_file_name` (the stub the host compile includes)
    fatbin_c: str = ""  # cicc's `--include_file_name` (the fat binary's C file its stub includes)
    side: str | None = None  # the fatbinary's `--embedded-fatbin` file without `.c` (None: no `.c`)


@dataclass
class Plan:
    env: dict[str, str]
    steps: list[Step]
    host_stub_arch: str       # the arch whose cicc writes the stub the host compile includes


_plans: dict[str, Plan | None] = {}
_noted: set[str] = set()


def is_host_cc(prog: str) -> bool:
    base = os.path.basename(prog)
    return bool(re.fullmatch(r"(?:.*-)?(?:gcc|g\+\+|c\+\+|cc|clang|clang\+\+|icpx|icx)(?:-\d+)?", base))


class PlanShape(Exception):
    """The plan has a step this module does not know how to place in the graph."""


def parse(text: str) -> Plan:
    """The graph plan of `nvcc --dryrun -c` output, or `PlanShape` naming what is not recognised."""
    env, argvs = plan_lines(text)
    steps: list[Step] = []
    roles: dict[str, str] = {}          # temporary file -> role
    preprocessed: dict[str, Step] = {}  # role of a device preprocess's text no cicc has read yet -> its step

    def out(tmp: str, role: str) -> str:
        roles[tmp] = role
        return role

    def inp(tmp: str) -> str:
        if tmp not in roles:
            raise PlanShape(f"a step reads '{os.path.basename(tmp)}' that no earlier step wrote")
        return roles[tmp]

    for argv in argvs:
        prog = argv[0]
        base = os.path.basename(prog)
        tmps = [t for a in argv for t in _TMP.findall(a)]
        step = Step(kind="", argv=argv)
        if is_host_cc(prog) and "-E" in argv:
            arch = next((a.split("=", 1)[1] for a in argv if a.startswith("-D__CUDA_ARCH__=")), None)
            if arch:
                # `__CUDA_ARCH__` is the arch's number only (900 for compute_90, compute_90a and
                # compute_90f alike): the cicc step that reads this text names its virtual arch.
                step.kind, step.virtual = "pp", f"compute_{arch[:-1]}"
                step.outputs = [out(argv[argv.index("-o") + 1], f"ii.{len(steps)}")]
                preprocessed[step.outputs[0]] = step
            else:
                step.kind = "host_pp"
                step.outputs = [out(argv[argv.index("-o") + 1], "ii.host")]
        elif base == "cudafe++":
            step.kind = "fe"
            step.inputs = [inp(argv[-1])]
            step.outputs = [out(option_value(argv, "--gen_c_file_name"), "cudafe1.cpp"),
                            out(option_value(argv, "--module_id_file_name"), "module_id")]
            step.stub = option_value(argv, "--stub_file_name")
        elif base == "cicc":
            v = option_value(argv, "-arch")
            step.kind, step.virtual = "cicc", v
            step.inputs = [_claim(preprocessed, roles, inp(argv[argv.index("-o") - 1]), argv[argv.index("-o") - 1], v),
                           inp(option_value(argv, "--module_id_file_name"))]
            step.outputs = [out(argv[argv.index("-o") + 1], f"ptx.{v}"),
                            out(option_value(argv, "--gen_c_file_name"), f"cudafe1.c.{v}"),
                            out(option_value(argv, "--stub_file_name"), f"stub.{v}"),
                            out(option_value(argv, "--gen_device_file_name"), f"gpu.{v}")]
            step.fatbin_c = option_value(argv, "--include_file_name")
        elif base == "ptxas" and "-o" not in argv:
            # PTX only (`code=compute_NN`): nvcc assembles the PTX to check it, keeping nothing.
            if len(tmps) != 1:
                raise PlanShape("a ptxas check without one input")
            step.kind = "ptxas_check"
            step.inputs = [inp(tmps[0])]
            step.virtual = step.inputs[0].split(".", 1)[1]
        elif base == "ptxas":
            real = next((a.split("=", 1)[1] for a in argv if a.startswith("-arch=")))
            src = [t for t in tmps if t != argv[argv.index("-o") + 1]]
            if len(src) != 1 or not real:
                raise PlanShape("a ptxas step without one input and an -arch")
            step.kind, step.real = "ptxas", real
            step.inputs = [inp(src[0])]
            step.virtual = step.inputs[0].split(".", 1)[1]
            step.outputs = [out(argv[argv.index("-o") + 1], f"cubin.{step.virtual}.{real}")]
        elif base == "fatbinary":
            step.kind = "fatbin"
            for a in argv:
                if a.startswith("--image3="):
                    f = a.split("file=", 1)[1]
                    step.inputs.append(inp(f))
            emb = next(a.split("=", 1)[1] for a in argv if a.startswith("--embedded-fatbin="))
            step.outputs = [out(emb, "fatbin.c")]
            step.side = emb[:-2] if emb.endswith(".c") else None
        elif is_host_cc(prog) and "-c" in argv:
            step.kind = "host"
            step.inputs = [inp(argv[argv.index("-o") - 1])]
            if argv[argv.index("-o") + 1] != PLAN_OUT:
                raise PlanShape("the host compile does not write the object")
        else:
            raise PlanShape(f"an unknown step '{base}'")
        steps.append(step)
    if preprocessed:
        raise PlanShape("a device preprocess whose text no cicc step reads")
    kinds = [s.kind for s in steps]
    if kinds.count("fe") != 1 or kinds.count("host_pp") != 1 or kinds.count("fatbin") != 1 \
            or kinds.count("host") != 1 or kinds[-1] != "host" or "cicc" not in kinds:
        raise PlanShape("not one front end, fat binary and host compile around per-arch device steps")
    fe = steps[kinds.index("fe")]
    stub_owner = [s.virtual for s in steps if s.kind == "cicc"
                  and os.path.basename(option_value(s.argv, "--stub_file_name")) == os.path.basename(fe.stub)]
    if len(stub_owner) != 1:
        raise PlanShape("no cicc step writes the stub the host compile includes")
    if len({s.virtual for s in steps if s.kind == "cicc"}) != kinds.count("cicc"):
        raise PlanShape("two cicc steps for one virtual arch")
    return Plan(env=env, steps=steps, host_stub_arch=stub_owner[0])


def _claim(preprocessed: dict[str, Step], roles: dict[str, str], role: str, tmp: str, virtual: str) -> str:
    """The role `ii.<virtual>` of the device preprocess whose text (`role`, in `tmp`) the cicc
    step of `virtual` reads, now named after that arch. The preprocess knows only the arch's
    number (`-D__CUDA_ARCH__=900`), the same for `compute_90`, the arch-specific `compute_90a`
    and the family `compute_90f`; cicc's `-arch` tells them apart, so that each has files and a
    node of its own (`x.compute_90a.cpp1.ii`) when one source is built for several of them."""
    pp = preprocessed.pop(role, None)
    if pp is None:
        raise PlanShape("a cicc step that reads no device preprocess's text")
    m = re.fullmatch(r"compute_(\d+)[a-z]?", virtual)
    if not m or pp.virtual != f"compute_{m.group(1)}":
        raise PlanShape(f"cicc -arch {virtual} reads the text preprocessed for {pp.virtual}")
    pp.virtual = virtual
    roles[tmp] = pp.outputs[0] = f"ii.{virtual}"
    return roles[tmp]


def option_value(argv: list[str], name: str) -> str:
    try:
        return argv[argv.index(name) + 1]
    except (ValueError, IndexError):
        raise PlanShape(f"a step without {name}") from None


def split_wanted(env) -> bool:
    """Whether nvcc's steps become nodes: `OFFLOAD_NVCC_SPLIT` (default True) and no compiler
    launcher (`OFFLOAD_LAUNCHER`: ccache, sccache and distcc take whole nvcc compiles; sccache
    splits them itself)."""
    return bool(env.get("OFFLOAD_NVCC_SPLIT", True)) and not env.subst("$OFFLOAD_LAUNCHER").strip()


def plan_for(env, o: dict, target=None, source=None) -> Plan | None:
    """nvcc's plan for the compile of `source` into `target` with overrides `o` (memoized per
    command line), or None with a one-line note when it cannot be split; None, silently, when
    the split is not wanted (`split_wanted`). An arch variant nvcc does not build is refused
    first, whether split or not (`refuse_unbuilt_variants`)."""
    refuse_unbuilt_variants(env, o, source)
    return dryrun(env, o, "$OFFLOAD_NVCC --dryrun -c -o " + PLAN_OUT + " $_OFFLOAD_NVCC_GENCODE $OFFLOAD_NVCCFLAGS "
                  "$_OFFLOAD_NVCC_HOSTFLAGS $_OFFLOAD_NVCC_CPPFLAGS " + PLAN_SRC, parse,
                  "nvcc's plan is not split per arch", "one nvcc -c per source instead", target, source)


#: Within it, node names are relative to the top directory (`scons.nodes.from_top`).
from_top = _nodes.from_top


def dryrun(env, o: dict, template: str, parser, what: str, instead: str, target=None, source=None):
    """`parser` of the `--dryrun` output of `template` (substituted with overrides `o` for
    `target` and `source`, every variable as SCons expands it for their command, and run with the
    words the shell would give nvcc), memoized per command line; None when the split is not
    wanted, or with a one-line note (`what` (why): `instead`) when nvcc fails or `parser` does not
    recognise the plan's shape, or once per build when `$OFFLOAD_NVCC` is not nvcc itself
    (`_not_nvcc`)."""
    if not split_wanted(env):
        return None
    from ...toolchain import discovery as _toolchain
    oenv = _nodes.override(env, dict(o, _OFFLOAD_LAUNCH=""))
    with from_top(env, target):
        argv = shell_words(oenv, template, target, source)
    penv = _toolchain.build_env(env)
    key = "\0".join(argv + [penv.get("PATH", "")])
    if key not in _plans:
        why = None
        try:
            run = subprocess.run(argv, capture_output=True, text=True, timeout=60, cwd=_nodes.abspath(env.Dir("#")),
                                 env=penv)
            _plans[key] = parser(run.stdout + run.stderr) if run.returncode == 0 else None
            if run.returncode:
                why = "nvcc --dryrun failed"
            elif _not_nvcc(env, argv[0], _plans[key].env):
                _plans[key] = None
        except (OSError, subprocess.SubprocessError, ValueError) as exc:
            _plans[key], why = None, f"nvcc --dryrun did not run ({exc})"
        except PlanShape as exc:
            _plans[key], why = None, str(exc)
        if why and key not in _noted:
            _noted.add(key)
            sys.stderr.write(f"offload: note: {what} ({why}): {instead}\n")
    return _plans[key]


def _not_nvcc(env, program: str, plan_env: dict[str, str]) -> bool:
    """Whether `program` (the first word of `$OFFLOAD_NVCC`) is something else than the nvcc whose
    plan it gave (a site script, a logging shim): nvcc's split steps run its programs from its own
    folder and would go around it, so it takes whole compiles and device links; noted once per
    build. nvcc says where it is (`_HERE_` in its plan); a link to it is it, and so is a script
    that does nothing but `exec` it with its own arguments (as some installs put on PATH)."""
    from ...toolchain import discovery as _toolchain
    here = plan_env.get("_HERE_")
    if not here:
        raise PlanShape("the plan does not say where nvcc is (_HERE_)")
    path = _toolchain.resolve(env, program)
    nvcc = os.path.join(here, "nvcc")
    if path and (_same_file(path, nvcc) or _only_execs(path, nvcc)):
        return False
    if ("wrapper", program) not in _noted:
        _noted.add(("wrapper", program))
        sys.stderr.write(f"offload: note: OFFLOAD_NVCC '{program}' is not nvcc itself ({nvcc}), whose split steps "
                         "would go around it: one nvcc -c per source (and one nvcc -dlink per device link) through "
                         "it instead\n")
    return True


def _same_file(a: str, b: str) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


_SHELL_LINE = re.compile(r"#!\s*(?:\S*/)?(?:env\s+)?(?:ba|da|k|z)?sh\s*")


def _only_execs(path: str, nvcc: str) -> bool:
    """Whether `path` is a shell script whose one command is `exec <nvcc> "$@"`."""
    try:
        with open(path, "rb") as f:
            text = f.read(4097).decode("utf-8")
    except (OSError, UnicodeDecodeError):
        return False
    lines = text.splitlines()
    if len(text) > 4096 or not lines or not _SHELL_LINE.fullmatch(lines[0]):
        return False
    commands = [ln.strip() for ln in lines[1:] if ln.strip() and not ln.strip().startswith("#")]
    try:
        words = shlex.split(commands[0]) if len(commands) == 1 else []
    except ValueError:
        return False
    return len(words) == 3 and words[0] == "exec" and words[2] == "$@" and os.path.isabs(words[1]) \
        and _same_file(words[1], nvcc)


def plan_lines(text: str):
    """The `#$ ` lines of a `--dryrun`: (the variables it sets, the argv of each command but `rm`),
    each line read as the shell nvcc runs it with reads it."""
    env: dict[str, str] = {}
    argvs = []
    for line in text.splitlines():
        if not line.startswith("#$ "):
            continue
        raw = line[3:].strip()
        m = re.match(r"([A-Za-z_]\w*)=(.*)$", raw)
        if m:
            try:
                value = sh_words(m.group(2), env)
            except _NotSimple:
                value = None
            env[m.group(1)] = value[0] if value and len(value) == 1 else "" if value == [] else m.group(2).strip()
            continue
        try:
            argv = sh_words(raw, env)
        except _NotSimple as exc:
            raise PlanShape(f"a step that is not a simple command ({exc})") from None
        if argv and os.path.basename(argv[0]) != "rm":
            argvs.append(argv)
    return env, argvs
