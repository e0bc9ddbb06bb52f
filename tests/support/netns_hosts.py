"""Test hosts on one machine: each host is a network namespace joined to the others by a bridge, plus a
private mount namespace with a /dev/shm (a tmpfs) of its own, so that what one host puts in shared memory
cannot be opened on another -- as on separate machines -- and its own temp directory.

    with Hosts(3) as hosts:              # hosts[0].address == "10.213.0.1", ...
        p = hosts[0].popen(["python", "-c", "..."])
        hosts[1].link_bytes()            # {"rx": ..., "tx": ...} of the host's interface

Addresses exist only inside the namespaces made here (10.213.0.0/24 on a bridge in a namespace of its own;
no default route, nothing on the machine's own interfaces). Names are unique per run
(dlbh-<pid>-<random>-...), so parallel runs do not collide; a run whose pytest died without tearing down
(SIGKILL) is swept by the next one, by name. Teardown stops every process of each host by PID
(`ip netns pids`): SIGTERM, then SIGKILL; never by a process name (`ray stop` would kill every Ray on the
machine)."""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import json
import os
import secrets
import shutil
import signal
import subprocess
import tempfile
import time

PREFIX = "dlbh-"
SUBNET = "10.213.0"
INTERFACE = "eth0"
_PR_SET_PDEATHSIG = 1


class CannotMakeHosts(RuntimeError):
    """This machine cannot make test hosts (not root, no iproute2, namespaces refused)."""


def _ip(*args: str, check: bool = True, timeout: float = 20) -> subprocess.CompletedProcess:
    return subprocess.run(["ip", *args], capture_output=True, text=True, check=check, timeout=timeout)


def why_hosts_cannot_be_made() -> str | None:
    """None where this process may make network and mount namespaces, else the reason."""
    if os.geteuid() != 0:
        return "test hosts need root (network and mount namespaces)"
    for tool in ("ip", "tc", "nsenter", "unshare", "mount"):
        if shutil.which(tool) is None:
            return f"test hosts need {tool!r}, which is not on PATH"
    probe = f"{PREFIX}{os.getpid()}-probe-{secrets.token_hex(3)}"
    made = _ip("netns", "add", probe, check=False)
    if made.returncode != 0:
        return f"`ip netns add` is refused here: {made.stderr.strip()}"
    _ip("netns", "del", probe, check=False)
    return None


def _netns_pids(netns: str) -> list[int]:
    out = _ip("netns", "pids", netns, check=False).stdout
    return [int(p) for p in out.split()]


def _is_resource_tracker(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return b"multiprocessing.resource_tracker" in f.read()
    except OSError:
        return False


def _stop_pids(pids_of, grace: float) -> list[int]:
    """Stops every pid pids_of() lists; returns the pids that survived. SIGTERM, then SIGKILL, to all but
    Python's resource trackers (they ignore SIGTERM); the trackers then see their programs gone and unlink
    the shared memory those left, as on a real machine, and are given a few seconds to; then SIGKILL to
    what is left."""
    def others(pid):
        return not _is_resource_tracker(pid)

    def every(pid):
        return True

    # (signal or None to only wait, which pids get it, how long to wait for them)
    rounds = ((signal.SIGTERM, others, grace), (signal.SIGKILL, others, 5.0), (None, every, 5.0),
              (signal.SIGKILL, every, 5.0))
    for sig, chosen, wait in rounds:
        for pid in pids_of():
            if sig is not None and chosen(pid):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, sig)
        deadline = time.monotonic() + wait
        # A round ends early once only the processes it spared are left.
        while any(chosen(p) for p in pids_of()) and time.monotonic() < deadline:
            time.sleep(0.05)
    return pids_of()


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def sweep_stale() -> list[str]:
    """Removes the namespaces of earlier runs whose pytest is gone (killed before its teardown)."""
    removed = []
    for line in _ip("netns", "list", check=False).stdout.splitlines():
        name = line.split()[0] if line.split() else ""
        if not name.startswith(PREFIX):
            continue
        try:
            owner = int(name[len(PREFIX):].split("-")[0])
        except ValueError:
            owner = -1  # not a name this module makes: removed too
        if owner > 0 and _pid_alive(owner):
            continue
        _stop_pids(lambda n=name: _netns_pids(n), grace=1.0)
        _ip("netns", "del", name, check=False)
        removed.append(name)
    return removed


def _die_with_parent() -> None:
    # The anchor dies with the process that made it; ip, unshare and sh exec into it, keeping the signal.
    ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


class Host:
    """One test host: its network namespace, the anchor process holding its mount namespace (with the
    private /dev/shm), its address and temp directory."""

    def __init__(self, index: int, netns: str, address: str, tmpdir: str, anchor: subprocess.Popen):
        self.index, self.netns, self.address, self.tmpdir, self.anchor = index, netns, address, tmpdir, anchor
        self.processes: list[subprocess.Popen] = []

    def __repr__(self) -> str:
        return f"Host({self.netns}, {self.address})"

    def command(self, argv: list[str]) -> list[str]:
        """argv run inside this host: its network namespace and its mount namespace (private /dev/shm)."""
        return ["nsenter", f"--target={self.anchor.pid}", "--net", "--mount", "--", *argv]

    def environment(self, extra: dict[str, str] | None = None) -> dict[str, str]:
        env = dict(os.environ)
        env.update({"TMPDIR": self.tmpdir, "DLBRIDGE_TEST_HOST": self.netns})
        env.update(extra or {})
        return env

    def popen(self, argv: list[str], env: dict[str, str] | None = None, **kwargs) -> subprocess.Popen:
        process = subprocess.Popen(self.command(argv), env=self.environment(env), **kwargs)
        self.processes.append(process)
        return process

    def run(self, argv: list[str], timeout: float = 60, **kwargs) -> subprocess.CompletedProcess:
        return subprocess.run(self.command(argv), env=self.environment(), capture_output=True, text=True,
                              timeout=timeout, **kwargs)

    def pids(self) -> list[int]:
        """Every process in this host's network namespace, the anchor included."""
        return _netns_pids(self.netns)

    def link_bytes(self) -> dict[str, int]:
        """The kernel's byte counters of this host's interface (what crossed the link), read from the
        /sys that `ip netns exec` mounted for the host (a file read: fast enough to poll mid-transfer)."""
        stats = f"/proc/{self.anchor.pid}/root/sys/class/net/{INTERFACE}/statistics"
        try:
            with open(f"{stats}/rx_bytes") as rx, open(f"{stats}/tx_bytes") as tx:
                return {"rx": int(rx.read()), "tx": int(tx.read())}
        except OSError:
            shown = json.loads(_ip("-n", self.netns, "-s", "-j", "link", "show", INTERFACE).stdout)[0]
            return {"rx": shown["stats64"]["rx"]["bytes"], "tx": shown["stats64"]["tx"]["bytes"]}

    def set_link(self, up: bool) -> None:
        _ip("-n", self.netns, "link", "set", INTERFACE, "up" if up else "down")

    def limit_rate(self, mbit: int | None) -> None:
        """Caps what this host sends (a token bucket on its interface), so that a large transfer lasts long
        enough for a fault to land in its middle; None lifts the cap."""
        if mbit is None:
            subprocess.run(["tc", "-n", self.netns, "qdisc", "del", "dev", INTERFACE, "root"],
                           capture_output=True, timeout=20)
        else:
            subprocess.run(["tc", "-n", self.netns, "qdisc", "replace", "dev", INTERFACE, "root", "tbf", "rate",
                            f"{mbit}mbit", "burst", "256kb", "latency", "500ms"],
                           check=True, capture_output=True, timeout=20)

    def shm(self) -> list[str]:
        """The names in this host's own /dev/shm."""
        return sorted(os.listdir(f"/proc/{self.anchor.pid}/root/dev/shm"))


class Hosts:
    """N test hosts on one bridge. A context manager; teardown also runs at exit if the owner forgot."""

    def __init__(self, count: int, shm_size: str = "2g"):
        reason = why_hosts_cannot_be_made()
        if reason:
            raise CannotMakeHosts(reason)
        sweep_stale()
        self.run_id = f"{PREFIX}{os.getpid()}-{secrets.token_hex(3)}"
        self.switch = f"{self.run_id}-sw"
        self.hosts: list[Host] = []
        self.workdir = tempfile.mkdtemp(prefix=f"{self.run_id}-")
        self.report: dict = {}
        self._torn_down = False
        atexit.register(self.teardown)
        try:
            self._make(count, shm_size)
        except BaseException:
            self.teardown()
            raise

    def _make(self, count: int, shm_size: str) -> None:
        _ip("netns", "add", self.switch)
        _ip("-n", self.switch, "link", "add", "br0", "type", "bridge")
        _ip("-n", self.switch, "link", "set", "br0", "up")
        for i in range(count):
            netns = f"{self.run_id}-h{i}"
            address = f"{SUBNET}.{i + 1}"
            _ip("netns", "add", netns)
            # Both ends are made inside namespaces of this run: no interface of the machine's own is touched.
            _ip("-n", self.switch, "link", "add", f"p{i}", "type", "veth", "peer", "name", INTERFACE,
                "netns", netns)
            _ip("-n", self.switch, "link", "set", f"p{i}", "master", "br0", "up")
            _ip("-n", netns, "addr", "add", f"{address}/24", "dev", INTERFACE)
            _ip("-n", netns, "link", "set", INTERFACE, "up")
            _ip("-n", netns, "link", "set", "lo", "up")
            tmpdir = os.path.join(self.workdir, f"h{i}")
            os.makedirs(tmpdir)
            anchor = subprocess.Popen(
                ["ip", "netns", "exec", netns, "unshare", "--mount", "--propagation", "private", "sh", "-c",
                 f"mount -t tmpfs -o size={shm_size} tmpfs /dev/shm && echo ready && exec sleep infinity"],
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, preexec_fn=_die_with_parent)
            # Appended before the wait, so that a failed start is torn down too.
            self.hosts.append(Host(i, netns, address, tmpdir, anchor))
            if anchor.stdout.readline().strip() != "ready":
                raise CannotMakeHosts(f"host {netns}: private /dev/shm not mounted: {anchor.stderr.read()}")

    def __enter__(self) -> Hosts:
        return self

    def __exit__(self, *exc) -> None:
        self.teardown()

    def __getitem__(self, i: int) -> Host:
        return self.hosts[i]

    def __len__(self) -> int:
        return len(self.hosts)

    def stop_processes(self, grace: float = 5.0) -> list[int]:
        """Stops every process of every host but the anchors (so each /dev/shm can still be read), all
        hosts at once; returns the pids that survived SIGKILL (none, normally)."""
        def pids():
            return [p for h in self.hosts for p in h.pids() if p != h.anchor.pid]

        survivors = _stop_pids(pids, grace)
        for host in self.hosts:
            for process in host.processes:
                with contextlib.suppress(subprocess.TimeoutExpired):
                    process.wait(timeout=1)
        return survivors

    def teardown(self) -> dict:
        """Stops every process by PID, records what each host's /dev/shm still held, removes the namespaces
        and the temp directories. Idempotent; the record is self.report."""
        if self._torn_down:
            return self.report
        self._torn_down = True
        atexit.unregister(self.teardown)
        survivors = self.stop_processes()
        shm = {}
        for host in self.hosts:
            with contextlib.suppress(OSError):
                shm[host.netns] = host.shm()
        for host in self.hosts:
            _stop_pids(lambda h=host: _netns_pids(h.netns), grace=1.0)
            with contextlib.suppress(subprocess.TimeoutExpired):
                host.anchor.wait(timeout=5)
            for stream in (host.anchor.stdout, host.anchor.stderr):
                if stream:
                    stream.close()
        for name in [h.netns for h in self.hosts] + [self.switch]:
            _ip("netns", "del", name, check=False)
        shutil.rmtree(self.workdir, ignore_errors=True)
        left = [line.split()[0] for line in _ip("netns", "list", check=False).stdout.splitlines()
                if line.startswith(self.run_id)]
        self.report = {"survivors": survivors, "shm_at_stop": shm,
                       "namespaces_left": left}
        return self.report


def hosts_for_pytest(count: int) -> Hosts:
    """Hosts for a test module: where they cannot be made, a skip with the reason, or under CI=true (where
    the tier must run) a failure."""
    import pytest

    try:
        return Hosts(count)
    except CannotMakeHosts as exc:
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI must run the multi-host tier: {exc}")
        pytest.skip(f"no test hosts: {exc}")
