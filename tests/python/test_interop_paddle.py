"""PaddlePaddle (pinned in requirements/libs.txt) as producer and as convert's "paddle" target."""

import subprocess
import sys

import ml_dtypes
import numpy as np
import pytest

import dlbridge

paddle = pytest.importorskip("paddle", reason="paddlepaddle is not installed (scripts/setup installs requirements/libs.txt)")

DTYPES = ["bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "float16", "float32", "float64", "complex64",
          "complex128", "bfloat16"]


def host(name, shape=(3, 4)):
    values = np.arange(int(np.prod(shape))).reshape(shape)
    if name == "bool":
        return values % 2 == 0
    return values.astype(ml_dtypes.bfloat16 if name == "bfloat16" else name)


@pytest.mark.parametrize("name", DTYPES)
def test_paddle_exports_zero_copy(name):
    if name == "uint16":
        x = paddle.from_dlpack(host(name))  # paddle.to_tensor would make bfloat16 (finding below)
    else:
        x = paddle.to_tensor(host(name if name != "bfloat16" else "float32"))
    if name == "bfloat16":
        x = x.astype("bfloat16")
    t = dlbridge.from_dlpack(x)
    assert (t.dtype.name, t.shape, t.data_ptr) == (name, (3, 4), x.data_ptr())


@pytest.mark.parametrize("name", DTYPES)
def test_convert_to_paddle_zero_copy(name):
    a = host(name)
    out = dlbridge.convert(a, "paddle", copy=False)
    assert out.data_ptr() == a.__array_interface__["data"][0]
    back = dlbridge.from_dlpack(out)
    assert back.dtype.name == name
    np.testing.assert_array_equal(np.asarray(back).view(a.dtype), a)


def test_finding_paddle_to_tensor_turns_numpy_uint16_into_bfloat16():
    x = paddle.to_tensor(np.arange(3, dtype=np.uint16))
    assert x.dtype == paddle.bfloat16
    assert dlbridge.from_dlpack(x).dtype.name == "bfloat16"  # and exports what it holds


def test_uint16_is_carried_although_paddle_prints_it_as_bfloat16():
    out = dlbridge.convert(np.arange(4, dtype=np.uint16), "paddle")
    # Finding: str() of paddle's uint16 dtype reads "paddle.bfloat16"; the dtype itself is uint16.
    assert out.dtype == paddle.uint16 and str(out.dtype) == "paddle.bfloat16"
    np.testing.assert_array_equal(out.numpy(), np.arange(4))


def test_finding_paddle_misreads_negative_strides_and_convert_re_lays_out():
    a = np.arange(12, dtype=np.float32).reshape(3, 4)[:, ::-1]
    direct = paddle.from_dlpack(dlbridge.from_dlpack(a))
    assert not np.array_equal(direct.numpy(), a)
    np.testing.assert_array_equal(dlbridge.convert(a, "paddle").numpy(), a)
    with pytest.raises(dlbridge.LayoutError):
        dlbridge.convert(a, "paddle", copy=False)


@pytest.mark.parametrize("layout", ["transposed", "strided"])
def test_positive_strides_stay_zero_copy(layout):
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    view = a.T if layout == "transposed" else a[:, ::2]
    out = dlbridge.convert(view, "paddle", copy=False)
    assert out.data_ptr() == view.__array_interface__["data"][0]
    np.testing.assert_array_equal(out.numpy(), view)


def test_read_only_is_never_handed_over_writable():
    a = np.arange(4, dtype=np.float32)
    a.flags.writeable = False
    # Finding: paddle takes the versioned capsule and ignores its READ_ONLY flag.
    assert paddle.from_dlpack(dlbridge.from_dlpack(a)).data_ptr() == a.__array_interface__["data"][0]
    for copy in (None, True):
        out = dlbridge.convert(a, "paddle", copy=copy)
        assert out.data_ptr() != a.__array_interface__["data"][0]
    with pytest.raises(dlbridge.ReadOnlyError):
        dlbridge.convert(a, "paddle", copy=False)


def test_a_torch_tensor_that_requires_grad_reaches_paddle_as_a_private_copy():
    import torch

    p = torch.nn.Parameter(torch.arange(3.0))
    out = dlbridge.convert(p, "paddle")  # read-only (autograd's), and paddle cannot see READ_ONLY
    assert out.data_ptr() != p.data_ptr() and out.numpy().tolist() == [0.0, 1.0, 2.0]


def test_edge_shapes_and_device():
    assert dlbridge.convert(np.float32(2.5), "paddle", copy=True).shape == []
    assert dlbridge.convert(np.zeros((0, 3), np.float32), "paddle").shape == [0, 3]
    assert dlbridge.convert(np.ones(2, np.float32), "paddle", device="cpu").place.is_cpu_place()
    with pytest.raises(dlbridge.UnsupportedDeviceError):
        dlbridge.convert(np.ones(2, np.float32), "paddle", device=(4, 0))


def test_convert_refuses_paddle_after_tensorflow_instead_of_crashing():
    pytest.importorskip("tensorflow", reason="tensorflow-cpu is not installed")
    code = ("import tensorflow, numpy, dlbridge\n"
            "try:\n    dlbridge.convert(numpy.ones(2), 'paddle')\n"
            "except ImportError as exc:\n    print('refused:', exc)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0 and "refused: paddle crashes" in out.stdout, out.stderr[-500:]


def test_check_findings():
    from dlbridge import check

    found = {r["rule"]: r for r in check.run(check.load_target("paddle"))}
    # Versioned capsules, but __dlpack_device__ answers (kDLCPU, None) and a bad dl_device is no BufferError.
    assert found["P2.versioned"]["status"] == found["P4.copy_true"]["status"] == check.PASS
    assert found["P1.device"]["status"] == check.FAIL and "None" in found["P1.device"]["evidence"]
    assert found["P3.bad_device"]["status"] == check.FAIL and "NotImplementedError" in found["P3.bad_device"]["evidence"]
