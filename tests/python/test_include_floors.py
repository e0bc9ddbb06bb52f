"""The floors of include/dlbridge, checked on the include graph.

CONTRIBUTING.md ("The layers") states the floors; FLOORS below states them
again as data, and a test holds the two to each other. A header may include
headers of its own floor or of a lower one, never of a higher one; only
include/dlbridge/python/ includes Python (<Python.h>, nanobind, pybind11).
The deprecated include paths kept for one release (FORWARDERS) are outside the
floors: each includes exactly its new header and nothing else.
"""

from __future__ import annotations

import pathlib
import re
import shutil

ROOT = pathlib.Path(__file__).resolve().parents[2]
INCLUDE = ROOT / "include"

# Bottom to top. An entry ending in "/" is a folder (with its subfolders);
# any other entry is one header. Paths are relative to include/dlbridge/.
FLOORS: list[tuple[int, list[str]]] = [
    (1, ["abi.hpp", "version.hpp", "error.hpp"]),
    (2, ["platform/"]),
    (3, ["dtype.hpp", "device.hpp", "layout.hpp", "tensor_view.hpp", "managed_tensor.hpp",
         "export.hpp", "allocate.hpp", "buffer_view.hpp", "dlpack_compat.hpp",
         "exchange_api.hpp", "request.hpp"]),
    (4, ["backend/"]),
    (5, ["copy/"]),
    (6, ["exchange/"]),
    (7, ["dlbridge.hpp"]),
    (8, ["python/"]),
]

# Deprecated path -> the header it forwards to (removed in the next release).
FORWARDERS: dict[str, str] = {
    "nanobind.hpp": "python/nanobind.hpp",
    "pybind11.hpp": "python/pybind11.hpp",
    "tensor_arg.hpp": "python/tensor_arg.hpp",
    "host_memory.hpp": "platform/host_memory.hpp",
    "shared_memory.hpp": "platform/shared_memory.hpp",
    "device_request.hpp": "backend/device_support.hpp",
    "copy.hpp": "copy/copy.hpp",
    "transfer.hpp": "copy/transfer.hpp",
    "producer.hpp": "exchange/plan_export.hpp",
    "consumer.hpp": "exchange/plan_import.hpp",
    "carry_out.hpp": "exchange/carry_out.hpp",
    "convert_plan.hpp": "exchange/plan_convert.hpp",
}

PYTHON_FOLDER = "python/"
PYTHON_HEADER = re.compile(r"^\s*#\s*include\s*<(Python\.h|nanobind/[^>]*|pybind11/[^>]*)>", re.M)
OUR_INCLUDE = re.compile(r'^\s*#\s*include\s*(?:"([^"]+)"|<(dlbridge/[^>]+)>)', re.M)


def floor_of(relative: str) -> int | None:
    """The floor of a header (a path relative to include/dlbridge), or None."""
    for floor, entries in FLOORS:
        for entry in entries:
            if relative == entry or (entry.endswith("/") and relative.startswith(entry)):
                return floor
    return None


def headers(root: pathlib.Path) -> list[str]:
    base = root / "dlbridge"
    return sorted(p.relative_to(base).as_posix() for p in base.rglob("*.hpp"))


def includes_of(root: pathlib.Path, relative: str) -> list[str]:
    """dlbridge headers that `relative` includes, as paths relative to include/dlbridge."""
    base = root / "dlbridge"
    path = base / relative
    found = []
    for quoted, angled in OUR_INCLUDE.findall(path.read_text(encoding="utf-8")):
        target = (path.parent / quoted) if quoted else (root / angled)
        found.append(pathlib.Path(target).resolve().relative_to(base.resolve()).as_posix())
    return found


def violations(root: pathlib.Path) -> list[str]:
    """Every break of the floor rules in the include tree under root (an include/ folder)."""
    problems = []
    base = root / "dlbridge"
    for relative in headers(root):
        text = (base / relative).read_text(encoding="utf-8")
        if not relative.startswith(PYTHON_FOLDER):
            for match in PYTHON_HEADER.finditer(text):
                problems.append(
                    f"{relative} includes <{match.group(1)}>: only {PYTHON_FOLDER} includes Python")
        if relative in FORWARDERS:
            if includes_of(root, relative) != [FORWARDERS[relative]] or "Deprecated include path" not in text:
                problems.append(f"{relative} must be a deprecated forwarder to {FORWARDERS[relative]} alone")
            continue
        floor = floor_of(relative)
        if floor is None:
            problems.append(f"{relative} has no floor: add it to FLOORS and CONTRIBUTING.md")
            continue
        for target in includes_of(root, relative):
            if not (base / target).is_file():
                problems.append(f"{relative} includes {target}, which does not exist")
            elif target in FORWARDERS:
                problems.append(f"{relative} includes the deprecated path {target}")
            elif (floor_of(target) or 0) > floor:
                problems.append(f"{relative} (floor {floor}) includes {target} (floor {floor_of(target)})")
    return problems


def test_every_header_keeps_its_floor():
    assert violations(INCLUDE) == []


def test_every_floor_and_forwarder_names_a_header_that_exists():
    present = set(headers(INCLUDE))
    for _, entries in FLOORS:
        for entry in entries:
            assert entry in present or any(h.startswith(entry) for h in present if entry.endswith("/")), entry
    for old, new in FORWARDERS.items():
        assert old in present and new in present, (old, new)


def test_contributing_states_the_same_floors():
    text = (ROOT / "CONTRIBUTING.md").read_text(encoding="utf-8")
    stated = {}
    for floor, cell in re.findall(r"^\| (\d+) \| ([^|]+) \|", text, re.M):
        stated[int(floor)] = re.findall(r"`([^`]+)`", cell)
    assert stated == {floor: entries for floor, entries in FLOORS}


# The one place outside include/ that includes the deprecated paths: the test
# that they still work.
DEPRECATED_PATHS_TEST = "tests/cpp/test_deprecated_paths.cpp"


def test_nothing_of_ours_includes_a_deprecated_path():
    users = []
    for folder in ("src", "tests", "bench", "fuzz", "examples"):
        for path in (ROOT / folder).rglob("*"):
            relative = path.relative_to(ROOT).as_posix()
            if path.suffix not in {".cpp", ".hpp", ".h", ".cc"} or relative == DEPRECATED_PATHS_TEST:
                continue
            for _, angled in OUR_INCLUDE.findall(path.read_text(encoding="utf-8", errors="replace")):
                if angled and angled.removeprefix("dlbridge/") in FORWARDERS:
                    users.append(f"{relative}: <{angled}>")
    assert users == []
    tested = set(re.findall(r"#include <dlbridge/([^>]+)>", (ROOT / DEPRECATED_PATHS_TEST).read_text()))
    assert tested == set(FORWARDERS) - {"nanobind.hpp", "pybind11.hpp"}


def plant(tmp_path: pathlib.Path, relative: str, line: str) -> pathlib.Path:
    root = tmp_path / "include"
    shutil.copytree(INCLUDE, root)
    path = root / "dlbridge" / relative
    text = path.read_text(encoding="utf-8")
    path.write_text(text.replace("#pragma once\n", f"#pragma once\n{line}\n", 1), encoding="utf-8")
    return root


def test_an_include_from_above_is_found(tmp_path):
    root = plant(tmp_path, "backend/stream.hpp", '#include "../exchange/plan.hpp"')
    assert violations(root) == ["backend/stream.hpp (floor 4) includes exchange/plan.hpp (floor 6)"]


def test_python_in_the_core_is_found(tmp_path):
    root = plant(tmp_path, "tensor_view.hpp", "#include <Python.h>")
    assert violations(root) == ["tensor_view.hpp includes <Python.h>: only python/ includes Python"]


def test_the_umbrella_may_not_reach_python(tmp_path):
    root = plant(tmp_path, "dlbridge.hpp", '#include "python/tensor_arg.hpp"')
    assert violations(root) == ["dlbridge.hpp (floor 7) includes python/tensor_arg.hpp (floor 8)"]


def test_a_header_without_a_floor_is_found(tmp_path):
    root = plant(tmp_path, "abi.hpp", "")
    (root / "dlbridge" / "misc").mkdir()
    (root / "dlbridge" / "misc" / "stray.hpp").write_text("#pragma once\n")
    assert violations(root) == ["misc/stray.hpp has no floor: add it to FLOORS and CONTRIBUTING.md"]


def test_a_core_header_on_a_deprecated_path_is_found(tmp_path):
    root = plant(tmp_path, "exchange/carry_out.hpp", '#include "../copy.hpp"')
    assert violations(root) == ["exchange/carry_out.hpp includes the deprecated path copy.hpp"]
