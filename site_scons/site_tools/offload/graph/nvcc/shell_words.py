"""What the shell gives a program: the words a POSIX shell makes of a simple command line
(`sh_words`), and the words a program gets when SCons runs a command (`shell_words`).

SCons hands each command line to the shell, so a compiler gets the words the shell makes of it
(`CPPDEFINES=[('VERSION', '\\"1.0\\"')]` reaches g++ as `-DVERSION="1.0"`); nvcc must get
the same words (`flags`), and nvcc's `--dryrun` plan is shell lines (`plan`). `shlex` expands no
`$NAME` and does not tell a command substitution or an operator from a word: hence this reader
of the simple commands, which leaves the rest to a shell."""

from __future__ import annotations

import re
import subprocess

from ...scons import actions as _actions


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
