"""Ray and Dask clusters across test hosts (tests/support/netns_hosts.py), each with a driver process on
host 0 that answers calls (tests/support/serve_calls.py). Used by tests/python/test_multihost_*.py and
bench/bench_multihost.py.

Ray 2.60: `ray start` per host (head on host 0), RAY_AUTH_MODE=disabled on every node and the driver (2.60
turns token authentication on), a RAY_TMPDIR per host, one resource named after each host (h0, h1, ...)
so that a task runs where it is told. Dask: a scheduler on host 0 and one worker per other host, without
nanny (a killed worker stays dead). Every process is stopped by PID by the hosts' teardown; `ray stop` is
never run (it kills every Ray process on the machine by name)."""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

from netns_hosts import Hosts
from worker_interpreter import WorkerInterpreter

ROOT = Path(__file__).resolve().parents[2]
PYTHONPATH = os.pathsep.join(str(ROOT / "tests" / p) for p in ("python", "support"))


class DriverError(AssertionError):
    """A driver's call failed or the driver died or hung; the message carries its traceback or stderr."""


class Driver:
    """A Python process on a test host running a driver module's serve loop."""

    def __init__(self, host, module: str, env: dict[str, str]):
        self.host = host
        self.interpreter = WorkerInterpreter(
            host.command([sys.executable, "-c", f"import {module} as d; d.main()"]), host.environment(env))

    def call(self, name: str, timeout: float = 240, **kwargs):
        answer = self.interpreter.run({"call": name, "kwargs": kwargs}, timeout)
        if isinstance(answer, str):
            raise DriverError(f"{name}: {answer}")
        if "error" in answer:
            error = answer["error"]
            raise DriverError(f"{name} raised {error['type']}: {error['message']}\n{error['traceback']}")
        return answer["value"]


def host_names(hosts: Hosts) -> list[str]:
    return [f"h{h.index}" for h in hosts]


def ray_environment(host) -> dict[str, str]:
    return {"RAY_AUTH_MODE": "disabled", "RAY_TMPDIR": host.tmpdir, "RAY_USAGE_STATS_ENABLED": "0",
            "PYTHONPATH": PYTHONPATH, "JAX_PLATFORMS": "cpu"}


def wait_for_port(host, port: int, timeout: float = 180) -> None:
    """Waits until something listens on host's address and port (asked from inside the host)."""
    probe = ("import socket, sys, time\n"
             f"deadline = time.monotonic() + {timeout}\n"
             "while time.monotonic() < deadline:\n"
             "    try:\n"
             f"        socket.create_connection(({host.address!r}, {port}), timeout=2).close(); sys.exit(0)\n"
             "    except OSError:\n"
             "        time.sleep(0.2)\n"
             "sys.exit(1)\n")
    if host.run([sys.executable, "-c", probe], timeout=timeout + 30).returncode != 0:
        raise DriverError(f"nothing listens on {host.address}:{port} after {timeout} s\n{logs(host)}")


def logs(host) -> str:
    """The end of every log this module's processes wrote on host."""
    text = []
    for name in sorted(os.listdir(host.tmpdir)):
        path = os.path.join(host.tmpdir, name)
        if name.endswith((".log", ".err")) and os.path.isfile(path):
            with open(path, errors="replace") as f:
                text.append(f"--- {host.netns} {name}:\n{f.read()[-3000:]}")
    return "\n".join(text)


def _log(host, name: str):
    return open(os.path.join(host.tmpdir, name), "a")


def start_ray(hosts: Hosts, object_store_bytes: int = 400_000_000, port: int = 6379,
              timeout: float = 240) -> Driver:
    """A Ray node per host (the head on host 0 first, then one node at a time, each started again if it
    gives up, as `ray start` does when the machine is too busy for its startup deadline) and a driver on
    host 0."""
    head = hosts[0]

    def start_node(host):
        argv = [sys.executable, "-m", "ray.scripts.scripts", "start", "--block", "--disable-usage-stats",
                f"--node-ip-address={host.address}", "--num-cpus=1",
                f"--resources={json.dumps({f'h{host.index}': 100})}",
                f"--object-store-memory={object_store_bytes}"]
        if host is head:
            argv += ["--head", f"--port={port}", "--include-dashboard=false"]
        else:
            argv += [f"--address={head.address}:{port}"]
        return host.popen(argv, env=ray_environment(host), stdout=_log(host, "ray.log"),
                          stderr=_log(host, "ray.err"))

    start_node(head)
    wait_for_port(head, port)
    driver = Driver(head, "multihost_ray_driver", ray_environment(head))
    driver.call("connect", address=f"{head.address}:{port}", timeout=timeout)
    deadline = time.monotonic() + timeout
    for host in hosts:
        name = f"h{host.index}"
        node = start_node(host) if host is not head else None
        while name not in driver.call("nodes", hosts=host_names(hosts)):
            if time.monotonic() > deadline:
                raise DriverError(f"{name} did not join the Ray cluster in {timeout} s\n"
                                  + "\n".join(logs(h) for h in hosts))
            if node is not None and node.poll() is not None:
                node = start_node(host)
            time.sleep(0.5)
    return driver


def dask_environment(host) -> dict[str, str]:
    return {"PYTHONPATH": PYTHONPATH, "JAX_PLATFORMS": "cpu",
            # A worker that dies while it runs a task fails that task at once (KilledWorker) instead of
            # retrying it on another worker: the fault tests see the engine's own error.
            "DASK_DISTRIBUTED__SCHEDULER__ALLOWED_FAILURES": "0"}


def start_dask_worker(host, scheduler: str) -> None:
    host.popen([sys.executable, "-m", "distributed.cli.dask_worker", scheduler, "--host", host.address,
                "--nthreads", "1", "--no-dashboard", "--no-nanny", "--memory-limit", "3GiB",
                "--name", f"h{host.index}", "--resources", f"h{host.index}=100"],
               env=dask_environment(host), stdout=_log(host, "dask.log"), stderr=_log(host, "dask.err"))


def start_dask(hosts: Hosts, port: int = 8786) -> Driver:
    """A Dask scheduler on host 0, a worker on every other host once it listens, and a client on host 0."""
    head = hosts[0]
    scheduler = f"tcp://{head.address}:{port}"
    head.popen([sys.executable, "-m", "distributed.cli.dask_scheduler", "--host", head.address,
                "--port", str(port), "--no-dashboard"], env=dask_environment(head),
               stdout=_log(head, "dask.log"), stderr=_log(head, "dask.err"))
    wait_for_port(head, port)
    for host in hosts.hosts[1:]:
        start_dask_worker(host, scheduler)
    driver = Driver(head, "multihost_dask_driver", dask_environment(head))
    try:
        driver.call("connect", address=scheduler, hosts=host_names(hosts)[1:], timeout=300)
    except DriverError as exc:
        raise DriverError(f"{exc}\n" + "\n".join(logs(h) for h in hosts)) from None
    return driver
