"""The words the SCons tool's modules pass each other are declared (`graph/protocol.py`): every
`_OFFLOAD_*` construction variable and every `offload_*` mark on a node or builder the tool's
source names is declared there with its meaning, and every declared one is used."""

from __future__ import annotations

import ast
import io
import re
import sys
import tokenize
from pathlib import Path

import pytest

from conftest import REPO

TOOL = REPO / "site_scons" / "site_tools" / "offload"
sys.path.insert(0, str(TOOL.parent))

from offload.graph import protocol  # noqa: E402

PROTOCOL = TOOL / "graph" / "protocol.py"

#: A private construction variable: `_OFFLOAD_` then capitals (a Python name such as a module's
#: `_OFFLOAD_ARCHS` table is no word: words are read from strings, comments and keyword names).
WORD = re.compile(r"(?<![A-Za-z0-9_])_OFFLOAD_[A-Z0-9_]*[A-Z0-9]")
MARK = re.compile(r"offload_[a-z_]*[a-z]")


def words(path: Path) -> dict[str, list[int]]:
    """The `_OFFLOAD_*` words `path` names, with their lines: in strings and comments (commands,
    keys, `$` references, docstrings) and as keyword arguments (`env._OffloadX(..., _OFFLOAD_Y=1)`)."""
    text = path.read_text()
    found: dict[str, list[int]] = {}
    for tok in tokenize.generate_tokens(io.StringIO(text).readline):
        if tok.type in (tokenize.STRING, tokenize.COMMENT) or tok.type == getattr(tokenize, "FSTRING_MIDDLE", None):
            for w in WORD.findall(tok.string):
                found.setdefault(w, []).append(tok.start[0])
    for node in ast.walk(ast.parse(text, str(path))):
        if isinstance(node, ast.keyword) and node.arg and WORD.fullmatch(node.arg):
            found.setdefault(node.arg, []).append(node.lineno)
    return found


def own_fields(paths) -> set[str]:
    """`offload_*` names the tool's own classes declare (`Language.offload_kind`): not marks."""
    out = set()
    for path in paths:
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ClassDef):
                for b in node.body:
                    if isinstance(b, ast.AnnAssign) and isinstance(b.target, ast.Name):
                        out.add(b.target.id)
                    elif isinstance(b, ast.Assign):
                        out.update(t.id for t in b.targets if isinstance(t, ast.Name))
    return {n for n in out if MARK.fullmatch(n)}


def marks(path: Path) -> dict[str, list[int]]:
    """The `offload_*` attributes `path` reads or sets: `x.offload_y` (`x` no module it imports),
    and `getattr`/`hasattr`/`setattr(x, "offload_y", ...)`."""
    found: dict[str, list[int]] = {}
    tree = ast.parse(path.read_text(), str(path))
    modules = {a.asname or a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, (ast.Import, ast.ImportFrom))
               for a in n.names}
    for node in ast.walk(tree):
        name = None
        if isinstance(node, ast.Attribute) and not (isinstance(node.value, ast.Name) and node.value.id in modules):
            name = node.attr  # (a module's function, `_objects.offload_object`, is no mark)
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
              and node.func.id in ("getattr", "hasattr", "setattr") and len(node.args) >= 2
              and isinstance(node.args[1], ast.Constant) and isinstance(node.args[1].value, str)):
            name = node.args[1].value
        if name and MARK.fullmatch(name):
            found.setdefault(name, []).append(node.lineno)
    return found


def _sources() -> list[Path]:
    return [p for p in sorted(TOOL.rglob("*.py")) if p != PROTOCOL]


def _used(scan) -> dict[str, list[str]]:
    used: dict[str, list[str]] = {}
    for p in _sources():
        for name, lines in scan(p).items():
            used.setdefault(name, []).extend(f"{p.relative_to(TOOL)}:{n}" for n in lines)
    return used


DECLARED_MARKS = {**protocol.NODE_ATTRIBUTES, **protocol.BUILDER_ATTRIBUTES}


def test_every_word_is_declared():
    used = _used(words)
    undeclared = {w: where[:3] for w, where in used.items() if w not in protocol.WORDS}
    assert not undeclared, f"declare these in graph/protocol.py WORDS, with their meaning: {undeclared}"


def test_every_declared_word_is_used():
    unused = sorted(set(protocol.WORDS) - set(_used(words)))
    assert not unused, f"declared in graph/protocol.py but used by no module (remove them): {unused}"


def test_every_mark_is_declared():
    own = own_fields(_sources())
    used = _used(marks)
    undeclared = {m: where[:3] for m, where in used.items() if m not in DECLARED_MARKS and m not in own}
    assert not undeclared, ("declare these node or builder marks in graph/protocol.py, with their meaning: "
                            f"{undeclared}")


def test_every_declared_mark_is_used():
    unused = sorted(set(DECLARED_MARKS) - set(_used(marks)))
    assert not unused, f"declared in graph/protocol.py but used by no module (remove them): {unused}"


def test_each_declaration_says_what_it_means():
    for table in (protocol.WORDS, protocol.NODE_ATTRIBUTES, protocol.BUILDER_ATTRIBUTES):
        for name, meaning in table.items():
            assert isinstance(meaning, str) and len(meaning.split()) >= 4 and "\n" not in meaning, name
    assert set(protocol.WORDS).isdisjoint(DECLARED_MARKS)
    assert all(WORD.fullmatch(w) for w in protocol.WORDS)
    assert all(MARK.fullmatch(m) for m in DECLARED_MARKS)


def test_the_scans_find_what_they_look_for(tmp_path):
    sample = tmp_path / "sample.py"
    sample.write_text(
        "_OFFLOAD_TABLE = {}  # a Python name, no word; `$_OFFLOAD_IN_COMMENT` is one\n"
        "COM = '$_OFFLOAD_A ${_OFFLOAD_B}'\n"
        "x = f'{y} $_OFFLOAD_C'\n"
        "env._OffloadX(t, s, _OFFLOAD_D=1)\n"
        "OFFLOAD_ARCHS = OFFLOAD_USER = 1\n"
        "class Record:\n    offload_kind: str = ''\n"
        "n.attributes.offload_e = 1\n"
        "getattr(n.attributes, 'offload_f', None)\n"
        "b.offload_g = True\n"
        "from . import objects as _objects\n_objects.offload_object(env)\n")
    assert set(words(sample)) == {"_OFFLOAD_IN_COMMENT", "_OFFLOAD_A", "_OFFLOAD_B", "_OFFLOAD_C", "_OFFLOAD_D"}
    assert set(marks(sample)) == {"offload_e", "offload_f", "offload_g"}
    assert own_fields([sample]) == {"offload_kind"}


def test_parts_read_as_fields_and_as_items():
    host, dev, pkg = object(), object(), object()
    parts = protocol.Parts(host=host, devices={"sm_80": dev}, package=pkg)
    assert parts.host is host and parts["host"] is host and parts["devices"] == {"sm_80": dev}
    assert parts["package"] is pkg and protocol.Parts().devices == {} and protocol.Parts().package is None
    with pytest.raises(KeyError):
        parts["other"]


def test_every_builder_is_named_with_the_prefix_and_every_message_has_its_command():
    """The tool's builders are told from a user's by their name (`protocol.BUILDER_PREFIX`); a
    step's message `X*COMSTR` has its command `X*COM` (as SCons's own tools pair them), and a
    Python step's message, which has no command, is an `X*STR`."""
    import offload
    commands, messages, names = {}, {}, []
    for m in offload.BUILDER_MODULES:
        commands.update(m.COMMANDS)
        messages.update(m.COMSTRS)
        names += list(m.builders())
    assert names and all(n.startswith(protocol.BUILDER_PREFIX) for n in names), names
    unpaired = [k for k in messages if k.endswith("COMSTR") and k[:-3] not in commands]
    assert not unpaired, f"a *COMSTR without its *COM: {unpaired}"
    assert all(k.endswith("STR") for k in messages), messages
