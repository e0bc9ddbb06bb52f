"""The types users see (python/dlbridge/convert.pyi, _core.pyi) under mypy: the typed example
(tests/python/typing/typed_example.py) checks clean, and each line of the expected-errors file
marked "# E: code" is reported with that code, and no other line is."""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

# mypy is pinned in requirements/dev.txt: CI must never skip this file for want of it.
if importlib.util.find_spec("mypy") is None:
    if os.environ.get("CI") == "true":
        raise RuntimeError("mypy is not installed (requirements/dev.txt pins it)")
    pytest.skip("mypy is not installed (requirements/dev.txt)", allow_module_level=True)

HERE = Path(__file__).resolve().parent / "typing"
PACKAGE_ROOT = Path(__file__).resolve().parents[2] / "python"
REPORT = re.compile(r"^(?P<file>[^:]+):(?P<line>\d+): error: .*\[(?P<code>[a-z-]+)\]$")


@pytest.fixture(scope="module")
def reported(tmp_path_factory) -> dict[str, set[tuple[int, str]]]:
    """mypy's errors over both files, in one run: file name -> {(line, code)}."""
    cache = tmp_path_factory.mktemp("mypy-cache")
    proc = subprocess.run(
        [sys.executable, "-m", "mypy", "--python-executable", sys.executable, "--follow-imports=silent",
         "--cache-dir", str(cache), "--show-error-codes", "--no-error-summary", "--no-pretty",
         "typed_example.py", "expected_errors.py"],
        cwd=HERE, capture_output=True, text=True, timeout=900,
        # The package's own sources (and its stubs) as the editable install does not show them to mypy.
        env={"MYPYPATH": str(PACKAGE_ROOT), "PATH": "/usr/bin:/bin"})
    errors: dict[str, set[tuple[int, str]]] = {}
    for line in proc.stdout.splitlines():
        m = REPORT.match(line)
        if m:
            errors.setdefault(Path(m["file"]).name, set()).add((int(m["line"]), m["code"]))
        elif ": error:" in line:
            raise AssertionError(f"an error without a code: {line}")
    assert proc.returncode in (0, 1), proc.stdout + proc.stderr
    return errors


def test_the_typed_example_checks_clean(reported):
    assert reported.get("typed_example.py", set()) == set()


def test_each_expected_error_is_reported_and_nothing_else(reported):
    expected = set()
    for number, text in enumerate((HERE / "expected_errors.py").read_text().splitlines(), 1):
        m = re.search(r"# E: ([a-z-]+)$", text)
        if m:
            expected.add((number, m[1]))
    assert len(expected) >= 10
    assert reported.get("expected_errors.py", set()) == expected
