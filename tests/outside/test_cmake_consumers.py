"""dlbridge's source tree used by outside CMake projects: a plain configure,
build and install with no options, find_package against the install,
add_subdirectory, FetchContent from a local path, and pkg-config."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from conftest import ROOT, run, tool_env

VERSION = re.search(r'DLBRIDGE_VERSION_STRING "([^"]+)"', (ROOT / "include/dlbridge/version.hpp").read_text())[1]


def configure(source: Path, build: Path, *options: str) -> str:
    done = run(["cmake", "-S", source, "-B", build, *options])
    return done.stdout + done.stderr


@pytest.fixture(scope="module")
def plain_prefix(work) -> Path:
    """configure (as on a machine without GoogleTest), build, install: no other option."""
    build, prefix = work / "plain-build", work / "plain-prefix"
    out = configure(ROOT, build, "-DCMAKE_DISABLE_FIND_PACKAGE_GTest=ON")
    assert "C++ tests skipped: GoogleTest not found" in out
    run(["cmake", "--build", build])
    run(["cmake", "--install", build, "--prefix", prefix])
    return prefix


def test_plain_configure_finds_the_official_header_through_python(work):
    out = configure(ROOT, work / "plain-default")
    found = re.search(r"official DLPack 1\.3 header: (\S+)", out)
    assert found, out
    assert Path(found[1]).is_file()
    assert "test_abi_official and test_dlpack_compat skipped" not in out


@pytest.mark.skipif(Path("/usr/include/dlpack/dlpack.h").exists(), reason="a system dlpack.h would be found")
def test_plain_configure_without_a_python_skips_official_header_tests_with_a_reason(work):
    out = configure(ROOT, work / "plain-no-python", "-DCMAKE_DISABLE_FIND_PACKAGE_Python=ON")
    assert "test_abi_official and test_dlpack_compat skipped: no official DLPack 1.3" in out
    assert "-DDLBRIDGE_OFFICIAL_DLPACK_INCLUDE=" in out


def test_plain_install_serves_find_package(work, plain_prefix):
    build = work / "consumer-build"
    configure(ROOT / "tests/consumer", build, "-G", "Ninja", f"-DCMAKE_PREFIX_PATH={plain_prefix}",
              f"-DDLBRIDGE_EXPECTED_VERSION={VERSION}", "-DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF")
    cache = (build / "CMakeCache.txt").read_text()
    found_dir = re.search(r"^dlbridge_DIR:PATH=(.*)$", cache, re.M)[1]
    assert Path(found_dir).resolve().is_relative_to(plain_prefix.resolve())
    run(["cmake", "--build", build])
    assert "all checks passed" in run([build / "consumer"]).stdout


@pytest.mark.parametrize("how", ["add_subdirectory", "fetchcontent"])
def test_parent_project_gets_the_target_and_no_tests(work, how):
    build = work / f"subproject-{how}"
    configure(Path(__file__).parent / "subproject", build, "-G", "Ninja", f"-DHOW={how}",
              f"-DDLBRIDGE_SOURCE={ROOT}")
    run(["cmake", "--build", build])
    listed = run(["ctest", "--test-dir", build, "-N"]).stdout
    # Only the parent's own test: none of dlbridge's.
    assert "Total Tests: 1" in listed and "subproject_user" in listed
    assert "as a subproject: ok" in run([build / "subproject_user"]).stdout
    # Nor does a subproject install dlbridge unless its parent asks.
    assert "dlbridge.pc" not in run(["cmake", "--install", build, "--prefix", work / f"sub-prefix-{how}"]).stdout


@pytest.mark.skipif(shutil.which("pkg-config") is None, reason="pkg-config is not installed")
def test_pkg_config_file_builds_a_consumer(work, plain_prefix):
    env = tool_env(PKG_CONFIG_PATH=str(plain_prefix / "share/pkgconfig"))
    assert run(["pkg-config", "--modversion", "dlbridge"], env=env).stdout.strip() == VERSION
    cflags = run(["pkg-config", "--cflags", "dlbridge"], env=env).stdout.split()
    libs = run(["pkg-config", "--libs", "dlbridge"], env=env).stdout.split()
    include = next(flag[2:] for flag in cflags if flag.startswith("-I"))
    assert Path(include).resolve() == (plain_prefix / "include").resolve()
    exe = work / "pkgconfig-consumer"
    run(["c++", "-std=c++17", "-Wall", "-Wextra", "-Wpedantic", "-Werror", *cflags,
         f'-DDLBRIDGE_PACKAGE_VERSION="{VERSION}"', ROOT / "tests/consumer/main.cpp", "-o", exe, *libs])
    assert "all checks passed" in run([exe]).stdout
