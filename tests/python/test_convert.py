"""dlbridge.convert against the installed NumPy, PyTorch and JAX: the route it takes
where the direct path works, and the fix where the direct path fails."""

import jax.numpy as jnp
import numpy as np
import pytest
import torch
from conftest import check_error

import dlbridge
from dlbridge.convert import TARGETS, convert as convert_fn, resolve, strides_fit


def readonly(a):
    a = np.array(a)
    a.flags.writeable = False
    return a


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


def test_read_only_to_torch_is_refused_unless_copy():
    a = readonly(np.arange(4, dtype=np.float32))
    with pytest.raises(dlbridge.ReadOnlyError) as excinfo:
        convert_fn(a, "torch")
    assert "copy=True" in check_error(excinfo, dlbridge.ReadOnlyError, "read_only")
    out = convert_fn(a, "torch", copy=True)
    out += 1  # a private copy: the read-only source must not change
    np.testing.assert_array_equal(a, np.arange(4, dtype=np.float32))


def test_read_only_to_numpy_stays_read_only():
    out = convert_fn(readonly(np.arange(4.0)), "numpy")
    assert not out.flags.writeable


def test_read_only_to_jax_works_because_jax_never_writes():
    a = readonly(np.arange(4.0))
    with pytest.raises(BufferError):
        jnp.from_dlpack(a)  # the direct path: NumPy refuses a legacy export of read-only data
    np.testing.assert_array_equal(np.asarray(convert_fn(a, "jax")), a)
    with pytest.raises(dlbridge.CopyRequiredError) as excinfo:
        convert_fn(a, "jax", copy=False)
    check_error(excinfo, dlbridge.CopyRequiredError, "copy_required")


def test_dtype_the_target_cannot_hold_is_refused_with_the_fix():
    bf16 = torch.ones(3, dtype=torch.bfloat16)
    with pytest.raises(dlbridge.UnsupportedDTypeError) as excinfo:
        convert_fn(bf16, "numpy")
    assert "float32" in check_error(excinfo, dlbridge.UnsupportedDTypeError, "unsupported_dtype")
    assert convert_fn(bf16, "jax").dtype == jnp.bfloat16
    assert convert_fn(jnp.ones(2, dtype=jnp.bfloat16), "torch").dtype == torch.bfloat16


def test_copy_true_never_aliases():
    a = np.arange(6.0)
    out = convert_fn(a, "numpy", copy=True)
    out[0] = 99
    assert a[0] == 0


def test_targets_by_module_and_by_callable():
    a = np.arange(6.0).reshape(2, 3)
    assert isinstance(convert_fn(a, torch), torch.Tensor)
    assert resolve(torch)[0] is TARGETS["torch"]
    assert isinstance(convert_fn(a, torch.from_dlpack), torch.Tensor)
    # A callable we know nothing about is not trusted with read-only data.
    with pytest.raises(dlbridge.ReadOnlyError):
        convert_fn(readonly(a), torch.from_dlpack)


def test_bad_targets():
    with pytest.raises(ValueError, match="unknown conversion target"):
        convert_fn(np.arange(3.0), "no_such_library_xyz")
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
