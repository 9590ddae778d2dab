"""Which C/C++ sources are OpenMP offload code when nothing says so.

A `.c` / `.cpp` source means OpenMP offload by its suffix (`_languages.OPENMP`): one host compile
and one device compile per arch. That is what an OpenMP-offload program wants, but not the
`main.cpp` beside the kernels of a CUDA or HIP program, which CMake, Meson and Bazel compile once,
for the host. The rule, for a source whose language no `OFFLOAD_LANG` names (on the environment
or the call):

1. a C/C++ source built into the same program or library as CUDA or HIP sources is a plain host
   source (`OFFLOAD_LANG='host'`: the environment's own compile), unless it or a header it
   includes (as SCons's C scanner finds them on `CPPPATH`) holds an OpenMP target construct
   (`#pragma omp target ...`, `declare target`, or the same in `_Pragma`);
2. any other C/C++ source is OpenMP offload, as before; when one holds no target construct, the
   build says so once (`note_without_target`): it costs a device compile per arch for nothing.

`OFFLOAD_LANG='openmp'` (or `'host'`) on the call or the environment always wins.

The same walk over a source's headers tells HIP code in a `.cu` file (hipified CUDA, HeCBench's
`*-hip` programs), which its suffix makes CUDA: it includes `hip/hip_runtime.h`, itself or
through a header (`includes_hip_runtime`), so that the error for its archs can name
`OFFLOAD_LANG='hip'` rather than send the user to add an NVIDIA arch."""

from __future__ import annotations

import os
import re
import sys


from ..scons import actions as _actions
from ..scons import nodes as _nodes
from ..settings import languages as _languages
from .common import read_path, scanned_files

_CONSTRUCT = re.compile(rb"(?:^[ \t]*#[ \t]*pragma|_Pragma[ \t]*\([ \t]*\")[ \t]*omp[ \t]+"
                        rb"(?:target|(?:begin[ \t]+)?declare[ \t]+target)\b", re.M)
_INCLUDE = re.compile(rb'^[ \t]*#[ \t]*include[ \t]*([<"])([^>"\n]+)[>"]', re.M)
#: An `#if` / `#elif` that tests what differs between host and device code. clang's
#: `-frewrite-includes` (what sccache-dist sends a build server) evaluates every `#if` and `#elif`
#: where it runs, the host side here, and keeps only `#ifdef` / `#ifndef` for the server to decide.
_DEVICE_IF = re.compile(rb"^[ \t]*#[ \t]*(?:if|elif|elifdef|elifndef)\b[^\n]*?\b(__NVPTX__|__AMDGCN__|__AMDGPU__|"
                        rb"__CUDA_ARCH__|__CUDA_ARCH_LIST__|__HIP_DEVICE_COMPILE__|__SPIRV__|__OPENMP_NVPTX__|"
                        rb"__OPENMP_AMDGCN__|__AMDGCN_\w+|__gfx\w+__|__has_builtin)\b", re.M)
_MAX_FILES = 2000          # headers followed from one source, at most
_texts: dict[str, tuple[bool, list[tuple[bool, str]]]] = {}
_device_ifs: dict[str, tuple[int, str] | None] = {}


def _read(path: str) -> bytes:
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError:
        return b""


def _scan(path: str) -> tuple[bool, list[tuple[bool, str]]]:
    """(whether the file holds a target construct, its includes as (quoted, name)), read once."""
    if path not in _texts:
        text = _read(path)
        _texts[path] = (bool(_CONSTRUCT.search(text)),
                        [(q == b'"', n.decode("utf-8", "surrogateescape").strip()) for q, n in _INCLUDE.findall(text)])
    return _texts[path]


def device_conditional(env, node) -> tuple[str, int, str] | None:
    """The first `#if` / `#elif` testing a device's macro (`_DEVICE_IF`) in `node`'s file or a
    header it includes that lies in its folder or on `CPPPATH`, as (path, line, macro); None
    when there is none. A one-job OpenMP compile sent to a build server would have it decided
    for the host, so for every arch (`graph.compile.fat_object` keeps such a source here)."""
    for path, _ in _files(env, node):
        if path not in _device_ifs:
            text = _read(path)
            m = _DEVICE_IF.search(text)
            _device_ifs[path] = (text.count(b"\n", 0, m.start()) + 1, m.group(1).decode()) if m else None
        found = _device_ifs[path]
        if found:
            return path, found[0], found[1]
    return None


def _include_dirs(env, node) -> list[str]:
    """The source-tree folders of `CPPPATH` as SCons's C scanner resolves them for `node`."""
    dirs = _actions.c_include_dirs(env, node.dir)
    out = []
    for d in dirs:
        for p in (_nodes.abspath(d), _nodes.abspath(d.srcnode())):
            if p not in out:
                out.append(p)
    return out


def _files(env, node):
    """`node`'s file, then the headers it includes that lie in its folder or on `CPPPATH`, each
    once (at most `_MAX_FILES`), as (path, `_scan` of it), while the caller asks for more."""
    dirs = _include_dirs(env, node)
    seen, todo = set(), [read_path(node)]
    while todo and len(seen) < _MAX_FILES:
        path = todo.pop()
        if path in seen:
            continue
        seen.add(path)
        scanned = _scan(path)
        yield path, scanned
        here = os.path.dirname(path)
        for quoted, name in scanned[1]:
            for d in ([here] if quoted else []) + dirs:
                p = os.path.normpath(os.path.join(d, name))
                if os.path.isfile(p):
                    todo.append(p)
                    break


def holds_target_construct(env, node) -> bool:
    """Whether `node`'s file, or a header it includes that lies in its folder or on `CPPPATH`,
    holds an OpenMP target construct. A file that cannot be read yet (generated) counts as
    holding one: it stays OpenMP offload, which is always correct."""
    if not os.path.exists(read_path(node)):
        return True
    return any(found for _, (found, _) in _files(env, node))


def includes_hip_runtime(env, node) -> str | None:
    """The file (`node`'s own, or a header it includes that lies in its folder or on `CPPPATH`)
    that includes `hip/hip_runtime.h`, or None: code that includes it is HIP, whatever its suffix."""
    for path, (_, includes) in _files(env, node):
        if any(name == "hip/hip_runtime.h" for _, name in includes):
            return path
    return None


def _asks(env, kw: dict) -> bool:
    return bool(kw.get("OFFLOAD_LANG") or env.get("OFFLOAD_LANG"))


def _by_suffix_is_openmp(n) -> bool:
    """Whether `n` is of the language C/C++ sources are by their suffix alone (OpenMP's)."""
    return getattr(_languages.suffix_language(n), "guessed_by_suffix", False)


def gpu_language_sources(env, sources, kw: dict) -> bool:
    """Whether `sources` (of one program or library) hold CUDA or HIP sources, or objects the tool
    compiled from such sources."""
    if _asks(env, kw):
        return False
    return any(getattr(_languages.suffix_language(n), "gpu_kernels", False)
               or getattr(_languages.LANGUAGES.get(getattr(_nodes.marks(n), "offload_lang", None) or ""), "gpu_kernels",
                          False) for n in sources)


def source_kw(env, n, kw: dict, beside_gpu_sources: bool) -> dict:
    """The caller's overrides for source `n`, with `OFFLOAD_LANG='host'` added where rule 1 of the
    module docstring makes it a plain host source."""
    if not beside_gpu_sources or not _by_suffix_is_openmp(n) or _asks(env, kw):
        return kw
    senv = _nodes.override(env, kw) if kw else env
    if holds_target_construct(senv, n):
        return kw
    return dict(kw, OFFLOAD_LANG=_languages.HOST.name)


_noted: set[str] = set()


def note_without_target(env, source, target) -> None:
    """Rule 2's note, once per source and build: an OpenMP offload source by its suffix alone whose
    file and scanned headers hold no target construct."""
    path = _nodes.path(source.srcnode())
    if path in _noted or _asks(env, {}):
        return
    if any(_scan(read_path(n))[0] for n in [source] + scanned_files([target])):
        return
    _noted.add(path)
    sys.stderr.write(f"offload: note: '{path}' is compiled as OpenMP offload (from its suffix) but holds no OpenMP "
                     "target construct, nor do the headers SCons found it includes: each arch compiles it for "
                     "nothing; OFFLOAD_LANG='host' compiles it once, for the host\n")
