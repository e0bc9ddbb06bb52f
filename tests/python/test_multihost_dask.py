"""dlbridge tensors through a Dask cluster of three test hosts (tests/support/netns_hosts.py: separate
network namespaces on a bridge, each with its own /dev/shm): the scheduler and the client on h0, a worker
(without nanny) on h1 and on h2. What docs/distributed.md promises for Dask is checked on arrival on
another host, with the bytes counted on the receiving host's link; a shared-memory tensor is refused on
another host; and faults (a receiving worker killed mid-transfer, the worker holding scattered data killed
before it is read, a link cut for a moment) give the engine's own error or recovery, within bounded time.
The cluster starts once for the module; a killed worker is started again for the tests after it."""

from __future__ import annotations

import os
import signal
import sys
import time

import pytest

import multihost_cases as cases
from multihost_checks import (
    FIX, check_arrival, check_coded_refusal, counted, new_segments,
    report, segments, wait_for_progress,
)

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from engine_clusters import DriverError, start_dask, start_dask_worker  # noqa: E402


def dask_flags(sent: dict) -> tuple[int, bool]:
    """On arrival through Dask: the flags as sent, writable unless the tensor was read-only."""
    return sent["flags"], sent["readonly"]


@pytest.fixture(scope="module")
def dask_hosts(test_hosts):
    driver = start_dask(test_hosts)
    yield test_hosts, driver
    driver.interpreter.stop()


def check_zero_copy(received: dict, case: str) -> None:
    """A tensor wraps the frame Dask received when that frame is aligned for its dtype; Dask reads a
    message's frames into one buffer, so a frame lies wherever the frames before it end, and a misaligned
    one is copied once into aligned memory (docs/distributed.md). A tensor from a legacy capsule (JAX)
    arrives in a read-only frame and only ever wraps memory its receiver may write: copied once."""
    assert None not in received["frame_aligned"], "no frame of the tensor's size was received"
    expected = [aligned and case != "from_jax" for aligned in received["frame_aligned"]]
    assert received["in_received"] == expected


@pytest.mark.parametrize("case", list(cases.MAKERS))
def test_a_value_made_on_one_worker_host_arrives_on_another_as_the_docs_say(dask_hosts, case):
    hosts, driver = dask_hosts
    result, link = counted(hosts[2], lambda: driver.call("relay", case=case, source="h1", to="h2"))
    assert result["received"]["host"] == hosts[2].netns
    check_arrival(result["sent"]["describe"], result["received"]["describe"], case, dask_flags)
    assert link["rx"] >= result["sent"]["payload"], "the bytes did not cross h2's link"
    check_zero_copy(result["received"], case)


@pytest.mark.parametrize("route", ["scatter", "arg"])
def test_a_value_from_the_client_host_arrives_on_a_worker_host(dask_hosts, route):
    hosts, driver = dask_hosts
    result, link = counted(hosts[1], lambda: driver.call("send", case="dict", to="h1", route=route))
    check_arrival(result["sent"]["describe"], result["received"]["describe"], "dict", dask_flags)
    assert link["rx"] >= result["sent"]["payload"]
    check_zero_copy(result["received"], "dict")


def test_worker_to_worker_bypasses_the_scheduler_host(dask_hosts):
    hosts, driver = dask_hosts
    before = hosts[0].link_bytes()
    result = driver.call("relay", case="list", source="h2", to="h1")
    assert hosts[0].link_bytes()["rx"] - before["rx"] < result["sent"]["payload"]


def test_a_gathered_result_reaches_the_client_host(dask_hosts):
    hosts, driver = dask_hosts
    result, link = counted(hosts[0], lambda: driver.call("fetch", case="readonly", source="h2"))
    check_arrival(result["sent"]["describe"], result["received"]["describe"], "readonly", dask_flags)
    assert link["rx"] >= result["sent"]["payload"]


@pytest.mark.parametrize("case", ["dense", "strided", "zero_d", "size_0", "int4"])
def test_dask_sends_a_tensor_as_a_small_pickle_and_one_out_of_band_frame(dask_hosts, case):
    _, driver = dask_hosts
    seen = driver.call("serialization", case=case)
    assert seen["serializer"] == "pickle"
    assert seen["frames"][1:] == seen["tensors"], "one frame of the tensor's bytes"
    assert seen["frames"][0] < 300, "data went in-band"


def test_a_list_of_tensors_is_one_frame_per_tensor(dask_hosts):
    _, driver = dask_hosts
    seen = driver.call("serialization", case="list")
    assert sorted(f for f in seen["frames"] if f > 300) == sorted(t for t in seen["tensors"] if t > 300)


def test_a_shared_tensor_as_a_task_argument_takes_the_receiving_worker_down(dask_hosts):
    """Found here: the argument travels inside the scheduler's message to the worker; the worker cannot
    load it (dlbridge's DeviceUnavailableError, with the fix, in its log after Dask's CRITICAL "Failed to
    deserialize"), and Dask closes a worker that cannot read a message. The client sees KilledWorker
    (allowed-failures is 0 here; by default Dask tries three more workers, and loses each)."""
    hosts, driver = dask_hosts
    record = driver.call("send_shared", to="h1")
    revive(hosts, driver, hosts[1])
    assert record["type"] == "KilledWorker", record
    with open(os.path.join(hosts[1].tmpdir, "dask.err"), errors="replace") as f:
        log = f.read()
    assert "Failed to deserialize" in log
    assert "DeviceUnavailableError: Shared memory /dlbridge-" in log and FIX in log


def test_a_shared_tensor_from_a_worker_host_is_refused_on_the_client_host(dask_hosts):
    _, driver = dask_hosts
    check_coded_refusal(driver.call("fetch_shared", source="h2"))


# --- faults. The sending host's link is capped, so a 64 MiB transfer lasts seconds and a fault lands
# inside it. A killed worker is started again (and the client reconnected to it) before the next test.

FAULT_BYTES = 64 << 20
RATE_MBIT = 100


def revive(hosts, driver, host) -> None:
    """Starts the worker of host again (a new one is refused while the scheduler still lists the dead
    one under its name: then it is started once more) and reconnects the client's view of the workers."""
    for attempt in range(3):
        start_dask_worker(host, f"tcp://{hosts[0].address}:8786")
        try:
            driver.call("connect", address=f"tcp://{hosts[0].address}:8786", hosts=["h1", "h2"], seconds=60,
                        timeout=90)
            return
        except DriverError:
            if attempt == 2:
                raise


def test_a_receiving_worker_killed_mid_transfer_gives_dasks_killed_worker(dask_hosts):
    hosts, driver = dask_hosts
    shm_before = segments(hosts)
    pid = driver.call("connect", address=f"tcp://{hosts[0].address}:8786", hosts=["h1", "h2"], seconds=60,
                      timeout=90)["pids"]["h2"]
    hosts[1].limit_rate(RATE_MBIT)
    try:
        start = hosts[2].link_bytes()["rx"]
        driver.call("start_relay", source="h1", to="h2", nbytes=FAULT_BYTES)
        got = wait_for_progress(hosts[2], start, FAULT_BYTES, 0.2)
        assert got < FAULT_BYTES, "the transfer ended before the kill"
        os.kill(pid, signal.SIGKILL)
        outcome = report(driver.call("finish", seconds=60))
    finally:
        hosts[1].limit_rate(None)
    revive(hosts, driver, hosts[2])
    error = outcome["error"]
    assert error["type"] == "KilledWorker" and error["module"] == "distributed.scheduler", error
    assert outcome["seconds"] < 60
    assert not new_segments(hosts, shm_before)


def test_a_worker_killed_after_scatter_and_before_the_read_loses_the_data(dask_hosts):
    hosts, driver = dask_hosts
    shm_before = segments(hosts)
    pid = driver.call("connect", address=f"tcp://{hosts[0].address}:8786", hosts=["h1", "h2"], seconds=60,
                      timeout=90)["pids"]["h1"]
    driver.call("start_scatter", source="h1", nbytes=FAULT_BYTES)
    os.kill(pid, signal.SIGKILL)
    outcome = report(driver.call("get_on", to="h2", seconds=60))
    revive(hosts, driver, hosts[1])
    assert "error" in outcome, outcome
    assert outcome["error"]["module"].startswith(("distributed", "concurrent", "asyncio")), outcome["error"]
    assert outcome["seconds"] < 60
    assert not new_segments(hosts, shm_before)


def test_a_link_cut_for_a_moment_mid_transfer_recovers(dask_hosts):
    hosts, driver = dask_hosts
    shm_before = segments(hosts)
    hosts[1].limit_rate(RATE_MBIT)
    try:
        start = hosts[2].link_bytes()["rx"]
        expected = driver.call("start_relay", source="h1", to="h2", nbytes=FAULT_BYTES)["expected"]
        wait_for_progress(hosts[2], start, FAULT_BYTES, 0.2)
        hosts[2].set_link(False)
        time.sleep(2)
        hosts[2].set_link(True)
        outcome = report(driver.call("finish", seconds=120))
    finally:
        hosts[1].limit_rate(None)
    assert "value" in outcome, outcome
    assert outcome["value"]["describe"]["tensor"]["digest"] == expected
    check_zero_copy(outcome["value"], "dense")
    assert not new_segments(hosts, shm_before)
