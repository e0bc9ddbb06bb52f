"""The Ray driver of tests/python/test_multihost_ray.py: runs on test host h0 (beside Ray's head), connected
to a cluster of three hosts, and answers the test's calls (tests/support/serve_calls.py). Every node
offers a resource named after its host (h0, h1, h2), so a task runs where the test says.

    python -c "import multihost_ray_driver as d; d.main()"      (PYTHONPATH: tests/python, tests/support)

Tasks and actors are defined here, at the top of an importable module: Ray's workers import them by name."""

from __future__ import annotations

import os
import time

import numpy as np
import ray

import dlbridge
import multihost_cases as cases

STATE: dict = {}


def in_object_store(address: int) -> bool:
    """Whether address lies in this process's mapping of its node's object store (plasma)."""
    with open("/proc/self/maps") as maps:
        for line in maps:
            fields = line.split()
            low, high = (int(v, 16) for v in fields[0].split("-"))
            if low <= address < high:
                return "plasma" in " ".join(fields[5:])
    return False


def receipt(value) -> dict:
    """What the receiving process got: the description, and whether each tensor lies in its store."""
    return {"host": os.environ.get("DLBRIDGE_TEST_HOST", ""), "pid": os.getpid(),
            "describe": cases.describe(value),
            "in_store": [in_object_store(t.data_ptr) for t in cases.tensors(value) if t.nbytes]}


def on(host: str) -> dict:
    return {"resources": {host: 1}, "num_cpus": 0}


@ray.remote(max_retries=0)
def receive(refs):
    """Gets the object inside the task (the ref travels in a list, so Ray does not resolve it first)."""
    return receipt(ray.get(refs[0]))


@ray.remote(max_retries=0)
def receive_argument(value):
    return receipt(value)


@ray.remote(max_retries=0)
def make(case):
    return cases.make(case)


@ray.remote(max_retries=0)
def shm_names():
    return sorted(os.listdir("/dev/shm"))


@ray.remote(max_restarts=0, max_task_retries=0)
class Process:
    """A worker process whose pid the test kills."""

    def pid(self) -> int:
        return os.getpid()

    def fetch(self, refs):
        return receipt(ray.get(refs[0]))

    def make_shared(self):
        return cases.shared()

    def leave(self):
        ray.actor.exit_actor()

    def put(self, nbytes):
        self.kept = dlbridge.from_dlpack(np.ones(nbytes // 4, dtype=np.float32))
        return [ray.put(self.kept)]


def connect(address: str) -> None:
    ray.init(address=address, log_to_driver=False, configure_logging=False)


def nodes(hosts: list[str]) -> list[str]:
    """The hosts among `hosts` whose node is alive in the cluster."""
    alive = [n for n in ray.nodes() if n["Alive"]]
    return sorted(h for n in alive for h in n["Resources"] if h in hosts)


def _sent(value) -> dict:
    return {"describe": cases.describe(value), "payload": cases.payload_bytes(value)}


def send(case: str, to: str, route: str) -> dict:
    """The driver's value to a task on host `to`: through ray.put ("put") or as the task's argument ("arg")."""
    value = cases.make(case)
    if route == "put":
        got = ray.get(receive.options(**on(to)).remote([ray.put(value)]), timeout=180)
    else:
        got = ray.get(receive_argument.options(**on(to)).remote(value), timeout=180)
    return {"sent": _sent(value), "received": got}


def relay(case: str, source: str, to: str) -> dict:
    """A value made by a task on host `source` to a task on host `to`: it goes between their stores."""
    made = make.options(**on(source)).remote(case)
    got = ray.get(receive.options(**on(to)).remote([made]), timeout=180)
    return {"sent": _sent(cases.make(case)), "received": got}


def fetch(case: str, source: str) -> dict:
    """A value made by a task on host `source` to the driver (on h0)."""
    value = ray.get(make.options(**on(source)).remote(case), timeout=180)
    return {"sent": _sent(cases.make(case)), "received": receipt(value)}


def serialization(case: str) -> dict:
    """What Ray's own serializer does with the value: its pickle-5 stream (in-band) and the out-of-band
    buffers it hands to Ray's writer, observed by wrapping the pickle module Ray calls."""
    import ray._private.serialization as serialization

    real = serialization.pickle
    seen = {"inband": [], "buffers": []}

    class Spy:
        def __getattr__(self, name):
            return getattr(real, name)

        @staticmethod
        def dumps(value, protocol=None, buffer_callback=None):
            def callback(buffer):
                seen["buffers"].append(memoryview(buffer).nbytes)
                return buffer_callback(buffer)
            data = real.dumps(value, protocol=protocol, buffer_callback=callback if buffer_callback else None)
            seen["inband"].append(len(data))
            seen["protocol"] = protocol
            return data

    value = cases.make(case)
    serialization.pickle = Spy()
    try:
        ref = ray.put(value)
    finally:
        serialization.pickle = real
    del ref
    return {**seen, "tensors": [t.nbytes for t in cases.tensors(value)]}


def send_shared(to: str) -> dict:
    """A shared-memory tensor of h0 to a task on host `to`."""
    try:
        ray.get(receive.options(**on(to)).remote([ray.put(cases.shared())]), timeout=180)
    except Exception as exc:  # noqa: BLE001 - what the user sees is the answer
        return cases.error_record(exc)
    return {"type": None}


def fetch_shared(source: str) -> dict:
    """A shared-memory tensor made by a worker process on host `source`, got by the driver on h0. The
    worker then exits normally, so that its program's resource tracker unlinks the segment whose pickle
    was never loaded (docs/distributed.md: an unloaded ticket is what the tracker cleans up)."""
    process = Process.options(**on(source)).remote()
    try:
        ray.get(process.make_shared.remote(), timeout=180)
    except Exception as exc:  # noqa: BLE001
        return cases.error_record(exc)
    finally:
        process.leave.remote()
    return {"type": None}


def shm(host: str) -> list[str]:
    return ray.get(shm_names.options(**on(host)).remote(), timeout=120)


# --- faults: the test kills a process or cuts a link between a start_* and finish ---

def start_fetch(to: str, nbytes: int) -> dict:
    """An actor on `to` gets a large tensor put by the driver; returns the actor's pid."""
    process = Process.options(**on(to)).remote()
    pid = ray.get(process.pid.remote(), timeout=120)
    ref = ray.put(dlbridge.from_dlpack(np.ones(nbytes // 4, dtype=np.float32)))
    STATE.update(process=process, ref=ref, pending=process.fetch.remote([ref]))
    return {"pid": pid}


def start_put(source: str, nbytes: int) -> dict:
    """An actor on `source` puts a tensor (it owns it) and hands the driver its reference."""
    process = Process.options(**on(source)).remote()
    pid = ray.get(process.pid.remote(), timeout=120)
    STATE.update(process=process, ref=ray.get(process.put.remote(nbytes), timeout=120)[0])
    return {"pid": pid}


def get_put(seconds: float) -> dict:
    start = time.monotonic()
    try:
        value = ray.get(STATE["ref"], timeout=seconds)
        return {"value": cases.describe(value), "seconds": time.monotonic() - start}
    except Exception as exc:  # noqa: BLE001
        return {"error": cases.error_record(exc), "seconds": time.monotonic() - start}
    finally:
        STATE.clear()


def start_transfer(to: str, nbytes: int) -> dict:
    ref = ray.put(dlbridge.from_dlpack(np.ones(nbytes // 4, dtype=np.float32)))
    STATE.update(ref=ref, pending=receive.options(**on(to)).remote([ref]))
    return {"expected": cases.digest(dlbridge.from_dlpack(np.ones(nbytes // 4, dtype=np.float32)))}


def finish(seconds: float) -> dict:
    start = time.monotonic()
    try:
        got = ray.get(STATE["pending"], timeout=seconds)
        return {"value": got, "seconds": time.monotonic() - start}
    except Exception as exc:  # noqa: BLE001
        return {"error": cases.error_record(exc), "seconds": time.monotonic() - start}
    finally:
        STATE.clear()


# --- bench/bench_multihost.py: the same bytes as a NumPy array or a dlbridge tensor, host to host ---

@ray.remote(max_retries=0)
def make_payload(kind: str, nbytes: int):
    a = np.arange(nbytes // 4, dtype=np.float32)
    return a if kind == "numpy" else dlbridge.from_dlpack(a)


@ray.remote(max_retries=0)
def read_payload(refs) -> dict:
    x = ray.get(refs[0])
    address = x.data_ptr if isinstance(x, dlbridge.Tensor) else x.ctypes.data
    return {"type": type(x).__name__, "nbytes": x.nbytes, "in_store": in_object_store(address)}


def bench_transfer(kind: str, nbytes: int, source: str, to: str) -> dict:
    """Seconds for a task on `to` to get a value that lies in the store of `source` (made there first)."""
    made = make_payload.options(**on(source)).remote(kind, nbytes)
    ray.wait([made], fetch_local=False, timeout=600)
    start = time.perf_counter()
    seen = ray.get(read_payload.options(**on(to)).remote([made]), timeout=600)
    seconds = time.perf_counter() - start
    del made
    return {"seconds": seconds, **seen}


FUNCTIONS = {f.__name__: f for f in (connect, nodes, send, relay, fetch, serialization, send_shared, fetch_shared, shm,
                                     start_fetch, start_put, get_put, start_transfer, finish, bench_transfer)}


def main() -> None:
    from serve_calls import serve
    serve(FUNCTIONS)
