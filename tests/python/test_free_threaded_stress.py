"""Eight threads without a GIL, for a bounded time, each round converting, importing, exporting, pickling and
sharing the same tensors and their own, with every value checked and the GIL checked off throughout.

What they meet at once: the producer-type registry (several producer classes, new ones learnt while others
read), convert's target table (named targets and a learnt module-like one), the kept buffer of pickling,
shared-memory tensors loaded by name, and deleters that run on another thread than the import (tensors
handed across a queue). Only a free-threaded interpreter can race in these; with a GIL the test skips.
DLBRIDGE_STRESS_SECONDS sets how long the threads run (2 s by default).
"""

from __future__ import annotations

import os
import pickle
import queue
import sys
import sysconfig
import threading
import time
import types

import numpy as np
import pytest

import dlbridge

FREE_THREADED = bool(sysconfig.get_config_var("Py_GIL_DISABLED"))
pytestmark = pytest.mark.skipif(not FREE_THREADED, reason="needs a free-threaded CPython (3.13t or later): "
                                "with a GIL, dlbridge's state is never touched by two threads at once")

THREADS = 8
SECONDS = float(os.environ.get("DLBRIDGE_STRESS_SECONDS", "2"))


def gil_enabled() -> bool:
    return sys._is_gil_enabled()  # noqa: SLF001 (the one way to ask)


class Producer:
    """A producer class of its own: the registry learns it on first sight, from whichever thread."""

    def __init__(self, array: np.ndarray) -> None:
        self.array = array

    def __dlpack__(self, **kwargs):
        return self.array.__dlpack__(**kwargs)

    def __dlpack_device__(self):
        return self.array.__dlpack_device__()


class ArrayInterfaceOnly:
    def __init__(self, array: np.ndarray) -> None:
        self.__array_interface__ = array.__array_interface__
        self.keep = array


def fresh_producer_class(n: int) -> type:
    """A new class per call: registrations while other threads look classes up."""
    return type(f"Producer{n}", (Producer,), {})


# A module-like target for convert: learnt once per object, then read from its table.
CONSUMER = types.SimpleNamespace(__name__="stress_consumer", from_dlpack=np.from_dlpack)


def expected(seed: int, n: int = 24) -> np.ndarray:
    return (np.arange(n, dtype=np.float64) * seed).reshape(4, n // 4)


class Checker:
    def __init__(self) -> None:
        self.wrong: list[str] = []
        self.lock = threading.Lock()

    def equal(self, what: str, got, want: np.ndarray) -> None:
        got = np.asarray(got)
        if got.shape != want.shape or not np.array_equal(got, want):
            with self.lock:
                self.wrong.append(f"{what}: {got!r} != {want!r}")


def one_round(seed: int, k: int, check: Checker, shared: dict, handover: queue.Queue) -> int:
    """One round of every operation; returns how many values it checked."""
    mine = expected(seed + k % 5)
    source = shared["source"]
    tensor = shared["tensor"]
    # import: own and shared arrays, through each kind of producer
    check.equal("from_dlpack(own)", dlbridge.from_dlpack(mine), mine)
    check.equal("from_dlpack(shared source)", dlbridge.from_dlpack(source), source)
    check.equal("from_dlpack(Producer)", dlbridge.from_dlpack(Producer(mine)), mine)
    check.equal("from_dlpack(array interface)", dlbridge.from_dlpack(ArrayInterfaceOnly(mine)), mine)
    check.equal("from_dlpack(memoryview)", dlbridge.from_dlpack(memoryview(mine)), mine)
    if k % 50 == 0:
        check.equal("from_dlpack(new class)", dlbridge.from_dlpack(fresh_producer_class(seed * 100000 + k)(mine)),
                    mine)
    # export: the shared tensor to NumPy, by __dlpack__ and by a capsule
    check.equal("np.from_dlpack(shared tensor)", np.from_dlpack(tensor), source)
    capsule = tensor.__dlpack__(max_version=(1, 3))
    check.equal("capsule of shared tensor", dlbridge.from_dlpack(capsule), source)
    # convert: named targets, a learnt module-like one, a strided source that needs a copy
    check.equal("convert(shared, numpy)", dlbridge.convert(tensor, "numpy"), source)
    check.equal("convert(own, dlbridge)", dlbridge.convert(mine, "dlbridge"), mine)
    check.equal("convert(strided, numpy)", dlbridge.convert(mine[:, ::2], "numpy"), mine[:, ::2])
    check.equal("convert(own, module-like)", dlbridge.convert(mine, CONSUMER), mine)
    # copy: private and writable
    copy = np.from_dlpack(tensor.copy())
    copy += seed
    check.equal("copy", copy, source + seed)
    # pickle: out of band (the kept buffer) and in band
    own = dlbridge.from_dlpack(mine)
    buffers: list = []
    data = pickle.dumps(own, protocol=5, buffer_callback=buffers.append)
    check.equal("pickle 5", pickle.loads(data, buffers=buffers), mine)
    check.equal("pickle 4", pickle.loads(pickle.dumps(tensor, protocol=4)), source)
    # sharing: the same shared-memory tensor loaded by name from every thread
    check.equal("shared by name", pickle.loads(pickle.dumps(shared["segment"])), shared["segment_values"])
    if k % 200 == 0:
        mine_shared = own.share_memory()
        check.equal("share_memory", pickle.loads(pickle.dumps(mine_shared)), mine)
    # deleters on a foreign thread: hand a fresh import to whichever thread takes it next
    handover.put(dlbridge.from_dlpack(expected(seed)))
    try:
        other = handover.get_nowait()
    except queue.Empty:
        other = None
    if other is not None:
        values = np.from_dlpack(other)
        s = values[0, 1]  # expected(s)[0, 1] == s
        check.equal("handed over", values, expected(int(s)))
        del other, values
    return 18


@pytest.mark.sharing  # the threads pickle and load shared-memory tensors too
def test_eight_threads_without_the_gil_get_every_value_right():
    assert not gil_enabled(), "the GIL is on before dlbridge runs"
    source = expected(7)
    segment = dlbridge.empty((4, 6), "float64", shared=True)
    np.from_dlpack(segment)[...] = expected(11)
    shared = {"source": source, "tensor": dlbridge.from_dlpack(source), "segment": segment,
              "segment_values": expected(11)}
    check = Checker()
    handover: queue.Queue = queue.Queue()
    errors: list[str] = []
    rounds = [0] * THREADS
    values = [0] * THREADS
    gil_seen_on = []
    start = threading.Barrier(THREADS)
    deadline = [0.0]

    def run(index: int) -> None:
        try:
            start.wait()
            k = 0
            while time.monotonic() < deadline[0]:
                values[index] += one_round(index + 1, k, check, shared, handover)
                k += 1
                if k % 100 == 0 and gil_enabled():
                    gil_seen_on.append(index)
            rounds[index] = k
        except BaseException as exc:  # noqa: BLE001 (reported below)
            errors.append(f"thread {index}: {exc!r}")

    deadline[0] = time.monotonic() + SECONDS + 1
    threads = [threading.Thread(target=run, args=(i,)) for i in range(THREADS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    while not handover.empty():
        other = np.from_dlpack(handover.get_nowait())
        check.equal("left over", other, expected(int(other[0, 1])))
    print(f"\nfree-threaded stress: {THREADS} threads x {SECONDS:g} s, {sum(rounds)} rounds, "
          f"{sum(values)} values checked, {len(check.wrong)} wrong, GIL enabled: {gil_enabled()}")
    assert errors == []
    assert check.wrong == []
    assert all(rounds), f"a thread ran no round: {rounds}"
    assert gil_seen_on == [], "the GIL came on while the threads ran"
    assert not gil_enabled()



def test_a_daemon_thread_copying_at_exit_exits_cleanly_twenty_times_in_a_row(run_python):
    # Without the GIL this aborted about once in 20 exits ("terminate called without an active exception"):
    # the Tensor pool's thread-exit callback took a thread state while the interpreter finalized.
    from test_boundary_exit import DAEMON_COPYING_AT_EXIT

    for attempt in range(20):
        result = run_python(DAEMON_COPYING_AT_EXIT, timeout=120)
        assert "terminate called" not in result.stderr, f"exit {attempt + 1} of 20: {result.stderr}"
        assert result.returncode == 0, f"exit {attempt + 1} of 20: {result.stderr}"
