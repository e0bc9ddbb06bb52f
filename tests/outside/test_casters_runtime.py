"""The casters' run-time dependency on the dlbridge Python package
(docs/cpp-extensions.md, "The dlbridge package at run time"): an extension
built with them reads every tensor argument through the installed
dlbridge._core. Where that is missing, too old or of another interface
version, the extension fails with one ImportError that says what to do -- at
its import when it calls require_dlbridge (the examples), else at its first
tensor argument, whatever the argument is (the casters used to work for
NumPy input and raise ModuleNotFoundError for a memoryview and a plain
BufferError for read-only input). With the package, test_casters*.py and
test_examples.py."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from conftest import run

CALLS = ["view(np.zeros(3))", "view(memoryview(b'abc'))", "writable(np.frombuffer(b'abcd', np.uint8))",
         "view(object())"]


@pytest.fixture(scope="session")
def bare_python(work) -> Path:
    """A virtual environment with NumPy and no dlbridge."""
    venv = work / "bare-venv"
    run([sys.executable, "-m", "venv", "--without-pip", venv])
    python = venv / "bin" / "python"
    site = Path(run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"]).stdout.strip())
    numpy_home = Path(np.__file__).parent
    for item in [numpy_home, *numpy_home.parent.glob("numpy.libs"), *numpy_home.parent.glob("numpy-*.dist-info")]:
        (site / item.name).symlink_to(item)
    said = run([python, "-c", "import importlib.util as u; print(u.find_spec('dlbridge'), u.find_spec('numpy') is None)"])
    assert said.stdout.split() == ["None", "False"], said.stdout
    return python


def outcome(python: Path, extensions: Path, lines: list[str], extra_path: Path | None = None) -> list[str]:
    """Runs lines after putting the extensions (and extra_path) first on sys.path;
    each line's outcome: 'ok', or the exception's class and message."""
    code = ["import sys, numpy as np", f"sys.path[:0] = [{str(extensions)!r}, {str(extra_path or '')!r}]"]
    for line in lines:
        code += ["try:", f"    {line}", "    print('ok')", "except BaseException as e:",
                 "    print(type(e).__name__ + ': ' + str(e).replace(chr(10), ' '))"]
    done = subprocess.run([str(python), "-c", "\n".join(code)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout.splitlines()


def assert_install_advice(said: str) -> None:
    assert said.startswith("ImportError: This extension's dlbridge type casters read every tensor argument"), said
    assert "pip install dlbridge-<version>-<tag>.whl" in said and "it is not on PyPI" in said


@pytest.mark.parametrize("module", ["casters_nanobind", "casters_pybind11"])
def test_without_dlbridge_every_tensor_argument_raises_the_same_import_error(module, bare_python, extensions):
    said = outcome(bare_python, extensions, [f"import {module} as m"] + [f"m.{call}" for call in CALLS])
    assert said[0] == "ok"  # importing the extension needs nothing
    for line in said[1:]:
        assert_install_advice(line)
        assert "No module named 'dlbridge'" in line


@pytest.mark.parametrize("module", ["scale_nanobind", "scale_pybind11"])
def test_without_dlbridge_an_extension_calling_require_dlbridge_fails_at_import(module, bare_python, extensions):
    (said,) = outcome(bare_python, extensions, [f"import {module}"])
    assert_install_advice(said)


def fake_dlbridge(root: Path, table: str | None) -> Path:
    """A dlbridge package whose _core has no caster table (table None) or one
    whose first fields are `table`'s ctypes initialiser."""
    package = root / "dlbridge"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    core = "" if table is None else (
        "import ctypes\n"
        "class Head(ctypes.Structure):\n"
        "    _fields_ = [('major', ctypes.c_uint16), ('minor', ctypes.c_uint16), ('hold', ctypes.c_uint32),\n"
        "                ('entries', ctypes.c_void_p * 6)]\n"
        f"_table = Head({table})\n"
        "_new = ctypes.pythonapi.PyCapsule_New\n"
        "_new.restype = ctypes.py_object\n"
        "_new.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p]\n"
        "_name = ctypes.create_string_buffer(b'dlbridge._core._caster_api')\n"
        "_caster_api = _new(ctypes.addressof(_table), ctypes.addressof(_name), None)\n")
    (package / "_core.py").write_text(core)
    return root


@pytest.mark.parametrize("module", ["casters_nanobind", "casters_pybind11"])
def test_a_dlbridge_without_the_caster_interface_is_an_import_error_naming_it(module, bare_python, extensions,
                                                                               tmp_path):
    old = fake_dlbridge(tmp_path, None)
    said = outcome(bare_python, extensions, [f"import {module} as m", f"m.{CALLS[0]}"], old)
    assert said[0] == "ok"
    assert_install_advice(said[1])
    assert "has no attribute '_caster_api'" in said[1]


@pytest.mark.parametrize("table, words", [("2, 0, 64", "interface 2.0"), ("1, 0, 4096", "interface 1.0")],
                         ids=["major-2", "hold-too-large"])
@pytest.mark.parametrize("module", ["casters_nanobind", "casters_pybind11"])
def test_a_caster_interface_these_headers_cannot_use_is_refused_before_any_entry_is_called(
        module, table, words, bare_python, extensions, tmp_path):
    other = fake_dlbridge(tmp_path, table)
    said = outcome(bare_python, extensions, [f"import {module} as m", f"m.{CALLS[0]}"], other)
    assert said[1].startswith("ImportError: The installed dlbridge offers the casters' " + words), said[1]
    assert "Rebuild the extension against the installed dlbridge" in said[1]
