"""The Dask client of tests/python/test_multihost_dask.py: runs on test host h0 (beside the scheduler) and
answers the test's calls (tests/support/serve_calls.py). The workers are named after their hosts (h1, h2).

    python -c "import multihost_dask_driver as d; d.main()"     (PYTHONPATH: tests/python, tests/support)

Each worker records the address and size of every buffer Dask's pickle-5 deserializer hands to
pickle.loads (`install_spy`), so a receipt says whether a tensor wraps a frame Dask received (no copy)."""

from __future__ import annotations

import ctypes
import os
import time

import numpy as np

import dlbridge
import multihost_cases as cases

STATE: dict = {}
RECEIVED: list = []


def _address(buffer) -> tuple[int, int, bytes]:
    """Where a received buffer lies, its size, and its first bytes (to tell apart buffers of one size)."""
    raw = np.frombuffer(memoryview(buffer).cast("B"), dtype=np.uint8)
    return raw.ctypes.data, raw.nbytes, raw[:256].tobytes()


def install_spy() -> int:
    """Wraps the pickle.loads that Dask's pickle serializer calls, recording each out-of-band buffer."""
    import distributed.protocol.pickle as dask_pickle

    if not getattr(dask_pickle.loads, "dlbridge_spy", False):
        real = dask_pickle.loads

        def loads(x, *, buffers=()):
            RECEIVED[:] = RECEIVED[-63:] + [_address(b) for b in buffers]
            return real(x, buffers=buffers)

        loads.dlbridge_spy = True
        dask_pickle.loads = loads
    return os.getpid()


def needed_alignment(t: dlbridge.Tensor) -> int:
    """The alignment dlbridge needs of a received buffer to wrap it (src/python/pickling.cpp: the largest
    power of two dividing the element size, at most 16); below it, loading copies once."""
    size, alignment = max(1, t.dtype.bits * t.dtype.lanes // 8), 1
    while alignment < 16 and size % (alignment * 2) == 0:
        alignment *= 2
    return alignment


def receipt(value) -> dict:
    """What the receiving worker got; for each tensor with data, whether it lies inside a buffer Dask
    received (no copy), and whether the buffer Dask received with its bytes was aligned for its dtype."""
    def in_received(t):
        return any(start <= t.data_ptr and t.data_ptr + t.nbytes <= start + size for start, size, _ in RECEIVED)

    def frame_aligned(t):
        # The received buffer of the tensor's size whose first bytes are the tensor's (a compact layout
        # with positive strides, as every case that travels with data here).
        head = ctypes.string_at(t.data_ptr, min(256, t.nbytes))
        starts = [start for start, size, first in RECEIVED if size == t.nbytes and first == head]
        return starts[-1] % needed_alignment(t) == 0 if starts else None

    data = [t for t in cases.tensors(value) if t.nbytes]
    return {"host": os.environ.get("DLBRIDGE_TEST_HOST", ""), "pid": os.getpid(),
            "describe": cases.describe(value),
            "in_received": [in_received(t) for t in data], "frame_aligned": [frame_aligned(t) for t in data]}


def shm_names() -> list[str]:
    return sorted(os.listdir("/dev/shm"))


def big(nbytes: int):
    return dlbridge.from_dlpack(np.ones(nbytes // 4, dtype=np.float32))


def _client():
    return STATE["client"]


def _on(host: str) -> dict:
    return {"workers": [STATE["workers"][host]], "allow_other_workers": False, "pure": False}


def connect(address: str, hosts: list[str], seconds: float = 240) -> dict:
    from distributed import Client

    if "client" not in STATE:
        STATE["client"] = Client(address, timeout=seconds)
    client = _client()
    client.wait_for_workers(len(hosts), timeout=seconds)
    info = client.scheduler_info(n_workers=-1)["workers"]
    STATE["workers"] = {w["name"]: addr for addr, w in info.items()}
    pids = client.run(install_spy)
    STATE["pids"] = {w["name"]: pids[addr] for addr, w in info.items()}
    return {"workers": STATE["workers"], "pids": STATE["pids"]}


def _sent(value) -> dict:
    return {"describe": cases.describe(value), "payload": cases.payload_bytes(value)}


def send(case: str, to: str, route: str) -> dict:
    """The client's value to worker `to`: scattered to it ("scatter") or as a task's argument ("arg")."""
    value = cases.make(case)
    client = _client()
    if route == "scatter":
        future = client.scatter(value, workers=[STATE["workers"][to]], direct=True, hash=False)
        got = client.submit(receipt, future, **_on(to)).result(timeout=180)
    else:
        got = client.submit(receipt, value, **_on(to)).result(timeout=180)
    return {"sent": _sent(value), "received": got}


def relay(case: str, source: str, to: str) -> dict:
    """A value made on worker `source`, read by a task on worker `to`: worker to worker, directly."""
    client = _client()
    made = client.submit(cases.make, case, **_on(source))
    got = client.submit(receipt, made, **_on(to)).result(timeout=180)
    return {"sent": _sent(cases.make(case)), "received": got}


def fetch(case: str, source: str) -> dict:
    """A value made on worker `source`, gathered by the client on h0."""
    RECEIVED.clear()
    install_spy()
    value = _client().submit(cases.make, case, **_on(source)).result(timeout=180)
    return {"sent": _sent(cases.make(case)), "received": receipt(value)}


def serialization(case: str) -> dict:
    """Dask's own serialization of the value: the serializer it picks and the frames it sends."""
    from distributed.protocol.serialize import serialize_and_split

    value = cases.make(case)
    header, frames = serialize_and_split(value, on_error="raise")
    return {"serializer": header.get("serializer"), "frames": [memoryview(f).nbytes for f in frames],
            "tensors": [t.nbytes for t in cases.tensors(value)]}


def send_shared(to: str) -> dict:
    """A shared-memory tensor of h0 to a task on worker `to`."""
    try:
        _client().submit(receipt, cases.shared(), **_on(to)).result(timeout=180)
    except Exception as exc:  # noqa: BLE001 - what the user sees is the answer
        return cases.error_record(exc)
    return {"type": None}


def fetch_shared(source: str) -> dict:
    """A shared-memory tensor made on worker `source`, gathered by the client on h0."""
    try:
        _client().submit(cases.shared, **_on(source)).result(timeout=180)
    except Exception as exc:  # noqa: BLE001
        return cases.error_record(exc)
    return {"type": None}


def shm(host: str) -> list[str]:
    return _client().submit(shm_names, **_on(host)).result(timeout=120)


# --- faults: the test kills a worker or cuts a link between a start_* and finish ---

def start_relay(source: str, to: str, nbytes: int) -> dict:
    """A large tensor made on `source` and read on `to`; returns once it lies on `source`."""
    from distributed import wait

    client = _client()
    made = client.submit(big, nbytes, **_on(source))
    wait([made], timeout=180)
    if made.status != "finished":
        raise RuntimeError(f"making the tensor on {source}: {made.status}")
    STATE["made"] = made
    STATE["pending"] = client.submit(receipt, made, **_on(to))
    return {"expected": cases.digest(big(nbytes))}


def start_scatter(source: str, nbytes: int) -> dict:
    """The client puts a tensor on worker `source` (scatter); the test then kills that worker."""
    STATE["made"] = _client().scatter(big(nbytes), workers=[STATE["workers"][source]], direct=True)
    return {}


def get_on(to: str, seconds: float) -> dict:
    """A task on `to` reads what start_scatter put."""
    STATE["pending"] = _client().submit(receipt, STATE["made"], **_on(to))
    return finish(seconds)


def finish(seconds: float) -> dict:
    start = time.monotonic()
    try:
        got = STATE["pending"].result(timeout=seconds)
        return {"value": got, "seconds": time.monotonic() - start}
    except Exception as exc:  # noqa: BLE001
        return {"error": cases.error_record(exc), "seconds": time.monotonic() - start}
    finally:
        STATE.pop("pending", None)
        STATE.pop("made", None)


# --- bench/bench_multihost.py: the same bytes as a NumPy array or a dlbridge tensor, host to host ---

def make_payload(kind: str, nbytes: int):
    a = np.arange(nbytes // 4, dtype=np.float32)
    return a if kind == "numpy" else dlbridge.from_dlpack(a)


def read_payload(x) -> dict:
    return {"type": type(x).__name__, "nbytes": x.nbytes}


def bench_transfer(kind: str, nbytes: int, source: str, to: str) -> dict:
    """Seconds for a task on worker `to` to get a value that lies on worker `source` (made there first)."""
    from distributed import wait

    client = _client()
    made = client.submit(make_payload, kind, nbytes, **_on(source))
    wait([made], timeout=600)
    start = time.perf_counter()
    seen = client.submit(read_payload, made, **_on(to)).result(timeout=600)
    seconds = time.perf_counter() - start
    del made
    return {"seconds": seconds, **seen}


FUNCTIONS = {f.__name__: f for f in (connect, send, relay, fetch, serialization, send_shared, fetch_shared, shm,
                                     start_relay, start_scatter, get_on, finish, bench_transfer)}


def main() -> None:
    from serve_calls import serve
    serve(FUNCTIONS)
