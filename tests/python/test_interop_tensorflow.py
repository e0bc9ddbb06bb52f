"""TensorFlow (tensorflow-cpu, pinned in requirements/libs.txt) as producer and as convert's "tensorflow" target."""

import importlib.util

import ml_dtypes
import numpy as np
import pytest

import dlbridge

if importlib.util.find_spec("paddle") is not None:
    # paddle 3.3.1 dies (SIGSEGV) when first imported after tensorflow 2.21.0 in one process.
    import paddle  # noqa: F401
tf = pytest.importorskip("tensorflow", reason="tensorflow-cpu is not installed (scripts/setup installs requirements/libs.txt)")

DTYPES = ["bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "float16", "float32",
          "float64", "complex64", "complex128", "bfloat16"]


def host(name, shape=(3, 4)):
    values = np.arange(int(np.prod(shape))).reshape(shape)
    if name == "bool":
        return values % 2 == 0
    return values.astype(ml_dtypes.bfloat16 if name == "bfloat16" else name)


def pointer(x) -> int:
    return dlbridge.inspect_capsule(tf.experimental.dlpack.to_dlpack(x))["data"]


@pytest.mark.parametrize("name", DTYPES)
def test_tensorflow_exports_zero_copy(name):
    x = tf.constant(host(name))
    t = dlbridge.from_dlpack(x)
    assert (t.dtype.name, t.shape, t.data_ptr) == (name, (3, 4), pointer(x))


@pytest.mark.parametrize("name", DTYPES)
def test_convert_to_tensorflow_zero_copy(name):
    a = host(name)
    out = dlbridge.convert(a, "tensorflow", copy=False)
    assert pointer(out) == a.__array_interface__["data"][0]
    assert out.dtype.name == name
    np.testing.assert_array_equal(out.numpy(), a)


def test_finding_tensorflow_takes_only_capsules():
    with pytest.raises(TypeError, match="incompatible function arguments"):
        tf.experimental.dlpack.from_dlpack(dlbridge.from_dlpack(np.ones(3)))


@pytest.mark.parametrize("layout", ["transposed", "strided", "negative"])
def test_finding_tensorflow_rejects_strides_and_convert_re_lays_out(layout):
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    view = {"transposed": a.T, "strided": a[:, ::2], "negative": a[:, ::-1]}[layout]
    with pytest.raises(tf.errors.InvalidArgumentError, match="Invalid strides"):
        tf.experimental.dlpack.from_dlpack(dlbridge.from_dlpack(view).__dlpack__())
    np.testing.assert_array_equal(dlbridge.convert(view, "tensorflow").numpy(), view)
    with pytest.raises(dlbridge.LayoutError):
        dlbridge.convert(view, "tensorflow", copy=False)


def test_read_only_needs_a_copy():
    a = np.arange(4, dtype=np.float32)
    a.flags.writeable = False
    with pytest.raises(dlbridge.ReadOnlyError):
        dlbridge.convert(a, "tensorflow")
    out = dlbridge.convert(a, "tensorflow", copy=True)
    assert pointer(out) != a.__array_interface__["data"][0]
    np.testing.assert_array_equal(out.numpy(), a)


def test_edge_shapes_dtype_and_device():
    assert dlbridge.convert(np.array(2.5, np.float32), "tensorflow").shape == ()
    assert dlbridge.convert(np.zeros((0, 3), np.float32), "tensorflow").shape == (0, 3)
    with pytest.raises(dlbridge.UnsupportedDTypeError):
        dlbridge.convert(np.zeros(3, ml_dtypes.float8_e4m3fn), "tensorflow")
    with pytest.raises(dlbridge.UnsupportedDeviceError):
        dlbridge.convert(np.ones(2, np.float32), "tensorflow", device=(4, 0))


def test_tensorflow_to_torch_through_convert():
    import torch

    x = tf.constant(host("float32"))
    # TensorFlow speaks legacy capsules only, so its tensors' writability is unknown (docs/boundary.md) and
    # torch, which cannot see a read-only flag, gets them only as a private copy.
    with pytest.raises(dlbridge.ReadOnlyError):
        dlbridge.convert(x, "torch")
    out = dlbridge.convert(x, "torch", copy=True)
    assert out.data_ptr() != pointer(x)
    assert torch.equal(out, torch.arange(12, dtype=torch.float32).reshape(3, 4))


def test_check_findings():
    from dlbridge import check

    found = {r["rule"]: r for r in check.run(check.load_target("tensorflow"))}
    # Legacy capsules only, whatever max_version asks; dl_device and copy=True are refused with a RuntimeError.
    assert found["P2.versioned"]["status"] == check.FAIL and "'dltensor'" in found["P2.versioned"]["evidence"]
    assert found["P2.legacy"]["status"] == check.PASS
    assert found["P3.bad_device"]["status"] == check.FAIL and "RuntimeError" in found["P3.bad_device"]["evidence"]
    assert found["P4.copy_true"]["status"] == check.FAIL and "RuntimeError" in found["P4.copy_true"]["evidence"]
    assert found["P6.bad_argument"]["status"] == check.FAIL
