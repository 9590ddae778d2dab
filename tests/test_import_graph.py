"""The import graphs of the library and of the SCons tool, read from the source: no import circles
(imports inside functions included) and no library tier importing a higher one
(docs/architecture.md, "Tiers")."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "offload_tool"
TOOL = Path(__file__).resolve().parent.parent / "site_scons" / "site_tools" / "offload"

# The tiers, lowest first (docs/architecture.md): a module imports from its own tier and lower ones.
FOUNDATIONS = {"offload_tool", "offload_tool.errors", "offload_tool.inputs", "offload_tool.fileio",
               "offload_tool.printable", "offload_tool.budget", "offload_tool.records"}
TIERS = {"foundations": 0, "rules": 1, "formats": 2, "ops": 3, "cli": 4}


def _modules(package: Path = PACKAGE) -> dict[str, Path]:
    modules = {}
    for path in sorted(package.rglob("*.py")):
        parts = list(path.relative_to(package.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        modules[".".join(parts)] = path
    return modules


def _imported(module: str, path: Path, node: ast.Import | ast.ImportFrom, modules: dict[str, Path]) -> set[str]:
    """The library modules one import statement names (`from pkg import mod` names `pkg.mod`)."""
    if isinstance(node, ast.Import):
        names = [alias.name for alias in node.names]
    else:
        if node.level:
            base = module.split(".")
            if path.name != "__init__.py":
                base.pop()
            base = base[:len(base) - (node.level - 1)]
            prefix = ".".join(base + ([node.module] if node.module else []))
        else:
            prefix = node.module or ""
        names = [f"{prefix}.{alias.name}" if f"{prefix}.{alias.name}" in modules else prefix
                 for alias in node.names]
    found = set()
    for name in names:
        while name not in modules and "." in name:
            name = name.rsplit(".", 1)[0]
        if name in modules and name != module:
            found.add(name)
    return found


def import_graph(package: Path = PACKAGE) -> dict[str, set[str]]:
    """Module -> the package's modules it imports anywhere in its source (functions included)."""
    modules = _modules(package)
    graph = {}
    for module, path in modules.items():
        edges: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                edges |= _imported(module, path, node, modules)
        graph[module] = edges
    return graph


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import circle of `graph` (its modules, the first repeated at the end), or None."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(module: str) -> list[str] | None:
        state[module] = 1
        path.append(module)
        for dep in sorted(graph[module]):
            if state.get(dep) == 1:
                return path[path.index(dep):] + [dep]
            if dep not in state and (found := visit(dep)) is not None:
                return found
        path.pop()
        state[module] = 2
        return None

    for module in sorted(graph):
        if module not in state and (found := visit(module)) is not None:
            return found
    return None


def tier(module: str) -> int:
    if module in FOUNDATIONS:
        return TIERS["foundations"]
    parts = module.split(".")
    if len(parts) < 2 or parts[1] not in TIERS:
        raise AssertionError(f"{module} is in no tier: add it to FOUNDATIONS or a tier package "
                             f"(and to docs/architecture.md)")
    return TIERS[parts[1]]


def test_graph_is_read():
    graph = import_graph()
    assert "offload_tool.ops.bundler_api" in graph["offload_tool.cli.bundler"]
    # Imports inside functions count: the bundler imports its -### printer only for -###.
    assert "offload_tool.ops.dry_run" in graph["offload_tool.cli.bundler"]
    assert "offload_tool.budget" in graph["offload_tool.formats.offload_binary"]  # `from .. import budget`


def test_no_import_cycle():
    cycle = _cycle(import_graph())
    assert cycle is None, "import circle: " + " -> ".join(cycle)


def test_the_scons_tool_has_no_import_cycle():
    graph = import_graph(TOOL)
    assert "offload.flavours.registry" in graph["offload.graph.objects"]
    cycle = _cycle(graph)
    assert cycle is None, "import circle: " + " -> ".join(cycle)


def test_lower_tiers_do_not_import_higher_ones():
    wrong = [f"{m} -> {d}" for m, deps in sorted(import_graph().items()) for d in sorted(deps) if tier(d) > tier(m)]
    assert not wrong, "lower tier imports a higher one: " + ", ".join(wrong)


def test_every_module_has_a_tier():
    for module in import_graph():
        tier(module)


#: What the library never imports at run time: each CLI call is a process of its own, and these
#: cost its start-up (`dataclasses` brings `inspect`, `ast`, `dis`, `tokenize`); the data classes
#: are `offload_tool.records` classes, annotation-only names sit under `if TYPE_CHECKING:`.
START_UP_HEAVY = {"dataclasses", "typing", "inspect"}


def _run_time_imports(tree: ast.Module) -> list[tuple[int, str]]:
    """(line, module) of every import outside an `if TYPE_CHECKING:` block, functions included."""
    found = []

    def visit(node):
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, ast.Import):
            found.extend((node.lineno, alias.name.split(".")[0]) for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            found.append((node.lineno, node.module.split(".")[0]))
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    return found


def test_the_library_imports_no_start_up_heavy_module_at_run_time():
    wrong = [f"{path.relative_to(PACKAGE.parent)}:{line}: {name}"
             for path in sorted(_modules().values())
             for line, name in _run_time_imports(ast.parse(path.read_text(), str(path)))
             if name in START_UP_HEAVY]
    assert not wrong, "imported at run time: " + ", ".join(wrong)


#: The SCons tool's layers, lowest first (docs/architecture.md): the door to SCons; asking
#: compilers; what the settings mean; building the graph (nodes, flavours, distribution, insight,
#: and the helper scripts its steps run); the tool's entry.
TOOL_LAYERS = {"scons": 0, "toolchain": 1, "settings": 2, "graph": 3, "flavours": 3, "dist": 3, "insight": 3,
               "_package_embed": 3, "_device_link": 3, "offload": 4,
               # the table of callable variables names functions of every layer: only the entry reads it
               "settings.variables": 4}


def tool_layer(module: str) -> int:
    name = module.split(".", 1)[1] if "." in module else module
    for key in (name, name.split(".")[0]):
        if key in TOOL_LAYERS:
            return TOOL_LAYERS[key]
    raise AssertionError(f"{module}: no layer in TOOL_LAYERS")


def test_the_scons_tool_layers_import_downwards():
    """A module imports its own layer and those below: `scons/` nothing of the tool, `toolchain/`
    only `scons/`, `settings/` those two; `settings.variables`, which names the callables of
    every layer, only `generate` imports."""
    graph = import_graph(TOOL)
    wrong = [f"{m} -> {d}" for m, deps in sorted(graph.items()) for d in sorted(deps) if tool_layer(d) > tool_layer(m)]
    assert not wrong, "a lower layer of the SCons tool imports a higher one: " + ", ".join(wrong)
    readers = sorted(m for m, deps in graph.items() if "offload.settings.variables" in deps)
    assert readers == ["offload"], readers

@pytest.mark.parametrize("graph, cycle", [
    ({"a": {"b"}, "b": {"c"}, "c": {"a"}}, ["a", "b", "c", "a"]),
    ({"a": {"b"}, "b": set(), "c": {"a", "b"}}, None),
])
def test_cycle_finder(graph, cycle):
    assert _cycle(graph) == cycle


def test_every_package_of_the_scons_tool_is_installed():
    """pyproject.toml lists the tool's sub-packages one by one (the tool installs as
    `offload_scons.offload`): a new sub-package missing there would be left out of a wheel."""
    import tomllib
    listed = set(tomllib.loads((TOOL.parents[2] / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    packages = {".".join(("offload_scons", *p.parent.relative_to(TOOL.parent).parts)) for p in TOOL.rglob("__init__.py")}
    assert packages <= listed, sorted(packages - listed)


def test_docs_architecture_has_a_row_for_every_module_of_the_scons_tool():
    """docs/architecture.md's module table of the SCons tool matches the tree: every module has a
    row (a row may name several modules of one package: `flavours/openmp_clang.py`, `cuda_clang.py`),
    and every module a row names exists."""
    import re
    text = (TOOL.parents[2] / "docs" / "architecture.md").read_text()
    section = text[text.index("## The SCons tool"):text.index("### Where do I change X (SCons tool)")]
    named = set()
    for row in section.splitlines():
        m = re.match(r"^\| (`[^|]+`) \|", row)
        if not m:
            continue
        folder = ""
        for word in re.findall(r"`([a-z_/]+\.py)`", m.group(1)):
            if "/" in word:
                folder = word.rsplit("/", 1)[0] + "/"
                named.add(word)
            else:
                named.add(folder + word)
    modules = {str(p.relative_to(TOOL)) for p in TOOL.rglob("*.py")
               if p.name != "__init__.py" or p.parent == TOOL or p.parent.name == "nvcc"}
    assert modules - named == set(), sorted(modules - named)
    assert named - modules == set(), sorted(named - modules)
