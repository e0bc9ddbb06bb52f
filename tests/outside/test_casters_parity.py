"""A caster gives dlbridge.from_dlpack's answer, case by case: the same values,
dtype, shape, strides, device and writability, or the same exception class
and error code, and the same number of calls to the producer.

The cases are every malformed, future and unusual tensor of the boundary
tests (tests/python/test_hostile.py's REFUSED and ACCEPTED, read from that
file, each as a raw capsule, a legacy capsule and through a producer's
__dlpack__), and the kinds of input of test_import.py and the library tests:
NumPy (read-only, strided, byte-swapped, structured), buffers, array
interfaces, old and legacy producers, producers that raise or lie about their
device, torch (conjugate and negative views, requires_grad, quantized, sparse,
meta, subclasses), JAX, Arrow, dlbridge tensors and objects that are no tensor.
"""

from __future__ import annotations

import array
import ast
import ctypes
import importlib
import sys
import types
from pathlib import Path

import numpy as np
import pytest
from conftest import OldProducer

import dlbridge

HOSTILE = Path(__file__).resolve().parents[1] / "python" / "test_hostile.py"


def hostile_cases() -> list[tuple[str, dict]]:
    """(id, make_capsule keywords) of test_hostile.py's REFUSED and ACCEPTED."""
    tree = ast.parse(HOSTILE.read_text())
    found = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and getattr(node.targets[0], "id", "") in (
                "REFUSED", "ACCEPTED"):
            found[node.targets[0].id] = eval(compile(ast.Expression(node.value), str(HOSTILE), "eval"),
                                             {"E": dlbridge})
    assert set(found) == {"REFUSED", "ACCEPTED"}, f"{HOSTILE} no longer defines REFUSED and ACCEPTED"
    return [(case[0], case[1]) for name in ("REFUSED", "ACCEPTED") for case in found[name]]


def tools():
    return dlbridge._core._testing


class CapsuleProducer:
    """A producer that hands out make_capsule(**spec), counting its calls."""

    def __init__(self, **spec):
        self.spec = spec
        self.calls = 0

    def __dlpack__(self, **kwargs):
        self.calls += 1
        return tools().make_capsule(**self.spec)

    def __dlpack_device__(self):
        return tuple(self.spec.get("device", (1, 0)))


class Returning:
    """A producer whose __dlpack__ returns make() (or raises it)."""

    def __init__(self, make, device=(1, 0)):
        self.make = make
        self.device = device
        self.calls = 0

    def __dlpack__(self, **kwargs):
        self.calls += 1
        value = self.make()
        if isinstance(value, BaseException):
            raise value
        return value

    def __dlpack_device__(self):
        if isinstance(self.device, BaseException):
            raise self.device
        return self.device


class ArrayInterfaceOnly:
    def __init__(self, interface):
        self.__array_interface__ = interface


class CudaInterfaceOnly:
    __cuda_array_interface__ = {"shape": (2,), "typestr": "<f4", "data": (4096, False), "version": 3}


def readonly(a):
    a.flags.writeable = False
    return a


def consumed_capsule():
    used = np.zeros(2).__dlpack__(max_version=(1, 0))
    dlbridge.from_dlpack(used)
    return used


def foreign_capsule(name=b"other"):
    new = ctypes.pythonapi.PyCapsule_New
    new.restype = ctypes.py_object
    new.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
    return new(id(foreign_capsule), name, None)


def released_view():
    view = memoryview(bytearray(8))
    view.release()
    return view


class ReEntering:
    """A producer whose __dlpack__, once its type has answered one call, asks dlbridge to read
    the same object again before it answers: every reader refuses that re-entry at once, a
    caster too, whatever dlbridge has learnt of the type by then."""

    answered = False

    def __init__(self):
        self.calls = 0

    def __dlpack__(self, **kwargs):
        self.calls += 1
        if ReEntering.answered:
            dlbridge.from_dlpack(self)
        ReEntering.answered = True
        return np.arange(3.0).__dlpack__(**kwargs)

    def __dlpack_device__(self):
        return (1, 0)


def torch_case(make):
    def build():
        torch = pytest.importorskip("torch")
        return make(torch)
    return build


def impostor_torch_tensor():
    """A class that calls itself torch.Tensor and offers dlbridge's own exchange table."""
    base = np.arange(3.0)
    namespace = {"__module__": "torch", "__dlpack_c_exchange_api__": dlbridge.Tensor.__dlpack_c_exchange_api__,
                 "__dlpack__": lambda self, **kwargs: base.__dlpack__(**kwargs),
                 "__dlpack_device__": lambda self: (1, 0)}
    return type("Tensor", (), namespace)()


def torch_subclass(torch, *, own_dlpack):
    namespace = {}
    if own_dlpack:
        namespace["__dlpack__"] = lambda self, **kw: torch.Tensor.__dlpack__(self, **kw)
    return type("TorchSub", (torch.Tensor,), namespace)


def arrow_case(make):
    def build():
        pa = pytest.importorskip("pyarrow")
        return make(pa)
    return build


def jax_case(make):
    def build():
        jnp = pytest.importorskip("jax.numpy")
        return make(jnp)
    return build


CASES = {
    # NumPy, through its __dlpack__
    "numpy": lambda: np.arange(6, dtype=np.float32).reshape(2, 3),
    "numpy-read-only": lambda: readonly(np.arange(4, dtype=np.int16)),
    "numpy-strided": lambda: np.arange(12.0)[::3],
    "numpy-negative-strides": lambda: np.arange(6.0).reshape(2, 3)[::-1, ::-1],
    "numpy-transposed": lambda: np.arange(6, dtype=np.int8).reshape(2, 3).T,
    "numpy-0d": lambda: np.array(3.5),
    "numpy-size-0": lambda: np.zeros((0, 3)),
    "numpy-bool": lambda: np.array([True, False]),
    "numpy-float16": lambda: np.ones(3, dtype=np.float16),
    "numpy-complex64": lambda: np.arange(3, dtype=np.complex64),
    "numpy-big-endian": lambda: np.arange(4, dtype=">f4"),
    "numpy-datetime64": lambda: np.arange(3).astype("M8[s]"),
    "numpy-structured": lambda: np.zeros(2, dtype=[("a", "<i4"), ("b", "<f8")]),
    "numpy-objects": lambda: np.array([None, 1], dtype=object),
    "numpy-unaligned": lambda: np.frombuffer(bytearray(12), dtype=np.int32, count=2, offset=1),
    "numpy-size1-huge-stride": lambda: np.lib.stride_tricks.as_strided(np.zeros(4), (1, 2), (2**62, 8)),
    # buffers and array interfaces
    "bytes": lambda: b"abcdefgh",
    "bytearray": lambda: bytearray(b"abcd"),
    "memoryview-float": lambda: memoryview(bytearray(8)).cast("f"),
    "memoryview-read-only": lambda: memoryview(b"abcd"),
    "memoryview-strided": lambda: memoryview(np.arange(6.0))[::2],
    "memoryview-released": released_view,
    "array.array": lambda: array.array("d", [1.0, 2.0]),
    "ctypes-array": lambda: (ctypes.c_int * 3)(1, 2, 3),
    "array-interface": lambda: ArrayInterfaceOnly(np.ones(3, dtype=np.uint16).__array_interface__),
    "array-interface-lying-typestr": lambda: ArrayInterfaceOnly({"shape": (2,), "typestr": "<q9", "data": (0, False),
                                                                  "version": 3}),
    "array-interface-null-data": lambda: ArrayInterfaceOnly({"shape": (2,), "typestr": "<f4", "data": (0, False),
                                                              "version": 3}),
    "cuda-array-interface": CudaInterfaceOnly,
    # producers: old, legacy, raising, lying
    "old-producer": lambda: OldProducer(np.arange(3, dtype=np.int64)),
    "legacy-producer": lambda: CapsuleProducer(shape=[2, 3], versioned=False),
    "raises-BufferError": lambda: Returning(lambda: BufferError("cannot export")),
    "raises-RuntimeError": lambda: Returning(lambda: RuntimeError("broken")),
    "raises-TypeError": lambda: Returning(lambda: TypeError("no such keyword")),
    "raises-KeyboardInterrupt": lambda: Returning(lambda: KeyboardInterrupt()),
    "raises-SystemExit": lambda: Returning(lambda: SystemExit(3)),
    "returns-int": lambda: Returning(lambda: 7),
    "returns-None": lambda: Returning(lambda: None),
    "returns-consumed-capsule": lambda: Returning(consumed_capsule),
    "returns-foreign-capsule": lambda: Returning(foreign_capsule),
    "device-says-cuda-data-on-cpu": lambda: Returning(lambda: np.zeros(2).__dlpack__(), device=(2, 0)),
    "device-raises": lambda: Returning(lambda: np.zeros(2).__dlpack__(), device=RuntimeError("device")),
    "device-garbage": lambda: Returning(lambda: np.zeros(2).__dlpack__(), device=("cpu", "zero")),
    "cuda-memory-producer": lambda: CapsuleProducer(device=(2, 0)),
    "cuda-host-producer": lambda: CapsuleProducer(device=(3, 0)),
    "cpu-device-1-producer": lambda: CapsuleProducer(device=(1, 1)),
    "re-entering-producer": ReEntering,
    # raw capsules
    "capsule-versioned": lambda: np.arange(3.0).__dlpack__(max_version=(1, 0)),
    "capsule-legacy": lambda: np.arange(3.0).__dlpack__(),
    "capsule-read-only": lambda: readonly(np.arange(3.0)).__dlpack__(max_version=(1, 0)),
    "capsule-consumed": consumed_capsule,
    "capsule-foreign": foreign_capsule,
    "capsule-non-utf8-name": lambda: foreign_capsule(b"dltensor\xff"),
    # dlbridge's own
    "dlbridge-tensor": lambda: dlbridge.from_dlpack(np.arange(4, dtype=np.uint8)),
    "dlbridge-read-only": lambda: dlbridge.from_dlpack(readonly(np.arange(4, dtype=np.uint8))),
    "dlbridge-bfloat16": lambda: dlbridge.from_dlpack(tools().make_capsule(shape=[1, 2], dtype=(4, 16, 1))),
    "dlbridge-uninitialised": lambda: dlbridge.Tensor.__new__(dlbridge.Tensor),
    # no tensor at all
    "None": lambda: None,
    "str": lambda: "text",
    "int": lambda: 3,
    "list": lambda: [1, 2],
    "object": object,
    "type": lambda: int,
    # torch
    "torch": torch_case(lambda torch: torch.arange(6, dtype=torch.float32).reshape(2, 3)),
    "torch-transposed": torch_case(lambda torch: torch.arange(6.0).reshape(2, 3).t()),
    "torch-offset": torch_case(lambda torch: torch.arange(6.0)[2:]),
    "torch-0d": torch_case(lambda torch: torch.tensor(2.5)),
    "torch-bool": torch_case(lambda torch: torch.tensor([True, False])),
    "torch-bfloat16": torch_case(lambda torch: torch.ones(3, dtype=torch.bfloat16)),
    "torch-conj": torch_case(lambda torch: torch.conj(torch.tensor([1 + 2j, 3 - 4j]))),
    "torch-neg": torch_case(lambda torch: torch._neg_view(torch.tensor([1.0, -2.0]))),
    "torch-conj-neg": torch_case(lambda torch: torch.conj(torch._neg_view(torch.tensor([1 + 2j])))),
    "torch-requires-grad": torch_case(lambda torch: torch.ones(2, requires_grad=True)),
    "torch-requires-grad-leaf-view": torch_case(lambda torch: torch.ones(3, requires_grad=True)[1:]),
    "torch-quantized": torch_case(lambda torch: torch.quantize_per_tensor(torch.ones(2), 0.1, 0, torch.qint8)),
    "torch-sparse": torch_case(lambda torch: torch.eye(2).to_sparse()),
    "torch-meta": torch_case(lambda torch: torch.empty(2, device="meta")),
    "torch-subclass": torch_case(lambda torch: torch.ones(2).as_subclass(torch_subclass(torch, own_dlpack=False))),
    "torch-subclass-own-dlpack": torch_case(
        lambda torch: torch.ones(2).as_subclass(torch_subclass(torch, own_dlpack=True))),
    # trust is given to torch's real class and its real table, never to a name or a table a
    # subclass sets (once a recursion in C until the stack overflowed)
    "torch-subclass-with-dlbridges-table": torch_case(
        lambda torch: torch.arange(3.0).as_subclass(
            type("TableSub", (torch.Tensor,), {"__dlpack_c_exchange_api__": dlbridge.Tensor.__dlpack_c_exchange_api__}))),
    "impostor-named-torch-tensor": lambda: impostor_torch_tensor(),
    "torch-subclass-own-dlpack-conj": torch_case(
        lambda torch: torch.conj(torch.tensor([1 + 2j])).as_subclass(torch_subclass(torch, own_dlpack=True))),
    # JAX: legacy capsules only
    "jax": jax_case(lambda jnp: jnp.arange(4, dtype=jnp.int32)),
    # Arrow, whose own __dlpack__ refuses some arrays dlbridge can still read
    "arrow-int64": arrow_case(lambda pa: pa.array([1, 2, 3])),
    "arrow-nulls": arrow_case(lambda pa: pa.array([1, None, 3])),
    "arrow-bool": arrow_case(lambda pa: pa.array([True, False])),
    "arrow-empty": arrow_case(lambda pa: pa.array([])),
    "arrow-chunked-one": arrow_case(lambda pa: pa.chunked_array([[1, 2]])),
    "arrow-chunked-two": arrow_case(lambda pa: pa.chunked_array([[1], [2]])),
}
for _id, _spec in hostile_cases():
    CASES[f"hostile-{_id}-capsule"] = lambda spec=_spec: tools().make_capsule(**spec)
    CASES[f"hostile-{_id}-producer"] = lambda spec=_spec: CapsuleProducer(**spec)
    if not {"version", "flags"} & set(_spec):
        CASES[f"hostile-{_id}-legacy"] = lambda spec=_spec: tools().make_capsule(versioned=False, **spec)
        CASES[f"hostile-{_id}-legacy-producer"] = lambda spec=_spec: CapsuleProducer(versioned=False, **spec)


@pytest.fixture(params=["casters_nanobind", "casters_pybind11"])
def m(request, extension_path):
    return importlib.import_module(request.param)


def answer(read, make):
    """What read(make()) gives: its result, or the exception's class and code;
    with the producer's call count where it counts."""
    x = make()
    try:
        result = ("returned", read(x))
    except BaseException as e:  # the outcome compared, whatever it is
        result = ("raised", type(e).__name__, getattr(e, "code", None))
    return result + ((x.calls,) if hasattr(x, "calls") else ())


@pytest.mark.parametrize("case", list(CASES))
def test_a_caster_gives_from_dlpacks_answer(m, case):
    make = CASES[case]
    # Once ahead, so that what dlbridge learns of a producer type on first
    # sight is learnt before the two are compared.
    answer(dlbridge.from_dlpack, make)
    direct = answer(lambda x: m.snapshot(dlbridge.from_dlpack(x)), make)
    assert answer(m.snapshot, make) == direct
    assert answer(m.owned_snapshot, make) == direct



def writable_outcome(read, make):
    """"accepted", or the class of the refusal, of a read that must give writable memory."""
    try:
        result = read(make())
    except BaseException as e:  # the outcome compared, whatever it is
        return type(e).__name__, getattr(e, "code", None)
    if isinstance(result, dlbridge.Tensor) and result.readonly:
        return "ReadOnlyError", "read_only"
    return "accepted"


@pytest.mark.parametrize("case", list(CASES))
def test_a_writable_argument_is_met_only_where_from_dlpack_without_a_copy_is_writable(m, case):
    # A writable argument is memory the caller's object holds: whatever from_dlpack(x,
    # copy=False) refuses (a torch tensor's lazily resolved negation, which only a copy can
    # hold) or gives read-only, the writable caster refuses with the same class.
    make = CASES[case]
    answer(dlbridge.from_dlpack, make)
    direct = writable_outcome(lambda x: dlbridge.from_dlpack(x, copy=False), make)
    assert writable_outcome(m.writable, make) == direct


def test_every_case_of_test_hostile_is_compared():
    ids = [case for case, _ in hostile_cases()]
    assert len(ids) >= 40 and all(f"hostile-{i}-capsule" in CASES for i in ids)


class Switching:
    """A plain producer (max_version only) that serves host memory until
    told to serve CUDA memory; it records the stream of every call."""

    def __init__(self):
        self.device = (1, 0)
        self.streams = []

    def __dlpack__(self, *, max_version=None, stream=None, **kwargs):
        self.streams.append(stream)
        return tools().make_capsule(shape=[2], device=self.device)

    def __dlpack_device__(self):
        return self.device


@pytest.mark.parametrize("read", ["caster", "from_dlpack"])
def test_device_memory_from_a_plain_producer_is_asked_for_again_with_a_stream(m, read):
    # A fresh type each time: what dlbridge learns of the type is part of the answer.
    producer = type("Fresh", (Switching,), {})()
    dlbridge.from_dlpack(producer)  # now a plain producer of host memory
    producer.device = (2, 0)
    got = m.snapshot(producer) if read == "caster" else m.snapshot(dlbridge.from_dlpack(producer))
    assert got == "float32 (2) cuda:0 rw strides (1,)"
    assert producer.streams == [None, None, 1]  # host memory, then CUDA memory asked again on stream 1


class LegacyOnly:
    """A producer of legacy capsules only, as Warp's arrays are."""

    def __init__(self):
        self.calls = 0

    def __dlpack__(self, **kwargs):
        self.calls += 1
        return tools().make_capsule(shape=[2], versioned=False)

    def __dlpack_device__(self):
        return (1, 0)


@pytest.mark.parametrize("stated", [True, False])
def test_what_a_library_states_of_its_legacy_capsules_reaches_a_caster_too(m, monkeypatch, stated):
    # A library module (libraries/<name>.py) naming its own class, with or without
    # LEGACY_EXPORT_WRITABLE; a class of its own each time, since what dlbridge learns of a
    # type it learns on first sight.
    cls = type(f"LegacyOnly{'Writable' if stated else 'Unstated'}{m.__name__}", (LegacyOnly,), {})
    monkeypatch.setattr(sys.modules[__name__], cls.__name__, cls, raising=False)
    library = types.SimpleNamespace(TARGET=types.SimpleNamespace(array_types=(f"{__name__}:{cls.__name__}",)),
                                    LEGACY_EXPORT_WRITABLE=stated)
    monkeypatch.setitem(dlbridge.libraries.LIBRARIES, "legacy_only", library)
    direct = answer(lambda x: m.snapshot(dlbridge.from_dlpack(x)), cls)
    assert direct[1].split()[3] == ("rw" if stated else "ro"), direct
    assert answer(m.snapshot, cls) == direct
    assert answer(m.owned_snapshot, cls) == direct
