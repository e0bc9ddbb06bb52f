"""TensorFlow (tensorflow-cpu, pinned in requirements/libs.txt) as producer and as convert's "tensorflow" target."""

import importlib.util

import ml_dtypes
import numpy as np
import pytest

import dlbridge
from dlbridge.convert import TARGETS
from dlbridge.libraries.numpy import ML_DTYPES
from foreign_producers import DTypeRaises

if importlib.util.find_spec("paddle") is not None:
    # paddle 3.3.1 dies (SIGSEGV) when first imported after tensorflow 2.21.0 in one process.
    import paddle  # noqa: F401
tf = pytest.importorskip("tensorflow", reason="tensorflow-cpu is not installed (scripts/setup installs requirements/libs.txt)")

# The dtypes tensorflow 2.21's from_dlpack takes (measured: each round-trips below).
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


# Every other dtype dlbridge can carry, each refused by tensorflow 2.21's from_dlpack.
REFUSED = sorted(ML_DTYPES - {"bfloat16"})
SUB_BYTE = {"int1", "int2", "int4", "uint1", "uint2", "uint4", "float4_e2m1fn", "float6_e2m3fn", "float6_e3m2fn"}


def test_target_dtype_set_is_what_tensorflow_takes():
    assert TARGETS["tensorflow"].dtypes == frozenset(DTYPES)


@pytest.mark.parametrize("name", REFUSED)
def test_finding_tensorflow_refuses_dtype(name):
    # Sub-byte values packed as DLPack describes them; a legacy capsule cannot carry the padded form at all.
    source = dlbridge.empty((4,), name) if name in SUB_BYTE else np.zeros(4, getattr(ml_dtypes, name))
    with pytest.raises(tf.errors.InvalidArgumentError, match="Unsupported"):
        tf.experimental.dlpack.from_dlpack(dlbridge.from_dlpack(source).__dlpack__(max_version=None))


@pytest.mark.parametrize("name,packed", [(n, False) for n in REFUSED] + [(n, True) for n in sorted(SUB_BYTE)])
def test_convert_refuses_dtype_tensorflow_lacks_with_code_and_fix(name, packed):
    source = dlbridge.empty((4,), name) if packed else np.zeros(4, getattr(ml_dtypes, name))
    with pytest.raises(dlbridge.UnsupportedDTypeError) as info:
        dlbridge.convert(source, "tensorflow")
    assert info.value.code == "unsupported_dtype"
    assert f"tensorflow cannot hold dtype {name}" in str(info.value)
    assert "Cast in the source library first" in info.value.hint


@pytest.mark.parametrize("name", ["complex64", "complex128"])
def test_tvm_ffi_complex_to_tensorflow(name):
    # Was: tvm_ffi's own ValueError ("unknown type_code=5") from reading its .dtype for a byte-order check.
    tvm_ffi = pytest.importorskip("tvm_ffi")
    a = host(name)
    x = tvm_ffi.from_dlpack(a)
    out = dlbridge.convert(x, "tensorflow")
    assert out.dtype.name == name and pointer(out) == a.__array_interface__["data"][0]
    np.testing.assert_array_equal(out.numpy(), a)


def test_convert_never_reads_a_foreign_dtype_property():
    a = host("complex64")
    np.testing.assert_array_equal(dlbridge.convert(DTypeRaises(a), "tensorflow").numpy(), a)


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


def test_read_only_is_one_private_copy():
    a = np.arange(4, dtype=np.float32)
    a.flags.writeable = False
    for copy in (None, True):
        out = dlbridge.convert(a, "tensorflow", copy=copy)
        assert pointer(out) != a.__array_interface__["data"][0]
        np.testing.assert_array_equal(out.numpy(), a)
    with pytest.raises(dlbridge.ReadOnlyError):
        dlbridge.convert(a, "tensorflow", copy=False)


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
    for copy in (None, True):
        out = dlbridge.convert(x, "torch", copy=copy)
        assert out.data_ptr() != pointer(x)
        assert torch.equal(out, torch.arange(12, dtype=torch.float32).reshape(3, 4))
    with pytest.raises(dlbridge.ReadOnlyError):
        dlbridge.convert(x, "torch", copy=False)
    # TensorFlow to itself is the tensor itself.
    assert dlbridge.convert(x, "tensorflow") is x


def test_check_findings():
    from dlbridge import check

    found = {r["rule"]: r for r in check.run(check.load_target("tensorflow"))}
    # Legacy capsules only, whatever max_version asks; dl_device and copy=True are refused with a RuntimeError.
    assert found["P2.versioned"]["status"] == check.FAIL and "'dltensor'" in found["P2.versioned"]["evidence"]
    assert found["P2.legacy"]["status"] == check.PASS
    assert found["P3.bad_device"]["status"] == check.FAIL and "RuntimeError" in found["P3.bad_device"]["evidence"]
    assert found["P4.copy_true"]["status"] == check.FAIL and "RuntimeError" in found["P4.copy_true"]["evidence"]
    assert found["P6.bad_argument"]["status"] == check.FAIL


def test_a_quantized_tensors_refusal_is_coded():
    # TensorFlow refuses with its own InvalidArgumentError, not a BufferError.
    with pytest.raises(dlbridge.ProducerError) as excinfo:
        dlbridge.from_dlpack(tf.constant([1, 2], dtype=tf.qint16))
    assert excinfo.value.code == "producer_refused"
    assert type(excinfo.value.__cause__).__name__ == "InvalidArgumentError"
