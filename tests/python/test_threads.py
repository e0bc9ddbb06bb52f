"""Eight threads importing, exporting, converting and copying at once, with
every result checked: shared sources and tensors are used from all threads,
so a race in dlbridge's caches, capsule handling or copies shows as a wrong
value, an exception or a crash."""

import sys
import threading

import numpy as np
import torch

import dlbridge

THREADS = 8
ROUNDS = 1500  # per thread; each round runs one operation of each kind


def expected(seed: int) -> np.ndarray:
    return np.arange(12.0).reshape(3, 4) * seed


def work(seed: int, shared: dlbridge.Tensor, shared_source: np.ndarray) -> None:
    mine = expected(seed)
    for _ in range(ROUNDS):
        # import (own array and the shared one)
        assert np.array_equal(np.asarray(dlbridge.from_dlpack(mine)), mine)
        assert np.array_equal(np.asarray(dlbridge.from_dlpack(shared_source)), shared_source)
        # export: a capsule from the shared tensor, consumed by NumPy
        capsule = dlbridge.to_dlpack(shared, max_version=(1, 3))
        assert np.array_equal(np.from_dlpack(dlbridge.from_dlpack(capsule)), shared_source)
        # convert to torch, strided so that a copy may be needed
        converted = dlbridge.convert(mine[:, ::2], "torch")
        assert torch.equal(converted, torch.from_numpy(mine[:, ::2].copy()))
        # copy: independent of the source and of other threads' copies
        copy = np.asarray(shared.copy())
        copy += seed
        assert np.array_equal(copy, shared_source + seed)


def test_eight_threads_of_mixed_operations():
    shared_source = expected(7)
    shared = dlbridge.from_dlpack(shared_source)
    errors = []
    start = threading.Barrier(THREADS)

    def run(seed):
        try:
            start.wait()
            work(seed, shared, shared_source)
        except BaseException as exc:  # noqa: BLE001 (reported below)
            errors.append((seed, repr(exc)))

    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)  # switch threads often, to interleave more
    try:
        threads = [threading.Thread(target=run, args=(seed,)) for seed in range(1, THREADS + 1)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    finally:
        sys.setswitchinterval(interval)
    assert errors == []
    assert np.array_equal(shared_source, expected(7)), "the shared source was written to"
