"""dlbridge's CUDA paths from Python, on the simulated CUDA runtime: dl_device
requests, from_dlpack(device=...), __cuda_array_interface__ producers with
streams, export to a consumer's stream, several devices, empty() on a device,
and runtime faults. The simulator's streams run their work late, so a read
that is not ordered after a producer's write sees stale bytes.

These tests need DLBRIDGE_CUDART_PATH to name the simulator when dlbridge
first looks for CUDA; scripts/test-cuda-sim (run by scripts/test) does that.
Elsewhere they skip, saying so."""

from __future__ import annotations

import ctypes

import numpy as np
import pytest

import dlbridge
from dlbridge._core import inspect_capsule

import cuda_sim
from conftest import check_error

_PATH = cuda_sim.library_path()
pytestmark = pytest.mark.skipif(
    _PATH is None, reason="needs the CUDA simulator: run scripts/test-cuda-sim (scripts/test does)")

N = 1 << 16
FLAG_IS_COPIED = 2


@pytest.fixture(scope="module")
def sim() -> cuda_sim.Sim:
    return cuda_sim.Sim(_PATH)


@pytest.fixture(autouse=True)
def _settled(sim):
    yield
    sim.lib.cudasim_set_ignore_stream_waits(0)
    sim.settle()


def values(n=N):
    return np.arange(n, dtype=np.float32)


def to_host(t) -> np.ndarray:
    return np.from_dlpack(dlbridge.from_dlpack(t, device="cpu"))


def test_the_runtime_dlbridge_loaded_is_the_simulator():
    assert dlbridge.Device("cuda:1") is not None
    t = dlbridge.from_dlpack(values(4), device="cuda:1")
    assert t.device == dlbridge.Device("cuda:1")
    with pytest.raises(dlbridge.DeviceUnavailableError) as e:
        dlbridge.from_dlpack(values(4), device="cuda:2")
    assert "this machine has 2 CUDA devices (ids 0..1)" in check_error(e, dlbridge.DeviceUnavailableError,
                                                                        "device_unavailable")


def test_dl_device_request_copies_to_the_device_and_back():
    a = values()
    capsule = dlbridge.to_dlpack(a, max_version=(1, 3), dl_device=(2, 1))
    info = inspect_capsule(capsule)
    assert info["device"] == (2, 1)
    assert info["flags"] & FLAG_IS_COPIED
    t = dlbridge.from_dlpack(capsule)
    back = t.__dlpack__(max_version=(1, 3), dl_device=(1, 0))
    assert inspect_capsule(back)["device"] == (1, 0)
    np.testing.assert_array_equal(np.from_dlpack(dlbridge.from_dlpack(back)), a)


def test_dl_device_copy_is_queued_on_the_consumers_stream(sim):
    consumer = sim.stream()
    sim.check(sim.lib.cudasim_sleep_async(cuda_sim.SLOW_US, consumer))  # the consumer's queue is busy
    t = dlbridge.from_dlpack(dlbridge.to_dlpack(values(), dl_device=(2, 0), stream=consumer))
    assert sim.peek(t.data_ptr, 4) == bytes([sim.fresh_byte] * 4), "the copy did not wait its turn"
    sim.check(sim.lib.cudaStreamSynchronize(consumer))
    assert np.frombuffer(sim.peek(t.data_ptr, 4 * N), np.float32).tolist() == values().tolist()


@pytest.mark.parametrize("src,dst", [("cuda:0", "cuda:1"), ("cuda:1", "cuda:0"), ("cuda:0", "cuda_host"),
                                     ("cuda_managed", "cuda:1"), ("cuda_host", "cuda_managed")])
def test_from_dlpack_device_between_kinds_and_devices(sim, src, dst):
    a = values().reshape(256, 256)[:, 3:200]  # rows a pitch apart
    t = dlbridge.from_dlpack(a, device=src)
    current = sim.current_device()
    moved = dlbridge.from_dlpack(t, device=dst)
    assert moved.device == dlbridge.Device(dst)
    assert sim.current_device() == current, "dlbridge changed the caller's current device"
    np.testing.assert_array_equal(to_host(moved), a)


def test_empty_on_a_device_allocates_there_and_uploads_nothing(sim):
    sim.lib.cudasim_reset_counts()
    t = dlbridge.empty((64, 64), "float32", device="cuda:1")
    assert t.device == dlbridge.Device("cuda:1") and t.is_c_contiguous
    assert sim.count("malloc") == 1
    assert sim.count("host_to_device") == 0, "empty() uploaded uninitialised host memory"
    assert sim.peek(t.data_ptr, 8) == bytes([sim.fresh_byte] * 8)


def _cai(ptr, n=N, stream=None):
    d = {"shape": (n,), "typestr": "<f4", "data": (ptr, False), "version": 3}
    if stream is not None:
        d["stream"] = stream
    return type("Producer", (), {"__cuda_array_interface__": d})()


def test_cuda_array_interface_stream_is_waited_for(sim):
    p = sim.malloc(4 * N)
    producer = sim.stream()
    sim.pending_write(p, 0x3F, 4 * N, producer)
    t = dlbridge.from_dlpack(_cai(p, stream=producer))
    assert t.device == dlbridge.Device("cuda:0") and t.data_ptr == p
    got = to_host(t)
    assert (got.view(np.uint8) == 0x3F).all(), "the import read before the producer's stream wrote"


def test_without_the_stream_wait_the_same_import_reads_stale_data(sim):
    # What the test above guards against: with cudaStreamWaitEvent ordering
    # nothing, the same import reads the memory before the producer wrote.
    sim.lib.cudasim_set_ignore_stream_waits(1)
    p = sim.malloc(4 * N)
    producer = sim.stream()
    sim.pending_write(p, 0x3F, 4 * N, producer)
    got = to_host(dlbridge.from_dlpack(_cai(p, stream=producer)))
    assert (got.view(np.uint8) == sim.fresh_byte).all()


def test_cuda_array_interface_on_device_1_and_managed_memory(sim):
    p = sim.malloc(4 * N, device=1)
    producer = sim.stream(device=1)
    sim.pending_write(p, 0x11, 4 * N, producer)
    t = dlbridge.from_dlpack(_cai(p, stream=producer))
    assert t.device == dlbridge.Device("cuda:1")
    assert (to_host(t).view(np.uint8) == 0x11).all()

    m = sim.malloc_managed(4 * N)
    sim.pending_write(m, 0x22, 4 * N, producer)
    t = dlbridge.from_dlpack(_cai(m, stream=producer))
    assert t.device == dlbridge.Device("cuda_managed")
    # Managed memory is read by the host directly: the import waited.
    assert (np.asarray(memoryview(t)).view(np.uint8) == 0x22).all()


def test_cuda_array_interface_refusals(sim):
    p = sim.malloc(64)
    with pytest.raises(dlbridge.StreamError) as e:
        dlbridge.from_dlpack(_cai(p, 16, stream=0))
    check_error(e, dlbridge.StreamError, "invalid_stream")
    with pytest.raises(TypeError):
        dlbridge.from_dlpack(_cai(p, 16, stream=True))
    sim.free(p)
    with pytest.raises(dlbridge.InvalidTensorError) as e:
        dlbridge.from_dlpack(_cai(p, 16))
    check_error(e, dlbridge.InvalidTensorError, "invalid_tensor")


def test_export_orders_the_consumers_stream_after_dlbridges_copy(sim):
    sim.check(sim.lib.cudasim_sleep_async(cuda_sim.SLOW_US, 1))  # the legacy stream is busy
    t = dlbridge.from_dlpack(values(), device="cuda:0")  # queued on the legacy stream
    consumer = sim.stream()
    t.__dlpack__(stream=consumer)
    out = np.zeros(N, np.float32)
    sim.check(sim.lib.cudaMemcpyAsync(out.ctypes.data, t.data_ptr, 4 * N, 4, consumer))
    sim.check(sim.lib.cudaStreamSynchronize(consumer))
    np.testing.assert_array_equal(out, values())


def test_out_of_memory_and_runtime_failures_are_coded(sim):
    sim.lib.cudasim_fail_next(b"cudaMalloc", cuda_sim.MEMORY_ALLOCATION, 1)
    with pytest.raises(MemoryError, match=r"out of memory \(2\)"):
        dlbridge.from_dlpack(values(), device="cuda:0")
    sim.lib.cudasim_fail_next(b"cudaMemcpyAsync", 400, 1)
    with pytest.raises(dlbridge.DeviceUnavailableError) as e:
        dlbridge.from_dlpack(values(), device="cuda:0")
    assert "invalid resource handle (400)" in check_error(e, dlbridge.DeviceUnavailableError,
                                                          "device_unavailable")
    # Nothing stays broken: the next copy works.
    np.testing.assert_array_equal(to_host(dlbridge.from_dlpack(values(), device="cuda:0")), values())


def test_pinned_memory_relabelled_as_cpu_is_uploaded_before_the_call_returns(sim):
    pinned = dlbridge.from_dlpack(values(), device="cuda_host")
    as_cpu = dlbridge.from_dlpack(pinned, device="cpu", copy=False)
    assert as_cpu.device == dlbridge.Device("cpu") and as_cpu.data_ptr == pinned.data_ptr
    sim.check(sim.lib.cudasim_sleep_async(cuda_sim.SLOW_US, 1))  # the upload has to wait its turn
    on_device = dlbridge.from_dlpack(as_cpu, device="cuda:0")
    np.asarray(memoryview(pinned))[:] = -1  # the caller reuses its buffer
    np.testing.assert_array_equal(to_host(on_device), values())
