"""dlbridge.get_include() / get_cmake_dir() / get_pkgconfig_dir() and the
matching `python -m dlbridge` flags, in this (editable) installation; the
wheel's copies are checked by tests/outside/test_wheel.py."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import dlbridge
from dlbridge import _paths


def test_paths_hold_what_they_promise():
    assert (Path(dlbridge.get_include()) / "dlbridge" / "dlbridge.hpp").is_file()
    assert (Path(dlbridge.get_include()) / "dlbridge" / "python" / "nanobind.hpp").is_file()
    assert (Path(dlbridge.get_cmake_dir()) / "dlbridgeConfig.cmake").is_file()
    assert (Path(dlbridge.get_pkgconfig_dir()) / "dlbridge.pc").is_file()


@pytest.mark.parametrize("flag, function", [("--includedir", dlbridge.get_include),
                                            ("--cmake-dir", dlbridge.get_cmake_dir),
                                            ("--pkgconfig-dir", dlbridge.get_pkgconfig_dir)])
def test_module_flags_print_the_same_paths(flag, function):
    done = subprocess.run([sys.executable, "-m", "dlbridge", flag], capture_output=True, text=True, check=True)
    assert done.stdout == function() + "\n"


def test_a_broken_installation_says_what_is_missing(tmp_path, monkeypatch):
    monkeypatch.setattr(_paths, "_installed_root", lambda: tmp_path)
    with pytest.raises(FileNotFoundError, match=r"dlbridge/dlbridge.hpp is missing there; reinstall"):
        dlbridge.get_include()
    with pytest.raises(FileNotFoundError, match="dlbridgeConfig.cmake is missing"):
        dlbridge.get_cmake_dir()


def test_flag_on_a_broken_installation_exits_1_with_the_reason(tmp_path):
    code = ("import sys, dlbridge._paths as p, runpy; from pathlib import Path\n"
            f"p._installed_root = lambda: Path({str(tmp_path)!r})\n"
            "sys.argv = ['dlbridge', '--cmake-dir']; runpy.run_module('dlbridge', run_name='__main__')")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 1 and done.stdout == ""
    assert "dlbridge: dlbridge's CMake package should be at" in done.stderr


def test_other_arguments_still_reach_the_command_line():
    done = subprocess.run([sys.executable, "-m", "dlbridge", "version"], capture_output=True, text=True, check=True)
    assert done.stdout.startswith("dlbridge ")
