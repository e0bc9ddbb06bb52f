"""The child process that performs the doctor's exchanges, so that a consumer which kills
its process (PyTorch on negative strides) costs one case, not the whole report.

Protocol: one JSON plan on stdin; JSON lines on the file descriptor the plan names
(stdout by default), written whole by one os.write each so that lines from the two
processes below never interleave:
  {"importing": name} / {"imported": name}       around each library import
  {"start": i, "lane": L} / {"done": i, "lane": L, "result": {...}}   around each task
The parent (runner.py) gives every step a deadline and knows from these lines which
import or task was running when the process died or stopped answering.

The libraries are imported first, before any is used. Tasks marked "isolate" (exchanges
known to kill their process) then run in a fork of that untouched process, one fresh
fork each (lane "isolated"), so a crash costs a fork rather than importing the libraries
again; the others run here, in order (lane "main").
"""

from __future__ import annotations

import importlib
import json
import os
import select
import signal
import sys
import tempfile
import time
import warnings

from .._parent_death import end_with_parent

# A write of at most PIPE_BUF bytes to a pipe is atomic (POSIX guarantees 512; Linux 4096).
_ATOMIC = 4096


class _Channel:
    """The protocol's lines, each written whole."""

    def __init__(self, fd: int):
        self.fd = fd

    def send(self, message: dict) -> None:
        line = json.dumps(message, default=str)
        if len(line.encode()) >= _ATOMIC:
            line = json.dumps(_shortened(message), default=str)
        os.write(self.fd, (line + "\n").encode())


def _shortened(message: dict) -> dict:
    """The message with every long string cut, so that it fits one atomic write."""
    if isinstance(message, dict):
        return {k: _shortened(v) for k, v in message.items()}
    if isinstance(message, list):
        return [_shortened(v) for v in message]
    return message[:200] if isinstance(message, str) else message


class _Libraries(dict):
    """The libraries imported so far: each on the first task that needs it, so a worker
    restarted after a crash pays only for what its remaining tasks touch."""

    def __init__(self):
        super().__init__()
        self.missing = {}

    def absent(self, names) -> list:
        from .libraries import discover

        todo = [n for n in names if n not in self and n not in self.missing]
        if todo:
            loaded, missing = discover(todo)
            self.update(loaded)
            self.missing.update({k: v for k, v in missing.items() if k not in loaded})
        return [n for n in names if n not in self]


def _cannot_make(task) -> str | None:
    """Why the producer cannot make this case, when that is known without importing it."""
    from .cases import by_name
    from .libraries import cannot_make

    decide = cannot_make(task.get("producer") or "")
    if task["kind"] != "case" or decide is None:
        return None
    return decide(by_name(task["case"]).build())


def needed_libraries(tasks) -> list[str]:
    """The libraries these tasks import: their producers and consumers, except where a
    producer is known not to make the case."""
    names = []
    for task in tasks:
        if _cannot_make(task) is not None:
            continue
        names += [n for n in (task.get("producer"), task.get("consumer")) if n and n not in names]
    return names


def preload(names, channel: _Channel) -> None:
    """Import the libraries' modules, and nothing more: no library has run anything yet when
    the isolated lane forks, so the forks start from a clean state."""
    from .libraries import import_order, importable, module_name

    for name in import_order(names):
        if not importable(name):
            continue
        channel.send({"importing": name})
        try:
            importlib.import_module(module_name(name))
        except Exception:
            pass  # discover() reports the broken install against the tasks that need it
        channel.send({"imported": name})


def _run(task, libs: _Libraries):
    from . import exchange

    kind = task["kind"]
    if (why := _cannot_make(task)) is not None:
        # What exchange.run_case reports when make() raises NotApplicable, minus the import.
        return {"producer": task["producer"], "consumer": task["consumer"], "case": task["case"],
                "route": task["route"], "status": exchange.NA, "error": None, "readonly": None, "note": why}
    needed = [n for n in (task.get("producer"), task.get("consumer")) if n]
    absent = libs.absent(needed)
    if absent:
        why = "; ".join(f"{n}: {libs.missing.get(n, 'not loaded')}" for n in absent)
        return exchange.settled(task, exchange.NA, note=why)
    if kind == "producer":
        return exchange.producer_info(libs[task["producer"]])
    if kind == "probe":
        return exchange.probe_pair(libs, task["producer"], task["consumer"], task["number"], task["repeat"])
    return exchange.run_case(libs, task["producer"], task["consumer"], task["case"], task["route"])


def _run_reported(task, libs: _Libraries) -> dict:
    from . import exchange

    try:
        return _run(task, libs)
    except Exception as exc:  # a bug in an adapter is reported against its task
        return exchange.settled(task, exchange.FAILS, exchange.error_info(exc))


def _main_lane(tasks, channel: _Channel) -> None:
    libs = _Libraries()
    for index, task in tasks:
        channel.send({"start": index, "lane": "main"})
        channel.send({"done": index, "lane": "main", "result": _run_reported(task, libs)})


def _read_until_exit(fd: int, pid: int, deadline: float) -> tuple[bytes, int | None]:
    """What the fork wrote, and its wait status; None when it outlived the deadline (then killed)."""
    data = b""
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            return data, None
        ready, _, _ = select.select([fd], [], [], left)
        if ready:
            chunk = os.read(fd, 65536)
            if chunk:
                data += chunk
                continue
            return data, os.waitpid(pid, 0)[1]


def _default_fatal_signals() -> None:
    """Let a crash end the process at once. Libraries install handlers for fatal signals that
    print their own reports (Paddle's takes seconds on a SIGSEGV); C++'s "what():" line, which
    the report keeps, is printed before the abort and does not need them."""
    for name in ("SIGSEGV", "SIGFPE", "SIGABRT", "SIGBUS", "SIGILL"):
        if hasattr(signal, name):
            signal.signal(getattr(signal, name), signal.SIG_DFL)


def _isolated_task(task, seconds: float) -> dict:
    """Run one task in a fork of this process; its death or hang is this task's result."""
    from . import exchange
    from .runner import crash_detail, describe_exit

    read_end, write_end = os.pipe()
    with tempfile.TemporaryFile() as stderr:
        me = os.getpid()
        pid = os.fork()
        if pid == 0:  # the fork: run, answer, and leave without Python's exit handlers
            end_with_parent(me)
            os.close(read_end)
            os.dup2(stderr.fileno(), 2)
            _default_fatal_signals()
            os.write(write_end, json.dumps(_run_reported(task, _Libraries()), default=str).encode())
            os._exit(0)
        os.close(write_end)
        try:
            data, status = _read_until_exit(read_end, pid, time.monotonic() + seconds)
        finally:
            os.close(read_end)
        if status is None:
            return exchange.settled(task, exchange.HANGS, exchange.hang_error(task, seconds))
        if os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0 and data:
            return json.loads(data)
        stderr.seek(0)
        text = stderr.read().decode(errors="replace")
    returncode = -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)
    error = exchange.crash_error(task, describe_exit(returncode), crash_detail(text))
    return exchange.settled(task, exchange.CRASH, error)


def _isolated_lane(tasks, channel: _Channel, seconds: float) -> None:
    for index, task in tasks:
        channel.send({"start": index, "lane": "isolated"})
        channel.send({"done": index, "lane": "isolated", "result": _isolated_task(task, seconds)})


def main() -> int:
    warnings.simplefilter("ignore")
    plan = json.load(sys.stdin)
    end_with_parent(plan["parent"])  # before any library is imported: an import may hang
    # The protocol keeps its own copy of stdout; whatever a library prints goes to stderr.
    channel = _Channel(os.dup(1))
    os.dup2(2, 1)
    tasks = [(index, task) for index, task in plan["tasks"]]
    preload(needed_libraries(task for _, task in tasks), channel)
    isolated = [(i, t) for i, t in tasks if t.get("isolate")]
    fork = None
    if isolated:
        me = os.getpid()
        fork = os.fork()
        if fork == 0:
            try:
                end_with_parent(me)
                _isolated_lane(isolated, channel, plan.get("deadline", 120.0))
            finally:
                os._exit(0)
    _main_lane([(i, t) for i, t in tasks if not t.get("isolate")], channel)
    if fork:
        os.waitpid(fork, 0)
    return 0


if __name__ == "__main__":
    status = main()
    sys.stdout.flush()
    sys.stderr.flush()
    # Every answer is written; tearing down TensorFlow, Paddle and the rest would take seconds more.
    os._exit(status)
