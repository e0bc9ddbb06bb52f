"""The test hosts of the multi-host tier (tests/support/netns_hosts.py): separate /dev/shm and network,
no route out, teardown by PID that leaves nothing, stale runs swept, and the skip (or, under CI=true, the
failure) where hosts cannot be made."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
import netns_hosts  # noqa: E402


def test_each_host_has_its_own_dev_shm(test_hosts):
    made = test_hosts[0].run(["sh", "-c", "echo x > /dev/shm/dlbh-probe"])
    assert made.returncode == 0, made.stderr
    try:
        assert "dlbh-probe" in test_hosts[0].shm()
        assert "dlbh-probe" not in test_hosts[1].shm()
        assert not os.path.exists("/dev/shm/dlbh-probe"), "the machine's own /dev/shm was written"
    finally:
        os.unlink(f"/proc/{test_hosts[0].anchor.pid}/root/dev/shm/dlbh-probe")


def test_hosts_reach_each_other_and_nothing_else(test_hosts):
    routes = test_hosts[1].run(["ip", "route"]).stdout
    assert "default" not in routes and f"{netns_hosts.SUBNET}.0/24" in routes
    probe = f"import socket; socket.create_connection(('{test_hosts[2].address}', 9), timeout=5)"
    refused = test_hosts[0].run([sys.executable, "-c", probe])
    assert "ConnectionRefusedError" in refused.stderr, refused.stderr  # h2 answered: nothing listens there


def test_teardown_stops_every_process_by_pid_and_removes_the_namespaces():
    hosts = netns_hosts.Hosts(1)
    stubborn = hosts[0].popen(["sh", "-c", "trap '' TERM; sleep 300"])
    plain = hosts[0].popen(["sleep", "300"])
    report = hosts.teardown()
    assert stubborn.wait(timeout=5) is not None and plain.wait(timeout=5) is not None
    assert report["survivors"] == [] and report["namespaces_left"] == []
    listed = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    assert hosts.run_id not in listed


def test_a_run_whose_owner_died_is_swept():
    gone = subprocess.Popen(["true"])
    gone.wait()
    stale = f"{netns_hosts.PREFIX}{gone.pid}-000000-h0"
    subprocess.run(["ip", "netns", "add", stale], check=True)
    assert stale in netns_hosts.sweep_stale()
    assert stale not in subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout


@pytest.mark.parametrize("ci", ["", "true"])
def test_without_root_the_tier_skips_with_the_reason_except_in_ci(monkeypatch, ci):
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    monkeypatch.setenv("CI", ci)
    expected = pytest.fail.Exception if ci else pytest.skip.Exception
    with pytest.raises(expected, match="test hosts need root"):
        netns_hosts.hosts_for_pytest(3)
