"""Functions that the shared-memory tests run in child processes.

Spawned and forkserver children import the module of the function they
run; this one imports only dlbridge and NumPy, so a child starts in well
under a second instead of loading the suite's torch and JAX.
"""

from __future__ import annotations

import os
import time

import numpy as np

import dlbridge


def add_one_in_place(t):
    """Writes through a tensor that arrived by pickle; returns its name."""
    np.from_dlpack(t)[...] += 1
    return dlbridge._share._shared_memory_info(t)[0]


def total(t):
    return float(np.from_dlpack(t).sum())


def make_shared(n):
    """A tensor created in the child and returned to the parent: the child
    lets go of it as soon as the result is sent."""
    t = dlbridge.empty((n,), "float64", shared=True)
    np.from_dlpack(t)[...] = np.arange(n)
    return t


def put_and_exit(queue, n):
    queue.put(make_shared(n))


def relay(inbox, outbox):
    """Receives a tensor, adds one in place, reports, and waits for the word to leave."""
    t = inbox.get()
    outbox.put(add_one_in_place(t))
    inbox.get()


def hold_until_killed(queue, ready):
    t = queue.get()
    np.from_dlpack(t)[0] = 7.0
    ready.put(os.getpid())
    time.sleep(600)


def write_and_send_on(t, queue):
    """In a forked child: the tensor is the parent's, inherited, and is sent
    on by pickle (the error's text when that fails)."""
    import pickle

    np.from_dlpack(t)[0] = 10.0
    try:
        queue.put(pickle.dumps(t))
    except Exception as e:  # noqa: BLE001 (reported to the parent)
        queue.put(f"{type(e).__name__} {getattr(e, 'code', '')}: {e}")


def wait_then_send_on(t, queue, go):
    go.wait(60)
    write_and_send_on(t, queue)
