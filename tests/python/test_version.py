import pathlib
import re
from importlib.metadata import version

import dlbridge

ROOT = pathlib.Path(__file__).resolve().parents[2]


def header_version() -> str:
    text = (ROOT / "include/dlbridge/version.hpp").read_text()
    return re.search(r'DLBRIDGE_VERSION_STRING "([^"]+)"', text).group(1)


def test_version_comes_from_the_header():
    assert dlbridge.__version__ == header_version()
    assert version("dlbridge") == header_version()


def test_dlpack_version_produced():
    assert dlbridge.DLPACK_VERSION == (1, 3)
