"""Shared fixtures of the Python suite.

numpy, torch, jax and ml_dtypes are pinned dependencies of the suite and are
imported directly: a missing one must fail the run, not skip half of it.
Only tests that need a GPU may skip, and the Python matrix (scripts/test-matrix),
which names the libraries that have no wheel for its interpreter in
DLBRIDGE_TEST_WITHOUT (e.g. "torch,jax"): test files that use one of those are
not collected there, and the run's header lists them. Tests marked `sharing`
need the sharing module (dlbridge._share, which -DDLBRIDGE_SHARE=OFF leaves
out): without it they skip with that reason, and a CI run without it must
deselect them (-m "not sharing", as scripts/test-no-share does) rather than
skip them.
"""

from __future__ import annotations

import gc
import importlib.util
import os
import pathlib
import re
import subprocess
import sys
import textwrap

import pytest

import dlbridge
from dlbridge._core import _testing

HAS_SHARE = importlib.util.find_spec("dlbridge._share") is not None
NO_SHARE = "needs dlbridge._share, which this build left out (-DDLBRIDGE_SHARE=OFF)"
WITHOUT = {name for name in os.environ.get("DLBRIDGE_TEST_WITHOUT", "").split(",") if name}
_HERE = pathlib.Path(__file__).parent


def _needs_missing(path: pathlib.Path) -> str | None:
    """The library a test file uses that this interpreter lacks on purpose, if any."""
    text = path.read_text(encoding="utf-8")
    # Coarse on purpose: a file that names the library anywhere (an import, a producer spec "torch")
    # is assumed to need it.
    for name in sorted(WITHOUT):
        if re.search(rf"\b{name}\b", text):
            return name
    return None


_NOT_COLLECTED = {p.name: lib for p in sorted(_HERE.glob("test_*.py")) if (lib := _needs_missing(p))}


def pytest_ignore_collect(collection_path, config):
    return collection_path.name in _NOT_COLLECTED or None


def pytest_configure(config):
    if not HAS_SHARE and os.environ.get("CI") == "true" and config.getoption("markexpr") != "not sharing":
        raise pytest.UsageError(f"the sharing tests cannot run: {NO_SHARE}; deselect them with -m 'not sharing'")


def pytest_collection_modifyitems(config, items):
    if HAS_SHARE:
        return
    for item in items:
        if item.get_closest_marker("sharing") is not None:
            item.add_marker(pytest.mark.skip(reason=NO_SHARE))


def pytest_collection_finish(session):
    # The test modules have imported every library by now. Freezing what
    # exists keeps each gc.collect() in a test to the objects the tests made:
    # a full collection with torch, JAX and TensorFlow loaded costs ~0.4 s,
    # and the suite collects about 150 times (deleter counts, lifetimes).
    gc.freeze()


def pytest_report_header(config):
    if _NOT_COLLECTED:
        listed = ", ".join(f"{name} ({lib})" for name, lib in _NOT_COLLECTED.items())
        return f"not collected, their library has no wheel for this Python: {listed}"
    return None


def _jax_setup() -> None:
    # Without x64 JAX silently narrows int64/float64/complex128, and the
    # interop tests could not tell a dtype refusal from a narrowing.
    import jax

    jax.config.update("jax_enable_x64", True)
    jax.config.update("jax_platforms", "cpu")


if "jax" not in WITHOUT:
    _jax_setup()
    import jax.numpy  # noqa: E402,F401
if "torch" not in WITHOUT:
    import torch  # noqa: E402,F401
# Importing torch and jax leaves ~10^6 long-lived objects; moving them out of
# the collector's reach makes each gc.collect() below cost ms, not 0.3 s.
gc.freeze()


class DeleterCounter:
    """Counts _testing capsule deleter calls made since the fixture started."""

    def __init__(self) -> None:
        gc.collect()
        self.start = _testing.deleter_calls()

    @property
    def calls(self) -> int:
        return _testing.deleter_calls() - self.start

    def settled(self) -> int:
        # Cycles can hold tensors; collect before counting so that a count
        # of 0 means "never ran", not "not collected yet".
        gc.collect()
        return self.calls


@pytest.fixture
def deleters() -> DeleterCounter:
    return DeleterCounter()


def check_error(excinfo: pytest.ExceptionInfo, cls: type, code: str) -> str:
    """The common contract of every dlbridge error; returns the message."""
    err = excinfo.value
    assert type(err) is cls, f"expected {cls.__name__}, got {type(err).__name__}: {err}"
    assert isinstance(err, dlbridge.DLPackError)
    assert isinstance(err, BufferError)
    assert err.code == code
    assert err.hint, "every dlbridge error must say what to do"
    assert err.hint in str(err)
    return str(err)


@pytest.fixture
def run_python():
    """Runs code in a fresh interpreter with the suite's Python."""

    def run(code: str, timeout: float = 120.0) -> subprocess.CompletedProcess:
        env = dict(os.environ)
        env.setdefault("JAX_PLATFORMS", "cpu")
        env.pop("PYTHONWARNINGS", None)
        return subprocess.run(
            [sys.executable, "-c", textwrap.dedent(code)],
            capture_output=True, text=True, timeout=timeout, env=env,
        )

    return run


def fresh_producer_class(*, style: str) -> type:
    """A new producer type each call: dlbridge remembers per type what a
    producer accepts, so a test that counts probes needs an unseen type.

    Every call of __dlpack__ is logged in cls.calls with its keywords, also
    the ones refused with TypeError, so probing is visible.
    style "modern": the DLPack 1.0+ keywords; "no_keywords": a pre-2023
    producer whose __dlpack__ takes no argument; "legacy_only": takes stream
    and max_version (DLPack 0.8 era) but returns only "dltensor" capsules.
    """
    calls: list[dict] = []
    accepted = {"modern": {"stream", "max_version", "dl_device", "copy"},
                "no_keywords": set(),
                "legacy_only": {"stream", "max_version"}}[style]

    def __dlpack__(self, *args, **kwargs):
        calls.append(dict(kwargs))
        unknown = set(kwargs) - accepted
        if args or unknown:
            raise TypeError(f"__dlpack__() got an unexpected keyword argument {sorted(unknown)}")
        if style == "modern":
            return self.source.__dlpack__(**kwargs)
        return self.source.__dlpack__()

    def __dlpack_device__(self):
        return self.source.__dlpack_device__()

    def __init__(self, source):
        self.source = source

    name = "".join(part.title() for part in style.split("_")) + "Producer"
    return type(name, (), {"__init__": __init__, "__dlpack__": __dlpack__,
                           "__dlpack_device__": __dlpack_device__, "calls": calls})


def numpy_layouts():
    """(id, array) pairs covering the layouts DLPack must carry; float64 so
    that every library can hold them. Each call makes fresh arrays."""
    import numpy as np
    from numpy.lib.stride_tricks import as_strided

    base = np.arange(60.0)
    odd_size1 = as_strided(base, shape=(3, 1, 2), strides=(16, 999 * 8, 8))
    return [
        ("c", base[:12].reshape(3, 4)),
        ("f", np.asfortranarray(base[:12].reshape(3, 4))),
        ("transposed", base[:24].reshape(2, 3, 4).transpose(2, 0, 1)),
        ("stepped", base.reshape(6, 10)[::2, 1::3]),
        ("negative", base[:10][::-1]),
        ("negative-2d", base[:12].reshape(3, 4)[::-1, ::-2]),
        ("size1-odd-stride", odd_size1),
        ("zero-d", np.array(2.5)),
        ("size-0", np.zeros((0, 3))),
        ("size-0-strided", np.zeros((4, 6))[:, 2:2]),
        ("offset", base[7:19].reshape(3, 4)),
    ]


@pytest.fixture(scope="module")
def test_hosts():
    """Three test hosts for one module (tests/support/netns_hosts.py): network namespaces on a bridge, each
    with a private /dev/shm. Skipped with the reason where they cannot be made (not root), never in CI
    (CI=true), where the tier must run. At teardown every process is stopped by PID; a process that
    survives SIGKILL, a dlbridge segment left in a host's /dev/shm, or a namespace left fails the module."""
    sys.path.insert(0, str(_HERE.parent / "support"))
    from netns_hosts import hosts_for_pytest

    hosts = hosts_for_pytest(3)
    try:
        yield hosts
    finally:
        report = hosts.teardown()
    left = {host: [n for n in names if n.startswith("dlbridge-")] for host, names in report["shm_at_stop"].items()}
    assert not report["survivors"], f"processes survived SIGKILL: {report['survivors']}"
    assert not any(left.values()), f"dlbridge segments left in the hosts' /dev/shm: {left}"
    assert not report["namespaces_left"], report["namespaces_left"]
