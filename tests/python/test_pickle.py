"""Pickling dlbridge.Tensor: protocol 5 with out-of-band buffers (zero-copy on
both sides for dense tensors), in-band bytes below 5, copy / deepcopy, and
device memory refused with the fix."""

from __future__ import annotations

import copy
import gc
import pickle

import ml_dtypes
import numpy as np
import pytest

pytest.importorskip("dlbridge._share", reason="needs dlbridge._share, which this build left out (-DDLBRIDGE_SHARE=OFF)")
import dlbridge
from dlbridge._core import _testing
from dlbridge._pickle import rebuild_tensor
from conftest import check_error, numpy_layouts

pytestmark = pytest.mark.sharing

READ_ONLY = 1
PADDED = 4


def dumps_out_of_band(t, protocol=5):
    buffers = []
    data = pickle.dumps(t, protocol=protocol, buffer_callback=buffers.append)
    return data, buffers


def address(buffer) -> int:
    return np.frombuffer(buffer, dtype=np.uint8).ctypes.data


def readonly_array(values):
    a = np.array(values)
    a.flags.writeable = False
    return a


@pytest.mark.parametrize("protocol", range(2, pickle.HIGHEST_PROTOCOL + 1))
@pytest.mark.parametrize("name, array", numpy_layouts())
def test_every_layout_round_trips_by_every_protocol(protocol, name, array):
    t = dlbridge.from_dlpack(array)
    loaded = pickle.loads(pickle.dumps(t, protocol=protocol))
    assert type(loaded) is dlbridge.Tensor
    assert (loaded.shape, loaded.dtype, loaded.device) == (t.shape, t.dtype, t.device)
    np.testing.assert_array_equal(np.from_dlpack(loaded), array)
    assert not loaded.readonly, "a writable tensor must come back writable"


@pytest.mark.parametrize("protocol", [2, 4, 5])
def test_read_only_tensors_come_back_read_only(protocol):
    t = dlbridge.from_dlpack(readonly_array([1.0, 2.0, 3.0]))
    loaded = pickle.loads(pickle.dumps(t, protocol=protocol))
    assert loaded.readonly
    assert loaded.flags & READ_ONLY
    assert not np.from_dlpack(loaded).flags.writeable


def test_protocol_5_sends_a_compact_tensor_without_copying_it():
    a = np.arange(12.0, dtype=np.float32).reshape(3, 4)
    t = dlbridge.from_dlpack(a)
    data, buffers = dumps_out_of_band(t)
    assert len(buffers) == 1
    raw = buffers[0].raw()
    assert address(raw) == t.data_ptr == a.ctypes.data
    assert raw.nbytes == t.nbytes
    assert len(data) < 200, "the data must not also travel in-band"


@pytest.mark.parametrize("name", ["f", "transposed", "negative", "offset"])
def test_protocol_5_sends_any_dense_layout_as_it_is(name):
    array = dict(numpy_layouts())[name]
    t = dlbridge.from_dlpack(array)
    data, buffers = dumps_out_of_band(t)
    assert buffers[0].raw().nbytes == t.nbytes
    loaded = pickle.loads(data, buffers=buffers)
    assert loaded.strides == t.strides
    assert loaded.data_ptr == t.data_ptr, "received without a copy: the same element 0"
    np.testing.assert_array_equal(np.from_dlpack(loaded), array)


@pytest.mark.parametrize("name", ["stepped", "negative-2d"])
def test_protocol_5_sends_a_compact_copy_of_a_tensor_with_gaps(name):
    array = dict(numpy_layouts())[name]
    t = dlbridge.from_dlpack(array)
    data, buffers = dumps_out_of_band(t)
    raw = buffers[0].raw()
    assert raw.nbytes == t.nbytes
    loaded = pickle.loads(data, buffers=buffers)
    assert loaded.is_c_contiguous
    np.testing.assert_array_equal(np.from_dlpack(loaded), array)


def test_loading_wraps_the_received_buffer_and_keeps_it_alive():
    t = dlbridge.from_dlpack(np.arange(6.0))
    data, buffers = dumps_out_of_band(t)
    received = bytearray(buffers[0].raw())
    loaded = pickle.loads(data, buffers=[received])
    assert loaded.data_ptr == address(received)
    np.from_dlpack(loaded)[0] = 42.0
    assert received[:8] == np.float64(42.0).tobytes(), "writes reach the received buffer"
    del received, buffers
    gc.collect()
    np.testing.assert_array_equal(np.from_dlpack(loaded), [42.0, 1, 2, 3, 4, 5])


def test_a_read_only_received_buffer_makes_a_read_only_tensor():
    t = dlbridge.from_dlpack(np.arange(4.0))
    data, buffers = dumps_out_of_band(t)
    received = bytes(buffers[0].raw())
    loaded = pickle.loads(data, buffers=[received])
    assert not t.readonly
    assert loaded.readonly and loaded.flags & READ_ONLY
    assert loaded.data_ptr == address(received), "read-only is no reason to copy"
    assert not np.from_dlpack(loaded).flags.writeable
    assert dlbridge.inspect_capsule(loaded.__dlpack__(max_version=(1, 3)))["flags"] & READ_ONLY
    with pytest.raises(dlbridge.ReadOnlyError):
        dlbridge.convert(loaded, "torch", copy=False)
    private = dlbridge.convert(loaded, "torch")  # torch cannot see READ_ONLY: one private copy
    assert private.tolist() == [0.0, 1.0, 2.0, 3.0] and private.data_ptr() != address(received)


def test_protocol_below_5_sends_one_bytes_copy_and_loads_it_writable():
    a = np.arange(1000.0)
    t = dlbridge.from_dlpack(a)
    data = pickle.dumps(t, protocol=4)
    assert a.tobytes() in data
    loaded = pickle.loads(data)
    assert not loaded.readonly
    np.from_dlpack(loaded)[0] = -1.0
    assert a[0] == 0.0, "the loaded tensor owns its data"


def test_a_misaligned_buffer_is_copied_to_aligned_memory():
    t = dlbridge.from_dlpack(np.arange(4.0))
    data, buffers = dumps_out_of_band(t)
    storage = bytearray(len(bytes(buffers[0].raw())) + 1)
    storage[1:] = bytes(buffers[0].raw())
    received = memoryview(storage)[1:]
    loaded = pickle.loads(data, buffers=[received])
    assert loaded.data_ptr % 8 == 0
    np.testing.assert_array_equal(np.from_dlpack(loaded), [0.0, 1.0, 2.0, 3.0])


@pytest.mark.parametrize("dtype", [ml_dtypes.bfloat16, ml_dtypes.float8_e4m3fn, ml_dtypes.float8_e5m2,
                                   np.bool_, np.complex64, np.int16])
def test_dtypes_without_a_buffer_format_round_trip(dtype):
    a = np.arange(-3, 5).astype(dtype).reshape(2, 4)
    t = dlbridge.from_dlpack(a)
    for protocol in (4, 5):
        loaded = pickle.loads(pickle.dumps(t, protocol=protocol))
        assert loaded.dtype == t.dtype
        np.testing.assert_array_equal(dlbridge.convert(loaded, "numpy"), a)


def tensor_from_bytes(payload: bytes, dtype, shape, strides, offset=0, flags=0):
    code, bits, lanes = dlbridge.DType(dtype).code, dlbridge.DType(dtype).bits, dlbridge.DType(dtype).lanes
    return rebuild_tensor(bytearray(payload), (1, (code, bits, lanes), tuple(shape), tuple(strides),
                                                offset, flags))


@pytest.mark.parametrize("flags", [0, PADDED])
def test_sub_byte_tensors_keep_their_packing(flags):
    payload = bytes([0x21, 0x43, 0x65]) if flags == 0 else bytes([1, 2, 3, 4, 5, 6])
    t = tensor_from_bytes(payload, "int4", [6], [1], flags=flags)
    for protocol in (4, 5):
        loaded = pickle.loads(pickle.dumps(t, protocol=protocol))
        assert loaded.dtype == "int4"
        assert loaded.flags == flags
        assert loaded.nbytes == len(payload)
        assert dlbridge.convert(loaded.copy_unpacked(), "numpy").view(np.int8).tolist() == [1, 2, 3, 4, 5, 6]


def test_float4_and_vector_lanes_round_trip():
    fp4 = tensor_from_bytes(bytes([0x10, 0x32]), "float4_e2m1fn", [4], [1])
    lanes = tensor_from_bytes(bytes(range(16)), "float32x2", [2], [1])
    for t in (fp4, lanes):
        _, buffers = dumps_out_of_band(t)
        loaded = pickle.loads(pickle.dumps(t, protocol=5))
        assert (loaded.dtype, loaded.shape) == (t.dtype, t.shape)
        assert bytes(dumps_out_of_band(loaded)[1][0].raw()) == bytes(buffers[0].raw())


def test_pinned_host_memory_travels_and_arrives_on_the_cpu():
    pinned = dlbridge.from_dlpack(_testing.make_capsule(shape=[2, 3], device=(3, 0), data_bytes=24))
    assert pinned.device == dlbridge.Device((3, 0))
    loaded = pickle.loads(pickle.dumps(pinned, protocol=5))
    assert loaded.device == dlbridge.Device("cpu")
    assert loaded.shape == (2, 3)


def test_device_memory_is_refused_with_the_fix():
    cuda = dlbridge.from_dlpack(_testing.make_capsule(device=(2, 0)))
    for protocol in (2, 5):
        with pytest.raises(dlbridge.DeviceUnavailableError) as excinfo:
            pickle.dumps(cuda, protocol=protocol)
        message = check_error(excinfo, dlbridge.DeviceUnavailableError, "device_unavailable")
        assert "t.copy(device='cpu')" in message
    with pytest.raises(dlbridge.DeviceUnavailableError):
        cuda.share_memory()


def test_copy_copy_shares_the_memory():
    a = np.arange(4.0)
    t = dlbridge.from_dlpack(a)
    shallow = copy.copy(t)
    assert shallow is not t
    assert shallow.data_ptr == t.data_ptr and shallow.strides == t.strides
    a[0] = 7.0
    assert np.from_dlpack(shallow)[0] == 7.0


def test_copy_deepcopy_copies_the_data_and_keeps_the_flags():
    a = readonly_array([[1.0, 2.0], [3.0, 4.0]]).T
    t = dlbridge.from_dlpack(a)
    deep = copy.deepcopy(t)
    assert deep.data_ptr != t.data_ptr
    assert deep.readonly
    np.testing.assert_array_equal(np.from_dlpack(deep), a)
    writable = copy.deepcopy(dlbridge.from_dlpack(np.arange(3.0)))
    assert not writable.readonly
    assert t.__deepcopy__(None).data_ptr != t.data_ptr, "memo may be None"
    pair = copy.deepcopy([t, t])
    assert pair[0] is pair[1], "deepcopy's memo keeps shared references shared"


class Forged:
    """Pickles as a call of dlbridge's reconstructor with arguments of our choosing."""

    def __init__(self, *args):
        self.args = args

    def __reduce__(self):
        return rebuild_tensor, self.args


F32 = (2, 32, 1)


@pytest.mark.parametrize("layout, cls, code", [
    ((1, F32, (5,), (1,), 0, 0), dlbridge.InvalidTensorError, "invalid_tensor"),  # 20 bytes claimed, 16 held
    ((1, F32, (4,), (-1,), 8, 0), dlbridge.InvalidTensorError, "invalid_tensor"),  # reaches back past byte 0
    ((1, (99, 32, 1), (4,), (1,), 0, 0), dlbridge.UnsupportedDTypeError, "unsupported_dtype"),
    ((1, (6, 16, 1), (4,), (1,), 0, 0), dlbridge.InvalidTensorError, "invalid_tensor"),  # bool of 16 bits
    ((1, F32, (2, 2), (1,), 0, 0), dlbridge.InvalidTensorError, "invalid_tensor"),
    ((1, F32, (-4,), (1,), 0, 0), dlbridge.InvalidTensorError, "invalid_tensor"),
    ((1, F32, (2**62, 4), (4, 1), 0, 0), dlbridge.InvalidTensorError, "invalid_tensor"),
    ((1, F32, (2,), (2**62,), 0, 0), dlbridge.InvalidTensorError, "invalid_tensor"),
    ((1, F32, (4,), (1,), 20, 0), dlbridge.InvalidTensorError, "invalid_tensor"),
    ((1, F32, (4,), (1,), 0, 2), dlbridge.InvalidTensorError, "invalid_tensor"),  # IS_COPIED
    ((1, F32, (2**70,), (1,), 0, 0), dlbridge.InvalidTensorError, "invalid_tensor"),
    ((1, F32, ("4",), (1,), 0, 0), dlbridge.InvalidTensorError, "invalid_tensor"),
    ((1, F32, (4,), (1,)), dlbridge.InvalidTensorError, "invalid_tensor"),
    ([1, F32, (4,), (1,), 0, 0], dlbridge.InvalidTensorError, "invalid_tensor"),
    ((1, (2, 32), (4,), (1,), 0, 0), dlbridge.InvalidTensorError, "invalid_tensor"),
    ((1, (2, 256, 1), (4,), (1,), 0, 0), dlbridge.InvalidTensorError, "invalid_tensor"),
    ((2, F32, (4,), (1,), 0, 0), dlbridge.VersionError, "unsupported_version"),
])
def test_hostile_pickles_are_refused_with_a_code(layout, cls, code):
    data = pickle.dumps(Forged(bytearray(16), layout), protocol=5)
    with pytest.raises(cls) as excinfo:
        pickle.loads(data)
    check_error(excinfo, cls, code)


def test_a_payload_without_a_contiguous_buffer_is_refused():
    with pytest.raises(dlbridge.InvalidTensorError) as excinfo:
        pickle.loads(pickle.dumps(Forged(12345, (1, F32, (1,), (1,), 0, 0))))
    assert "payload is not a buffer" in check_error(excinfo, dlbridge.InvalidTensorError,
                                                    "invalid_tensor")
    strided = memoryview(bytearray(32))[::2]
    with pytest.raises(dlbridge.InvalidTensorError):
        rebuild_tensor(strided, (1, F32, (1,), (1,), 0, 0))


LAYOUT4 = (1, F32, (4,), (1,), 0, 0)


def released_view():
    view = memoryview(bytearray(16))
    view.release()
    return view


@pytest.mark.parametrize("fields, why", [
    ((bytearray(16), None), "layout is not a tuple"),
    ((bytearray(16), b"layout"), "layout is not a tuple"),
    ((bytearray(16), LAYOUT4, "yes"), "private_bytes is not True or False"),
    ((bytearray(16), LAYOUT4, 1), "private_bytes is not True or False"),
    ((bytearray(16), LAYOUT4, None), "private_bytes is not True or False"),
    ((bytearray(16), LAYOUT4, False, "yes"), "writability_unknown is not True or False"),
    ((None, LAYOUT4), "payload is not a buffer"),
    (("sixteen bytes!!!", LAYOUT4), "payload is not a buffer"),
    ((released_view(), LAYOUT4), "payload is not a buffer (ValueError)"),  # fuzz finding 4
    ((bytearray(16),), "takes 2 to 4 fields, not 1"),
    ((bytearray(16), LAYOUT4, False, False, False), "takes 2 to 4 fields, not 5"),
    ((), "takes 2 to 4 fields, not 0"),
])
def test_a_pickle_with_fields_of_the_wrong_type_is_invalid_tensor(fields, why):
    try:
        data = pickle.dumps(Forged(*fields), protocol=5)
        load = lambda: pickle.loads(data)  # noqa: E731
    except TypeError:  # a released memoryview: pickle cannot carry it, the reconstructor still meets it
        load = lambda: rebuild_tensor(*fields)  # noqa: E731
    with pytest.raises(dlbridge.InvalidTensorError) as excinfo:
        load()
    message = check_error(excinfo, dlbridge.InvalidTensorError, "invalid_tensor")
    assert why in message
    assert "incompatible function arguments" not in message


PICKLING_AT_EXIT = """
import pickle, threading, time
import numpy as np
import dlbridge
t = dlbridge.from_dlpack(np.zeros(1 << 21)[::2])  # not dense: pickling copies it first
started = threading.Event()
def work():
    started.set()
    while True:
        pickle.dumps(t, protocol={protocol})
threading.Thread(target=work, daemon=True).start()
started.wait()
time.sleep(0.05)
"""


@pytest.mark.parametrize("protocol", [4, 5, 5, 5])
def test_pickling_a_non_dense_tensor_in_a_daemon_thread_at_exit_exits_cleanly(run_python, protocol):
    result = run_python(PICKLING_AT_EXIT.format(protocol=protocol), timeout=60)
    assert "terminate called" not in result.stderr
    assert result.returncode == 0, result.stderr[-3000:]


# --- a tensor imported from a legacy capsule: its writability is unknown ---------


def unknown_writability(values):
    import jax.numpy as jnp

    t = dlbridge.from_dlpack(jnp.asarray(values))
    assert t.readonly and dlbridge.inspect_capsule(t.__dlpack__())["name"] == "dltensor"
    return t


def keeps_unknown_writability(t, values):
    """Read-only to every view, yet leaves as a legacy capsule, so JAX takes it back."""
    import jax.numpy as jnp

    assert t.readonly
    assert not np.from_dlpack(t).flags.writeable
    assert dlbridge.inspect_capsule(t.__dlpack__())["name"] == "dltensor"
    np.testing.assert_array_equal(np.asarray(jnp.from_dlpack(t)), values)


@pytest.mark.parametrize("protocol", range(2, pickle.HIGHEST_PROTOCOL + 1))
def test_pickling_keeps_unknown_writability_by_every_protocol(protocol):
    values = np.arange(6.0).reshape(2, 3)
    loaded = pickle.loads(pickle.dumps(unknown_writability(values), protocol=protocol))
    keeps_unknown_writability(loaded, values)


@pytest.mark.parametrize("received", [bytes, bytearray], ids=["bytes", "bytearray"])
def test_out_of_band_the_receiver_copies_once_to_keep_unknown_writability(received):
    # The buffer leaves read-only (the tensor is read-only to the buffer
    # protocol), so pickle hands the receiver a read-only view of whatever
    # arrives. A legacy consumer may write into what it is given, never into
    # memory someone else declared read-only: the tensor gets its own copy.
    values = np.arange(4.0)
    data, buffers = dumps_out_of_band(unknown_writability(values))
    arrived = received(buffers[0].raw())
    loaded = pickle.loads(data, buffers=[arrived])
    keeps_unknown_writability(loaded, values)
    assert loaded.data_ptr != address(arrived)


def test_copy_and_deepcopy_keep_unknown_writability():
    values = np.arange(3.0)
    t = unknown_writability(values)
    keeps_unknown_writability(copy.copy(t), values)
    deep = copy.deepcopy(t)
    assert deep.data_ptr != t.data_ptr
    keeps_unknown_writability(deep, values)


def test_the_jax_round_trip_survives_a_pickle():
    import jax.numpy as jnp

    x = jnp.arange(6.0).reshape(2, 3)
    via = pickle.loads(pickle.dumps(dlbridge.from_dlpack(x)))
    np.testing.assert_array_equal(np.asarray(jnp.from_dlpack(via)), np.asarray(x))
    np.testing.assert_array_equal(np.asarray(dlbridge.convert(via, "jax")), np.asarray(x))


def test_a_known_read_only_tensor_stays_known_read_only_through_a_pickle():
    t = dlbridge.from_dlpack(readonly_array([1.0, 2.0]))
    loaded = pickle.loads(pickle.dumps(t))
    with pytest.raises(dlbridge.ReadOnlyError):
        loaded.__dlpack__()  # a legacy capsule could not say read-only
