"""nvcc's flags from the SCons variables: the callable construction variables of nvcc's command
lines (the `-gencode` list, the host compiler's and the preprocessor's flags, file names, the
clangd entry of an nvcc compile), each word written so that nvcc passes it on unchanged."""

from __future__ import annotations

import re
import shlex

from offload_tool.rules import offload_arch

from ...scons import actions as _actions
from ...toolchain import installations as _installations
from .shell_words import shell_words

# Words: how nvcc must be given what the shell gives a program
#
# nvcc gets the words the shell would give a compiler (`shell_words`), and they reach its steps
# unchanged: nvcc splits the value of a list option (`-D`, `-U`, `-Xcompiler`) at commas and
# takes a backslash as an escape in it, and runs each step as a shell line with a `-D` value and
# a file name inside double quotes (where `$` and backquotes expand) and an `-Xcompiler` value
# bare. Its own `-I`/`-isystem`/`-include` quoting holds (a comma, a quote in such a folder name
# it cannot pass: nvcc's limit).


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


def nvcc_cpp_flags(target, source, env, for_signature):
    """`$_OFFLOAD_NVCC_CPPFLAGS`: `$_CCCOMCOM` (`$CPPFLAGS`, `CPPDEFINES`, `CPPPATH`) as nvcc takes it."""
    return command_words(nvcc_preprocessor_words(shell_words(env, "$_CCCOMCOM", target, source, for_signature)))


def nvcc_target_file(target, source, env, for_signature):
    """`$_OFFLOAD_NVCC_TARGET`: `$TARGET` as nvcc takes a file name."""
    return command_words([nvcc_file(str(target[0]))])


def nvcc_source_files(target, source, env, for_signature):
    """`$_OFFLOAD_NVCC_SOURCES`: `$SOURCES` as nvcc takes file names."""
    return command_words(nvcc_file(str(n)) for n in source)


COMMANDS = {
    # The one-action compile (split off, no plan, a launcher, a wrapper as OFFLOAD_NVCC): its own
    # flags ($OFFLOAD_NVCCFLAGS), the host compiler's through -Xcompiler.
    "OFFLOAD_NVCCCOM": "$( $_OFFLOAD_LAUNCH $) $OFFLOAD_NVCC -c -o $_OFFLOAD_NVCC_TARGET $_OFFLOAD_NVCC_GENCODE "
                       "$OFFLOAD_NVCCFLAGS $_OFFLOAD_NVCC_HOSTFLAGS $_OFFLOAD_NVCC_CPPFLAGS $_OFFLOAD_NVCC_SOURCES",
}


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


# --------------------------------------------------------------------------------------------
# nvcc's flags from the SCons variables

def nvcc_gencode(target, source, env, for_signature):
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


def nvcc_host_flags(target, source, env, for_signature):
    """The host compiler's flags (`$CCFLAGS $CXXFLAGS $OFFLOAD_HOSTFLAGS`) as nvcc takes them:
    `-Xcompiler=<flag>` each (`-march=native` is a host compiler flag nvcc itself rejects), except
    the language dialect: `-std=c++NN` goes to nvcc itself, which compiles the device side in it
    and hands it to the host compiler (passed only to the host compiler, the two sides disagree).
    Each flag is the word the shell gives g++ from the same variables, and reaches the host
    compiler as that word (a comma, a blank, a quote in it: `nvcc_host_flag`)."""
    flags = shell_words(env, "$CCFLAGS $CXXFLAGS $OFFLOAD_HOSTFLAGS", target, source, for_signature)
    return command_words(f if f.startswith("-std=") else nvcc_host_flag(f) for f in flags)


