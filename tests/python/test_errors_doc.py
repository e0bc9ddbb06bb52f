"""docs/errors.md against the real errors: every code has an entry, and each
entry's message pattern matches the message dlbridge really produces."""

import pathlib
import re

import numpy as np
import pytest
import torch

import dlbridge
from dlbridge import catalogue
from dlbridge._core import _testing

ROOT = pathlib.Path(__file__).resolve().parents[2]
# Mapped to ValueError / MemoryError, which carry no code; the page says so.
PLAIN_PYTHON = {"invalid_argument", "out_of_memory"}


def entries():
    return catalogue.by_code()


def codes_in_sources() -> set:
    """Every ErrorCode used by the C++ core and every error class Python code raises by name."""
    found = set()
    for path in [*ROOT.glob("include/**/*.hpp"), *ROOT.glob("src/**/*.cpp"), *ROOT.glob("src/**/*.hpp")]:
        # Macro bodies (the error table's X-macro rows) are templates, not uses.
        text = re.sub(r"#define(?:[^\n]*\\\n)*[^\n]*", "", path.read_text())
        found |= set(re.findall(r"ErrorCode::(\w+)", text))
    by_class = {cls.__name__: code for code, cls in dlbridge.errors.ERROR_CLASSES.items()}
    for path in (ROOT / "python" / "dlbridge").rglob("*.py"):
        for name in re.findall(r"""["'](\w+Error)["']""", path.read_text()):
            if name in by_class:
                found.add(by_class[name])
    return found - PLAIN_PYTHON


def test_every_code_raised_anywhere_has_an_entry():
    missing = codes_in_sources() - set(entries())
    assert not missing, f"codes without an entry in docs/errors.md: {sorted(missing)}"


def test_every_error_class_has_an_entry_and_nothing_else_does():
    assert set(entries()) == set(dlbridge.errors.ERROR_CLASSES)


@pytest.mark.parametrize("code", sorted(dlbridge.errors.ERROR_CLASSES))
def test_entry_names_the_class_that_carries_the_code(code):
    entry = entries()[code]
    cls = getattr(dlbridge, entry.exception.removeprefix("dlbridge."))
    assert issubclass(cls, dlbridge.DLPackError) and cls.code == code
    re.compile(entry.pattern)


def test_unsupported_device_pattern_states_the_contract_sentence():
    pattern = entries()["unsupported_device_type"].pattern
    sentence = "The device specification passed to to_dlpack contains an unsupported device type"
    assert pattern.startswith(sentence)
    for shown in ("kDLVulkan", "99"):
        assert re.search(pattern, f"{sentence} (DLDeviceType: {shown}). Supported: kDLCPU. Pass dl_device=None.")


def _readonly_numpy():
    a = np.arange(4, dtype=np.float32)
    a.flags.writeable = False
    return a


def _consume_twice():
    capsule = np.arange(3.0).__dlpack__()
    dlbridge.from_dlpack(capsule)
    dlbridge.from_dlpack(capsule)


# One real trigger per code (more where the core and convert raise it separately).
def _list_array():
    import pyarrow as pa

    return pa.array([[1, 2], [3, 4]])


class _Batch(list):
    """A list subclass: no structure convert can rebuild."""


TRIGGERS = {
    "unsupported_device_type#number": lambda: dlbridge.to_dlpack(np.arange(3.0), dl_device=(99, 0)),
    "unsupported_device_type#name": lambda: dlbridge.to_dlpack(np.arange(3.0), dl_device=(7, 0)),
    "device_unavailable": lambda: dlbridge.to_dlpack(np.arange(3.0), dl_device=(2, 0)),
    "unsupported_dtype#buffer": lambda: memoryview(dlbridge.from_dlpack(torch.zeros(2, dtype=torch.bfloat16))),
    "unsupported_dtype#convert": lambda: dlbridge.convert(np.zeros(2, dtype=np.uint16), "torch"),
    "unsupported_layout": lambda: dlbridge.convert(np.arange(6.0)[::-1], "jax", copy=False),
    "read_only#legacy": lambda: dlbridge.to_dlpack(_readonly_numpy()),
    "read_only#convert": lambda: dlbridge.convert(_readonly_numpy(), "torch", copy=False),
    "unsupported_version": lambda: dlbridge.from_dlpack(_testing.make_capsule(version=(2, 0))),
    "copy_required": lambda: dlbridge.convert(np.arange(3.0), "mlx", copy=False),
    "invalid_stream": lambda: dlbridge.to_dlpack(np.arange(3.0), stream=1),
    "capsule_consumed": _consume_twice,
    "invalid_tensor#null": lambda: dlbridge.from_dlpack(_testing.make_capsule(null_data=True)),
    "invalid_tensor#fp4": lambda: dlbridge.from_dlpack(_testing.make_capsule(dtype=(17, 8, 1))),
    "producer_refused": lambda: dlbridge.from_dlpack(_list_array()),
    "not_an_array#leaf": lambda: dlbridge.convert({"x": np.ones(2), "epoch": 7}, "numpy"),
    "not_an_array#rebuild": lambda: dlbridge.convert((_Batch(),), "numpy"),
}


def test_every_code_has_a_trigger():
    assert {k.split("#")[0] for k in TRIGGERS} == set(dlbridge.errors.ERROR_CLASSES)


@pytest.mark.parametrize("trigger", sorted(TRIGGERS))
def test_pattern_matches_the_real_message(trigger):
    code = trigger.split("#")[0]
    entry = entries()[code]
    with pytest.raises(dlbridge.DLPackError) as excinfo:
        TRIGGERS[trigger]()
    err = excinfo.value
    assert err.code == code, f"{trigger} raised {type(err).__name__} ({err.code}): {err}"
    assert type(err).__name__ == entry.exception.removeprefix("dlbridge.")
    assert err.hint and err.hint in str(err)
    assert re.search(entry.pattern, str(err)), f"pattern {entry.pattern!r} does not match {str(err)!r}"
