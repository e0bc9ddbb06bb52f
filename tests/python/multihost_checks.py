"""Checks shared by tests/python/test_multihost_ray.py and test_multihost_dask.py, on the test's side
(the machine that made the hosts): bytes on a host's link, segments in its /dev/shm, what arrived."""

from __future__ import annotations

import time


def counted(host, call):
    """call()'s result and the bytes the host's interface received and sent meanwhile."""
    before = host.link_bytes()
    result = call()
    after = host.link_bytes()
    link = {k: after[k] - before[k] for k in before}
    print(f"link of {host.netns}: {link}")  # shown with pytest -s: the figures for a report
    return result, link


def segments(hosts) -> dict:
    """The dlbridge segments in each host's own /dev/shm."""
    return {host.netns: [n for n in host.shm() if n.startswith("dlbridge-")] for host in hosts}


def new_segments(hosts, before: dict) -> dict:
    """The dlbridge segments that appeared in each host's /dev/shm since `before` (segments(hosts))."""
    now = segments(hosts)
    return {name: sorted(set(now[name]) - set(before[name])) for name in now if set(now[name]) - set(before[name])}


def wait_for_progress(host, start: int, nbytes: int, fraction: float, timeout: float = 60) -> int:
    """Waits until host has received fraction of nbytes since its counter read start; returns the count."""
    deadline = time.monotonic() + timeout
    got = 0
    while time.monotonic() < deadline:
        got = host.link_bytes()["rx"] - start
        if got >= fraction * nbytes:
            return got
        time.sleep(0.02)
    raise AssertionError(f"{host} received {got} of {nbytes} bytes in {timeout} s")


def compact_strides(shape: list[int]) -> list[int]:
    strides, step = [], 1
    for n in reversed(shape):
        strides.insert(0, step)
        step *= max(n, 1)
    return strides


def report(outcome: dict) -> dict:
    """Prints what a fault gave the user (shown with pytest -s) and returns it."""
    shown = {k: v for k, v in outcome.items() if k != "value"}
    if "error" in shown:
        shown["error"] = {k: shown["error"][k] for k in ("type", "module", "message")}
        shown["error"]["message"] = shown["error"]["message"][:300]
    print(f"fault outcome: {shown}")
    return outcome


def check_arrival(sent: dict, received: dict, case: str, flags_on_arrival) -> None:
    """Values (bit for bit), dtype, shape and device as sent; a dense layout as it was and a layout with
    gaps (the "strided" case) compacted; the flags and writability flags_on_arrival(sent) gives; the
    lists and dict keys of the value kept."""
    if "tensor" in sent:
        s, r = sent["tensor"], received["tensor"]
        assert r["type"] == "Tensor"
        assert (r["dtype"], r["shape"], r["digest"], r["device"]) == (s["dtype"], s["shape"], s["digest"], "cpu")
        assert r["strides"] == (compact_strides(s["shape"]) if case == "strided" else s["strides"])
        assert (r["flags"], r["readonly"]) == flags_on_arrival(s)
        assert not r["shared"]
        return
    kind = next(iter(sent))
    assert set(received) == {kind}
    if kind == "list":
        assert len(received["list"]) == len(sent["list"])
        for s, r in zip(sent["list"], received["list"]):
            check_arrival(s, r, case, flags_on_arrival)
    else:
        assert list(received["dict"]) == list(sent["dict"])
        for key in sent["dict"]:
            check_arrival(sent["dict"][key], received["dict"][key], case, flags_on_arrival)


# The fix dlbridge's refusal of a shared tensor on another machine gives.
FIX = "send t.copy() to another machine"


def check_coded_refusal(record: dict) -> None:
    """A shared-memory tensor loaded on another host: dlbridge's own exception reached the user, with its
    code and the fix."""
    assert record["is_device_unavailable"], record
    assert "DeviceUnavailableError" in record["mro"]
    assert record["dlbridge"]["code"] == "device_unavailable"
    assert FIX in record["dlbridge"]["hint"], record["dlbridge"]["hint"]


def check_refusal_text(record: dict) -> None:
    """The refusal as text inside an engine's own exception: dlbridge's class, message and fix."""
    assert "dlbridge.errors.DeviceUnavailableError: Shared memory /dlbridge-" in record["message"], record
    assert "is not available on this machine" in record["message"] and FIX in record["message"]
