"""Text from inside files made safe to print: one line, no terminal control sequences.

Entry IDs, section names, member names and string-table values come from files an attacker may
have written.  Printed raw, a newline in one forges extra lines of output (a second "error:" line,
a fake `-list` entry) and an escape sequence rewrites the terminal.  Every message and every name
printed by the CLIs goes through `printable`: C0 and C1 control characters and DEL become Python-
style escapes (`\\n`, `\\x1b`, `\\x85`), undecodable bytes kept as surrogates become `\\xNN`, and a
backslash stays a backslash (names are shown, not round-tripped).  Ordinary text, including
non-ASCII letters, is unchanged."""

from __future__ import annotations

import re

__all__ = ["printable"]

_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}
_UNSAFE = re.compile(r"[\x00-\x1f\x7f-\x9f\udc80-\udcff\u2028\u2029]")


def _escape(m: re.Match) -> str:
    c = m.group()
    named = _NAMED.get(c)
    if named is not None:
        return named
    code = ord(c)
    if 0xDC80 <= code <= 0xDCFF:  # a byte that was not UTF-8 (surrogateescape)
        code -= 0xDC00
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"


def printable(text) -> str:
    """`text` with every control character escaped (see the module docstring)."""
    text = str(text)
    return _UNSAFE.sub(_escape, text) if _UNSAFE.search(text) else text
