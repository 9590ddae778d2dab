"""`__CUDA_ARCH_LIST__` tracking: a device or host preprocess reruns on an arch-list change only
when the text it preprocessed depends on the list (the record beside its output, read by
`rerun_if_list_used`, written by `record_arch_list_use`)."""

from __future__ import annotations

import os
import re

from ...scons import nodes as _nodes


# --------------------------------------------------------------------------------------------
# `__CUDA_ARCH_LIST__`: nvcc defines it for every preprocess as the whole arch list. A
# preprocessed text depends on it only where some file it read names it (CUB and Thrust put it
# in their namespace names); for the others, adding or removing an arch cannot change the text.
# So the macro is outside the preprocess steps' signatures, and each preprocess records beside
# its output the list it used, or nothing when no file it read (nor another option) names the
# macro; when the recorded list is not the current one, the step reruns (`AlwaysBuild`). A
# file that builds the name by token pasting is not seen.

ARCH_LIST_DEF = "-D__CUDA_ARCH_LIST__="
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
    others = " ".join(a for a in command.split() if not a.startswith(ARCH_LIST_DEF))
    if "__CUDA_ARCH_LIST__" in others:
        return True
    with open(ii_path, "rb") as f:
        text = f.read()
    files = {re.sub(r"\\(.)", r"\1", m.decode("utf-8", "surrogateescape")) for m in _LINE_MARKER.findall(text)}
    return any(_file_names_list(f) for f in files if not f.startswith("<"))


def record_arch_list_use(target, source, env):
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


def rerun_if_list_used(env, pp, arch_list: str) -> None:
    """Rerun the preprocess `pp` when its record (its last target) holds another arch list than
    `arch_list`."""
    try:
        with open(_nodes.abspath(pp[-1])) as f:
            recorded = f.read().strip()
    except OSError:
        return             # not built yet (its output is missing, so it runs)
    if recorded and recorded != arch_list:
        env.AlwaysBuild(pp)
