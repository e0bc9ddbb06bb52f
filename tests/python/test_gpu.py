"""CUDA tests: copies CPU <-> CUDA through dl_device and from_dlpack(device=),
pinned and managed memory, stream hand-off with PyTorch under a slow producer
kernel, and device ids other than the current one. scripts/gpu-check runs
them; without a usable CUDA device every test is skipped with the reason."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import dlbridge
from dlbridge._core import inspect_capsule


def _cuda_reason() -> str | None:
    try:
        dlbridge.to_dlpack(np.zeros(1, np.float32), dl_device=(2, 0))
    except dlbridge.DeviceUnavailableError as e:
        return f"no usable CUDA device for dlbridge: {e}"
    return None


_REASON = _cuda_reason()
pytestmark = [pytest.mark.gpu, pytest.mark.skipif(_REASON is not None, reason=_REASON or "")]
needs_torch_cuda = pytest.mark.skipif(
    not torch.cuda.is_available(), reason="this PyTorch build has no CUDA (torch.cuda.is_available() is False)")

FLAG_IS_COPIED = 2
# ~0.5 s of GPU time at 2 GHz: long enough that a consumer that does not
# wait for the producer's stream reads the data before it is written.
SLOW_CYCLES = 1_000_000_000


def host(n=1 << 16):
    return np.arange(n, dtype=np.float32)


def to_numpy(t: dlbridge.Tensor) -> np.ndarray:
    return np.from_dlpack(dlbridge.from_dlpack(t, device="cpu"))


def test_cpu_to_cuda_and_back_through_dl_device():
    a = host()
    capsule = dlbridge.to_dlpack(a, max_version=(1, 3), dl_device=(2, 0))
    info = inspect_capsule(capsule)
    assert info["device"] == (2, 0)
    assert info["flags"] & FLAG_IS_COPIED
    t = dlbridge.from_dlpack(capsule)
    back = t.__dlpack__(max_version=(1, 3), dl_device=(1, 0))
    assert inspect_capsule(back)["device"] == (1, 0)
    np.testing.assert_array_equal(np.from_dlpack(dlbridge.from_dlpack(back)), a)


@pytest.mark.parametrize("layout", ["transposed", "negative", "pitched"])
def test_strided_layouts_both_ways(layout):
    base = host(4096).reshape(64, 64)
    a = {"transposed": base.T, "negative": base[::-1, ::-2], "pitched": base[:, 3:40]}[layout]
    on_gpu = dlbridge.from_dlpack(dlbridge.from_dlpack(a), device="cuda:0")
    assert on_gpu.device == dlbridge.Device("cuda:0") and on_gpu.is_c_contiguous
    np.testing.assert_array_equal(to_numpy(on_gpu), a)


@needs_torch_cuda
@pytest.mark.parametrize("view", ["rows", "transposed", "stepped"])
def test_strided_device_memory_to_the_host(view):
    x = torch.arange(4096, dtype=torch.float32, device="cuda").reshape(64, 64)
    v = {"rows": x[:, 3:40], "transposed": x.T, "stepped": x[::2, ::3]}[view]
    np.testing.assert_array_equal(to_numpy(dlbridge.from_dlpack(v)), v.cpu().numpy())


def test_from_dlpack_device_and_copy_false():
    t = dlbridge.from_dlpack(host())
    with pytest.raises(dlbridge.CopyRequiredError):
        dlbridge.from_dlpack(t, device="cuda:0", copy=False)
    g = dlbridge.from_dlpack(t, device="cuda:0")
    assert dlbridge.from_dlpack(g, device="cuda:0", copy=False).data_ptr == g.data_ptr
    np.testing.assert_array_equal(to_numpy(g), host())


@pytest.mark.parametrize("kind", ["cuda_host", "cuda_managed"])
def test_pinned_and_managed_memory(kind):
    t = dlbridge.from_dlpack(host()).copy(device=kind)
    assert t.device == dlbridge.Device(kind)
    np.testing.assert_array_equal(np.asarray(memoryview(t)), host())  # the host reads it directly
    relabelled = dlbridge.from_dlpack(t, device="cpu", copy=False)
    assert relabelled.data_ptr == t.data_ptr
    on_gpu = t.copy(device="cuda:0")
    np.testing.assert_array_equal(to_numpy(on_gpu), host())
    back = on_gpu.copy(device=kind)
    np.testing.assert_array_equal(np.asarray(memoryview(back)), host())


@needs_torch_cuda
def test_torch_cuda_tensors_zero_copy_and_to_host():
    x = torch.arange(1000, dtype=torch.float32, device="cuda")
    t = dlbridge.from_dlpack(x)
    assert t.device == dlbridge.Device("cuda:0") and t.data_ptr == x.data_ptr()
    np.testing.assert_array_equal(to_numpy(t), x.cpu().numpy())
    y = torch.from_dlpack(dlbridge.from_dlpack(host()).copy(device="cuda:0"))
    assert y.is_cuda and torch.equal(y.cpu(), torch.from_numpy(host()))


@needs_torch_cuda
def test_cuda_array_interface_is_read_through_the_runtime():
    x = torch.arange(64, dtype=torch.float32, device="cuda")

    class Cai:
        __cuda_array_interface__ = x.__cuda_array_interface__

    t = dlbridge.from_dlpack(Cai())
    assert t.device == dlbridge.Device("cuda:0") and t.data_ptr == x.data_ptr()
    np.testing.assert_array_equal(to_numpy(t), x.cpu().numpy())


@needs_torch_cuda
def test_import_waits_for_a_slow_producer_stream():
    x = torch.ones(1 << 20, device="cuda")
    side = torch.cuda.Stream()  # non-blocking: the legacy stream does not wait for it
    with torch.cuda.stream(side):
        torch.cuda._sleep(SLOW_CYCLES)
        y = x * 3  # queued behind the sleep on the producer's stream
        # No synchronize. The DLPack contract orders the consumer's stream
        # after the producer's *current* stream, so the export happens while
        # `side` is current; outside this block PyTorch would order it after
        # its default stream and the read would race the kernel.
        got = np.from_dlpack(dlbridge.from_dlpack(y, device="cpu"))
    assert (got == 3).all()
    side.synchronize()


@needs_torch_cuda
def test_export_orders_the_consumers_stream_after_the_copy():
    torch.cuda._sleep(SLOW_CYCLES)  # the legacy default stream is busy
    t = dlbridge.from_dlpack(np.full(1 << 20, 7, np.float32)).copy(device="cuda:0")
    consumer = torch.cuda.Stream()  # non-blocking: not ordered by the legacy stream
    with torch.cuda.stream(consumer):
        y = torch.from_dlpack(t) * 1  # torch passes consumer's handle as stream=
    consumer.synchronize()
    assert (y == 7).all()


@needs_torch_cuda
def test_device_ids_other_than_the_current_one():
    if torch.cuda.device_count() < 2:
        pytest.skip(f"needs two CUDA devices; this machine has {torch.cuda.device_count()}")
    last = torch.cuda.device_count() - 1
    torch.cuda.set_device(0)
    t = dlbridge.from_dlpack(host()).copy(device=f"cuda:{last}")
    assert t.device == dlbridge.Device(f"cuda:{last}")
    assert torch.cuda.current_device() == 0  # dlbridge restored the caller's device
    x = torch.from_dlpack(t)
    assert x.device.index == last
    np.testing.assert_array_equal(to_numpy(t), host())
    moved = dlbridge.from_dlpack(t, device="cuda:0")
    np.testing.assert_array_equal(to_numpy(moved), host())


@pytest.mark.sharing
def test_cuda_ipc_between_processes():
    """share_memory() of a device tensor: its pickle carries a name, and a
    spawned child opens the same device memory (CUDA IPC), after the copy
    into it that may still be queued here, and reads the values."""
    import concurrent.futures
    import multiprocessing
    import pickle

    import cuda_ipc_workers  # tests/python is on the path a spawned child inherits

    a = host()
    s = dlbridge.from_dlpack(a, device="cuda:0").share_memory()
    assert s.is_shared and s.device == dlbridge.Device("cuda:0")
    blob = pickle.dumps(s)
    # Loaded here, too: a pickle never loaded would hold this process's exit.
    assert len(blob) < 1024 and pickle.loads(blob).data_ptr == s.data_ptr
    with concurrent.futures.ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as pool:
        assert pool.submit(cuda_ipc_workers.read, s).result(timeout=120) == a.tolist()
    np.testing.assert_array_equal(to_numpy(s), a)
