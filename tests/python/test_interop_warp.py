"""NVIDIA Warp (warp-lang, pinned in requirements/libs.txt; CPU arrays here) as producer and as convert's "warp" target."""

import ml_dtypes
import numpy as np
import pytest

import dlbridge

wp = pytest.importorskip("warp", reason="warp-lang is not installed (scripts/setup installs requirements/libs.txt)")

DTYPES = ["bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "float16", "float32",
          "float64", "bfloat16"]


@pytest.fixture(scope="module", autouse=True)
def warp_ready():
    from dlbridge.libraries.warp import ready as _warp

    _warp()


def host(name, shape=(3, 4)):
    values = np.arange(int(np.prod(shape))).reshape(shape)
    if name == "bool":
        return values % 2 == 0
    return values.astype(ml_dtypes.bfloat16 if name == "bfloat16" else name)


@pytest.mark.parametrize("name", [n for n in DTYPES if n != "bfloat16"])
def test_warp_exports_zero_copy_on_a_legacy_capsule(name):
    x = wp.array(host(name), device="cpu")
    t = dlbridge.from_dlpack(x)
    assert (t.dtype.name, t.shape, t.data_ptr) == (name, (3, 4), x.ptr)


def test_finding_warp_exports_without_max_version():
    x = wp.zeros(3, dtype=wp.float32, device="cpu")
    with pytest.raises(TypeError, match="max_version"):
        x.__dlpack__(max_version=(1, 3))
    assert dlbridge.inspect_capsule(x.__dlpack__())["name"] == "dltensor"


@pytest.mark.parametrize("name", DTYPES)
def test_convert_to_warp_zero_copy(name):
    a = host(name)
    out = dlbridge.convert(a, "warp", copy=False)
    assert out.ptr == a.__array_interface__["data"][0] and out.shape == (3, 4)
    back = dlbridge.from_dlpack(out)
    assert back.dtype.name == name
    np.testing.assert_array_equal(np.asarray(back).view(a.dtype), a)


@pytest.mark.parametrize("layout", ["transposed", "strided", "negative"])
def test_warp_keeps_strides(layout):
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    view = {"transposed": a.T, "strided": a[:, ::2], "negative": a[:, ::-1]}[layout]
    out = dlbridge.convert(view, "warp", copy=False)
    assert out.strides == view.strides
    np.testing.assert_array_equal(out.numpy(), view)


def test_finding_warp_fails_on_0_d_and_convert_refuses_with_the_fix():
    t = dlbridge.from_dlpack(np.array(1.5, np.float32))
    with pytest.raises(IndexError):
        wp.from_dlpack(t)
    with pytest.raises(dlbridge.LayoutError, match="at least one dimension") as info:
        dlbridge.convert(np.array(1.5, np.float32), "warp")
    assert "(1,)" in info.value.hint


def test_finding_warp_has_no_complex_and_convert_refuses_with_the_code():
    t = dlbridge.from_dlpack(np.zeros(3, np.complex64))
    with pytest.raises(RuntimeError, match="complex"):
        wp.from_dlpack(t)
    with pytest.raises(dlbridge.UnsupportedDTypeError):
        dlbridge.convert(np.zeros(3, np.complex64), "warp")


def test_read_only_is_one_private_copy():
    a = np.arange(4, dtype=np.float32)
    a.flags.writeable = False
    for copy in (None, True):
        out = dlbridge.convert(a, "warp", copy=copy)
        assert out.ptr != a.__array_interface__["data"][0]
    with pytest.raises(dlbridge.ReadOnlyError):
        dlbridge.convert(a, "warp", copy=False)


def test_size_0_and_device():
    assert dlbridge.convert(np.zeros((0, 3), np.float32), "warp").shape == (0, 3)
    with pytest.raises(dlbridge.UnsupportedDeviceError):
        dlbridge.convert(np.ones(2, np.float32), "warp", device=(4, 0))


def test_check_findings():
    from dlbridge import check

    found = {r["rule"]: r for r in check.run(check.load_target("warp"))}
    # __dlpack__ takes only stream=, so every rule that asks for a version fails on the keyword.
    assert found["P2.legacy"]["status"] == check.PASS
    for rule in ("P1.keywords", "P2.versioned", "P4.copy_false"):
        assert found[rule]["status"] == check.FAIL and "max_version" in found[rule]["evidence"]
