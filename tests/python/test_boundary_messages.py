"""Bad input gets an error that says what happened: a TypeError or
ValueError naming the problem, never RuntimeError("std::bad_cast")."""

import numpy as np
import pytest

import dlbridge


class Interface:
    def __init__(self, **fields):
        self.__array_interface__ = dict(dict(shape=(2,), typestr="<f4", version=3), **fields)


BUFFER = np.zeros(4, dtype=np.float32)
GOOD_ADDRESS = BUFFER.ctypes.data


@pytest.mark.parametrize("fields, exc, words", [
    (dict(data=(-1, False)), ValueError, "not an address"),
    (dict(data=(2**64, False)), ValueError, "not an address"),
    (dict(data=(2**80, False)), ValueError, "not an address"),
    (dict(data=("0x10", False)), TypeError, "data pointer must be an int"),
    (dict(data=(1.5, False)), TypeError, "data pointer must be an int"),
    (dict(data=(GOOD_ADDRESS, False), typestr=b"<f4"), TypeError, "'typestr' must be a str"),
    (dict(data=(GOOD_ADDRESS, False), typestr="<f4\ud800"), ValueError, "surrogate"),
    (dict(data=(GOOD_ADDRESS, False), shape=(2**64,)), ValueError, "64 bits"),
])
def test_malformed_array_interface_values_say_what_is_wrong(fields, exc, words):
    with pytest.raises(exc, match=words):
        dlbridge.from_dlpack(Interface(**fields))


@pytest.mark.parametrize("flag, readonly", [(1, True), (0, False), ("yes", True), ((), False), (None, False)])
def test_array_interface_read_only_flag_is_read_by_its_truth_value_as_numpy_does(flag, readonly):
    t = dlbridge.from_dlpack(Interface(data=(GOOD_ADDRESS, flag)))
    assert t.readonly is readonly
    assert np.asarray(Interface(data=(GOOD_ADDRESS, flag))).flags.writeable is not readonly


@pytest.mark.parametrize("shape", [2**63, 2**64, -(2**63) - 1, (2**63,), [1, 2**70]])
def test_empty_with_a_dimension_beyond_int64_is_a_value_error(shape):
    with pytest.raises(ValueError, match="64 bits"):
        dlbridge.empty(shape)


@pytest.mark.parametrize("make", [lambda: dlbridge.Device("\ud800"), lambda: dlbridge.DType("\ud800"),
                                  lambda: dlbridge.empty(2, dtype="\udcff"),
                                  lambda: dlbridge.empty(2, device="cuda\ud800")])
def test_names_without_utf8_form_are_a_value_error(make):
    with pytest.raises(ValueError):
        make()


@pytest.mark.parametrize("cls", [dlbridge.Device, dlbridge.DType])
def test_uninitialised_device_or_dtype_argument_is_a_type_error(cls):
    bare = cls.__new__(cls)
    with pytest.raises(TypeError, match="never initialised"):
        cls(bare)
    with pytest.raises(TypeError, match="never initialised"):
        dlbridge.empty(2, **{"device" if cls is dlbridge.Device else "dtype": bare})


def capsule_named(raw_name: bytes):
    """A capsule whose name is the given bytes (not necessarily UTF-8)."""
    import ctypes

    new = ctypes.pythonapi.PyCapsule_New
    new.restype = ctypes.py_object
    new.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
    name = ctypes.create_string_buffer(raw_name)
    capsule = new(ctypes.addressof(name), name, None)
    return capsule, name  # the name must outlive the capsule


@pytest.mark.parametrize("raw", [b"\xff\xfe", b"dltensor\xff", b"\xc3("])
def test_capsule_with_a_non_utf8_name_is_not_a_dlpack_capsule(raw):
    capsule, keep = capsule_named(raw)
    with pytest.raises(TypeError, match="is not a DLPack capsule") as info:
        dlbridge.from_dlpack(capsule)
    assert "\\x" in str(info.value)
    described = dlbridge.inspect_capsule(capsule)
    assert described["name"] == raw.decode("utf-8", "backslashreplace")
    assert described["versioned"] is False
    del capsule, keep


def test_to_dlpack_of_an_unreadable_object_names_to_dlpack():
    with pytest.raises(TypeError, match=r"^dlbridge\.to_dlpack cannot read a int"):
        dlbridge.to_dlpack(1)
    with pytest.raises(TypeError, match=r"^dlbridge\.from_dlpack cannot read a int"):
        dlbridge.from_dlpack(1)


@pytest.mark.parametrize("triple", [(5, 8, 3), (2, 32, 2), (0, 4, 1), (17, 4, 2), (6, 8, 1)])
def test_dtype_names_parse_back(triple):
    t = dlbridge.DType(triple)
    assert dlbridge.DType(t.name) == t
