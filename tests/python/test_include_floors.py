"""The floors of include/dlbridge, checked on the include graph.

CONTRIBUTING.md ("The layers") states the floors; FLOORS below states them
again as data, and a test holds the two to each other. A header may include
headers of its own floor or of a lower one, never of a higher one; only
include/dlbridge/python/ includes Python (<Python.h>, nanobind, pybind11).
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
    (1, ["abi.hpp", "version.hpp", "error.hpp", "compiler.hpp"]),
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

# The tensor model, which compiles on any C++17 compiler: every header of
# floors 1 and 3 but those that allocate host memory through platform/.
# tests/cpp/portable_headers.cpp includes exactly these, and scripts/test
# compiles it with the GNU and POSIX macros undefined.
PORTABLE_EXCEPT = {"allocate.hpp", "exchange_api.hpp"}
NOT_PORTABLE = ("platform/", "backend/")
PORTABLE_HEADERS_TEST = "tests/cpp/portable_headers.cpp"

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
        floor = floor_of(relative)
        if floor is None:
            problems.append(f"{relative} has no floor: add it to FLOORS and CONTRIBUTING.md")
            continue
        for target in includes_of(root, relative):
            if not (base / target).is_file():
                problems.append(f"{relative} includes {target}, which does not exist")
            elif (floor_of(target) or 0) > floor:
                problems.append(f"{relative} (floor {floor}) includes {target} (floor {floor_of(target)})")
    return problems


def test_every_header_keeps_its_floor():
    assert violations(INCLUDE) == []


def test_every_floor_names_a_header_that_exists():
    present = set(headers(INCLUDE))
    for _, entries in FLOORS:
        for entry in entries:
            assert entry in present or any(h.startswith(entry) for h in present if entry.endswith("/")), entry


def test_contributing_states_the_same_floors():
    text = (ROOT / "CONTRIBUTING.md").read_text(encoding="utf-8")
    stated = {}
    for floor, cell in re.findall(r"^\| (\d+) \| ([^|]+) \|", text, re.M):
        stated[int(floor)] = re.findall(r"`([^`]+)`", cell)
    assert stated == {floor: entries for floor, entries in FLOORS}


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



def test_an_include_of_a_removed_path_is_found(tmp_path):
    root = plant(tmp_path, "exchange/carry_out.hpp", '#include "../copy.hpp"')
    assert violations(root) == ["exchange/carry_out.hpp includes copy.hpp, which does not exist"]


def portable(root: pathlib.Path) -> list[str]:
    """The headers of floors 1 and 3 that must compile on any C++17 compiler."""
    return [h for h in headers(root) if floor_of(h) in (1, 3) and h not in PORTABLE_EXCEPT]


def reached(root: pathlib.Path, relative: str) -> set[str]:
    """Every dlbridge header that `relative` includes, directly or not."""
    seen: set[str] = set()
    todo = [relative]
    while todo:
        for target in includes_of(root, todo.pop()):
            if target not in seen and (root / "dlbridge" / target).is_file():
                seen.add(target)
                todo.append(target)
    return seen


def portability_violations(root: pathlib.Path) -> list[str]:
    return [f"{h} reaches {t}, which only POSIX with GCC or Clang compiles"
            for h in portable(root) for t in sorted(reached(root, h)) if t.startswith(NOT_PORTABLE)]


def test_the_tensor_model_reaches_neither_platform_nor_backend():
    assert portability_violations(INCLUDE) == []


def test_the_portable_check_compiles_exactly_the_tensor_model():
    text = (ROOT / PORTABLE_HEADERS_TEST).read_text(encoding="utf-8")
    assert sorted(re.findall(r"#include <dlbridge/([^>]+)>", text)) == portable(INCLUDE)


def test_a_tensor_model_header_reaching_platform_is_found(tmp_path):
    root = plant(tmp_path, "compiler.hpp", '#include "platform/platform.hpp"')
    found = portability_violations(root)
    assert "compiler.hpp reaches platform/platform.hpp, which only POSIX with GCC or Clang compiles" in found


# The satellites of the core in C++: sharing tensors across processes (POSIX shared memory, CUDA
# IPC, pickles), built as their own extension, dlbridge._share. No header of include/ reaches
# them, no source of dlbridge._core includes them, and the core meets them only through
# sharing_seam.hpp, which the two seams include (CONTRIBUTING.md, "The core and its satellites").
SATELLITE_HEADERS = ("platform/shared_memory.hpp", "backend/cuda_ipc.hpp")
SATELLITE_SOURCES = ("src/python/pickling.hpp", "src/python/pickling.cpp", "src/python/shared_memory.cpp",
                     "src/python/cuda_ipc.cpp", "src/python/share_module.cpp")
SHARING_SEAM = "sharing_seam.hpp"
SHARING_SEAM_USERS = {
    "src/python/module.cpp",  # binds the Tensor methods that call the sharing module's hooks
    "src/python/import.cpp",  # dlbridge.empty(shared=True)
    "src/python/sharing_seam.cpp",  # the seam itself: the hooks and the table _share reads
}
SOURCE_INCLUDE = re.compile(r'^\s*#\s*include\s*(?:"([^"]+)"|<dlbridge/([^>]+)>)', re.M)


def core_reaching_satellites(root: pathlib.Path) -> list[str]:
    return [f"{h} reaches {t}" for h in headers(root) if h not in SATELLITE_HEADERS
            for t in sorted(reached(root, h)) if t in SATELLITE_HEADERS]


def test_no_core_header_reaches_a_satellite():
    assert core_reaching_satellites(INCLUDE) == []


def test_a_core_header_reaching_a_satellite_is_found(tmp_path):
    root = plant(tmp_path, "exchange/plan.hpp", '#include "../platform/shared_memory.hpp"')
    assert "exchange/plan.hpp reaches platform/shared_memory.hpp" in core_reaching_satellites(root)


def core_sources():
    for path in sorted((ROOT / "src" / "python").rglob("*")):
        relative = path.relative_to(ROOT).as_posix()
        if path.suffix in {".cpp", ".hpp"} and relative not in SATELLITE_SOURCES:
            yield relative, SOURCE_INCLUDE.findall(path.read_text(encoding="utf-8"))


def test_core_extension_sources_include_no_satellite():
    found = {relative: angled or quoted for relative, includes in core_sources() for quoted, angled in includes
             if angled in SATELLITE_HEADERS or (quoted and f"src/python/{quoted}" in SATELLITE_SOURCES)}
    assert found == {}


def test_only_the_two_seams_include_the_sharing_seam():
    users = {relative for relative, includes in core_sources() for quoted, _ in includes if quoted == SHARING_SEAM}
    assert users == SHARING_SEAM_USERS


def test_the_share_module_is_built_from_the_sharing_sources():
    cmake = (ROOT / "src" / "python" / "CMakeLists.txt").read_text(encoding="utf-8")
    listed = re.search(r"set\(DLBRIDGE_SHARE_SOURCES ([^)]*)\)", cmake).group(1).split()
    assert sorted(f"src/python/{name}" for name in listed) == sorted(
        s for s in SATELLITE_SOURCES if s.endswith(".cpp"))
