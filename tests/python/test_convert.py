"""dlbridge.convert against the installed NumPy, PyTorch and JAX: the route it takes
where the direct path works, and the fix where the direct path fails."""

import jax.numpy as jnp
import numpy as np
import pytest
import torch
from conftest import check_error

import dlbridge
from dlbridge._core import strides_fit as _strides_fit
from dlbridge.convert import TARGETS, _target_of as target_of, convert as convert_fn
from dlbridge.libraries.numpy import ML_DTYPES


def strides_fit(shape, strides, rule):
    return _strides_fit(tuple(shape), tuple(strides), rule)


def readonly(a):
    a = np.array(a)
    a.flags.writeable = False
    return a


def aligned(a, alignment=64):
    """A copy of a whose data starts on an `alignment`-byte boundary (JAX copies anything less aligned)."""
    raw = np.empty(a.nbytes + alignment, dtype=np.uint8)
    start = -raw.ctypes.data % alignment
    out = raw[start:start + a.nbytes].view(a.dtype).reshape(a.shape)
    out[...] = a
    return out


def test_convert_is_the_public_function():
    assert dlbridge.convert is convert_fn


def test_zero_copy_where_the_target_accepts_the_layout():
    a = np.arange(12, dtype=np.float32).reshape(3, 4)[:, ::-1]
    out = convert_fn(a, "numpy")
    assert out.__array_interface__["data"][0] == a.__array_interface__["data"][0]
    t = torch.arange(6.0).reshape(2, 3).T
    out = convert_fn(t, "numpy")
    assert out.__array_interface__["data"][0] == t.data_ptr()
    np.testing.assert_array_equal(out, t.numpy())


def test_dlbridge_target_is_the_zero_copy_tensor():
    a = np.arange(6.0)
    t = convert_fn(a, "dlbridge")
    assert isinstance(t, dlbridge.Tensor) and t.data_ptr == a.ctypes.data


def test_negative_strides_to_torch_are_copied_not_crashed():
    # torch 2.13 aborts the process on negative strides from NumPy (doctor shows
    # it); convert hands over one compact copy instead.
    a = np.arange(12, dtype=np.float32).reshape(3, 4)[:, ::-1]
    out = convert_fn(a, "torch")
    assert isinstance(out, torch.Tensor)
    np.testing.assert_array_equal(out.numpy(), a)
    assert out.data_ptr() != a.__array_interface__["data"][0]


def test_non_compact_strides_to_jax_are_copied():
    a = np.arange(24.0).reshape(4, 6)
    for view in (a[:, ::-1], a[:, ::2]):
        with pytest.raises(Exception):
            jnp.from_dlpack(view)  # the direct path: JAX rejects these strides
        np.testing.assert_array_equal(np.asarray(convert_fn(view, "jax")), view)


def test_transposed_reaches_jax_without_a_relayout():
    a = np.arange(24.0).reshape(4, 6).T
    np.testing.assert_array_equal(np.asarray(convert_fn(a, "jax")), a)


def test_layout_fix_refused_when_copy_is_false():
    with pytest.raises(dlbridge.LayoutError) as excinfo:
        convert_fn(np.arange(6.0)[::-1], "torch", copy=False)
    assert "copy=None" in check_error(excinfo, dlbridge.LayoutError, "unsupported_layout")


def test_read_only_to_torch_is_one_private_copy():
    # torch cannot see READ_ONLY: copy=None hands it one private copy (the array
    # API's meaning), copy=True the same, copy=False refuses with the way out.
    a = readonly(np.arange(4, dtype=np.float32))
    for copy in (None, True):
        out = convert_fn(a, "torch", copy=copy)
        assert out.data_ptr() != a.ctypes.data
        out += 1  # a private copy: the read-only source must not change
        np.testing.assert_array_equal(a, np.arange(4, dtype=np.float32))
    with pytest.raises(dlbridge.ReadOnlyError) as excinfo:
        convert_fn(a, "torch", copy=False)
    assert "copy=None" in check_error(excinfo, dlbridge.ReadOnlyError, "read_only")


def test_read_only_to_numpy_stays_read_only():
    out = convert_fn(readonly(np.arange(4.0)), "numpy")
    assert not out.flags.writeable


def test_read_only_to_jax_is_zero_copy_because_jax_never_writes():
    a = aligned(np.arange(4.0))
    a.flags.writeable = False
    with pytest.raises(BufferError):
        jnp.from_dlpack(a)  # the direct path: NumPy refuses a legacy export of read-only data
    for copy in (None, False):
        out = convert_fn(a, "jax", copy=copy)
        np.testing.assert_array_equal(np.asarray(out), a)
        assert out.unsafe_buffer_pointer() == a.ctypes.data
    assert dlbridge.plan_convert(a, "jax").zero_copy


def test_dtype_the_target_cannot_hold_is_refused_with_the_fix():
    with pytest.raises(dlbridge.UnsupportedDTypeError) as excinfo:
        convert_fn(np.zeros(3, dtype=np.uint16), "torch")
    assert "float32" in check_error(excinfo, dlbridge.UnsupportedDTypeError, "unsupported_dtype")
    bf16 = torch.ones(3, dtype=torch.bfloat16)
    assert convert_fn(bf16, "jax").dtype == jnp.bfloat16
    # JAX's legacy capsule leaves writability unknown: torch gets a copy.
    assert convert_fn(jnp.ones(2, dtype=jnp.bfloat16), "torch", copy=True).dtype == torch.bfloat16


# --- NumPy through ml_dtypes: dtypes numpy.from_dlpack refuses

def as_float32(a):
    return np.asarray(a).astype(np.float32)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float8_e4m3fn, torch.float8_e5m2])
def test_torch_extension_dtypes_reach_numpy_zero_copy(dtype):
    import ml_dtypes

    source = torch.tensor([[-3.0, -1.5, 0.0, 0.5], [1.0, 2.0, 448.0, -448.0]]).to(dtype)
    with pytest.raises(RuntimeError, match="Unsupported dtype"):
        np.from_dlpack(source)  # the direct path
    for x in (source, source.T, source[:, ::2]):
        out = convert_fn(x, "numpy")
        assert out.dtype == getattr(ml_dtypes, str(dtype).removeprefix("torch."))
        assert out.ctypes.data == x.data_ptr() and out.strides == tuple(s * x.element_size() for s in x.stride())
        np.testing.assert_array_equal(as_float32(out), x.float().numpy())
        assert out.flags.writeable  # PyTorch exports writable memory


def test_jax_bfloat16_reaches_numpy_zero_copy():
    import ml_dtypes

    x = jnp.arange(12, dtype=jnp.float32).reshape(3, 4).astype(jnp.bfloat16)
    with pytest.raises(RuntimeError, match="Unsupported dtype"):
        np.from_dlpack(x)
    out = convert_fn(x, "numpy")
    assert out.dtype == ml_dtypes.bfloat16 and out.ctypes.data == x.unsafe_buffer_pointer()
    np.testing.assert_array_equal(as_float32(out), np.arange(12, dtype=np.float32).reshape(3, 4))


def test_writes_through_the_numpy_view_reach_the_source():
    x = torch.zeros(4, dtype=torch.bfloat16)
    out = convert_fn(x, "numpy")
    out[1] = 2.5
    assert x[1].item() == 2.5


def test_read_only_extension_data_stays_read_only_in_numpy():
    import ml_dtypes

    a = readonly(np.array([1.0, -2.0, 0.25], dtype=ml_dtypes.float8_e4m3fn))
    out = convert_fn(a, "numpy")
    assert np.shares_memory(out, a) and not out.flags.writeable
    with pytest.raises(ValueError, match="read-only"):
        out[0] = 0
    t = convert_fn(a, "dlbridge")
    assert t.readonly and not convert_fn(t, "numpy").flags.writeable


def test_numpy_view_keeps_the_source_memory_alive():
    import gc

    x = torch.arange(1000, dtype=torch.float32).to(torch.bfloat16)
    expected = x.float().numpy().copy()
    out = convert_fn(x, "numpy")
    base = out
    while isinstance(base, np.ndarray):
        base = base.base
    assert isinstance(base, dlbridge.Tensor)
    del x, base
    gc.collect()
    # Reuse freed memory so a dangling view would read someone else's values.
    garbage = [torch.full((1000,), 7.0, dtype=torch.bfloat16) for _ in range(20)]
    np.testing.assert_array_equal(as_float32(out), expected)
    del garbage


def test_padded_int4_reaches_numpy_zero_copy():
    import ml_dtypes

    a = np.array([[-8, -1], [0, 7]], dtype=ml_dtypes.int4)
    t = dlbridge.from_dlpack(a.T)
    assert t.flags & dlbridge._core.FLAG_IS_SUBBYTE_TYPE_PADDED
    out = convert_fn(t, "numpy")
    assert out.dtype == ml_dtypes.int4 and np.shares_memory(out, a)
    np.testing.assert_array_equal(as_float32(out), as_float32(a.T))


def test_packed_fp4_from_torch_is_unpacked_into_one_copy():
    # PyTorch exports float4_e2m1fn_x2 as (17, 4, 2): two FP4 lanes per byte,
    # lane 0 in the low bits. ml_dtypes holds one FP4 value per byte, so the
    # lanes become a trailing axis of 2 in a copy; copy=False must refuse.
    import ml_dtypes

    raw = torch.randint(0, 256, (17, 4), dtype=torch.uint8)
    x = raw.view(torch.float4_e2m1fn_x2)
    assert dlbridge.from_dlpack(x).dtype == (17, 4, 2)
    out = convert_fn(x, "numpy")
    assert out.dtype == ml_dtypes.float4_e2m1fn and out.shape == (17, 4, 2)
    nibbles = np.stack([raw.numpy() & 0xF, raw.numpy() >> 4], axis=-1)
    np.testing.assert_array_equal(as_float32(out), as_float32(nibbles.view(ml_dtypes.float4_e2m1fn)))
    assert not np.shares_memory(out, raw.numpy()) and out.flags.writeable
    with pytest.raises(dlbridge.CopyRequiredError) as excinfo:
        convert_fn(x, "numpy", copy=False)
    assert "copy=None" in check_error(excinfo, dlbridge.CopyRequiredError, "copy_required")


def test_without_ml_dtypes_numpy_refuses_with_the_fix():
    # A process where `import ml_dtypes` fails, as where it is not installed.
    import subprocess
    import sys

    code = """
import sys
sys.modules["ml_dtypes"] = None
import numpy as np, torch, dlbridge
try:
    dlbridge.convert(torch.ones(3, dtype=torch.bfloat16), "numpy")
except dlbridge.UnsupportedDTypeError as e:
    assert e.code == "unsupported_dtype" and "ml_dtypes" in str(e) and "bfloat16" in str(e), str(e)
else:
    raise SystemExit("converted without ml_dtypes")
assert dlbridge.convert(torch.ones(3), "numpy").dtype == np.float32  # standard dtypes need no ml_dtypes
"""
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr


def test_every_ml_dtypes_name_is_a_dlpack_dtype_and_an_ml_dtypes_type():
    import ml_dtypes

    for name in ML_DTYPES:
        assert dlbridge.DType(name).name == name
        assert np.dtype(getattr(ml_dtypes, name)).itemsize == (dlbridge.DType(name).bits + 7) // 8


def test_copy_true_never_aliases():
    a = np.arange(6.0)
    out = convert_fn(a, "numpy", copy=True)
    out[0] = 99
    assert a[0] == 0


def test_targets_by_module_and_by_callable():
    a = np.arange(6.0).reshape(2, 3)
    assert isinstance(convert_fn(a, torch), torch.Tensor)
    assert target_of(torch)[1] is TARGETS["torch"] and target_of(torch)[3] == (torch.Tensor,)
    assert isinstance(convert_fn(a, torch.from_dlpack), torch.Tensor)
    # A callable we know nothing about is not trusted with read-only data: it gets a copy.
    r = readonly(a)
    out = convert_fn(r, lambda t: torch.from_dlpack(t))
    out += 1
    np.testing.assert_array_equal(r, a)
    assert dlbridge.plan_convert(r, lambda t: t).reasons == ("read_only",)


def test_bad_targets():
    with pytest.raises(ValueError, match="unknown conversion target"):
        convert_fn(np.arange(3.0), "no_such_library_xyz")


@pytest.mark.parametrize("name", ["", " ", ".", ".numpy", "numpy.", "a..b", "numpy torch", "../x", "1abc"])
def test_a_target_name_that_is_no_module_name_is_an_unknown_target(name):
    # importlib answered "" with its own bare "Empty module name" and ".numpy" with a TypeError.
    with pytest.raises(ValueError, match="unknown conversion target") as refused:
        convert_fn(np.arange(3.0), name)
    assert "Empty module name" not in str(refused.value)
    with pytest.raises(ValueError, match="unknown conversion target"):
        dlbridge.plan_convert(np.arange(3.0), name)
    with pytest.raises(TypeError):
        convert_fn(np.arange(3.0), 42)


@pytest.mark.parametrize("shape,strides,rule,fits", [
    ((3, 4), (4, 1), "row_major", True),
    ((3, 4), (1, 3), "row_major", False),
    ((3, 4), (1, 3), "permuted_compact", True),
    ((3, 4), (8, 2), "permuted_compact", False),
    ((3, 4), (4, -1), "nonnegative", False),
    ((3, 1), (1, -7), "nonnegative", True),      # size-1 dims take any stride
    ((0, 4), (4, -1), "nonnegative", True),      # nothing to address
    ((), (), "row_major", True),
    ((3, 4), (4, -1), "any", True),
])
def test_strides_fit(shape, strides, rule, fits):
    assert strides_fit(shape, strides, rule) is fits


def test_the_table_only_uses_known_rules():
    for target in TARGETS.values():
        assert target.strides in ("any", "nonnegative", "permuted_compact", "row_major")
        assert target.read_only in ("honoured", "immutable", "ignored")
        assert target.takes in ("array", "capsule")


def test_read_only_data_that_needs_a_copy_anyway_is_handed_over_as_that_copy():
    # torch cannot see READ_ONLY, but negative strides make convert copy the
    # data regardless: the private copy is safe to write, so no refusal.
    a = np.arange(6.0)
    a.flags.writeable = False
    out = dlbridge.convert(a[::-1], "torch")
    assert out.tolist() == [5.0, 4.0, 3.0, 2.0, 1.0, 0.0]
    out[0] = 100.0
    assert a[-1] == 5.0
    assert dlbridge.plan_convert(a[::-1], "torch").reasons == ("layout",)  # one copy, for both reasons
