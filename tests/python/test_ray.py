"""dlbridge tensors through a live local Ray cluster (ray.init(num_cpus=2),
started once per test session): ray.put / ray.get, task arguments and
results. On one node the tensor a process receives lies in the object
store's shared mapping -- no copy -- and is read-only, so no consumer may
write into the store."""

from __future__ import annotations

import os

import ml_dtypes
import numpy as np
import pytest
import ray
import torch

import dlbridge

pytestmark = pytest.mark.sharing

READ_ONLY = 1
# Ray inlines objects under 100 KiB in its messages; these are above that,
# so they are stored in (and read from) the shared object store.
LARGE = 1 << 18


@pytest.fixture(scope="session")
def ray_cluster():
    # Ray's workers inherit the environment of the processes ray.init starts,
    # and import task functions from this module by name.
    tests = os.path.dirname(os.path.abspath(__file__))
    saved = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (tests, saved) if p)
    try:
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False,
                 object_store_memory=128 << 20, configure_logging=False)
    finally:
        if saved is None:
            del os.environ["PYTHONPATH"]
        else:
            os.environ["PYTHONPATH"] = saved
    yield ray
    ray.shutdown()


def store_mapping(address: int) -> str:
    """The file behind the mapping of this process that holds address."""
    with open("/proc/self/maps") as maps:
        for line in maps:
            fields = line.split()
            low, high = (int(x, 16) for x in fields[0].split("-"))
            if low <= address < high:
                return " ".join(fields[5:])
    return ""


def in_object_store(address: int) -> bool:
    return "plasma" in store_mapping(address)


@ray.remote
def describe(t):
    return {"type": type(t).__name__, "readonly": t.readonly, "in_store": in_object_store(t.data_ptr),
            "sum": float(np.from_dlpack(t).sum())}


@ray.remote
def make_tensor(n):
    return dlbridge.from_dlpack(np.arange(n, dtype=np.float32))


def test_put_and_get_share_the_store_and_are_read_only(ray_cluster):
    a = np.arange(LARGE, dtype=np.float32)
    ref = ray.put(dlbridge.from_dlpack(a))
    first, second = ray.get(ref), ray.get(ref)
    assert type(first) is dlbridge.Tensor
    assert first.readonly and first.flags & READ_ONLY
    assert in_object_store(first.data_ptr), store_mapping(first.data_ptr)
    assert second.data_ptr == first.data_ptr, "both gets view the one stored copy"
    np.testing.assert_array_equal(np.from_dlpack(first), a)
    assert not np.from_dlpack(first).flags.writeable
    assert dlbridge.inspect_capsule(first.__dlpack__(max_version=(1, 3)))["flags"] & READ_ONLY


def test_a_task_argument_arrives_in_the_workers_store_mapping(ray_cluster):
    t = dlbridge.from_dlpack(np.ones(LARGE, dtype=np.float32))
    for argument in (t, ray.put(t)):
        seen = ray.get(describe.remote(argument), timeout=120)
        assert seen == {"type": "Tensor", "readonly": True, "in_store": True, "sum": float(LARGE)}


def test_a_task_result_arrives_in_the_store(ray_cluster):
    result = ray.get(make_tensor.remote(LARGE), timeout=120)
    assert type(result) is dlbridge.Tensor and result.readonly
    assert in_object_store(result.data_ptr)
    np.testing.assert_array_equal(np.from_dlpack(result), np.arange(LARGE, dtype=np.float32))


def test_torch_never_writes_into_the_store(ray_cluster):
    stored = ray.get(ray.put(dlbridge.from_dlpack(np.zeros(LARGE, dtype=np.float32))))
    with pytest.raises(dlbridge.ReadOnlyError):
        dlbridge.convert(stored, "torch", copy=False)
    private = dlbridge.convert(stored, "torch")  # torch cannot see READ_ONLY: one private copy
    assert isinstance(private, torch.Tensor)
    assert private.data_ptr() != stored.data_ptr
    private += 1
    assert float(np.from_dlpack(stored).sum()) == 0.0


def test_strided_and_extension_dtypes_survive_a_task(ray_cluster):
    strided = np.arange(64.0).reshape(8, 8)[::2, ::-3]
    bf16 = np.linspace(-2, 2, 12).astype(ml_dtypes.bfloat16).reshape(3, 4).T
    for a in (strided, bf16):
        back = ray.get(ray.put(dlbridge.from_dlpack(a)))
        assert back.dtype == dlbridge.from_dlpack(a).dtype
        np.testing.assert_array_equal(dlbridge.convert(back, "numpy"), a)


# --- share_memory() tensors: the pickle carries a segment name, not the data,
# so a task on this machine maps the driver's very pages (writable, outside
# the object store) instead of a read-only copy in the store.

@ray.remote
def add_one_in_place(t):
    np.from_dlpack(t)[...] += 1
    return {"shared": t.is_shared, "readonly": t.readonly,
            "name": dlbridge._share._shared_memory_info(t)[0], "mapping": store_mapping(t.data_ptr)}


def shared_arange(n: int):
    t = dlbridge.empty((n,), "float32", shared=True)
    np.from_dlpack(t)[...] = np.arange(n, dtype=np.float32)
    return t


def test_a_shared_tensor_reaches_a_task_as_the_drivers_pages(ray_cluster):
    t = shared_arange(LARGE)
    name = dlbridge._share._shared_memory_info(t)[0]
    for argument in (t, ray.put(t)):
        seen = ray.get(add_one_in_place.remote(argument), timeout=120)
        assert seen["shared"] and not seen["readonly"]
        assert seen["name"] == name, "the worker mapped another segment"
        assert seen["mapping"].startswith("/dev/shm" + name), seen["mapping"]
    # Both writes landed in the driver's memory: no copy went either way.
    np.testing.assert_array_equal(np.from_dlpack(t), np.arange(LARGE, dtype=np.float32) + 2)


def test_a_shared_tensor_through_the_store_is_a_view_of_the_same_pages(ray_cluster):
    t = shared_arange(LARGE)
    got = ray.get(ray.put(t))
    assert got.is_shared and not in_object_store(got.data_ptr)
    assert dlbridge._share._shared_memory_info(got)[0] == dlbridge._share._shared_memory_info(t)[0]
    np.from_dlpack(got)[0] = -7
    assert np.from_dlpack(t)[0] == -7
