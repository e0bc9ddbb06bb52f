"""Fixtures of the outside-project tests: dlbridge used only the ways a user
outside this repository can use it.

Everything is built once per session, into one scratch directory:
- ``wheel_python``: a fresh virtual environment holding only the dlbridge
  wheel built from this tree; the other packages (numpy, torch, jax,
  nanobind, pybind11) are seen from the development environment through a
  plain path entry, which does not run its editable-install hook, so
  ``import dlbridge`` there is the wheel's.
- ``extensions``: tests/outside/extensions (both examples and the caster test
  modules), configured with that Python and nothing else: dlbridge is found
  through ``python -m dlbridge --cmake-dir``. ``DLBRIDGE_TEST_EXTENSIONS``
  names a directory of modules built already (the sanitized run's).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
JOBS = str(os.cpu_count() or 2)


def tool_env(**extra: str) -> dict[str, str]:
    """The environment with this Python's tools (cmake, ninja) first on PATH."""
    env = os.environ.copy()
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env.update(extra)
    return env


def run(cmd: list, *, env: dict[str, str] | None = None, cwd: Path | None = None,
        timeout: float = 400) -> subprocess.CompletedProcess:
    """Runs cmd; a failure fails the test with the command's whole output."""
    done = subprocess.run([str(c) for c in cmd], env=env or tool_env(), cwd=cwd, capture_output=True,
                          text=True, timeout=timeout)
    if done.returncode != 0:
        pytest.fail(f"{' '.join(map(str, cmd))} exited {done.returncode}\n{done.stdout}\n{done.stderr}")
    return done


@pytest.fixture(scope="session")
def work(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("outside")


@pytest.fixture(scope="session")
def wheel(work) -> Path:
    out = work / "wheel"
    # The same build directory as the editable install: only packaging is new.
    run([sys.executable, "-m", "pip", "wheel", "-q", "--disable-pip-version-check", "--no-deps",
         "--no-build-isolation", "-w", out, ROOT])
    (found,) = out.glob("dlbridge-*.whl")
    return found


@pytest.fixture(scope="session")
def wheel_python(work, wheel) -> Path:
    venv = work / "wheel-venv"
    run([sys.executable, "-m", "venv", "--without-pip", venv])
    python = venv / "bin" / "python"
    site = Path(run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"]).stdout.strip())
    run([sys.executable, "-m", "pip", "install", "-q", "--disable-pip-version-check", "--no-deps",
         "--target", site, wheel])
    (site / "development-packages.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    return python


@pytest.fixture(scope="session")
def extensions(request, work) -> Path:
    # DLBRIDGE_TEST_EXTENSIONS: modules already built elsewhere against the dlbridge this
    # interpreter imports (scripts/test-python-asan builds them sanitized beside its _core).
    if os.environ.get("DLBRIDGE_TEST_EXTENSIONS"):
        return Path(os.environ["DLBRIDGE_TEST_EXTENSIONS"])
    wheel_python = request.getfixturevalue("wheel_python")
    build = work / "extensions"
    run(["cmake", "-S", HERE / "extensions", "-B", build, "-G", "Ninja", "-DCMAKE_BUILD_TYPE=Release",
         f"-DPython_EXECUTABLE={wheel_python}", f"-DDLBRIDGE_EXAMPLES={ROOT / 'examples'}",
         f"-DDLBRIDGE_BENCH={ROOT / 'bench'}"])
    run(["cmake", "--build", build, "-j", JOBS])
    return build / "modules"


@pytest.fixture(scope="session")
def extension_path(extensions):
    """The built modules, importable in this process (which has dlbridge already)."""
    sys.path.insert(0, str(extensions))
    yield extensions
    sys.path.remove(str(extensions))


def have(tool: str) -> bool:
    return shutil.which(tool, path=tool_env()["PATH"]) is not None


class OldProducer:
    """A producer from before max_version: __dlpack__ takes no keywords."""

    def __init__(self, array):
        self.array = array
        self.calls = 0

    def __dlpack__(self):
        self.calls += 1
        return self.array.__dlpack__()

    def __dlpack_device__(self):
        return (1, 0)
