"""The wheel carries the C++ side: headers, the CMake package and dlbridge.pc,
and tells where they are (dlbridge.get_include(), get_cmake_dir(),
python -m dlbridge --includedir / --cmake-dir)."""

from __future__ import annotations

import re
import shutil
import zipfile
from pathlib import Path

import pytest

from conftest import ROOT, run, tool_env


def test_wheel_holds_the_headers_and_package_files(wheel):
    names = set(zipfile.ZipFile(wheel).namelist())
    headers = {f"dlbridge/include/dlbridge/{p.relative_to(ROOT / 'include/dlbridge')}"
               for p in (ROOT / "include/dlbridge").rglob("*.hpp")}
    assert headers and headers <= names, sorted(headers - names)
    assert {"dlbridge/cmake/dlbridgeConfig.cmake", "dlbridge/cmake/dlbridgeConfigVersion.cmake",
            "dlbridge/cmake/dlbridgeTargets.cmake", "dlbridge/pkgconfig/dlbridge.pc"} <= names


def python_says(python: Path, code: str) -> str:
    return run([python, "-c", code]).stdout.strip()


def test_paths_point_into_the_installed_wheel(wheel_python):
    site = Path(python_says(wheel_python, "import sysconfig; print(sysconfig.get_paths()['purelib'])"))
    include = python_says(wheel_python, "import dlbridge; print(dlbridge.get_include())")
    cmake_dir = python_says(wheel_python, "import dlbridge; print(dlbridge.get_cmake_dir())")
    assert Path(include) == site / "dlbridge" / "include"
    assert (Path(include) / "dlbridge" / "python" / "nanobind.hpp").is_file()
    assert not (Path(include) / "dlbridge" / "detail" / "python_bridge.hpp").exists()
    assert Path(cmake_dir) == site / "dlbridge" / "cmake"
    assert run([wheel_python, "-m", "dlbridge", "--includedir"]).stdout.strip() == include
    assert run([wheel_python, "-m", "dlbridge", "--cmake-dir"]).stdout.strip() == cmake_dir


@pytest.mark.skipif(shutil.which("pkg-config") is None, reason="pkg-config is not installed")
def test_wheel_pkg_config_points_at_its_headers(wheel_python):
    pc_dir = run([wheel_python, "-m", "dlbridge", "--pkgconfig-dir"]).stdout.strip()
    cflags = run(["pkg-config", "--cflags", "dlbridge"], env=tool_env(PKG_CONFIG_PATH=pc_dir)).stdout
    include = re.search(r"-I(\S+)", cflags)[1]
    assert Path(include).resolve() == Path(python_says(wheel_python, "import dlbridge; print(dlbridge.get_include())"))


def test_outside_extension_compiled_against_the_wheels_headers_only(extensions, wheel_python):
    commands = (extensions.parent / "build.ninja").read_text()
    include = python_says(wheel_python, "import dlbridge; print(dlbridge.get_include())")
    assert include in commands
    assert str(ROOT / "include") not in commands
    assert sorted(p.name.split(".")[0] for p in extensions.glob("*.so")) == [
        "casters_bench_nanobind", "casters_bench_pybind11", "casters_nanobind", "casters_pybind11",
        "scale_nanobind", "scale_pybind11"]


def test_wheel_carries_the_license(wheel):
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        metadata = archive.read(next(n for n in names if n.endswith(".dist-info/METADATA"))).decode()
        licenses = [n for n in names if n.endswith(".dist-info/licenses/LICENSE")]
        assert len(licenses) == 1, names
        assert archive.read(licenses[0]) == (ROOT / "LICENSE").read_bytes()
    assert "License-Expression: Apache-2.0" in metadata and "License-File: LICENSE" in metadata


def test_one_wheel_carries_the_core_and_the_sharing_module(wheel):
    with zipfile.ZipFile(wheel) as archive:
        modules = sorted(n.rsplit("/", 1)[-1].split(".")[0] for n in archive.namelist() if n.endswith(".so"))
    assert modules == ["_core", "_share"]
