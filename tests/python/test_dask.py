"""dlbridge tensors through a live Dask cluster: LocalCluster with two worker
processes over TCP on loopback, started once per test session. Dask sends a
tensor's pickle-5 buffer as a frame of its own; the receiving worker gets a
tensor over the received frame."""

from __future__ import annotations

import logging
import sys

import cloudpickle
import dask
import dask.array as da
import numpy as np
import pytest
from distributed import Client, LocalCluster

import dlbridge

pytestmark = pytest.mark.sharing


@pytest.fixture(scope="session")
def dask_client():
    cloudpickle.register_pickle_by_value(sys.modules[__name__])
    cluster = LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
                           dashboard_address=None, silence_logs=logging.ERROR)
    client = Client(cluster)
    yield client
    client.close()
    cluster.close()


def describe(t):
    return type(t).__name__, t.shape, str(t.dtype), t.readonly, float(np.from_dlpack(t).sum())


def block(i):
    return dlbridge.from_dlpack(np.full((4, 5), i, dtype=np.float64))


def test_scatter_and_submit(dask_client):
    t = dlbridge.from_dlpack(np.arange(1000, dtype=np.float32).reshape(10, 100))
    future = dask_client.scatter(t)
    assert dask_client.submit(describe, future).result(timeout=120) == (
        "Tensor", (10, 100), "float32", False, float(np.arange(1000).sum()))


def test_tensors_as_arguments_and_results(dask_client):
    a = np.arange(12.0).reshape(3, 4)
    a.flags.writeable = False
    result = dask_client.submit(lambda t: t, dlbridge.from_dlpack(a.T)).result(timeout=120)
    assert type(result) is dlbridge.Tensor
    assert result.readonly, "the flag travels with the tensor"
    np.testing.assert_array_equal(np.from_dlpack(result), a.T)


def test_a_dask_array_of_dlbridge_tensors_sums_correctly(dask_client):
    blocks = [dask.delayed(block)(i) for i in range(6)]
    # Each block is made on a worker and may be read on the other one.
    arrays = [da.from_delayed(dask.delayed(dlbridge.convert)(b, "numpy"), shape=(4, 5), dtype=np.float64)
              for b in blocks]
    total = da.concatenate(arrays).sum().compute()
    assert total == 20 * sum(range(6))


def test_tensors_made_on_one_worker_are_read_on_another(dask_client):
    futures = dask_client.map(block, range(4))
    moved = dask_client.map(describe, futures, workers=list(dask_client.scheduler_info()["workers"])[:1])
    assert [m[4] for m in dask_client.gather(moved)] == [20.0 * i for i in range(4)]


# --- share_memory() tensors: their pickle names the segment, so a worker
# on this machine maps the client's very pages instead of receiving a frame.

def add_one_in_place(t):
    np.from_dlpack(t)[...] += 1
    return t.is_shared, t.readonly, dlbridge._share._shared_memory_info(t)[0]


def test_a_shared_tensor_reaches_a_worker_as_the_clients_pages(dask_client):
    t = dlbridge.empty((1000,), "float64", shared=True)
    np.from_dlpack(t)[...] = np.arange(1000.0)
    name = dlbridge._share._shared_memory_info(t)[0]
    assert dask_client.submit(add_one_in_place, t, pure=False).result(timeout=120) == (True, False, name)
    scattered = dask_client.scatter(t)
    assert dask_client.submit(add_one_in_place, scattered, pure=False).result(timeout=120) == (
        True, False, name)
    np.testing.assert_array_equal(np.from_dlpack(t), np.arange(1000.0) + 2)
    del scattered
