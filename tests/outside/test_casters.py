"""<dlbridge/python/nanobind.hpp> and <dlbridge/python/pybind11.hpp>: the same
functions (extensions/caster_functions.hpp) bound by each framework, called
with every kind of input dlbridge reads and every requirement missed once, and
the casters' own defects of issue 28 (each test fails on the casters that kept
their own reading of arguments). test_casters_parity.py holds every boundary
case beside dlbridge.from_dlpack; test_casters_fuzz.py fuzzes them."""

from __future__ import annotations

import gc
import importlib
import weakref

import numpy as np
import pytest
from conftest import OldProducer

import dlbridge


@pytest.fixture(params=["casters_nanobind", "casters_pybind11"])
def m(request, extension_path):
    module = importlib.import_module(request.param)
    yield module
    module.drop_kept()


class ArrayInterfaceOnly:
    """An object that only has __array_interface__ (no __dlpack__, no buffer)."""

    def __init__(self, array):
        self.array = array
        self.__array_interface__ = array.__array_interface__


def test_borrowed_view_of_numpy_is_zero_copy(m):
    a = np.zeros((2, 3), dtype=np.float32)
    assert m.view(a) == "float32 (2, 3) cpu rw"
    assert m.address(a) == a.ctypes.data


def test_read_only_numpy_stays_read_only(m):
    a = np.zeros(4, dtype=np.int16)
    a.flags.writeable = False
    assert m.view(a) == "int16 (4) cpu ro"


def test_reads_torch_jax_buffers_and_array_interfaces(m):
    torch = pytest.importorskip("torch")
    jnp = pytest.importorskip("jax.numpy")
    t = torch.ones(5, dtype=torch.float64)
    assert m.view(t) == "float64 (5) cpu rw" and m.address(t) == t.data_ptr()
    # JAX answers max_version with a legacy capsule: read-only, as dlbridge.from_dlpack
    # imports it (docs/boundary.md); the casters' fast route used to make it writable.
    x = jnp.ones((2, 2), dtype=jnp.int32)
    assert m.view(x) == "int32 (2, 2) cpu ro" and dlbridge.from_dlpack(x).readonly
    assert m.view(bytearray(b"abc")) == "uint8 (3) cpu rw"
    assert m.view(ArrayInterfaceOnly(np.ones(3, dtype=np.uint16))) == "uint16 (3) cpu rw"
    assert m.view(dlbridge.empty((1, 2), "bfloat16")) == "bfloat16 (1, 2) cpu rw"


def test_no_tensor_is_a_type_mismatch_and_tries_the_next_overload(m):
    with pytest.raises(TypeError, match="incompatible function arguments"):
        m.view(object())
    assert m.which("text") == "string"
    assert m.which(np.zeros(2)) == "tensor"


def test_requirements_in_the_type_raise_their_codes(m):
    ones = np.ones((2, 2), dtype=np.float32)
    assert m.float_matrix(ones) == "float32 (2, 2) cpu rw"
    with pytest.raises(dlbridge.UnsupportedDTypeError) as caught:
        m.float_matrix(np.ones((2, 2), dtype=np.int64))
    assert caught.value.code == "unsupported_dtype" and "astype('float32')" in caught.value.hint
    with pytest.raises(dlbridge.LayoutError, match="takes 2-dimensional tensors; got 1"):
        m.float_matrix(np.ones(2, dtype=np.float32))
    with pytest.raises(dlbridge.DeviceUnavailableError, match="takes tensors on kDLCUDA; got one on cpu"):
        m.on_cuda(ones)
    with pytest.raises(dlbridge.LayoutError, match=r"C-contiguous tensors; got strides \(1, 2\)"):
        m.compact(ones.T)
    assert m.compact(ones) == "float32 (2, 2) cpu rw"
    ones.flags.writeable = False
    with pytest.raises(dlbridge.ReadOnlyError):
        m.writable(ones)


class Producer:
    """A __dlpack__ producer handing out capsules built to order, counted."""

    def __init__(self, **capsule):
        self.capsule = capsule
        self.calls = 0

    def __dlpack__(self, **kwargs):
        self.calls += 1
        return dlbridge._core._testing.make_capsule(**self.capsule)

    def __dlpack_device__(self):
        return (1, 0)


def test_hostile_producer_is_refused_with_dlbridges_code_and_every_capsule_deleted_once(m):
    testing = dlbridge._core._testing
    before = testing.deleter_calls()
    hostile, future = Producer(shape=[2, -3]), Producer(version=(2, 0))
    with pytest.raises(dlbridge.InvalidTensorError) as caught:
        m.view(hostile)
    assert caught.value.code == "invalid_tensor" and "negative" in str(caught.value)
    with pytest.raises(dlbridge.VersionError):
        m.view(future)
    assert hostile.calls >= 1 and future.calls >= 1
    assert testing.deleter_calls() - before == hostile.calls + future.calls


def test_capsules_the_in_place_view_cannot_take_get_adopts_refusal_and_are_deleted_once(m):
    # The casters validate a view in place; what ManagedTensor::adopt alone
    # refuses (unknown flag bits, a NULL struct is not makeable here) must
    # still be refused with its code, and each capsule deleted exactly once.
    testing = dlbridge._core._testing
    before = testing.deleter_calls()
    unknown_flags = Producer(flags=1 << 40)
    with pytest.raises(dlbridge.InvalidTensorError, match="flag bits 0x10000000000"):
        m.view(unknown_flags)
    with pytest.raises(dlbridge.InvalidTensorError):
        m.float_matrix(unknown_flags)
    assert unknown_flags.calls >= 2
    assert testing.deleter_calls() - before == unknown_flags.calls


def test_legacy_capsule_from_dlpack_is_a_read_only_view_deleted_once(m):
    testing = dlbridge._core._testing
    before = testing.deleter_calls()
    legacy = Producer(shape=[2, 3], dtype=(2, 32, 1), versioned=False)
    assert m.view(legacy) == "float32 (2, 3) cpu ro"
    assert m.float_matrix(legacy) == "float32 (2, 3) cpu ro"
    with pytest.raises(dlbridge.ReadOnlyError):
        m.writable(legacy)
    assert testing.deleter_calls() - before == legacy.calls == 3


def test_raw_capsule_is_consumed_once(m):
    capsule = dlbridge._core._testing.make_capsule(shape=[3], dtype=(0, 8, 1))
    assert m.view(capsule) == "int8 (3) cpu rw"
    with pytest.raises(dlbridge.ConsumedCapsuleError):
        m.view(capsule)


def test_owned_tensor_outlives_the_producer_object(m):
    a = np.arange(4, dtype=np.float64)
    m.keep(a)
    del a
    gc.collect()
    assert m.kept_sum() == 6.0


def test_owned_tensor_returns_as_a_zero_copy_dlbridge_tensor(m):
    a = np.arange(3, dtype=np.float32)
    t = m.pass_through(a)
    assert isinstance(t, dlbridge.Tensor) and t.data_ptr == a.ctypes.data
    np.testing.assert_array_equal(np.from_dlpack(t), a)


def test_new_tensor_from_cpp_reaches_numpy_and_torch(m):
    torch = pytest.importorskip("torch")
    t = m.arange(5)
    assert t.dtype == "int32" and not t.readonly
    assert np.from_dlpack(t).tolist() == [0, 1, 2, 3, 4]
    assert torch.from_dlpack(m.arange(3)).tolist() == [0, 1, 2]


def test_producer_without_keywords_is_asked_the_old_way(m):
    old = OldProducer(np.arange(3, dtype=np.int64))
    # A legacy capsule cannot say whether the data may be written, so the view is read-only
    # (docs/boundary.md), exactly as dlbridge.from_dlpack treats it.
    assert m.view(old) == "int64 (3) cpu ro"
    assert m.view(old) == "int64 (3) cpu ro"
    assert old.calls == 2  # one capsule per call: the refused keyword call never ran


def test_torch_conjugate_and_negative_views_arrive_resolved(m):
    # The casters called torch's C exchange API without the check that
    # dlbridge.from_dlpack makes: a function taking torch.conj(z) received z.
    torch = pytest.importorskip("torch")
    z = torch.tensor([1 + 2j, 3 - 4j], dtype=torch.complex64)
    x = torch.tensor([1.0, -2.0])
    # Each lazy view beside the tensor whose memory it shares.
    for lazy, memory in ((torch.conj(z), z), (torch._neg_view(x), x), (torch.conj(torch._neg_view(z)), z)):
        resolved = lazy.resolve_conj().resolve_neg()
        assert m.snapshot(lazy) == m.snapshot(resolved) == m.snapshot(dlbridge.from_dlpack(lazy))
        assert m.snapshot(lazy) != m.snapshot(memory)


def test_a_capsule_is_consumed_only_by_the_overload_that_runs(m):
    # pick(TensorView, int) fails on its second argument; the capsule must
    # still be there for pick(TensorView, str), and be consumed by it.
    testing = dlbridge._core._testing
    before = testing.deleter_calls()
    capsule = testing.make_capsule(shape=[3], dtype=(0, 8, 1))
    assert m.pick(capsule, "x") == "text int8 (3) cpu rw"
    with pytest.raises(dlbridge.ConsumedCapsuleError):
        m.pick(capsule, 1)
    assert m.pick(np.zeros(2, np.int8), 1) == "int int8 (2) cpu rw"
    del capsule
    gc.collect()
    assert testing.deleter_calls() - before == 1


def test_a_capsule_consumed_by_another_argument_meanwhile_is_refused_not_read(m):
    # The overload's arguments load first; a later argument's producer may
    # consume (and free) the capsule that an earlier one only looked at.
    testing = dlbridge._core._testing
    capsule = testing.make_capsule(shape=[3], dtype=(0, 8, 1))

    class Thief:
        def __index__(self):
            dlbridge.from_dlpack(capsule)
            return 1

    with pytest.raises(dlbridge.ConsumedCapsuleError):
        m.pick(capsule, Thief())


class Raising:
    """A producer whose __dlpack__ raises `error`, counting its calls."""

    def __init__(self, error):
        self.error = error
        self.calls = 0

    def __dlpack__(self, **kwargs):
        self.calls += 1
        raise self.error

    def __dlpack_device__(self):
        return (1, 0)


@pytest.mark.parametrize("error", [KeyboardInterrupt(), RuntimeError("broken"), BufferError("no")],
                         ids=["KeyboardInterrupt", "RuntimeError", "BufferError"])
def test_a_producers_exception_is_raised_as_from_dlpack_raises_it_after_one_call(m, error):
    # The casters swallowed any exception of __dlpack__ (even Ctrl-C) and
    # called it again through dlbridge.
    expected = Raising(error)
    with pytest.raises(BaseException) as direct:
        dlbridge.from_dlpack(expected)
    producer = Raising(error)
    with pytest.raises(type(direct.value)) as caught:
        m.view(producer)
    assert producer.calls == expected.calls == 1
    assert getattr(caught.value, "code", None) == getattr(direct.value, "code", None)


def test_producer_types_a_caster_has_seen_are_not_kept_alive(m):
    # The casters held a strong reference to every type they met: 300
    # dynamic classes, all alive.
    watches = []
    for k in range(300):
        cls = type(f"Dynamic{k}", (), {"__dlpack__": lambda self, **kw: np.zeros(2).__dlpack__(**kw),
                                        "__dlpack_device__": lambda self: (1, 0)})
        assert m.view(cls()) == "float64 (2) cpu rw"
        watches.append(weakref.ref(cls))
        del cls
    gc.collect()
    assert sum(w() is not None for w in watches) == 0


def test_a_producer_that_calls_back_into_the_extension_is_served(m):
    # An old producer (no keywords) whose __dlpack__ first reaches the same
    # extension with new types: the casters' per-type table grew under a
    # reference into it, which the refused keyword call then wrote through (a
    # use-after-free under ASan, scripts/test-python-asan).
    def reenter(self, **kwargs):
        for k in range(64):
            inner = type(f"Inner{k}", (), {"__dlpack__": lambda s, **kw: np.ones(1).__dlpack__(**kw),
                                            "__dlpack_device__": lambda s: (1, 0)})
            assert m.view(inner()) == "float64 (1) cpu rw"
        if kwargs:
            raise TypeError("__dlpack__() takes no keyword arguments")
        return np.arange(3, dtype=np.int16).__dlpack__()

    outer = type("Outer", (), {"__dlpack__": reenter, "__dlpack_device__": lambda self: (1, 0)})
    assert m.view(outer()) == "int16 (3) cpu ro"  # a legacy capsule: read-only, as from_dlpack reads it
    assert m.view(outer()) == m.snapshot(dlbridge.from_dlpack(outer())).split(" strides")[0]


def test_an_owned_tensor_keeps_what_the_view_showed(m):
    a = np.arange(6, dtype=np.float32).reshape(2, 3)[:, ::2]
    assert m.owned_snapshot(a) == m.snapshot(a) == m.snapshot(dlbridge.from_dlpack(a))
    legacy = Producer(shape=[2], dtype=(2, 32, 1), versioned=False)
    assert m.owned_snapshot(legacy).startswith("float32 (2) cpu ro")


def test_a_writable_argument_refuses_what_reaches_it_only_as_a_copy(m):
    # torch's lazy negation or conjugation is resolved into a copy; a function that writes
    # would write into that copy and the caller's tensor would stay as it was, silently.
    torch = pytest.importorskip("torch")
    for lazy in (torch._neg_view(torch.ones(4)), torch.conj(torch.ones(2, dtype=torch.complex64))):
        with pytest.raises(dlbridge.CopyRequiredError) as refused:
            m.writable(lazy)
        assert refused.value.code == "copy_required"
        assert "writes would be lost" in str(refused.value)
        m.snapshot(lazy)  # a function that only reads gets the resolved values
    plain = torch.ones(4)
    assert m.writable(plain) == m.view(plain)
