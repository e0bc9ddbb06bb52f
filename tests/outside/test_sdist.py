"""The sdist holds exactly what builds and tests dlbridge (pyproject.toml, [tool.scikit-build] sdist):
its file list must be sdist-manifest.txt, so a stray file (an old wheel, a scratch file, the fuzz corpus)
or a missing one fails here. After adding or removing a file on purpose:

    .venv/bin/python tests/outside/test_sdist.py --write
"""

from __future__ import annotations

import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
MANIFEST = Path(__file__).resolve().parent / "sdist-manifest.txt"


def build_sdist(out: Path) -> Path:
    """The sdist, built by the pinned scikit-build-core exactly as pip's build frontends ask for it."""
    code = "import sys; from scikit_build_core.build import build_sdist; print(build_sdist(sys.argv[1]))"
    done = subprocess.run([sys.executable, "-c", code, str(out)], cwd=ROOT, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    return out / done.stdout.strip().splitlines()[-1]


def members(sdist: Path) -> list[str]:
    """Its files, relative to its top folder (dlbridge-VERSION/)."""
    with tarfile.open(sdist) as tar:
        return sorted(m.name.split("/", 1)[1] for m in tar.getmembers() if m.isfile())


def manifest() -> list[str]:
    return [line for line in MANIFEST.read_text().splitlines() if line and not line.startswith("#")]


@pytest.fixture(scope="module")
def sdist(tmp_path_factory) -> Path:
    return build_sdist(tmp_path_factory.mktemp("sdist"))


def test_sdist_holds_exactly_the_manifest(sdist):
    found = members(sdist)
    expected = manifest()
    extra, missing = sorted(set(found) - set(expected)), sorted(set(expected) - set(found))
    assert not extra and not missing, (
        f"in the sdist but not in {MANIFEST.name}: {extra}\nin {MANIFEST.name} but not in the sdist: {missing}\n"
        f"a stray file? remove it; a file added or removed on purpose? {__doc__.strip().splitlines()[-1].strip()}")


def test_sdist_carries_the_license_in_its_metadata(sdist):
    with tarfile.open(sdist) as tar:
        top = tar.getnames()[0].split("/", 1)[0]
        pkg_info = tar.extractfile(f"{top}/PKG-INFO").read().decode()
        license_text = tar.extractfile(f"{top}/LICENSE").read().decode()
    assert "License-Expression: Apache-2.0" in pkg_info and "License-File: LICENSE" in pkg_info
    assert license_text == (ROOT / "LICENSE").read_text() and "Apache License" in license_text


if __name__ == "__main__" and sys.argv[1:] == ["--write"]:
    import tempfile

    with tempfile.TemporaryDirectory() as scratch:
        files = members(build_sdist(Path(scratch)))
    MANIFEST.write_text("# Every file of the sdist (tests/outside/test_sdist.py); regenerate with\n"
                        "#   .venv/bin/python tests/outside/test_sdist.py --write\n" + "\n".join(files) + "\n")
    print(f"{MANIFEST}: {len(files)} files")
