"""`llvm::sys::path` (POSIX style) as LLVM's tools use it to name their outputs: `filename`,
`stem`, `extension`.  Output names must match LLVM's byte for byte, edge cases included
(`.bashrc` has no stem, `dir/` names `.`), so the rules live here once."""

from __future__ import annotations

__all__ = ["filename", "stem", "extension"]


def filename(path: str) -> str:
    """`sys::path::filename`: the last component; "." for a trailing '/', "/" for the root."""
    if path.endswith("/"):
        return "." if path.strip("/") else "/"
    return path.rsplit("/", 1)[-1]


def stem(path: str) -> str:
    """`sys::path::stem`: the file name without its last extension (".bashrc" -> "")."""
    name = filename(path)
    if name in (".", ".."):
        return name
    dot = name.rfind(".")
    return name if dot < 0 else name[:dot]


def extension(path: str) -> str:
    """`sys::path::extension`: the last extension with its dot ("" for none, "." and "..")."""
    name = filename(path)
    if name in (".", ".."):
        return ""
    dot = name.rfind(".")
    return "" if dot < 0 else name[dot:]
