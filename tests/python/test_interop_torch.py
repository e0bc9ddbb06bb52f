"""PyTorch as producer and as consumer of dlbridge."""

import gc

import numpy as np
import pytest
import torch

import dlbridge
from conftest import numpy_layouts

# Every torch dtype that torch exports through DLPack, with the DLPack name
# dlbridge must see.
TORCH_DTYPES = [
    (torch.bool, "bool"), (torch.int8, "int8"), (torch.int16, "int16"), (torch.int32, "int32"),
    (torch.int64, "int64"), (torch.uint8, "uint8"), (torch.uint16, "uint16"), (torch.uint32, "uint32"),
    (torch.uint64, "uint64"), (torch.float16, "float16"), (torch.float32, "float32"),
    (torch.float64, "float64"), (torch.bfloat16, "bfloat16"), (torch.complex32, "complex32"),
    (torch.complex64, "complex64"), (torch.complex128, "complex128"),
    (torch.float8_e4m3fn, "float8_e4m3fn"), (torch.float8_e4m3fnuz, "float8_e4m3fnuz"),
    (torch.float8_e5m2, "float8_e5m2"), (torch.float8_e5m2fnuz, "float8_e5m2fnuz"),
    (torch.float8_e8m0fnu, "float8_e8m0fnu"),
    # Two FP4 values per byte, said as lanes=2 (facts sheet).
    (torch.float4_e2m1fn_x2, "float4_e2m1fnx2"),
]


def torch_values(dtype, n=6):
    if dtype is torch.bool:
        return torch.arange(n) % 2 == 0
    if dtype in (torch.float4_e2m1fn_x2, torch.float8_e8m0fnu, torch.complex32) or dtype.itemsize == 1 \
            and dtype.is_floating_point:
        # No arithmetic on these in torch; fill the bytes instead.
        raw = torch.arange(n * dtype.itemsize, dtype=torch.uint8) % 60
        return raw.view(dtype)
    if dtype.is_complex:
        return torch.complex(torch.arange(n, dtype=torch.float64), torch.ones(n, dtype=torch.float64)).to(dtype)
    return torch.arange(n).to(dtype)


def same_bytes(x, y):
    return torch.equal(x.contiguous().view(torch.uint8), y.contiguous().view(torch.uint8))


@pytest.mark.parametrize("dtype, name", TORCH_DTYPES, ids=[n for _, n in TORCH_DTYPES])
def test_torch_dtypes_round_trip_zero_copy(dtype, name):
    x = torch_values(dtype)
    t = dlbridge.from_dlpack(x)
    assert t.dtype == name
    assert t.data_ptr == x.data_ptr()
    y = torch.from_dlpack(t)
    assert y.dtype == dtype
    assert y.data_ptr() == x.data_ptr()
    assert same_bytes(x, y)


@pytest.mark.parametrize("dtype", [torch.bits8, torch.bits16, torch.bits1x8])
def test_torch_refuses_to_export_bit_types(dtype):
    x = torch.zeros(2, dtype=torch.uint8 if dtype.itemsize == 1 else torch.int16).view(dtype)
    with pytest.raises(BufferError, match="Bit types"):
        x.__dlpack__(max_version=(1, 3))
    # Finding: torch's C exchange API (which dlbridge prefers when present)
    # reports the same refusal as a RuntimeError; dlbridge reports it as the
    # producer's refusal, a BufferError like the Python protocol's.
    with pytest.raises(dlbridge.ProducerError, match="Bit types"):
        dlbridge.from_dlpack(x)


def test_torch_sub_byte_integer_dtypes_export_as_whole_bytes():
    # Finding: torch.int4 / uint4 (and int1..int7) are one value per byte and
    # export as int8 / uint8, so their bit width is lost on the way out.
    for narrow, wide in [(torch.int4, "int8"), (torch.uint4, "uint8"), (torch.int1, "int8")]:
        x = torch.zeros(4, dtype=torch.int8 if wide == "int8" else torch.uint8).view(narrow)
        assert dlbridge.from_dlpack(x).dtype == wide


@pytest.mark.parametrize("name", ["float8_e4m3b11fnuz", "float8_e3m4", "float8_e4m3", "float6_e2m3fn",
                                  "float4_e2m1fn", "int4"])
def test_torch_refuses_dlpack_dtypes_it_has_no_type_for(name):
    with pytest.raises(BufferError):
        torch.from_dlpack(dlbridge.empty((4,), name))


def torch_layouts():
    base = torch.arange(60, dtype=torch.float64)
    return [
        ("c", base[:12].reshape(3, 4)),
        ("f", base[:12].reshape(4, 3).t()),
        ("transposed", base[:24].reshape(2, 3, 4).permute(2, 0, 1)),
        ("stepped", base.reshape(6, 10)[::2, 1::3]),
        ("size1-odd-stride", base.as_strided((3, 1, 2), (2, 999, 1))),
        ("zero-d", torch.tensor(2.5, dtype=torch.float64)),
        ("size-0", torch.zeros(0, 3, dtype=torch.float64)),
        ("offset", base[7:19].reshape(3, 4)),
        ("expanded", base[:3].reshape(3, 1).expand(3, 4)),
    ]


@pytest.mark.parametrize("layout, x", torch_layouts(), ids=[n for n, _ in torch_layouts()])
def test_torch_layouts_round_trip_with_shared_memory(layout, x):
    t = dlbridge.from_dlpack(x)
    assert t.shape == tuple(x.shape)
    assert t.strides == tuple(x.stride()) or x.numel() == 0
    if x.numel():
        assert t.data_ptr == x.data_ptr()
    y = torch.from_dlpack(t)
    assert torch.equal(y, x)
    if x.numel():
        assert y.data_ptr() == x.data_ptr()
    np.testing.assert_array_equal(np.from_dlpack(t), x.numpy())


NON_NEGATIVE_NUMPY_LAYOUTS = [(n, a) for n, a in numpy_layouts() if not n.startswith("negative")]


@pytest.mark.parametrize("layout, a", NON_NEGATIVE_NUMPY_LAYOUTS, ids=[n for n, _ in NON_NEGATIVE_NUMPY_LAYOUTS])
def test_numpy_layouts_reach_torch_through_dlbridge(layout, a):
    y = torch.from_dlpack(dlbridge.from_dlpack(a))
    np.testing.assert_array_equal(y.numpy(), a)
    if a.size:
        assert y.data_ptr() == a.ctypes.data


def test_torch_aborts_the_process_on_negative_strides(run_python):
    # Finding: torch 2.13's from_dlpack still aborts (c10::Error escapes as
    # std::terminate) on negative strides, so it runs in a child process.
    result = run_python("""
        import dlbridge, numpy as np, torch
        t = dlbridge.from_dlpack(np.arange(4.0)[::-1])
        torch.from_dlpack(t)
        print("survived")
    """)
    assert result.returncode != 0
    assert "survived" not in result.stdout
    assert "Storage size calculation overflowed" in result.stderr


def test_negative_strides_reach_torch_after_a_dlbridge_copy():
    a = np.arange(4.0)[::-1]
    y = torch.from_dlpack(dlbridge.from_dlpack(a, copy=True))
    assert y.tolist() == [3.0, 2.0, 1.0, 0.0]


def test_copy_true_from_torch_never_shares():
    x = torch.arange(6.0).reshape(2, 3)
    t = dlbridge.from_dlpack(x, copy=True)
    assert t.data_ptr != x.data_ptr()
    y = torch.from_dlpack(t)
    assert torch.equal(x, y)
    y[0, 0] = 100
    assert x[0, 0] == 0


def test_torch_ignores_is_copied_and_copy_requests_are_still_honoured():
    # Finding: torch copies for copy=True but never sets IS_COPIED, so
    # dlbridge must not rely on the flag; the data is still fresh.
    x = torch.arange(4.0)
    info = dlbridge.inspect_capsule(x.__dlpack__(max_version=(1, 3), copy=True))
    assert info["flags"] == 0
    assert info["data"] != x.data_ptr()


def test_torch_speaks_versioned_dlpack():
    info = dlbridge.inspect_capsule(torch.arange(3.0).__dlpack__(max_version=(1, 3)))
    assert info["name"] == "dltensor_versioned" and info["version"][0] == 1


def test_torch_unsupported_dl_device_is_an_internal_assert():
    # Finding: torch answers an OpenCL dl_device with an internal assertion,
    # not a BufferError; dlbridge's own answer is the JAX-style message.
    with pytest.raises(RuntimeError, match="INTERNAL ASSERT"):
        torch.arange(3.0).__dlpack__(max_version=(1, 3), dl_device=(4, 0))
    with pytest.raises(dlbridge.UnsupportedDeviceError):
        dlbridge.to_dlpack(torch.arange(3.0), max_version=(1, 3), dl_device=(4, 0))


def test_torch_drops_the_readonly_flag_on_import():
    # Finding: torch imports a READ_ONLY tensor as an ordinary writable one.
    a = np.arange(3.0)
    a.flags.writeable = False
    t = dlbridge.from_dlpack(a)
    assert t.readonly
    y = torch.from_dlpack(t)
    assert y.data_ptr() == a.ctypes.data
    assert not y.is_inference()  # nothing marks it read-only


def test_torch_requires_grad_refused_by_dunder_but_not_by_the_c_exchange_api():
    # Finding: torch's __dlpack__ refuses tensors that require grad, but its
    # C exchange API (which dlbridge uses when the type offers it) exports them.
    x = torch.ones(2, requires_grad=True)
    with pytest.raises(BufferError, match="require gradient"):
        x.__dlpack__(max_version=(1, 3))
    assert dlbridge.from_dlpack(x).data_ptr == x.data_ptr()
    assert dlbridge.from_dlpack(x.detach()).data_ptr == x.data_ptr()


# --- lifetime

def test_torch_producer_deleted_before_the_consumer():
    x = torch.arange(100.0)
    t = dlbridge.from_dlpack(x[::2])
    del x
    gc.collect()
    assert np.from_dlpack(t).tolist() == list(np.arange(0.0, 100.0, 2.0))


def test_dlbridge_deleted_before_the_torch_view():
    t = dlbridge.empty((2, 2), "float32")
    y = torch.from_dlpack(t)
    y.fill_(3.0)
    del t
    gc.collect()
    assert y.sum().item() == 12.0
