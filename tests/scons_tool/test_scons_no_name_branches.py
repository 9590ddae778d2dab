"""A flavour owns every fact about itself: nothing outside `flavours/` (and `settings/languages.py`,
whose records name the flavours) branches on a flavour's or a language's name. Read from the
tool's source: a name of a registered flavour or language compared (`==`, `in`, a set of names),
used as a dict key or an index, or a record of either compared by identity or by its `.name`, is a
branch; the same word in a docstring, a message, a keyword value or a default is not."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

from conftest import REPO

TOOL = REPO / "site_scons" / "site_tools" / "offload"
sys.path.insert(0, str(TOOL.parent))

from offload.flavours import registry as _flavours  # noqa: E402
from offload.settings import languages as _languages  # noqa: E402

#: Where names may be branched on: the flavours, and the language records that name them.
OWNERS = ("flavours/", "settings/languages.py")
#: The generic flavour `clang` shares its name with the compiler, whose program names the
#: toolchain modules test (`"clang" in basename`): a compiler's name, not a flavour's.
COMPILER_NAMES = {"clang"}
#: The modules' aliases of the registries, and the names of the flavour and language records in them.
REGISTRIES = {"_flavours": _flavours, "_languages": _languages}
#: nvcc's `--dryrun` steps have kinds of their own (`host`, `cicc`, ...): `step.kind == "host"`
#: names a step, not a language.
STEP_KIND_WORDS = {"kind", "kinds"}
#: An object's parts (`offload_parts`) are keyed by role: `parts["host"]` is its host object.
PARTS_KEYS = {"host", "devices", "package"}
PARTS_WORDS = {"parts", "offload_parts"}


def names() -> set[str]:
    found = set(_flavours.FLAVOURS) | set(_languages.LANGUAGES)
    found |= {lang.offload_kind for lang in _languages.LANGUAGES.values() if lang.offload_kind}
    return found - COMPILER_NAMES


def _words(node: ast.AST) -> set[str]:
    """The names and attribute names an expression is made of."""
    out = set()
    for n in ast.walk(node):
        if isinstance(n, ast.Name):
            out.add(n.id)
        elif isinstance(n, ast.Attribute):
            out.add(n.attr)
    return out


def _literals(node: ast.AST, known: set[str]) -> list[str]:
    """The names in `known` that `node` spells: a string, or a tuple, list or set of strings."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value] if node.value in known else []
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        if _parts_keys([e.value for e in node.elts if isinstance(e, ast.Constant)]):
            return []
        return [e.value for e in node.elts if isinstance(e, ast.Constant) and e.value in known]
    return []


def _parts_keys(words) -> bool:
    """The roles of an object's parts, spelled together (`("host", "devices", "package")`)."""
    return bool(words) and set(words) <= PARTS_KEYS and "devices" in words


def _record(node: ast.AST) -> str | None:
    """`_languages.OPENMP`, `_flavours.SPLIT_DEVICE_LINK.name`: a registry's record (or its name)."""
    if isinstance(node, ast.Attribute) and node.attr == "name":
        node = node.value
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in REGISTRIES \
            and isinstance(getattr(REGISTRIES[node.value.id], node.attr, None), (_flavours.Flavour, _languages.Language)):
        return f"{node.value.id}.{node.attr}"
    return None


def branches(source: str, known: set[str]) -> list[str]:
    """`line: what` for each branch on a flavour or language name in `source`."""
    found = []
    for node in ast.walk(ast.parse(source)):
        hits: list[str] = []
        if isinstance(node, ast.Compare):
            operands = [node.left, *node.comparators]
            for i, operand in enumerate(operands):
                others = operands[:i] + operands[i + 1:]
                if any(_words(o) & STEP_KIND_WORDS for o in others):
                    continue
                hits += [repr(n) for n in _literals(operand, known)]
                if (rec := _record(operand)) is not None:
                    hits.append(rec)
        elif isinstance(node, ast.BinOp):  # set algebra: `langs - {"host"}`
            hits += [repr(n) for side in (node.left, node.right) if isinstance(side, ast.Set)
                     for n in _literals(side, known)]
        elif isinstance(node, ast.Dict):
            if not _parts_keys([k.value for k in node.keys if isinstance(k, ast.Constant)]):
                hits += [repr(n) for k in node.keys if k is not None for n in _literals(k, known)]
        elif isinstance(node, ast.Subscript):
            if not _words(node.value) & PARTS_WORDS:
                hits += [repr(n) for n in _literals(node.slice, known)]
        elif isinstance(node, ast.MatchValue):
            hits += [repr(n) for n in _literals(node.value, known)]
        found += [f"{node.lineno}: {h}" for h in hits]
    return found


def tool_modules() -> list[Path]:
    return [p for p in sorted(TOOL.rglob("*.py"))
            if not p.relative_to(TOOL).as_posix().startswith(OWNERS)]


def test_the_names_are_read_from_the_registries():
    assert {"openmp-clang", "cuda-clang", "cuda-nvcc", "hip-bundled", "hip-packaged", "hip-bundled-hipcc",
            "hip-packaged-hipcc", "host", "openmp", "cuda", "hip"} <= names()


def test_nothing_outside_the_flavours_branches_on_a_flavour_or_language_name():
    known = names()
    found = [f"{p.relative_to(TOOL)}:{b}" for p in tool_modules() for b in branches(p.read_text(), known)]
    assert not found, ("branches on a flavour or language name outside flavours/ and settings/languages.py "
                       "(make the fact a field or method of the flavour, or of the language record): "
                       + ", ".join(found))


@pytest.mark.parametrize("source, found", [
    ('if f == "cuda-nvcc": pass', ['1: \'cuda-nvcc\'']),
    ('x = lang in ("cuda", "hip")', ["1: 'cuda'", "1: 'hip'"]),
    ('langs = set(known) - {"", "host"}', ["1: 'host'"]),
    ('LOCAL = {"openmp-clang": 1}', ["1: 'openmp-clang'"]),
    ('f = FLAVOURS["host"]', ["1: 'host'"]),
    ('ok = lang is _languages.OPENMP', ["1: _languages.OPENMP"]),
    ('ok = lang.name == _languages.HOST.name', ["1: _languages.HOST"]),
    ('match lang:\n    case "openmp": pass', ["2: 'openmp'"]),
    # not branches: a docstring, a keyword value, a default, a message, an nvcc step's kind
    ('"""cuda-nvcc builds it"""', []),
    ('o = dict(kw, _OFFLOAD_LANG="cuda")', []),
    ('lang = env.get("_OFFLOAD_LANG", "openmp")', []),
    ('print(f"{x}: host")', []),
    ('h = next(st for st in steps if st.kind == "host")', []),
    ('ok = kinds[-1] != "host"', []),
    ('ok = "clang" in name', []),
    ('argv = ["-x", "cuda"] + more', []),
    ('what = "host" + suffix', []),
    ('h = parts["host"]', []),
    ('p = {"host": n, "devices": {}, "package": None}', []),
    ('ok = name not in ("host", "devices", "package")', []),
    ('ok = x in _languages.C_SUFFIXES', []),
])
def test_the_branch_finder(source, found):
    assert branches(source, names()) == found
