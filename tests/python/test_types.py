"""DeviceType, Device and DType: the values every other API names devices and dtypes with."""

import jax
import ml_dtypes
import numpy as np
import pytest
import torch

import dlbridge
from dlbridge import Device, DeviceType, DType
from conftest import check_error

# DLPack 1.3 DLDeviceType, written out here so that a renumbering in the
# binding cannot pass by agreeing with itself.
DEVICE_TYPES = {
    "kDLCPU": 1, "kDLCUDA": 2, "kDLCUDAHost": 3, "kDLOpenCL": 4, "kDLVulkan": 7, "kDLMetal": 8,
    "kDLVPI": 9, "kDLROCM": 10, "kDLROCMHost": 11, "kDLExtDev": 12, "kDLCUDAManaged": 13,
    "kDLOneAPI": 14, "kDLWebGPU": 15, "kDLHexagon": 16, "kDLMAIA": 17, "kDLTrn": 18,
}


def test_device_type_has_exactly_the_dlpack_1_3_values():
    assert {m.name: int(m) for m in DeviceType} == DEVICE_TYPES


def test_device_type_is_an_int_enum_so_it_compares_with_plain_ints():
    assert DeviceType.kDLCUDA == 2
    assert DeviceType(13) is DeviceType.kDLCUDAManaged


@pytest.mark.parametrize("spec, expected", [
    ("cpu", (1, 0)),
    ("cuda:1", (2, 1)),
    ("kDLCUDA:3", (2, 3)),
    ("cuda_host", (3, 0)),
    ("cuda_managed:0", (13, 0)),
    ("rocm:2", (10, 2)),
    ("trn:7", (18, 7)),
    ((2, 1), (2, 1)),
    ([10, 0], (10, 0)),
    (1, (1, 0)),
    (DeviceType.kDLOpenCL, (4, 0)),
])
def test_device_accepts_every_documented_spelling(spec, expected):
    d = Device(spec)
    assert tuple(d) == expected
    assert (int(d.type), d.id) == expected


def test_device_from_type_and_id():
    d = Device(DeviceType.kDLCUDA, 1)
    assert d == Device("cuda:1") == Device((2, 1))
    assert tuple(d) == (DeviceType.kDLCUDA, 1)
    assert d.type is DeviceType.kDLCUDA
    assert len(d) == 2 and d[0] == 2 and d[-1] == 1


def test_device_str_and_repr_round_trip():
    for spec in ["cpu", "cuda:1", "cuda_host:0", "rocm:3"]:
        d = Device(spec)
        assert Device(str(d)) == d
        assert repr(d) == f"Device('{d}')"
    assert str(Device("cpu")) == "cpu"


def test_device_is_hashable_and_immutable():
    assert {Device("cpu"), Device((1, 0)), Device(DeviceType.kDLCPU, 0)} == {Device("cpu")}
    assert hash(Device("cuda:1")) == hash(Device((2, 1)))
    with pytest.raises(AttributeError):
        Device("cpu").id = 3
    with pytest.raises(AttributeError):
        Device("cpu").type = DeviceType.kDLCUDA
    # Equal objects hash equal (Python data model): a Device is found by its name.
    assert "cpu" in {Device("cpu")}


def test_device_compares_with_tuples_and_not_with_nonsense():
    assert Device("cpu") == (1, 0)
    assert Device("cuda:1") != (2, 0)
    assert Device("cpu") != "not a device"
    assert not (Device("cpu") == 3.5)


def test_device_from_other_libraries():
    assert Device(torch.device("cpu")) == Device("cpu")
    assert Device(jax.devices("cpu")[0]) == Device("cpu")


def test_unknown_device_numbers_are_values_not_crashes():
    # dl_device=(99, 0) must reach the producer rules to be refused there
    # with the JAX message, so the Device itself is representable.
    d = Device((99, 0))
    assert int(d.type) == 99 and not isinstance(d.type, DeviceType)


@pytest.mark.parametrize("spec, exc", [
    ("gpu", ValueError),
    ("cuda:", ValueError),
    ("cuda:x", ValueError),
    ("cuda:-1", ValueError),
    ("cuda:99999999999", ValueError),
    ((1,), TypeError),
    ((1, 2, 3), TypeError),
    (("cpu", 0), TypeError),
    ((2, -1), ValueError),
    ((2**31, 0), ValueError),
    (3.5, TypeError),
    (object(), TypeError),
    (True, TypeError),
])
def test_bad_device_specs_raise_python_errors(spec, exc):
    with pytest.raises(exc) as info:
        Device(spec)
    assert not isinstance(info.value, dlbridge.DLPackError)


def test_bad_device_message_names_the_accepted_forms():
    with pytest.raises(ValueError, match="cuda") as info:
        Device("gpu")
    assert "cpu" in str(info.value)
    with pytest.raises(TypeError, match="float.*'cpu'"):
        Device(3.5)


@pytest.mark.parametrize("spec, triple, name", [
    ("float32", (2, 32, 1), "float32"),
    ("bool", (6, 8, 1), "bool"),
    ("int8", (0, 8, 1), "int8"),
    ("uint64", (1, 64, 1), "uint64"),
    ("bfloat16", (4, 16, 1), "bfloat16"),
    ("complex64", (5, 64, 1), "complex64"),
    ("complex128", (5, 128, 1), "complex128"),
    ("float8_e3m4", (7, 8, 1), "float8_e3m4"),
    ("float8_e4m3", (8, 8, 1), "float8_e4m3"),
    ("float8_e4m3b11fnuz", (9, 8, 1), "float8_e4m3b11fnuz"),
    ("float8_e4m3fn", (10, 8, 1), "float8_e4m3fn"),
    ("float8_e4m3fnuz", (11, 8, 1), "float8_e4m3fnuz"),
    ("float8_e5m2", (12, 8, 1), "float8_e5m2"),
    ("float8_e5m2fnuz", (13, 8, 1), "float8_e5m2fnuz"),
    ("float8_e8m0fnu", (14, 8, 1), "float8_e8m0fnu"),
    ("float6_e2m3fn", (15, 6, 1), "float6_e2m3fn"),
    ("float6_e3m2fn", (16, 6, 1), "float6_e3m2fn"),
    ("float4_e2m1fn", (17, 4, 1), "float4_e2m1fn"),
    ("float32x4", (2, 32, 4), "float32x4"),
    ((2, 32, 1), (2, 32, 1), "float32"),
    ((4, 16, 1), (4, 16, 1), "bfloat16"),
    (np.float16, (2, 16, 1), "float16"),
    (np.dtype("int16"), (0, 16, 1), "int16"),
    (np.bool_, (6, 8, 1), "bool"),
    (ml_dtypes.bfloat16, (4, 16, 1), "bfloat16"),
    (ml_dtypes.float8_e4m3fn, (10, 8, 1), "float8_e4m3fn"),
    (torch.bfloat16, (4, 16, 1), "bfloat16"),
    (torch.float8_e5m2, (12, 8, 1), "float8_e5m2"),
    (torch.complex32, (5, 32, 1), "complex32"),
    # torch's packed FP4 holds two values per byte, which DLPack says as lanes.
    (torch.float4_e2m1fn_x2, (17, 4, 2), "float4_e2m1fnx2"),
    (jax.numpy.float8_e4m3b11fnuz, (9, 8, 1), "float8_e4m3b11fnuz"),
])
def test_dtype_from_every_spelling(spec, triple, name):
    t = DType(spec)
    assert (t.code, t.bits, t.lanes) == triple
    assert tuple(t) == triple
    assert t.name == str(t) == name
    assert repr(t) == f"DType('{name}')"
    assert DType(t.name) == t
    assert DType(triple) == t


def test_dtype_compares_with_names_and_other_libraries():
    assert DType("float32") == "float32"
    assert DType("float32") != "int32"
    assert DType("float32") == np.float32
    assert DType("bfloat16") == torch.bfloat16
    assert DType("float32") != 5
    assert not (DType("float32") != DType((2, 32, 1)))


def test_dtype_is_hashable_and_immutable():
    assert {DType("float32"), DType(np.float32), DType((2, 32, 1))} == {DType("float32")}
    # Equal objects hash equal (Python data model): a DType is found by its name.
    assert "float32" in {DType("float32")}
    with pytest.raises(AttributeError):
        DType("float32").bits = 64


@pytest.mark.parametrize("name, itemsize", [
    ("bool", 1), ("float16", 2), ("complex128", 16), ("float32x4", 16), ("float4_e2m1fn", 1),
])
def test_dtype_itemsize_rounds_up_to_whole_bytes(name, itemsize):
    assert DType(name).itemsize == itemsize


@pytest.mark.parametrize("triple, cls, code", [
    ((99, 8, 1), dlbridge.UnsupportedDTypeError, "unsupported_dtype"),
    ((18, 8, 1), dlbridge.UnsupportedDTypeError, "unsupported_dtype"),
    ((17, 8, 1), dlbridge.InvalidTensorError, "invalid_tensor"),
    ((15, 8, 1), dlbridge.InvalidTensorError, "invalid_tensor"),
    ((6, 16, 1), dlbridge.InvalidTensorError, "invalid_tensor"),
    ((2, 0, 1), dlbridge.InvalidTensorError, "invalid_tensor"),
    ((2, 32, 0), dlbridge.InvalidTensorError, "invalid_tensor"),
    ((5, 33, 1), dlbridge.InvalidTensorError, "invalid_tensor"),
])
def test_malformed_dtype_triples_use_the_import_error_classes(triple, cls, code):
    with pytest.raises(cls) as info:
        DType(triple)
    check_error(info, cls, code)


@pytest.mark.parametrize("spec, exc", [
    ("floaty", ValueError),
    ("float032", ValueError),
    (np.dtype("U3"), ValueError),
    ((2, 32), TypeError),
    ((2, 256, 1), ValueError),
    (("2", 32, 1), TypeError),
])
def test_bad_dtype_arguments_raise_python_errors(spec, exc):
    with pytest.raises(exc):
        DType(spec)


def test_unknown_dtype_name_message_lists_good_names():
    with pytest.raises(ValueError, match="bfloat16"):
        DType("floaty")


class _NameRaises:
    @property
    def name(self):
        raise KeyError("name is broken")

    def __str__(self):
        return "float32"


class _NameMissing:
    def __str__(self):
        return "float32"


def test_a_dtype_name_property_that_raises_propagates_its_error():
    # hasattr() would swallow the KeyError (Python 3.13 reports it as
    # "Exception ignored") and read str() instead: a silent guess.
    with pytest.raises(KeyError, match="name is broken"):
        DType(_NameRaises())
    assert DType(_NameMissing()).name == "float32"
