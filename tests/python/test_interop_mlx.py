"""MLX (mlx[cpu], pinned in requirements/libs.txt) as producer and as convert's "mlx" target."""

import ml_dtypes
import numpy as np
import pytest

import dlbridge

mx = pytest.importorskip("mlx.core", reason="mlx[cpu] is not installed (scripts/setup installs requirements/libs.txt)")

DTYPES = ["bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "float16", "float32",
          "float64", "complex64", "bfloat16"]


def host(name, shape=(3, 4)):
    values = np.arange(int(np.prod(shape))).reshape(shape)
    if name == "bool":
        return values % 2 == 0
    if name.startswith("complex"):
        return (values + 0.5j).astype(name)
    return values.astype(ml_dtypes.bfloat16 if name == "bfloat16" else name)


def mlx_dtype(name):
    return getattr(mx, "bool_" if name == "bool" else name)


@pytest.mark.parametrize("name", DTYPES)
def test_mlx_exports(name):
    x = mx.array(host(name), dtype=mlx_dtype(name))
    t = dlbridge.from_dlpack(x)
    assert (t.dtype.name, t.shape) == (name, (3, 4))
    np.testing.assert_array_equal(np.asarray(t).view(host(name).dtype), host(name))


@pytest.mark.parametrize("name", DTYPES)
def test_convert_to_mlx_keeps_dtype_and_values(name):
    a = host(name)
    out = dlbridge.convert(a, "mlx")
    assert out.dtype == mlx_dtype(name)
    np.testing.assert_array_equal(np.asarray(dlbridge.from_dlpack(out)).view(a.dtype), a)


@pytest.mark.parametrize("name", ["float64", "complex128"])
def test_finding_mlx_from_dlpack_narrows(name):
    a = host(name)
    narrowed = mx.from_dlpack(dlbridge.from_dlpack(a))
    assert narrowed.dtype == (mx.float32 if name == "float64" else mx.complex64)


def test_float64_is_carried_and_complex128_refused():
    a = np.array([1 + 2.0 ** -40], np.float64)  # not representable in float32
    assert dlbridge.convert(a, "mlx").item() == a[0]
    with pytest.raises(dlbridge.UnsupportedDTypeError):
        dlbridge.convert(np.zeros(3, np.complex128), "mlx")


def test_finding_mlx_always_copies_on_the_cpu():
    t = dlbridge.from_dlpack(np.ones(3, np.float32))
    with pytest.raises(ValueError, match="without a copy"):
        mx.from_dlpack(t, copy=False)
    with pytest.raises(dlbridge.CopyRequiredError) as info:
        dlbridge.convert(np.ones(3, np.float32), "mlx", copy=False)
    assert info.value.code == "copy_required"


def test_finding_mlx_rejects_negative_strides_and_convert_re_lays_out():
    a = np.arange(12, dtype=np.float32).reshape(3, 4)[:, ::-1]
    with pytest.raises(ValueError, match="negative strides"):
        mx.from_dlpack(dlbridge.from_dlpack(a))
    np.testing.assert_array_equal(np.array(dlbridge.convert(a, "mlx")), a)
    # MLX's own copy is the only one: negative axes are flipped around it.
    assert dlbridge.plan_convert(a, "mlx").copy == "target"
    b = np.arange(24, dtype=np.float64).reshape(2, 3, 4)[::-1, :, ::-2]
    out = dlbridge.convert(b, "mlx")
    assert out.dtype == mx.float64
    np.testing.assert_array_equal(np.array(out), b)


def test_read_only_source_is_copied_never_written():
    a = np.arange(4, dtype=np.float32)
    a.flags.writeable = False
    out = dlbridge.convert(a, "mlx")
    out[0] = 99.0
    assert a[0] == 0.0 and out[0].item() == 99.0


def test_edge_shapes_and_device():
    assert dlbridge.convert(np.array(2.5, np.float32), "mlx").shape == ()
    assert dlbridge.convert(np.zeros((0, 3), np.float32), "mlx").shape == (0, 3)
    with pytest.raises(dlbridge.UnsupportedDeviceError):
        dlbridge.convert(np.ones(2, np.float32), "mlx", device=(4, 0))


def test_check_findings():
    from dlbridge import check

    found = {r["rule"]: r for r in check.run(check.load_target("mlx"))}
    # Legacy capsules whatever max_version asks, and a malformed max_version is accepted.
    assert found["P2.legacy"]["status"] == check.PASS
    assert found["P2.versioned"]["status"] == check.FAIL and "'dltensor'" in found["P2.versioned"]["evidence"]
    assert found["P6.bad_argument"]["status"] == check.FAIL


def test_an_empty_tensor_with_a_dimension_mlx_cannot_hold_is_refused_with_a_code():
    # It used to reach mlx as a raw OverflowError about int32_t.
    with pytest.raises(dlbridge.LayoutError) as excinfo:
        dlbridge.convert(dlbridge.empty((0, 2**40), "float32"), "mlx")
    assert "2147483647" in str(excinfo.value)
