"""nvcc on the per-arch graph: a `.cu` source built with `OFFLOAD_CUDA_COMPILER='nvcc'` becomes
the sub-steps nvcc itself runs, as nodes:

    <stem>.cu --NVCC-FE-->          <stem>.cudafe1.cpp, <stem>.module_id  (gcc -E, then cudafe++)
    <stem>.cu --NVCC-PP compute_NN--> <stem>.compute_NN.cpp1.ii          (device preprocess, per arch)
    .cpp1.ii + .module_id --NVCC-DEVICE compute_NN--> <stem>.compute_NN.ptx, <stem>.sm_NN.cubin
                                                                         (cicc, then ptxas per SASS arch)
    cubins + PTX --NVCC-FATBIN--> <stem>.fatbin.c                        (fatbinary)
    .cudafe1.cpp + stub + .fatbin.c --NVCC-HOST--> <stem>.o               (host compile)

The steps are not hard-coded: they come from `nvcc --dryrun` with the same flags and `-gencode`
list (as sccache splits nvcc), read once per distinct command line. Each node's command is the
one nvcc would run, with nvcc's temporary files renamed to the nodes' files, so each node's
signature holds exactly the flags that step gets (a host-only flag change reruns no `cicc` or
`ptxas`; the device preprocess reruns, and its unchanged output stops the rebuild there) and the
object equals the one `nvcc -c` makes. A plan of another shape (another CUDA release, a flag
that adds steps) falls back to the one-action compile with a one-line note, as does an
`$OFFLOAD_NVCC` that is not nvcc itself (a script around it: `_not_nvcc`). On by default
(`OFFLOAD_NVCC_SPLIT`); objects of relocatable device code (`-rdc=true`) are marked (`mark`)
for the device link of the links that take them (`_nvcc_link`).

Adding an arch changes `__CUDA_ARCH_LIST__`, which every preprocess gets; only a text whose
files name it depends on it (CUB and Thrust put it in their namespace names), so each preprocess
records whether it did (see `_arch_list_use`) and reruns on a list change only then."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass, field

import SCons.Action
import SCons.Errors
import SCons.Script

from offload_tool.rules import offload_arch

from .. import consume as _consume
from ...scons import actions as _actions
from ...scons import nodes as _nodes
from ..protocol import Parts
from ..common import builder, names_when_cleaning, stem
from ...toolchain import installations as _installations

_PLAN_SRC = "offload_nvcc_plan_src.cu"
_PLAN_OUT = "offload_nvcc_plan_out.o"
def temporaries(stem: str):
    """nvcc's temporary files of a plan whose source or output is named `<stem>.*`."""
    return re.compile(r"(?:/[^\s\"]*/)?tmpxft_[0-9a-f]+_[0-9a-f]+-\d+_" + stem + r"\.[A-Za-z0-9_.]+")


_TMP = temporaries("offload_nvcc_plan_src")

COMMANDS = {
    "_OFFLOAD_NVCCSTEPCOM": "$_OFFLOAD_NVCC_STEP",
    # compile_commands.json: the nvcc compile as a clang CUDA command clangd reads.
    "OFFLOAD_NVCCDBCOM": "clang++ -x cuda $_OFFLOAD_NVCCDB_FLAGS -c -o $TARGET $CCFLAGS $CXXFLAGS $OFFLOAD_HOSTFLAGS "
                         "$_CCCOMCOM $SOURCE",
}

COMSTRS = {
    "OFFLOAD_NVCCFECOMSTR": "NVCC-FE ${_OFFLOAD_NVCC_SRC}",
    "OFFLOAD_NVCCPPCOMSTR": "NVCC-PP ${_OFFLOAD_NVCC_VARCH} ${_OFFLOAD_NVCC_SRC}",
    "OFFLOAD_NVCCDEVICECOMSTR": "NVCC-DEVICE ${_OFFLOAD_NVCC_VARCH} ${_OFFLOAD_NVCC_SRC}",
    "OFFLOAD_NVCCFATBINCOMSTR": "NVCC-FATBIN ${TARGET}",
    "OFFLOAD_NVCCHOSTCOMSTR": "NVCC-HOST ${TARGET}",
}


# --------------------------------------------------------------------------------------------
# Words: what the shell gives a program, and how nvcc must be given them
#
# SCons hands each command line to the shell, so a compiler gets the words the shell makes of
# it (`CPPDEFINES=[('VERSION', '\\"1.0\\"')]` reaches g++ as `-DVERSION="1.0"`). nvcc gets the
# same words here, and they reach its steps unchanged: nvcc splits the value of a list option
# (`-D`, `-U`, `-Xcompiler`) at commas and takes a backslash as an escape in it, and runs each
# step as a shell line with a `-D` value and a file name inside double quotes (where `$` and
# backquotes expand) and an `-Xcompiler` value bare. Its own `-I`/`-isystem`/`-include`
# quoting holds (a comma, a quote in such a folder name it cannot pass: nvcc's limit).

class _NotSimple(Exception):
    """A shell line this module does not evaluate (a command substitution, an operator)."""


_SPECIAL_PARAMS = set("@*#?-$!")
_EXPANSION = re.compile(r"\$(?:\{([A-Za-z_]\w*)\}|([A-Za-z_]\w*)|(\d))")


def _expansion(line: str, i: int, variables: dict) -> tuple[str, int]:
    """The value of the `$` expansion at `line[i]`, and where the line goes on."""
    m = _EXPANSION.match(line, i)
    if m:
        name = m.group(1) or m.group(2)
        return (variables.get(name, "") if name else ""), m.end()
    nxt = line[i + 1:i + 2]
    if nxt in ("(", "{") or nxt in _SPECIAL_PARAMS:
        raise _NotSimple(f"'${nxt}'")
    return "$", i + 1


def sh_words(line: str, variables: dict, operators: bool = True) -> list[str]:
    """The words a POSIX shell makes of the simple command `line` (quotes removed, `$NAME` and
    `${NAME}` expanded from `variables`, split at blanks outside double quotes; no globbing), or
    `_NotSimple` for what only a shell does (a command substitution, a special parameter; an
    unquoted operator unless `operators` is False, which takes operators as plain characters)."""
    words: list[str] = []
    cur: list[str] | None = None          # the word being made (None: between words)
    i, n = 0, len(line)
    while i < n:
        c = line[i]
        if c in " \t\n":
            if cur is not None:
                words.append("".join(cur))
                cur = None
            i += 1
        elif c == "$":
            # Unquoted: the value split at blanks; an empty one makes no word.
            value, i = _expansion(line, i, variables)
            for k, piece in enumerate(re.split(r"[ \t\n]+", value) if value else []):
                if k and cur is not None:
                    words.append("".join(cur))
                    cur = None
                if piece:
                    cur = (cur or []) + [piece]
        elif c == "#" and cur is None:
            break
        elif c == "`":
            raise _NotSimple("a command substitution")
        elif operators and c in ";&|<>()":
            raise _NotSimple(f"the operator '{c}'")
        else:
            cur = [] if cur is None else cur
            if c == "\\":
                if line[i + 1:i + 2] not in ("", "\n"):
                    cur.append(line[i + 1])
                i += 2
            elif c == "'":
                j = line.find("'", i + 1)
                if j < 0:
                    raise _NotSimple("an unterminated quote")
                cur.append(line[i + 1:j])
                i = j + 1
            elif c == '"':
                i = _double_quoted(line, i + 1, variables, cur)
            else:
                cur.append(c)
                i += 1
    if cur is not None:
        words.append("".join(cur))
    return words


def _double_quoted(line: str, i: int, variables: dict, cur: list[str]) -> int:
    """Read the double-quoted text from `line[i]` (after the quote) into `cur`; where it ends."""
    n = len(line)
    while i < n:
        c = line[i]
        if c == '"':
            return i + 1
        if c == "\\" and line[i + 1:i + 2] in ("$", "`", '"', "\\", "\n"):
            if line[i + 1] != "\n":
                cur.append(line[i + 1])
            i += 2
        elif c == "`":
            raise _NotSimple("a command substitution")
        elif c == "$":
            value, i = _expansion(line, i, variables)
            cur.append(value)
        else:
            cur.append(c)
            i += 1
    raise _NotSimple("an unterminated quote")


_words: dict = {}


def shell_words(env, template: str, target=None, source=None, for_signature: bool = False) -> list[str]:
    """The words a program gets when SCons runs `template` (substituted for `target`/`source`):
    SCons's own escaping of each word, then the shell's reading of the line, with the build's
    `ENV`. A line that needs a shell (a command substitution) is read by one, except for a
    signature, which takes it as SCons wrote it."""
    from ...toolchain import discovery as _toolchain
    lines = _actions.command_lines(env, template, target, source, for_signature)
    line = " ".join(" ".join(map(str, _actions.escaped(words, env))) for words in lines)
    if not any(c in line for c in "$`\\'\""):
        return line.split()
    penv = _toolchain.build_env(env) if "$" in line else {}
    key = (line, for_signature, tuple(sorted(penv.items())))
    if key not in _words:
        try:
            _words[key] = sh_words(line, penv, operators=False)
        except _NotSimple:
            if for_signature:
                _words[key] = line.split()
            else:
                run = subprocess.run(["/bin/sh", "-c", 'printf "%s\\0" ' + line], capture_output=True,
                                     env=_toolchain.build_env(env), timeout=60)
                _words[key] = run.stdout.decode("utf-8", "surrogateescape").split("\0")[:-1]
    return list(_words[key])


def _in_quotes(v: str) -> str:
    """`v` written so that a shell's double quotes give it back."""
    return v.replace("\\", "\\\\").replace("$", "\\$").replace("`", "\\`")


def _list_value(v: str) -> str:
    """`v` as one value of an nvcc option that takes a comma-separated list."""
    return v.replace("\\", "\\\\").replace(",", "\\,").replace('"', '\\"')


def nvcc_file(path: str) -> str:
    """A file name as nvcc takes it (it puts it in double quotes on its steps' lines)."""
    return _in_quotes(path)


def nvcc_host_flag(flag: str) -> str:
    """A host compiler flag as nvcc takes it: `-Xcompiler=<flag>`, the flag one value of the list
    and quoted for the shell line nvcc puts it on bare (`-Wl,-rpath,x`, `-DNAME="a b"`)."""
    return "-Xcompiler=" + _list_value(shlex.quote(flag))


_MACRO = re.compile(r"(-D|-U|--define-macro=|--undefine-macro=)(.*)", re.S)


def nvcc_preprocessor_words(words: list[str]) -> list[str]:
    """Preprocessor options (`$_CCCOMCOM`'s) as nvcc takes them: a macro's definition one value
    of `-D`'s list, written for the double quotes nvcc puts it in; the others as they are."""
    out = []
    value_next = False
    for w in words:
        if value_next:
            out.append(_list_value(_in_quotes(w)))
            value_next = False
        elif w in ("-D", "-U", "--define-macro", "--undefine-macro"):
            out.append(w)
            value_next = True
        else:
            m = _MACRO.fullmatch(w)
            out.append(m.group(1) + _list_value(_in_quotes(m.group(2))) if m else w)
    return out


_SHELL_SPECIAL = set(" \t\n\"'\\$`;&|<>()*?[]{}~#!")


def command_words(words) -> list:
    """Words for a callable construction variable to put on a command line so that the shell
    gives them back as they are: a word without a blank quoted here (SCons leaves it alone), one
    with a blank as a `Literal` (SCons quotes it: a backquote in such a word is the one thing
    that does not come through)."""
    out = []
    for w in words:
        if w and not _SHELL_SPECIAL.intersection(w):
            out.append(w)
        elif any(c in w for c in " \t\n"):
            out.append(_actions.literal(w))
        else:
            out.append(_actions.word(shlex.quote(w), None))
    return out


def _cpp_flags(target, source, env, for_signature):
    """`$_OFFLOAD_NVCC_CPPFLAGS`: `$_CCCOMCOM` (`$CPPFLAGS`, `CPPDEFINES`, `CPPPATH`) as nvcc takes it."""
    return command_words(nvcc_preprocessor_words(shell_words(env, "$_CCCOMCOM", target, source, for_signature)))


def _target_file(target, source, env, for_signature):
    """`$_OFFLOAD_NVCC_TARGET`: `$TARGET` as nvcc takes a file name."""
    return command_words([nvcc_file(str(target[0]))])


def _source_files(target, source, env, for_signature):
    """`$_OFFLOAD_NVCC_SOURCES`: `$SOURCES` as nvcc takes file names."""
    return command_words(nvcc_file(str(n)) for n in source)


COMMANDS.update({
    # The one-action compile (split off, no plan, a launcher, a wrapper as OFFLOAD_NVCC): its own
    # flags ($OFFLOAD_NVCCFLAGS), the host compiler's through -Xcompiler.
    "OFFLOAD_NVCCCOM": "$( $_OFFLOAD_LAUNCH $) $OFFLOAD_NVCC -c -o $_OFFLOAD_NVCC_TARGET $_OFFLOAD_NVCC_GENCODE "
                       "$OFFLOAD_NVCCFLAGS $_OFFLOAD_NVCC_HOSTFLAGS $_OFFLOAD_NVCC_CPPFLAGS $_OFFLOAD_NVCC_SOURCES",
    "_OFFLOAD_NVCC_CPPFLAGS": _cpp_flags,
    "_OFFLOAD_NVCC_TARGET": _target_file,
    "_OFFLOAD_NVCC_SOURCES": _source_files,
})


# --------------------------------------------------------------------------------------------
# The plan: nvcc's own steps, read from `--dryrun`

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


def _is_host_cc(prog: str) -> bool:
    base = os.path.basename(prog)
    return bool(re.fullmatch(r"(?:.*-)?(?:gcc|g\+\+|c\+\+|cc|clang|clang\+\+|icpx|icx)(?:-\d+)?", base))


class _Shape(Exception):
    """The plan has a step this module does not know how to place in the graph."""


def parse(text: str) -> Plan:
    """The graph plan of `nvcc --dryrun -c` output, or `_Shape` naming what is not recognised."""
    env, argvs = plan_lines(text)
    steps: list[Step] = []
    roles: dict[str, str] = {}          # temporary file -> role
    preprocessed: dict[str, Step] = {}  # role of a device preprocess's text no cicc has read yet -> its step

    def out(tmp: str, role: str) -> str:
        roles[tmp] = role
        return role

    def inp(tmp: str) -> str:
        if tmp not in roles:
            raise _Shape(f"a step reads '{os.path.basename(tmp)}' that no earlier step wrote")
        return roles[tmp]

    for argv in argvs:
        prog = argv[0]
        base = os.path.basename(prog)
        tmps = [t for a in argv for t in _TMP.findall(a)]
        step = Step(kind="", argv=argv)
        if _is_host_cc(prog) and "-E" in argv:
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
            step.outputs = [out(_opt(argv, "--gen_c_file_name"), "cudafe1.cpp"),
                            out(_opt(argv, "--module_id_file_name"), "module_id")]
            step.stub = _opt(argv, "--stub_file_name")
        elif base == "cicc":
            v = _opt(argv, "-arch")
            step.kind, step.virtual = "cicc", v
            step.inputs = [_claim(preprocessed, roles, inp(argv[argv.index("-o") - 1]), argv[argv.index("-o") - 1], v),
                           inp(_opt(argv, "--module_id_file_name"))]
            step.outputs = [out(argv[argv.index("-o") + 1], f"ptx.{v}"),
                            out(_opt(argv, "--gen_c_file_name"), f"cudafe1.c.{v}"),
                            out(_opt(argv, "--stub_file_name"), f"stub.{v}"),
                            out(_opt(argv, "--gen_device_file_name"), f"gpu.{v}")]
            step.fatbin_c = _opt(argv, "--include_file_name")
        elif base == "ptxas" and "-o" not in argv:
            # PTX only (`code=compute_NN`): nvcc assembles the PTX to check it, keeping nothing.
            if len(tmps) != 1:
                raise _Shape("a ptxas check without one input")
            step.kind = "ptxas_check"
            step.inputs = [inp(tmps[0])]
            step.virtual = step.inputs[0].split(".", 1)[1]
        elif base == "ptxas":
            real = next((a.split("=", 1)[1] for a in argv if a.startswith("-arch=")))
            src = [t for t in tmps if t != argv[argv.index("-o") + 1]]
            if len(src) != 1 or not real:
                raise _Shape("a ptxas step without one input and an -arch")
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
        elif _is_host_cc(prog) and "-c" in argv:
            step.kind = "host"
            step.inputs = [inp(argv[argv.index("-o") - 1])]
            if argv[argv.index("-o") + 1] != _PLAN_OUT:
                raise _Shape("the host compile does not write the object")
        else:
            raise _Shape(f"an unknown step '{base}'")
        steps.append(step)
    if preprocessed:
        raise _Shape("a device preprocess whose text no cicc step reads")
    kinds = [s.kind for s in steps]
    if kinds.count("fe") != 1 or kinds.count("host_pp") != 1 or kinds.count("fatbin") != 1 \
            or kinds.count("host") != 1 or kinds[-1] != "host" or "cicc" not in kinds:
        raise _Shape("not one front end, fat binary and host compile around per-arch device steps")
    fe = steps[kinds.index("fe")]
    stub_owner = [s.virtual for s in steps if s.kind == "cicc"
                  and os.path.basename(_opt(s.argv, "--stub_file_name")) == os.path.basename(fe.stub)]
    if len(stub_owner) != 1:
        raise _Shape("no cicc step writes the stub the host compile includes")
    if len({s.virtual for s in steps if s.kind == "cicc"}) != kinds.count("cicc"):
        raise _Shape("two cicc steps for one virtual arch")
    return Plan(env=env, steps=steps, host_stub_arch=stub_owner[0])


def _claim(preprocessed: dict[str, Step], roles: dict[str, str], role: str, tmp: str, virtual: str) -> str:
    """The role `ii.<virtual>` of the device preprocess whose text (`role`, in `tmp`) the cicc
    step of `virtual` reads, now named after that arch. The preprocess knows only the arch's
    number (`-D__CUDA_ARCH__=900`), the same for `compute_90`, the arch-specific `compute_90a`
    and the family `compute_90f`; cicc's `-arch` tells them apart, so that each has files and a
    node of its own (`x.compute_90a.cpp1.ii`) when one source is built for several of them."""
    pp = preprocessed.pop(role, None)
    if pp is None:
        raise _Shape("a cicc step that reads no device preprocess's text")
    m = re.fullmatch(r"compute_(\d+)[a-z]?", virtual)
    if not m or pp.virtual != f"compute_{m.group(1)}":
        raise _Shape(f"cicc -arch {virtual} reads the text preprocessed for {pp.virtual}")
    pp.virtual = virtual
    roles[tmp] = pp.outputs[0] = f"ii.{virtual}"
    return roles[tmp]


def _opt(argv: list[str], name: str) -> str:
    try:
        return argv[argv.index(name) + 1]
    except (ValueError, IndexError):
        raise _Shape(f"a step without {name}") from None


def split_wanted(env) -> bool:
    """Whether nvcc's steps become nodes: `OFFLOAD_NVCC_SPLIT` (default True) and no compiler
    launcher (`OFFLOAD_LAUNCHER`: ccache, sccache and distcc take whole nvcc compiles; sccache
    splits them itself)."""
    return bool(env.get("OFFLOAD_NVCC_SPLIT", True)) and not env.subst("$OFFLOAD_LAUNCHER").strip()


# An arch with a suffix: arch-specific `sm_90a`, family `sm_100f`.
_VARIANT = re.compile(r"sm_(\d+)([a-z])")
_variants: dict[tuple, str] = {}


def _variant_refused(env, command: str, path: str, arch: str) -> str:
    """What nvcc says when asked for the arch-specific or family variant `arch` (`''` when it
    builds it): nvcc lists only its `sm_NN` (`--list-gpu-code`), and which variants a CUDA
    release has is its own to say (CUDA 13 builds `sm_90a` and `sm_100f`, not `sm_90f` nor
    `sm_89a`). Asked with `--dryrun`, which compiles nothing (~25 ms), once per nvcc and arch;
    kept between runs with the other probes' answers while nvcc is unchanged."""
    from ...toolchain import probe_cache as _probe_cache
    from ...toolchain import discovery as _toolchain
    penv = _toolchain.build_env(env)
    memo = (path, penv.get("PATH", ""), arch)
    if memo in _variants:
        return _variants[memo]
    top = _nodes.abspath(env.Dir("#"))
    k = _probe_cache.key(command, path, penv, False, probe=f"nvcc-arch-variant {arch}")
    entry = _probe_cache.load(top, k) if k else None
    if entry is not None and len(entry["answers"]) == 1 and isinstance(entry["answers"][0], str):
        _variants[memo] = entry["answers"][0]
        return _variants[memo]
    n = arch[3:]
    try:
        run = subprocess.run([path, "--dryrun", "-gencode", f"arch=compute_{n},code=sm_{n}", "-c", "-x", "cu",
                              os.devnull, "-o", os.devnull], capture_output=True, text=True, timeout=60, env=penv)
    except (OSError, subprocess.SubprocessError, ValueError):
        return ""            # it cannot say: the compile will
    said = [ln.strip() for ln in (run.stdout + run.stderr).splitlines() if f"_{n}" in ln and not ln.startswith("#$")]
    # Only a refusal that names the arch is one: a wrapper failing on an empty source is not.
    _variants[memo] = re.sub(r"\s+", " ", said[0]) if run.returncode and said else ""
    if k and (run.returncode == 0 or said):
        _probe_cache.store(top, k, [_variants[memo]], [])
    return _variants[memo]


def refuse_unbuilt_variants(env, o: dict, source) -> None:
    """A `UserError` naming the first arch-specific or family arch of the compile with overrides
    `o` (`sm_89a`, `sm_90f`) that nvcc does not build. The check of `OFFLOAD_ARCHS` against what
    nvcc lists takes every listed `sm_NN` as standing for its variants too; one nvcc lacks would
    otherwise fail in nvcc's plan (a note, then the compile's own error) or in the compile, with
    no word of which setting to change. Asked in every nvcc mode (split or not, a launcher)."""
    from ...toolchain import discovery as _toolchain
    suffixed = [a for a in o.get("_OFFLOAD_NVCC_ARCHS") or [] if _VARIANT.fullmatch(a)]
    command = env.subst("$OFFLOAD_NVCC").strip() if suffixed else ""
    path = _toolchain.resolve(env, command) if command else None
    for arch in suffixed if path else ():
        why = _variant_refused(env, command, path, arch)
        if why:
            src = f", which compiles '{source[0]}' ({o.get('_OFFLOAD_LANG') or 'cuda'})" if source else ""
            raise SCons.Errors.UserError(
                f"offload: OFFLOAD_ARCHS: '{arch}' is not an arch {_toolchain.compiler_words(env, command, True)} "
                f"builds ({why}){src}: sm_{_VARIANT.fullmatch(arch).group(1)}, or a CUDA whose nvcc builds "
                f"{arch} (OFFLOAD_NVCC)")


def plan_for(env, o: dict, target=None, source=None) -> Plan | None:
    """nvcc's plan for the compile of `source` into `target` with overrides `o` (memoized per
    command line), or None with a one-line note when it cannot be split; None, silently, when
    the split is not wanted (`split_wanted`). An arch variant nvcc does not build is refused
    first, whether split or not (`refuse_unbuilt_variants`)."""
    refuse_unbuilt_variants(env, o, source)
    return dryrun(env, o, "$OFFLOAD_NVCC --dryrun -c -o " + _PLAN_OUT + " $_OFFLOAD_NVCC_GENCODE $OFFLOAD_NVCCFLAGS "
                  "$_OFFLOAD_NVCC_HOSTFLAGS $_OFFLOAD_NVCC_CPPFLAGS " + _PLAN_SRC, parse,
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
        except _Shape as exc:
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
        raise _Shape("the plan does not say where nvcc is (_HERE_)")
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
            raise _Shape(f"a step that is not a simple command ({exc})") from None
        if argv and os.path.basename(argv[0]) != "rm":
            argvs.append(argv)
    return env, argvs


# Relocatable device code: nvcc's options that ask for it (`-dc` is `-rdc=true -c`).
_RDC = re.compile(r"^(?:-rdc(?:=|\s+)true|--relocatable-device-code(?:=|\s+)true|-dc|--device-c)$")


def is_rdc(env, o: dict, plan: Plan | None) -> bool:
    """Whether a compile with overrides `o` makes relocatable device code: its plan says so
    (`cudafe++ --device-c`); without a plan, its flags do."""
    if plan is not None:
        return any(s.kind == "fe" and "--device-c" in s.argv for s in plan.steps)
    flags = _nodes.override(env, o).subst("$OFFLOAD_NVCCFLAGS").split()
    joined = [f"{a} {b}" for a, b in zip(flags, flags[1:])]
    return any(_RDC.match(f) for f in flags + joined)


def mark(made, env, o: dict, plan: Plan | None) -> None:
    """Record on nvcc's object what a device link needs: relocatable device code, for which archs."""
    if is_rdc(env, o, plan):
        for n in made:
            _nodes.marks(n).offload_nvcc_rdc = list(o.get("_OFFLOAD_NVCC_ARCHS") or [])


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
            + [_beside(obj, _cubin_name(v, r)) for r in env["_OFFLOAD_NVCC_RARCHS"]]), source


def _cubin_name(virtual: str, real: str) -> str:
    return f".{real}.cubin" if virtual.split("_")[1] == real.split("_")[1] else f".{virtual}.{real}.cubin"


def _fatbin_emitter(target, source, env):
    return [_beside(target[0], ".fatbin.c")], source


def _host_emitter(target, source, env):
    obj = target[0]
    _nodes.marks(obj).offload_lang = "cuda"
    return [obj, _beside(obj, ".cudafe1.stub.c")], source


# nvcc options that take a value as the next argument and mean nothing to clangd.
_NVCC_ONLY_WITH_VALUE = {"-gencode", "--generate-code", "-arch", "--gpu-architecture", "-code", "--gpu-code",
                         "-ccbin", "--compiler-bindir", "-maxrregcount", "--maxrregcount", "-Xptxas", "-Xnvlink",
                         "-Xfatbinary", "-Xcudafe", "--threads", "-t", "-diag-suppress", "--diag-suppress"}


def clangd_flags(target, source, env, for_signature) -> str:
    """`_OFFLOAD_NVCCDB_FLAGS`: what clangd needs of an nvcc compile: the toolkit, the archs, and
    `$OFFLOAD_NVCCFLAGS` translated (`-Xcompiler=a,b` -> `a b`; `-D`/`-I`/`-U`/`-std=`/`-isystem`
    kept; nvcc-only options such as `-gencode`, `-rdc`, `--expt-*`, `-lineinfo` dropped)."""
    toolkit = _installations.nvcc_cuda(env).path_flag
    out = [toolkit] if toolkit else []
    archs = [offload_arch.sass_of_ptx(a) or a for a in env.get("_OFFLOAD_NVCC_ARCHS") or []]   # compute_NN: its sm_NN
    out.extend(f"--cuda-gpu-arch={a}" for a in dict.fromkeys(archs))
    flags = env.subst("$OFFLOAD_NVCCFLAGS", target=target, source=source).split()
    i = 0
    while i < len(flags):
        f = flags[i]
        if f in ("-Xcompiler", "--compiler-options") and i + 1 < len(flags):
            out.extend(x for x in flags[i + 1].split(",") if x)
            i += 2
            continue
        if f.startswith(("-Xcompiler=", "--compiler-options=")):
            out.extend(x for x in f.split("=", 1)[1].split(",") if x)
        elif f in _NVCC_ONLY_WITH_VALUE:
            i += 1
        elif f.startswith(("-D", "-U", "-I", "-std=", "-isystem", "-include", "-W", "-f", "-O")) \
                and not f.startswith("-Xcompiler"):
            out.append(f)
        i += 1
    return " ".join(out)


COMMANDS["_OFFLOAD_NVCCDB_FLAGS"] = clangd_flags


# Sources of the steps after the front end are files nvcc's own steps wrote: their includes are
# those steps' inputs already, so they are not scanned (a `.cudafe1.cpp` is a megabyte of
# preprocessed text).
_NOT_SCANNED = SCons.Script.Scanner(lambda node, env, path: [], "offload-nvcc-none")


def _StepAction(com: str, **kw):
    """One of nvcc's steps. Its signature is the step's command as the plan gives it, with every
    file name relative to the top directory (the source's absolute path too: a moved tree or a
    clone signs as this one does) and `__CUDA_ARCH_LIST__` left out, plus nvcc's identity,
    computed once when the node is made (`_OFFLOAD_NVCC_STEPSIG`) rather than substituted per
    node on every run: a source has two such nodes per arch and three more, and a null build
    signs them all."""
    return _actions.VariableSignedAction(com, "_OFFLOAD_NVCC_STEPSIG", **kw)


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


def _step_signature(cmd: str, nvcc_id: str) -> str:
    return re.sub(r"(?<!\$)\$\( \S+ \$\)", "", cmd) + "\0" + nvcc_id


def builders() -> dict:
    def b(comstr, kind, emitter, scanner=_NOT_SCANNED, record=False, check=False):
        act = _StepAction("$_OFFLOAD_NVCCSTEPCOM", cmdstr="$" + comstr)
        if record:
            act = _actions.sequence([act, SCons.Action.Action(_record_arch_list_use, None)])
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


# --------------------------------------------------------------------------------------------
# The graph

def _command(step: Step, files: dict, src: str = "", srcabs: str = "") -> str:
    """The step's command line for SCons: nvcc's temporaries replaced by the nodes' files
    (`files`: a temporary, or its base name where nvcc gives one for an `#include`, -> a file
    name, or a list of names for an argument that stands for several; in part of an argument
    too), the plan's source by `src` (`--orig_src_path_name` by `srcabs`, as nvcc writes it);
    each argument quoted for the shell, with `$` escaped for SCons, so that the step gets the
    words nvcc would give it whatever the file names hold."""
    parts, prev = [], ""
    partial = sorted((k for k, v in files.items() if isinstance(v, str) and k not in (_PLAN_SRC, _PLAN_OUT)),
                     key=len, reverse=True)
    for raw in step.argv:
        a = raw
        if a == _PLAN_SRC and src:
            parts.append(_word(srcabs if prev == "--orig_src_path_name" and srcabs else src))
        elif a in files:
            v = files[a]
            parts.extend(_word(x) for x in ([v] if isinstance(v, str) else v))
        elif a.startswith(_ARCH_LIST_DEF):
            parts.append(f"$( {_word(a)} $)")     # in the signature only where used (see `_arch_list_use`)
        else:
            for tmp in partial:
                a = a.replace(tmp, files[tmp])
            parts.append(_word(a))
        prev = raw
    return " ".join(parts)


def _word(arg: str) -> str:
    """One argument on a step's command line: quoted for the shell, `$` escaped for SCons."""
    return shlex.quote(arg).replace("$", "$$")


# --------------------------------------------------------------------------------------------
# `__CUDA_ARCH_LIST__`: nvcc defines it for every preprocess as the whole arch list. A
# preprocessed text depends on it only where some file it read names it (CUB and Thrust put it
# in their namespace names); for the others, adding or removing an arch cannot change the text.
# So the macro is outside the preprocess steps' signatures, and each preprocess records beside
# its output the list it used, or nothing when no file it read (nor another option) names the
# macro; when the recorded list is not the current one, the step reruns (`AlwaysBuild`). A
# file that builds the name by token pasting is not seen.

_ARCH_LIST_DEF = "-D__CUDA_ARCH_LIST__="
_LINE_MARKER = re.compile(rb'^# \d+ "((?:[^"\\]|\\.)*)"', re.M)
_names_list: dict[tuple[str, int, int], bool] = {}


def _file_names_list(path: str) -> bool:
    try:
        st = os.stat(path)
    except OSError:
        return True        # not readable: assume it does
    key = (path, st.st_mtime_ns, st.st_size)
    if key not in _names_list:
        try:
            with open(path, "rb") as f:
                _names_list[key] = b"__CUDA_ARCH_LIST__" in f.read()
        except OSError:
            _names_list[key] = True
    return _names_list[key]


def _arch_list_use(ii_path: str, command: str) -> bool:
    """Whether the text preprocessed into `ii_path` may depend on `__CUDA_ARCH_LIST__`: a file
    it read (every file gcc entered has a line marker) or another option names the macro."""
    others = " ".join(a for a in command.split() if not a.startswith(_ARCH_LIST_DEF))
    if "__CUDA_ARCH_LIST__" in others:
        return True
    with open(ii_path, "rb") as f:
        text = f.read()
    files = {re.sub(r"\\(.)", r"\1", m.decode("utf-8", "surrogateescape")) for m in _LINE_MARKER.findall(text)}
    return any(_file_names_list(f) for f in files if not f.startswith("<"))


def _record_arch_list_use(target, source, env):
    """Second half of a preprocess action: the list it used, or an empty record (the last
    target). The front end's preprocessed text is its own temporary: removed once read."""
    cmd = env.subst("$_OFFLOAD_NVCC_STEP", target=target, source=source)
    ii = env["_OFFLOAD_NVCC_II"]          # a path (not substituted: it may hold a `$`)
    try:
        used = _arch_list_use(ii, cmd)
    finally:
        if env.get("_OFFLOAD_NVCC_II_TEMP"):
            os.remove(ii)
    with open(_nodes.abspath(target[-1]), "w") as f:
        f.write(env["_OFFLOAD_NVCC_ARCHLIST"] + "\n" if used else "")
    return 0


def _rerun_if_list_used(env, pp, arch_list: str) -> None:
    """Rerun the preprocess `pp` when its record (its last target) holds another arch list than
    `arch_list`."""
    try:
        with open(_nodes.abspath(pp[-1])) as f:
            recorded = f.read().strip()
    except OSError:
        return             # not built yet (its output is missing, so it runs)
    if recorded and recorded != arch_list:
        env.AlwaysBuild(pp)


def _intermediates(nodes) -> None:
    """The files nvcc's steps write and its next steps read are decided changed by their
    timestamp, then their content (`scons.nodes.decide_by_timestamp_then_content`): with the
    default 'content' decider SCons would hash the megabytes of preprocessed text per source and
    arch on every run."""
    _nodes.decide_by_timestamp_then_content(nodes)


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
        return _command(st, files, src, "" if sign else srcabs)

    base = dict(o, ENV=step_env, _OFFLOAD_NVCC_SRC=src.replace("$", "$$"))
    nvcc_id = senv.subst("$_OFFLOAD_NVCC_ID")

    def step(b, sources, cmd: str, sig: str | None = None, **kw):
        return b(fat, sources, _OFFLOAD_NVCC_STEP=cmd, _OFFLOAD_NVCC_STEPSIG=_step_signature(sig or cmd, nvcc_id),
                 **kw, **base)
    node_of: dict[str, object] = {}  # role -> node
    fe_step = next(st for st in plan.steps if st.kind == "fe")
    host_pp = next(st for st in plan.steps if st.kind == "host_pp")
    fatbin_step = next(st for st in plan.steps if st.kind == "fatbin")
    host_step = next(st for st in plan.steps if st.kind == "host")

    # Front end: host preprocess (its text a temporary of this node), then cudafe++.
    fatbin_c_name = f"{stem(fat)}.fatbin.c"
    arch_list = next((a[len(_ARCH_LIST_DEF):] for a in host_pp.argv if a.startswith(_ARCH_LIST_DEF)), "")
    base["_OFFLOAD_NVCC_ARCHLIST"] = arch_list
    ii = path(".cpp4.ii")
    fe_files = {fe_step.argv[-1]: ii,
                _opt(fe_step.argv, "--gen_c_file_name"): path(".cudafe1.cpp"),
                _opt(fe_step.argv, "--module_id_file_name"): path(".module_id"),
                os.path.basename(fe_step.stub): f"{stem(fat)}.cudafe1.stub.c"}
    cmd, sig = (command(host_pp, {_out(host_pp): ii}, sign) + " && " + command(fe_step, fe_files, sign)
                for sign in (False, True))
    fe = step(env._OffloadNvccFrontEnd, s, cmd, sig, _OFFLOAD_NVCC_II=os.path.join(_nodes.abspath(top), ii),
              _OFFLOAD_NVCC_II_TEMP=True)
    _rerun_if_list_used(env, fe, arch_list)
    _intermediates(fe)
    node_of.update({"cudafe1.cpp": fe[0], "module_id": fe[1]})

    # Per virtual arch: preprocess, then cicc and the ptxas of each of its SASS archs.
    devices = {}
    for st in plan.steps:
        if st.kind == "pp":
            v = st.virtual
            pp = step(env._OffloadNvccPreprocess, s, command(st, {_out(st): path(f".{v}.cpp1.ii")}),
                      _OFFLOAD_NVCC_VARCH=v, _OFFLOAD_NVCC_II=os.path.join(_nodes.abspath(top), path(f".{v}.cpp1.ii")))
            _rerun_if_list_used(env, pp, arch_list)
            _intermediates(pp)
            node_of[f"ii.{v}"] = pp[0]
        elif st.kind == "cicc":
            v = st.virtual
            ptx = path(f".{v}.ptx")
            files = {st.argv[st.argv.index("-o") - 1]: path(f".{v}.cpp1.ii"),
                     _opt(st.argv, "--module_id_file_name"): path(".module_id"),
                     _out(st): ptx,
                     _opt(st.argv, "--gen_c_file_name"): ptx + ".cudafe1.c",
                     _opt(st.argv, "--stub_file_name"): path(f".{v}.cudafe1.stub.c"),
                     _opt(st.argv, "--gen_device_file_name"): ptx + ".cudafe1.gpu",
                     os.path.basename(st.fatbin_c): fatbin_c_name}
            # cicc's own C and device files are read by no later step: removed, as nvcc does.
            cmds = [command(st, files), f"rm -f {_word(ptx + '.cudafe1.c')} {_word(ptx + '.cudafe1.gpu')}"]
            ptxas = [p for p in plan.steps if p.kind == "ptxas" and p.virtual == v]
            for p in ptxas:
                cmds.append(command(p, {_out(st): ptx, _out(p): path(_cubin_name(v, p.real))}))
            cmds.extend(command(p, {_out(st): ptx}) for p in plan.steps if p.kind == "ptxas_check" and p.virtual == v)
            sig = " && ".join([command(st, files, sign=True)] + cmds[1:])
            made = step(env._OffloadNvccDevice, [node_of[f"ii.{v}"], node_of["module_id"]], " && ".join(cmds), sig,
                        _OFFLOAD_NVCC_VARCH=v, _OFFLOAD_NVCC_RARCHS=[p.real for p in ptxas])
            _intermediates(made)
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
    _intermediates(fatbin)

    # Host compile: the stub nvcc would include copied to the name cudafe++ wrote into the
    # .cudafe1.cpp, then nvcc's host compile of it (the stub includes the .fatbin.c).
    hfiles = {host_step.argv[host_step.argv.index("-o") - 1]: path(".cudafe1.cpp"), _PLAN_OUT: _nodes.path(fat, top)}
    stub = path(f".{plan.host_stub_arch}.cudafe1.stub.c")
    cmd = f"cp -f {_word(stub)} {_word(path('.cudafe1.stub.c'))} && " + command(host_step, hfiles)
    made = step(env._OffloadNvccHost, [node_of["cudafe1.cpp"], node_of[f"stub.{plan.host_stub_arch}"], fatbin[0]], cmd)
    obj = made[0]
    _nodes.marks(obj).offload_parts = Parts(host=obj, devices=devices, package=fatbin[0])
    return [obj]


# --------------------------------------------------------------------------------------------
# `scons -c`: the files of nvcc's steps that are no targets now

#: What nvcc's split steps write beside an object `<stem>.o` (the per-arch files for any arch).
_STEP_FILES = re.compile(r"(?:sm|compute)_\d+[a-z]?\.(?:(?:sm|compute)_\d+[a-z]?\.)?"
                         r"(?:cpp1\.ii|archlist|ptx|cudafe1\.stub\.c|ptx\.cudafe1\.c|ptx\.cudafe1\.gpu|cubin)|"
                         r"cudafe1\.cpp|cudafe1\.stub\.c|module_id|cpp4\.archlist|cpp4\.ii|fatbin\.c")


def clean_leftovers(env, owners, folder, prefix: str, names=_STEP_FILES) -> None:
    """Under `scons -c`, also remove the files nvcc's steps wrote that are not targets of this
    build (`<prefix><name>` with `names` matching `<name>`): those of an arch no longer
    configured (`x.compute_89.ptx`, `x.sm_89.cubin`, ...), and all of them when the source is
    no longer split (`OFFLOAD_NVCC_SPLIT=False`, a wrapper)."""
    for name in names_when_cleaning(folder):
        if name.startswith(prefix) and names.fullmatch(name[len(prefix):]):
            env.Clean(owners, folder.File(name))


def _role_of(plan: Plan, tmp: str) -> str:
    for st in plan.steps:
        if st.kind in ("ptxas", "cicc") and _out(st) == tmp:
            return st.outputs[0]
    raise KeyError(tmp)


# --------------------------------------------------------------------------------------------
# nvcc's flags from the SCons variables

def _nvcc_gencode(target, source, env, for_signature):
    """One `-gencode` per arch: SASS (`code=sm_NN`), plus PTX (`code=compute_NN`, for JIT on
    later GPUs) when `OFFLOAD_CUDA_PTX` is set, as `nvcc -arch=sm_NN` embeds both; PTX only
    for an entry `compute_NN`."""
    ptx = env.get("OFFLOAD_CUDA_PTX")
    out = []
    for a in env.get("_OFFLOAD_NVCC_ARCHS") or []:
        n = a.split("_", 1)[1]
        code = f"compute_{n}" if a.startswith("compute_") else f"[sm_{n},compute_{n}]" if ptx else f"sm_{n}"
        out.append(f"-gencode arch=compute_{n},code={code}")
    return " ".join(out)


def _nvcc_host_flags(target, source, env, for_signature):
    """The host compiler's flags (`$CCFLAGS $CXXFLAGS $OFFLOAD_HOSTFLAGS`) as nvcc takes them:
    `-Xcompiler=<flag>` each (`-march=native` is a host compiler flag nvcc itself rejects), except
    the language dialect: `-std=c++NN` goes to nvcc itself, which compiles the device side in it
    and hands it to the host compiler (passed only to the host compiler, the two sides disagree).
    Each flag is the word the shell gives g++ from the same variables, and reaches the host
    compiler as that word (a comma, a blank, a quote in it: `nvcc_host_flag`)."""
    flags = shell_words(env, "$CCFLAGS $CXXFLAGS $OFFLOAD_HOSTFLAGS", target, source, for_signature)
    return command_words(f if f.startswith("-std=") else nvcc_host_flag(f) for f in flags)


COMMANDS["_OFFLOAD_NVCC_GENCODE"] = _nvcc_gencode
COMMANDS["_OFFLOAD_NVCC_HOSTFLAGS"] = _nvcc_host_flags
