"""No module of the dlbridge package imports one that imports it back: the layers of
CONTRIBUTING.md (library facts -> convert -> tools) hold in the code. Imports at module
level count wherever they stand in the file; imports inside functions are deferred on
purpose and are left out. The package's own __init__ (which every submodule's import
runs first) is the root of the graph, not a node of a cycle."""

from __future__ import annotations

import ast
import pathlib

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
