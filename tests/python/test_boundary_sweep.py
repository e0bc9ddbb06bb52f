"""Every public entry point called with wrong-typed and lying arguments.

Whatever comes back must be an answer or one of: TypeError, ValueError, a
coded dlbridge.DLPackError, or the exception the hostile argument raised
itself (HostileError, which must propagate unchanged). No message may carry
C++ internals: `std::`, `bad_cast`, or a C++ stack trace."""

import gc

import numpy as np
import pytest

import dlbridge


class HostileError(Exception):
    """Raised by the hostile arguments' own properties."""


class LyingTuple(tuple):
    def __len__(self):
        return 2

    def __getitem__(self, index):
        raise HostileError("__getitem__")

    def __iter__(self):
        raise HostileError("__iter__")


class LyingList(list):
    def __len__(self):
        return 3


class RaisingProperties:
    """Every attribute dlbridge may look up raises."""

    def __getattr__(self, name):
        raise HostileError(name)


class JunkDlpack:
    def __init__(self, capsule_value, device_value=(1, 0)):
        self.capsule_value, self.device_value = capsule_value, device_value

    def __dlpack__(self, **kwargs):
        return self.capsule_value

    def __dlpack_device__(self):
        return self.device_value


class JunkInterface:
    def __init__(self, interface):
        self.__array_interface__ = interface


class RaisingDunder:
    @property
    def __dlpack__(self):
        raise HostileError("__dlpack__")


def used_capsule():
    capsule = np.arange(2.0).__dlpack__()
    dlbridge.from_dlpack(capsule)
    return capsule


HOSTILE = {
    "None": lambda: None,
    "str": lambda: "not a thing",
    "empty-str": lambda: "",
    "float": lambda: 1.5,
    "nan": lambda: float("nan"),
    "bool": lambda: True,
    "huge-int": lambda: 2**70,
    "negative-int": lambda: -5,
    "bytes": lambda: b"\xff\x00",
    "list": lambda: [1, "a"],
    "dict": lambda: {"shape": (2,)},
    "object": lambda: object(),
    "lying-tuple-short": lambda: LyingTuple(()),
    "lying-tuple-long": lambda: LyingTuple((1, 2, 3)),
    "lying-list": lambda: LyingList([1]),
    "raising-properties": lambda: RaisingProperties(),
    "raising-dunder-dlpack": lambda: RaisingDunder(),
    "uninitialised-tensor": lambda: dlbridge.Tensor.__new__(dlbridge.Tensor),
    "uninitialised-device": lambda: dlbridge.Device.__new__(dlbridge.Device),
    "uninitialised-dtype": lambda: dlbridge.DType.__new__(dlbridge.DType),
    "dlpack-returns-int": lambda: JunkDlpack(7),
    "dlpack-returns-none": lambda: JunkDlpack(None),
    "dlpack-returns-used-capsule": lambda: JunkDlpack(used_capsule()),
    "dlpack-device-junk": lambda: JunkDlpack(np.arange(2.0).__dlpack__(), device_value=("x", None)),
    "interface-not-dict": lambda: JunkInterface([1, 2]),
    "interface-bad-data": lambda: JunkInterface({"shape": (2,), "typestr": "<f4", "data": ("x", 1)}),
    "interface-huge-shape": lambda: JunkInterface({"shape": (2**63,), "typestr": "<f4", "data": (8, False)}),
    "interface-negative-shape": lambda: JunkInterface({"shape": (-1,), "typestr": "<f4", "data": (8, False)}),
    "interface-bytes-typestr": lambda: JunkInterface({"shape": (1,), "typestr": b"<f4", "data": (8, False)}),
    "used-capsule": used_capsule,
    "surrogate-str": lambda: "cpu\ud800",
}


def tensor():
    return dlbridge.empty((2, 3))


ENTRY_POINTS = {
    "from_dlpack(x)": lambda v: dlbridge.from_dlpack(v),
    "from_dlpack(device=)": lambda v: dlbridge.from_dlpack(np.ones(2), device=v),
    "from_dlpack(copy=)": lambda v: dlbridge.from_dlpack(np.ones(2), copy=v),
    "to_dlpack(x)": lambda v: dlbridge.to_dlpack(v),
    "to_dlpack(stream=)": lambda v: dlbridge.to_dlpack(np.ones(2), stream=v),
    "to_dlpack(max_version=)": lambda v: dlbridge.to_dlpack(np.ones(2), max_version=v),
    "to_dlpack(dl_device=)": lambda v: dlbridge.to_dlpack(np.ones(2), dl_device=v),
    "to_dlpack(copy=)": lambda v: dlbridge.to_dlpack(np.ones(2), copy=v),
    "empty(shape)": lambda v: dlbridge.empty(v),
    "empty(dtype=)": lambda v: dlbridge.empty(2, dtype=v),
    "empty(device=)": lambda v: dlbridge.empty(2, device=v),
    "convert(x)": lambda v: dlbridge.convert(v, "numpy"),
    "convert(to)": lambda v: dlbridge.convert(np.ones(2), v),
    "convert(device=)": lambda v: dlbridge.convert(np.ones(2), "numpy", device=v),
    "convert(copy=)": lambda v: dlbridge.convert(np.ones(2), "numpy", copy=v),
    "Device(spec)": lambda v: dlbridge.Device(v),
    "Device(type, id)": lambda v: dlbridge.Device(1, v),
    "Device(spec, 0)": lambda v: dlbridge.Device(v, 0),
    "Device ==": lambda v: dlbridge.Device("cpu") == v,
    "Device[]": lambda v: dlbridge.Device("cpu")[v],
    "DType(spec)": lambda v: dlbridge.DType(v),
    "DType ==": lambda v: dlbridge.DType("float32") == v,
    "inspect_capsule": lambda v: dlbridge.inspect_capsule(v),
    "Tensor.__dlpack__(stream=)": lambda v: tensor().__dlpack__(stream=v),
    "Tensor.__dlpack__(max_version=)": lambda v: tensor().__dlpack__(max_version=v),
    "Tensor.__dlpack__(dl_device=)": lambda v: tensor().__dlpack__(dl_device=v),
    "Tensor.__dlpack__(copy=)": lambda v: tensor().__dlpack__(copy=v),
    "Tensor.__dlpack__(positional)": lambda v: tensor().__dlpack__(v),
    "Tensor.__dlpack__(unknown keyword)": lambda v: tensor().__dlpack__(colour=v),
    "Tensor.copy(device=)": lambda v: tensor().copy(device=v),
    "Tensor.copy(positional)": lambda v: tensor().copy(v),
    "Tensor.copy_unpacked(arg)": lambda v: tensor().copy_unpacked(v),
    "Tensor.__dlpack_device__(arg)": lambda v: tensor().__dlpack_device__(v),
    "Tensor(...)": lambda v: dlbridge.Tensor(v),
    "Tensor.__dlpack__ unbound": lambda v: dlbridge.Tensor.__dlpack__(v),
    "Tensor.shape unbound": lambda v: dlbridge.Tensor.shape.__get__(v),
    "Tensor.__array_interface__ unbound": lambda v: dlbridge.Tensor.__array_interface__.__get__(v),
    "Tensor.copy unbound": lambda v: dlbridge.Tensor.copy(v),
    "memoryview(from_dlpack(x))": lambda v: memoryview(dlbridge.from_dlpack(v)),
}
if hasattr(dlbridge, "explain"):
    ENTRY_POINTS["explain"] = lambda v: dlbridge.explain(v)

ALLOWED = (TypeError, ValueError, dlbridge.DLPackError, HostileError)
# Indexing out of range is an IndexError for Device as for the tuple it equals.
ALSO_ALLOWED = {"Device[]": (IndexError,)}
LEAKS = ("std::", "bad_cast", "Exception raised from", "most recent call first", "__cxa")


@pytest.mark.filterwarnings("ignore:nanobind")  # its warning on the uninitialised instances
@pytest.mark.parametrize("entry", sorted(ENTRY_POINTS))
def test_every_entry_point_refuses_hostile_arguments_cleanly(entry):
    call = ENTRY_POINTS[entry]
    failures = []
    allowed = ALLOWED + ALSO_ALLOWED.get(entry, ())
    for name, make in HOSTILE.items():
        try:
            call(make())
        except allowed as error:
            message = str(error)
            if type(error) is RuntimeError or any(leak in message for leak in LEAKS):
                failures.append(f"{name}: {type(error).__name__}: {message}")
            if isinstance(error, dlbridge.DLPackError) and not (error.code and error.hint):
                failures.append(f"{name}: uncoded {type(error).__name__}: {message}")
        except BaseException as error:  # noqa: BLE001 - every other class is the finding
            failures.append(f"{name}: {type(error).__name__}: {error}")
    gc.collect()
    assert not failures, "\n".join(failures)
