"""Which libraries of a link (`LIBS`) may carry device code.

The split AMD device link links each arch's device objects in a node of its own, so it must not
miss device code that a library would bring into the final link. Only static archives can: the
linker wrapper extracts device images from archive members, never from shared libraries (those
register their own images when loaded). So a `LIBS=['m', 'pthread']` link keeps the split; a
static library built by the offload builders, or an existing archive whose members hold device
images, or a library that cannot be found turns it off (the caller says so, once)."""

from __future__ import annotations

import os

import SCons.Util

from ..scons import nodes as _nodes
from ..toolchain import discovery as _toolchain

_ARCHIVE_MEMO: dict[tuple, bool] = {}


def _archive_has_device_code(path: str) -> bool:
    """True when an existing static archive holds device images in any member (memoised by the
    file's identity and mtime; archives are small to inspect next to a device link)."""
    try:
        st = os.stat(path)
    except OSError:
        return True
    key = (path, st.st_ino, st.st_mtime_ns, st.st_size)
    if key not in _ARCHIVE_MEMO:
        from offload_tool.ops import inspector
        from offload_tool.errors import OffloadError
        try:
            _ARCHIVE_MEMO[key] = bool(inspector.inspect_file(path, keep_data=False, hashes=False))
        except OffloadError:
            _ARCHIVE_MEMO[key] = False  # not an archive with readable offload content (an ld script, ...)
        except OSError:
            _ARCHIVE_MEMO[key] = True
    return _ARCHIVE_MEMO[key]


def _lib_dirs(senv) -> list[str]:
    out = []
    for d in SCons.Util.flatten([senv.get("LIBPATH") or []]):
        if _nodes.is_fs_entry(d):
            out.extend([_nodes.abspath(d), _nodes.abspath(d.srcnode())])
        else:
            p = senv.Dir(senv.subst(str(d)))
            out.extend([_nodes.abspath(p), _nodes.abspath(p.srcnode())])
    return list(dict.fromkeys(out))


def _system_file(senv, name: str) -> str | None:
    """Where the clang in use finds `name` in its library search path (it is asked)."""
    clang = senv.subst("$OFFLOAD_CLANG") if senv.get("OFFLOAD_CLANG") else ""
    if not clang:
        return None
    return _toolchain.print_file_name(senv, clang, name)


def device_code_reason(senv) -> str | None:
    """Why the libraries of this link may carry device code, or None when none can."""
    prefix, suffix = senv.subst("$LIBPREFIX"), senv.subst("$LIBSUFFIX")
    shsuffix = senv.subst("$SHLIBSUFFIX")
    for lib in SCons.Util.flatten([senv.get("LIBS") or []]):
        if _nodes.is_fs_entry(lib):
            candidates = [lib]
            label = str(lib)
        else:
            name = senv.subst(str(lib))
            if not name:
                continue
            label = name
            if os.sep in name or name.endswith((suffix, shsuffix)):
                candidates = [senv.File(name)]
            else:
                candidates = []
                for d in _lib_dirs(senv):
                    for fname in (prefix + name + shsuffix, prefix + name + suffix):
                        f = senv.File(os.path.join(d, fname))
                        if _nodes.has_builder(f) or os.path.exists(_nodes.abspath(f)):
                            candidates.append(f)
                if not candidates:
                    found = _system_file(senv, prefix + name + shsuffix) or _system_file(senv, prefix + name + suffix)
                    if not found:
                        return f"library '{name}' (LIBS) was not found, and may carry device code"
                    candidates = [senv.File(found)]
        first = candidates[0]
        if getattr(_nodes.marks(first), "offload_device_code", False):
            return f"library '{label}' (LIBS) is a heterogeneous archive built here"
        if first.name.endswith(shsuffix) or shsuffix + "." in first.name:
            continue  # a shared library: its device code is never linked into this program
        if _nodes.has_builder(first):
            return f"library '{label}' (LIBS) is built in this build and may carry device code"
        if _archive_has_device_code(_nodes.abspath(first)):
            return f"library '{label}' (LIBS) holds device images ({_nodes.abspath(first)})"
    return None
