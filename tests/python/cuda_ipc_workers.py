"""Functions that the CUDA IPC tests (test_cuda_sim_ipc.py) run in spawned
children. The children inherit DLBRIDGE_CUDART_PATH, so their dlbridge
loads the same simulator file, as a second process's runtime."""

from __future__ import annotations

import ctypes
import gc

import numpy as np

import dlbridge

import cuda_sim

_kept = []


def _sim() -> cuda_sim.Sim:
    return cuda_sim.Sim(cuda_sim.library_path())


def ready() -> int:
    """Loads dlbridge and the simulator, so that a later task starts fast."""
    dlbridge.Device("cuda:0")
    return 0


def read_and_add(t):
    """The values the child sees, its pointer, then a write of values + 1
    through the runtime on its legacy stream (the stream its tensor is
    ready on)."""
    sim = _sim()
    values = np.from_dlpack(dlbridge.from_dlpack(t, device="cpu"))
    out = (values + 1).astype(values.dtype)
    sim.check(sim.lib.cudaMemcpyAsync(t.data_ptr, out.ctypes.data, out.nbytes, 4, 1))
    sim.check(sim.lib.cudaStreamSynchronize(1))
    return values.tolist(), t.data_ptr, str(t.device), t.is_shared, sim.count("ipc_open")


def echo(t):
    """Sends back what arrived (a tensor over an opened handle)."""
    return t


def read(t):
    return np.from_dlpack(dlbridge.from_dlpack(t, device="cpu")).tolist()


def open_count_after_drop(blob: bytes):
    """Loads a pickle, drops the tensor: the handle is closed."""
    import pickle

    t = pickle.loads(blob)
    opened = _sim().count("ipc_open")
    del t
    gc.collect()
    return opened, _sim().count("ipc_close")


def keep(t) -> int:
    _kept.append(t)
    return len(_kept)


def drop_kept() -> int:
    _kept.clear()
    gc.collect()
    return _sim().count("ipc_close")


def load_twice(blob: bytes):
    import pickle

    a, b = pickle.loads(blob), pickle.loads(blob)
    return a.data_ptr == b.data_ptr, _sim().count("ipc_open")


def peek(p: int, nbytes: int) -> bytes:
    return ctypes.string_at(p, nbytes)


def produce(queue, late: bool) -> None:
    """Shares a device tensor, sends it (twice when late), and returns: the
    process exits while the receiver may still have the memory open."""
    import pickle

    s = dlbridge.from_dlpack(np.arange(8, dtype=np.float32), device="cuda:0").share_memory()
    queue.put(pickle.dumps(s))
    if late:
        queue.put(pickle.dumps(s))


def load_fields(*fields):
    """Loads a (possibly forged) CUDA pickle's fields: what came of it."""
    from dlbridge._pickle import rebuild_cuda_tensor

    try:
        t = rebuild_cuda_tensor(*fields)
    except dlbridge.DLPackError as e:
        return type(e).__name__, e.code, str(e)
    return "loaded", t.nbytes, t.device.__str__()


def export_and_wait(conn) -> None:
    """Shares 64 bytes of device memory, sends the record its pickle names
    (for forging), and stays alive until the other end closes the pipe."""
    from dlbridge._share import _shared_memory_info

    s = dlbridge.from_dlpack(np.arange(16, dtype=np.float32), device="cuda:0").share_memory()
    with open("/dev/shm" + _shared_memory_info(s)[0], "rb") as f:
        f.seek(4096)
        conn.send(f.read(152))
    try:
        conn.recv()
    except EOFError:
        pass
