"""CUDA memory shared between processes (CUDA IPC behind share_memory), on
the simulated CUDA runtime, with spawned children as the other processes:
they map the very device memory the parent exported, wait for the parent's
pending work on it, and close their handles; the parent frees it only when
no process has it open, and at exit waits for them.

Like test_cuda_sim.py, this needs DLBRIDGE_CUDART_PATH to name the
simulator (scripts/test-cuda-sim sets it); elsewhere it skips, saying so."""

from __future__ import annotations

import concurrent.futures
import gc
import multiprocessing
import os
import pickle
import time

import numpy as np
import pytest

pytest.importorskip("dlbridge._share", reason="needs dlbridge._share, which this build left out (-DDLBRIDGE_SHARE=OFF)")
import dlbridge
from dlbridge._share import _shared_memory_info
from dlbridge._pickle import rebuild_cuda_tensor

import cuda_ipc_workers
import cuda_sim
from conftest import check_error

_PATH = cuda_sim.library_path()
pytestmark = [pytest.mark.sharing, pytest.mark.skipif(
    _PATH is None, reason="needs the CUDA simulator: run scripts/test-cuda-sim (scripts/test does)")]

N = 4096
LEGACY = 1  # the legacy default stream's handle
TESTS = os.path.dirname(__file__)


def segment_names() -> set[str]:
    return {name for name in os.listdir("/dev/shm") if name.startswith("dlbridge-")}


@pytest.fixture(autouse=True, scope="module")
def no_segment_left_behind():
    """Every segment this module's shares made (and the exporter-exit runs'
    children made) is unlinked by the time it ends."""
    before = segment_names()
    yield
    gc.collect()
    deadline = time.monotonic() + 10
    while segment_names() - before and time.monotonic() < deadline:
        time.sleep(0.05)
    assert segment_names() - before == set(), "this module left segments in /dev/shm"


@pytest.fixture(scope="module")
def sim() -> cuda_sim.Sim:
    return cuda_sim.Sim(_PATH)


@pytest.fixture(scope="module")
def child():
    """One spawned worker for the module, started and warmed up once."""
    with concurrent.futures.ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as pool:
        assert pool.submit(cuda_ipc_workers.ready).result(timeout=120) == 0
        yield pool


@pytest.fixture(autouse=True)
def _settled(sim):
    yield
    gc.collect()
    sim.settle()


def on_device(values, device="cuda:0"):
    return dlbridge.from_dlpack(values, device=device)


def to_host(t) -> np.ndarray:
    return np.from_dlpack(dlbridge.from_dlpack(t, device="cpu"))


def test_share_memory_exports_a_device_copy_once():
    a = np.arange(N, dtype=np.float32)
    t = on_device(a, "cuda:1")
    s = t.share_memory()
    assert s.is_shared and not t.is_shared
    assert s.device == dlbridge.Device("cuda:1")
    assert s.data_ptr != t.data_ptr
    assert s.share_memory() is s
    np.testing.assert_array_equal(to_host(s), a)
    name, references, _ = _shared_memory_info(s)
    assert name.startswith("/dlbridge-") and references == 1


def test_empty_shared_on_a_device():
    s = dlbridge.empty((2, 3), "int16", device="cuda:1", shared=True)
    assert s.is_shared and s.device == dlbridge.Device("cuda:1") and s.shape == (2, 3)
    assert not dlbridge.empty((2, 3), device="cuda:1").is_shared


def test_the_pickle_carries_a_name_not_the_data(sim):
    s = on_device(np.arange(1 << 16, dtype=np.float32)).share_memory()
    name = _shared_memory_info(s)[0]
    opened = sim.count("ipc_open")
    for protocol in (2, 5):
        blob = pickle.dumps(s, protocol=protocol)
        assert len(blob) < 1024 and name.encode() in blob
        assert _shared_memory_info(s)[1] == 2, "the pickle's ticket counts until it is loaded"
        back = pickle.loads(blob)
        # CUDA opens a handle only in another process: here the exporter's
        # own memory comes back.
        assert back.data_ptr == s.data_ptr and back.is_shared
        del back
        gc.collect()
        assert _shared_memory_info(s)[1] == 1
    assert sim.count("ipc_open") == opened


def test_an_unshared_device_tensor_does_not_pickle_and_says_how():
    with pytest.raises(dlbridge.DeviceUnavailableError) as e:
        pickle.dumps(on_device(np.zeros(4, np.float32)))
    check_error(e, dlbridge.DeviceUnavailableError, "device_unavailable")
    assert "share_memory()" in e.value.hint


def test_a_spawned_child_maps_the_same_device_memory(child, sim):
    a = np.arange(N, dtype=np.float32)
    s = on_device(a, "cuda:1").share_memory()
    seen, pointer, device, shared, opened = child.submit(cuda_ipc_workers.read_and_add, s).result(60)
    assert seen == a.tolist()
    assert device == "cuda:1" and shared, "what the child opened is shared, and may be sent on"
    assert opened >= 1
    # The child's write is in our memory (its address there may differ:
    # CUDA promises no particular one).
    np.testing.assert_array_equal(to_host(s), a + 1)


def test_what_a_child_opened_it_may_send_on(child):
    """The child returns the tensor it received: its pickle names the same
    segment, and back here (the exporter) it is this process's own memory."""
    a = np.arange(N, dtype=np.float32)
    s = on_device(a).share_memory()
    back = child.submit(cuda_ipc_workers.echo, s).result(60)
    assert back.data_ptr == s.data_ptr and back.is_shared
    assert _shared_memory_info(back) == _shared_memory_info(s)
    del back
    gc.collect()
    deadline = time.monotonic() + 20
    while _shared_memory_info(s)[1] != 1 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _shared_memory_info(s)[1] == 1, "the child's open was closed and every ticket redeemed"


def test_the_child_waits_for_work_still_queued_here(child, sim):
    s = dlbridge.empty((N,), "float32", device="cuda:0", shared=True)
    a = np.arange(N, dtype=np.float32)
    # A slow kernel, then the upload, both still queued on our legacy stream
    # when the pickle leaves.
    sim.check(sim.lib.cudasim_sleep_async(500_000, LEGACY))
    sim.check(sim.lib.cudaMemcpyAsync(s.data_ptr, a.ctypes.data, a.nbytes, 4, LEGACY))
    assert sim.peek(s.data_ptr, 4) != a[:1].tobytes()
    assert child.submit(cuda_ipc_workers.read, s).result(60) == a.tolist()


def test_without_the_stream_wait_the_child_reads_stale_memory(sim, monkeypatch):
    """The same as above, in a child whose runtime ignores stream waits:
    the test above passes only because of the event."""
    monkeypatch.setenv("CUDASIM_IGNORE_STREAM_WAITS", "1")
    with concurrent.futures.ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as pool:
        pool.submit(cuda_ipc_workers.ready).result(120)
        s = dlbridge.empty((N,), "float32", device="cuda:0", shared=True)
        a = np.arange(N, dtype=np.float32)
        sim.check(sim.lib.cudasim_sleep_async(2_000_000, LEGACY))
        sim.check(sim.lib.cudaMemcpyAsync(s.data_ptr, a.ctypes.data, a.nbytes, 4, LEGACY))
        seen = pool.submit(cuda_ipc_workers.read, s).result(60)
    assert seen != a.tolist()
    assert np.array(seen, np.float32).tobytes() == bytes([sim.fresh_byte]) * (4 * N), \
        "the child read the memory before our upload ran"


def test_a_pickle_loaded_twice_in_a_child_is_one_open_counted_twice(child):
    s = on_device(np.ones(8, np.float32)).share_memory()
    same, opened = child.submit(cuda_ipc_workers.load_twice, pickle.dumps(s)).result(60)
    assert same, "a handle opened again returns the same pointer"
    assert opened >= 2


def test_the_child_closes_its_handle_and_gives_back_its_reference(child):
    s = on_device(np.ones(8, np.float32)).share_memory()
    opened, closed = child.submit(cuda_ipc_workers.open_count_after_drop, pickle.dumps(s)).result(60)
    assert closed >= 1 and opened >= 1
    assert _shared_memory_info(s)[1] == 1, "only our own reference is left"


def test_the_exporter_frees_only_after_the_last_opener_closes(child, sim):
    s = on_device(np.arange(8, dtype=np.float32)).share_memory()
    pointer = s.data_ptr
    assert child.submit(cuda_ipc_workers.keep, s).result(60) >= 1
    del s
    gc.collect()
    assert sim.is_device_memory(pointer), "freed while the child still has it open"
    child.submit(cuda_ipc_workers.drop_kept).result(60)
    # The next share (or pickle, or exit) frees what nobody holds any more.
    on_device(np.zeros(1, np.float32)).share_memory()
    assert not sim.is_device_memory(pointer)


def test_an_unheld_share_is_freed_at_once(sim):
    s = on_device(np.arange(8, dtype=np.float32)).share_memory()
    pointer = s.data_ptr
    del s
    gc.collect()
    assert not sim.is_device_memory(pointer)


# --- hostile pickles -----------------------------------------------------------


def ticket_of_host_share(nbytes: int, fill: bytes = b""):
    """(name, ticket) of a fresh host shared tensor of nbytes, its bytes set."""
    t = dlbridge.empty((nbytes,), "uint8", shared=True)
    np.from_dlpack(t)[: len(fill)] = np.frombuffer(fill, np.uint8)
    _, (name, ticket, _) = t.__reduce_ex__(5)
    return t, name, ticket


LAYOUT = (1, (2, 32, 1), (4,), (1,), 0, 0)


def forged_record(pid: int, handle: bytes) -> bytes:
    record = (0x3143504955434C44).to_bytes(8, "little")  # the record's magic
    record += (64).to_bytes(8, "little") + (0).to_bytes(4, "little") + pid.to_bytes(4, "little")
    return record + handle.ljust(64, b"\0") + bytes(64)


def test_a_host_segment_is_not_a_cuda_share():
    t, name, ticket = ticket_of_host_share(152)
    with pytest.raises(dlbridge.InvalidTensorError) as e:
        rebuild_cuda_tensor(name, ticket, LAYOUT)
    assert "no record of shared device memory" in check_error(e, dlbridge.InvalidTensorError,
                                                              "invalid_tensor")
    assert _shared_memory_info(t)[1] == 1, "the refused load gave its reference back"


def test_a_name_that_is_not_dlbridges_is_refused():
    with pytest.raises(dlbridge.InvalidTensorError):
        rebuild_cuda_tensor("/etc/passwd", 0, LAYOUT)


def test_a_forged_handle_is_a_coded_error_not_a_crash():
    t, name, ticket = ticket_of_host_share(152, forged_record(1, b"\x43\x53\x49\x4d" + bytes(60)))
    with pytest.raises(dlbridge.DeviceUnavailableError) as e:
        rebuild_cuda_tensor(name, ticket, LAYOUT)
    assert "cudaIpcOpenMemHandle" in check_error(e, dlbridge.DeviceUnavailableError,
                                                 "device_unavailable")
    assert _shared_memory_info(t)[1] == 1


def test_a_forged_record_naming_this_process_is_refused():
    t, name, ticket = ticket_of_host_share(152, forged_record(os.getpid(), b""))
    with pytest.raises(dlbridge.DeviceUnavailableError) as e:
        rebuild_cuda_tensor(name, ticket, LAYOUT)
    assert "shared by this process" in check_error(e, dlbridge.DeviceUnavailableError,
                                                   "device_unavailable")


@pytest.mark.parametrize("layout, cls", [
    ((1, (2, 32, 1), (1 << 20,), (1,), 0, 0), dlbridge.InvalidTensorError),  # more bytes than held
    ((1, (2, 32, 1), (4,), (-1,), 0, 0), dlbridge.InvalidTensorError),       # a stride out of it
    ((1, (99, 32, 1), (4,), (1,), 0, 0), dlbridge.UnsupportedDTypeError),   # no such dtype code
    ((1, (2, 32, 1), (True,), (1,), 0, 0), dlbridge.InvalidTensorError),     # not even parsable
])
def test_a_layout_outside_the_allocation_is_refused(layout, cls):
    s = on_device(np.zeros(16, np.float32)).share_memory()
    _, (name, ticket, _) = s.__reduce_ex__(5)
    with pytest.raises(cls):
        rebuild_cuda_tensor(name, ticket, layout)
    gc.collect()
    assert _shared_memory_info(s)[1] == 1, "the refused load gave the ticket's reference back"


RECORD_BYTES = 8 + 8 + 4 + 4 + 64 + 64  # magic, size, device, pid, memory and event handles


def record_of(shared) -> bytearray:
    """The record a device share's segment holds (after its 4096-byte header)."""
    with open("/dev/shm" + _shared_memory_info(shared)[0], "rb") as f:
        f.seek(4096)
        return bytearray(f.read(RECORD_BYTES))


def test_a_record_claiming_a_larger_allocation_is_refused(child):
    """The size beside the handle is the exporter's claim: the receiver asks
    the runtime (cuMemGetAddressRange), so a forged record cannot make a
    64 MiB tensor over a 64-byte allocation."""
    s = on_device(np.zeros(16, np.float32)).share_memory()  # 64 bytes
    record = record_of(s)
    record[8:16] = (64 << 20).to_bytes(8, "little")
    t, name, ticket = ticket_of_host_share(RECORD_BYTES, bytes(record))
    huge = (1, (2, 32, 1), (16 << 20,), (1,), 0, 0)  # 64 MiB of float32
    kind, code, message = child.submit(cuda_ipc_workers.load_fields, name, ticket, huge).result(60)
    assert (kind, code) == ("InvalidTensorError", "invalid_tensor"), message
    assert "claims an allocation of 67108864 bytes; the CUDA runtime reports 64" in message
    assert _shared_memory_info(t)[1] == 1, "the refused load gave its reference back"


def test_an_honest_record_is_sized_by_the_runtime(child, sim):
    s = on_device(np.arange(16, dtype=np.float32)).share_memory()
    _, (name, ticket, _) = s.__reduce_ex__(5)
    counted = sim.count("address_range")
    whole = (1, (2, 32, 1), (16,), (1,), 0, 0)
    assert child.submit(cuda_ipc_workers.load_fields, name, ticket, whole).result(60)[:2] == ("loaded", 64)
    _, (name, ticket, _) = s.__reduce_ex__(5)
    one_more = (1, (2, 32, 1), (17,), (1,), 0, 0)
    kind, code, _ = child.submit(cuda_ipc_workers.load_fields, name, ticket, one_more).result(60)
    assert (kind, code) == ("InvalidTensorError", "invalid_tensor")
    assert sim.count("address_range") == counted, "the parent asked nothing: the child's runtime did"


def test_a_handle_that_claims_another_size_does_not_open(child):
    """The simulated driver, like a real one, maps what its own records say
    was exported: a handle whose bytes claim a larger allocation is refused."""
    s = on_device(np.zeros(16, np.float32)).share_memory()
    record = record_of(s)
    handle_size_at = 24 + 48  # the handle's bytes field (tests/cudasim/ipc.cpp, MemoryWire)
    record[handle_size_at:handle_size_at + 8] = (64 << 20).to_bytes(8, "little")
    record[8:16] = (64 << 20).to_bytes(8, "little")
    t, name, ticket = ticket_of_host_share(RECORD_BYTES, bytes(record))
    huge = (1, (2, 32, 1), (16 << 20,), (1,), 0, 0)
    kind, code, message = child.submit(cuda_ipc_workers.load_fields, name, ticket, huge).result(60)
    assert (kind, code) == ("DeviceUnavailableError", "device_unavailable"), message
    assert "cudaIpcOpenMemHandle" in message and "(400)" in message


def test_pickles_with_fields_of_the_wrong_type_are_invalid_tensor():
    for fields in [(b"/dlbridge-0-0-0", 0, LAYOUT), ("/dlbridge-0-0-0", "0", LAYOUT),
                   ("/dlbridge-0-0-0", 0, None), ("/dlbridge-0-0-0", 0, LAYOUT, "yes"),
                   ("/dlbridge-0-0-0",)]:
        with pytest.raises(dlbridge.InvalidTensorError) as e:
            rebuild_cuda_tensor(*fields)
        assert "incompatible function arguments" not in check_error(
            e, dlbridge.InvalidTensorError, "invalid_tensor")


def test_share_memory_of_a_device_tensor_of_unknown_writability_keeps_it():
    s = dlbridge.from_dlpack(np.arange(4, dtype=np.float32), device="cuda:0")
    unknown = dlbridge.from_dlpack(s.__dlpack__())  # through a legacy capsule: writability unknown
    shared = unknown.share_memory()
    assert shared.readonly and dlbridge.inspect_capsule(shared.__dlpack__())["name"] == "dltensor"
    back = pickle.loads(pickle.dumps(shared))
    assert back.readonly and dlbridge.inspect_capsule(back.__dlpack__())["name"] == "dltensor"


# --- the exporter's exit -------------------------------------------------------------

EXPORTER_EXITS = """
import gc, multiprocessing, os, pickle, sys, time
sys.path.insert(0, {tests!r})
import numpy as np
import dlbridge
from cuda_ipc_workers import produce

if __name__ == "__main__":
    ctx = multiprocessing.get_context("spawn")
    queue = ctx.Queue()
    p = ctx.Process(target=produce, args=(queue, {late}))
    p.start()
    t = pickle.loads(queue.get(timeout=120))
    late = queue.get(timeout=120) if {late} else None
    time.sleep({hold})
    alive = p.is_alive()
    values = np.from_dlpack(dlbridge.from_dlpack(t, device="cpu")).tolist()
    del t
    gc.collect()
    p.join(60)
    print(p.exitcode, alive, values == list(range(8)), flush=True)
    if late is not None:
        try:
            pickle.loads(late)
            print("loaded")
        except dlbridge.DeviceUnavailableError as e:
            print(e.code)
"""


def run_exporter_exit(run_python, hold: float, wait: float, late: bool):
    env_before = os.environ.get("DLBRIDGE_CUDA_IPC_EXIT_WAIT")
    os.environ["DLBRIDGE_CUDA_IPC_EXIT_WAIT"] = str(wait)
    try:
        result = run_python(EXPORTER_EXITS.format(tests=TESTS, hold=hold, late=late))
    finally:
        if env_before is None:
            del os.environ["DLBRIDGE_CUDA_IPC_EXIT_WAIT"]
        else:
            os.environ["DLBRIDGE_CUDA_IPC_EXIT_WAIT"] = env_before
    assert result.returncode == 0, result.stderr
    return result.stdout.split("\n"), result.stderr


def test_the_exporter_waits_at_exit_until_no_process_has_its_memory_open(run_python):
    lines, stderr = run_exporter_exit(run_python, hold=2, wait=60, late=False)
    assert lines[0] == "0 True True", "the exporter should still be waiting after 2 s"
    assert "still have" not in stderr, stderr


def test_an_exporter_that_cannot_wait_longer_says_so(run_python):
    lines, stderr = run_exporter_exit(run_python, hold=4, wait=0.5, late=True)
    assert lines[0].split()[:2] == ["0", "False"], "the exporter should have given up waiting"
    assert "still have 1 CUDA allocation(s) it shared open" in stderr, stderr
    assert lines[1] == "device_unavailable", "a pickle loaded after its exporter exited is refused"
