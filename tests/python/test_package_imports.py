"""No module of the dlbridge package imports one that imports it back: the layers of
CONTRIBUTING.md (library facts -> convert -> tools) hold in the code. Imports at module
level count wherever they stand in the file; imports inside functions are deferred on
purpose and are left out. The package's own __init__ (which every submodule's import
runs first) is the root of the graph, not a node of a cycle."""

from __future__ import annotations

import ast
import pathlib
import subprocess
import sys

import dlbridge

PACKAGE = pathlib.Path(dlbridge.__file__).parent


def module_name(path: pathlib.Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def module_level_imports(path: pathlib.Path, name: str, known: set[str]) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in tree.body:  # module level only, but anywhere in the file
        targets = []
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[: len(anchor) - (node.level - 1)]
                base = ".".join(anchor + ([base] if base else []))
            # `from pkg import sub` needs the submodule; `from pkg import name` the package itself.
            targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in known else base for a in node.names]
        for target in targets:
            if target in known and target != "dlbridge" and target != name:
                found.add(target)
    return found


def import_graph() -> dict[str, set[str]]:
    paths = sorted(PACKAGE.rglob("*.py"))
    names = {module_name(p): p for p in paths}
    known = set(names)
    return {name: module_level_imports(path, name, known) for name, path in names.items()}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    found, stack, state = [], [], {}

    def visit(node):
        state[node] = "active"
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == "active":
                found.append(stack[stack.index(nxt):] + [nxt])
            elif nxt not in state:
                visit(nxt)
        stack.pop()
        state[node] = "done"

    for node in sorted(graph):
        if node not in state:
            visit(node)
    return found


def test_the_graph_sees_the_package():
    graph = import_graph()
    assert "dlbridge.convert" in graph and "dlbridge.libraries" in graph["dlbridge.convert"]
    assert "dlbridge.libraries.numpy" in graph


def test_no_module_imports_one_that_imports_it_back():
    assert cycles(import_graph()) == []


def test_the_check_finds_a_cycle_when_there_is_one():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == [["a", "b", "c", "a"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_library_modules_import_nothing_of_dlbridge_but_their_own_package():
    graph = import_graph()
    for name, imports in graph.items():
        if name.startswith("dlbridge.libraries"):
            assert all(i.startswith("dlbridge.libraries") for i in imports), (name, imports)


# The core and its satellites (CONTRIBUTING.md, "The core and its satellites"). The core is what
# `import dlbridge` and `convert` need; a satellite is built on the core's public API and may be
# left out without the core noticing: sharing across processes (pickles; dlbridge._share, which
# the core's extension imports on first use, never at import time), the tools (doctor,
# explain and its catalogue, check, the pytest plugin, the command line). Every module of the
# package is one or the other, so a new module has to say which.
CORE = ("dlbridge", "dlbridge._paths", "dlbridge.convert", "dlbridge.errors", "dlbridge.libraries",
        "dlbridge.structures", "dlbridge.tables")
SATELLITES = (
    "dlbridge._pickle", "dlbridge._share",  # sharing: the reconstructors pickles name, the extension
    "dlbridge.doctor", "dlbridge.explain", "dlbridge.catalogue", "dlbridge.check",
    "dlbridge.check_consumer", "dlbridge.conformance_items", "dlbridge.conformance_setup",
    "dlbridge.testing", "dlbridge.cli", "dlbridge.__main__", "dlbridge._errors_stub",
    "dlbridge._parent_death",  # tools: their child processes end with them
)
# The one import of a satellite the core makes: the package re-exports dlbridge.explain()
# (shared/api.md), and the function shares its name with its module, which a lazy import would
# replace on the package once the command line loads that module.
CORE_IMPORTS_OF_SATELLITES = {("dlbridge", "dlbridge.explain")}


def part_of(name: str, parts: tuple[str, ...]) -> bool:
    return any(name == p or (p != "dlbridge" and name.startswith(p + ".")) for p in parts)


def satellite_imports(graph: dict[str, set[str]]) -> set[tuple[str, str]]:
    return {(name, target) for name, imports in graph.items() if part_of(name, CORE)
            for target in imports if part_of(target, SATELLITES)}


def test_every_module_is_core_or_satellite():
    for name in import_graph():
        assert part_of(name, CORE) != part_of(name, SATELLITES), name


def test_the_core_imports_no_satellite():
    assert satellite_imports(import_graph()) == CORE_IMPORTS_OF_SATELLITES


def test_a_core_module_importing_a_satellite_is_found():
    graph = import_graph()
    graph["dlbridge.convert"] = graph["dlbridge.convert"] | {"dlbridge.doctor"}
    assert ("dlbridge.convert", "dlbridge.doctor") in satellite_imports(graph)


def test_importing_dlbridge_loads_no_satellite_but_explain():
    code = ("import sys, dlbridge; print('\\n'.join(m for m in sys.modules if m.startswith('dlbridge')))")
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                            timeout=120).stdout.split()
    assert "dlbridge.convert" in loaded
    assert sorted(m for m in loaded if part_of(m, SATELLITES)) == ["dlbridge.catalogue",
                                                                  "dlbridge.catalogue.linear",
                                                                  "dlbridge.explain"]
