"""Runs the doctor's tasks in a child process (worker.py) with a deadline on every step.

The child imports every library its tasks need, then runs them; exchanges known to kill
their process run in forks of it (see worker.py). When the child dies, the task that was
running is reported as a crash and a new child takes the rest. When a step outlives the
deadline, the child is killed: a library whose import hangs is reported as hanging and
left out, an exchange that hangs is reported as such, and the run goes on without them.
"""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import tempfile
import threading
import time

from . import exchange
from .libraries import direct_aborts

# Seconds one library import or one exchange may take (`dlbridge doctor --timeout`). TensorFlow's
# import, the slowest step, takes ~7 s on an idle 2-core machine and ~30 s on a heavily loaded one.
DEADLINE = 120.0
# The isolated lane's forks keep their own deadline; this is how much later the parent steps in.
_GRACE = 30.0

# Direct exchanges measured to kill the process are the consumers' DIRECT_ABORTS
# (dlbridge/libraries/: torch 2.13 aborts on negative strides; pyarrow 26.0.1's
# FixedShapeTensorArray.from_dlpack dies of SIGFPE on an empty tensor and SIGSEGV on a
# 0-d one). An exchange not listed that kills its child is still reported as a crash:
# a new child goes on after it.


def _may_abort(task) -> bool:
    return task.get("route") == "direct" and task.get("case") in direct_aborts(task.get("consumer") or "")


def describe_exit(returncode: int) -> str:
    """"SIGABRT" for a process killed by a signal, "exit status 1" otherwise."""
    if returncode < 0:
        try:
            return signal.Signals(-returncode).name
        except ValueError:
            return f"signal {-returncode}"
    return f"exit status {returncode}"


def crash_detail(stderr: str) -> str:
    """What a dead process said about why: C++'s "what():" line, or nothing. Other lines
    (tracebacks of fault handlers, library banners) say nothing about the exchange."""
    for line in stderr.splitlines():
        line = line.strip()
        if line.startswith("what():"):
            return line[len("what():"):].strip()
        if line.startswith("Check failed:") or " Check failed: " in line:
            return line[line.index("Check failed:"):]
    return ""


def schedule(tasks) -> list:
    """(index, task) for every task, those known to kill their process marked "isolate"."""
    return [(i, {**t, "isolate": True} if _may_abort(t) else t) for i, t in enumerate(tasks)]


def _involves(task, names) -> str | None:
    return next((n for n in (task.get("producer"), task.get("consumer")) if n in names), None)


class _Child:
    """One worker process and the lines it writes, read by a thread into a queue."""

    def __init__(self, plan: dict):
        self.stderr = tempfile.TemporaryFile(mode="w+")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "dlbridge.doctor.worker"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.stderr, text=True,
            env={**os.environ, "PYTHONFAULTHANDLER": ""}, start_new_session=True,
        )
        self.lines = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()
        try:
            self.proc.stdin.write(json.dumps(plan))
            self.proc.stdin.close()
        except (BrokenPipeError, OSError):
            pass  # it died at once; the end of its output says so

    def _read(self):
        for line in self.proc.stdout:
            try:
                self.lines.put(json.loads(line))
            except ValueError:
                continue
        self.lines.put(None)

    def kill(self):
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)  # the worker and its forks
        except ProcessLookupError:
            pass

    def finish(self) -> tuple[int, str]:
        returncode = self.proc.wait()
        self.stderr.seek(0)
        text = self.stderr.read()
        self.stderr.close()
        return returncode, text


class _Watch:
    """What one child is doing, from its lines: the import or the task of each lane, and since when."""

    def __init__(self, deadline: float):
        self.deadline = deadline
        self.lanes = {}          # lane -> (index, started)
        self.importing = None    # (name, started)
        self.progressed = False

    def _limit(self, lane: str) -> float:
        return self.deadline + (_GRACE if lane == "isolated" else 0)

    def wait(self) -> float | None:
        """Seconds until the next deadline, or None when nothing is running."""
        now = time.monotonic()
        waits = [self.importing[1] + self.deadline - now] if self.importing else []
        waits += [started + self._limit(lane) - now for lane, (_, started) in self.lanes.items()]
        return max(0.0, min(waits)) if waits else None

    def late_import(self) -> str | None:
        if self.importing and time.monotonic() - self.importing[1] >= self.deadline:
            return self.importing[0]
        return None

    def late_task(self) -> int | None:
        now = time.monotonic()
        return next((index for lane, (index, started) in self.lanes.items()
                     if now - started >= self._limit(lane)), None)

    def note(self, message: dict) -> int | None:
        """Record a line; the index of the task it settles, if any."""
        self.progressed = True
        if "importing" in message:
            self.importing = (message["importing"], time.monotonic())
        elif "imported" in message:
            self.importing = None
        elif "start" in message:
            self.lanes[message["lane"]] = (message["start"], time.monotonic())
        elif "done" in message:
            self.lanes.pop(message["lane"], None)
            return message["done"]
        return None


def _follow(child: _Child, watch: _Watch, pending: dict, on_result, stalled: dict) -> bool:
    """Read the child's lines until it ends; True when it was killed for outliving a deadline."""
    while True:
        try:
            message = child.lines.get(timeout=watch.wait())
        except queue.Empty:
            if (name := watch.late_import()) is not None:
                stalled[name] = f"hangs: its import did not finish within {watch.deadline:g} s"
                child.kill()
                return True
            if (index := watch.late_task()) is not None:
                task = pending.pop(index)
                on_result(index, exchange.settled(task, exchange.HANGS, exchange.hang_error(task, watch.deadline)))
                child.kill()
                return True
            continue
        if message is None:
            return False
        index = watch.note(message)
        if index is not None and pending.pop(index, None) is not None:
            on_result(index, message["result"])


def _round(pending: dict, deadline: float, on_result, stalled: dict) -> None:
    """One child over the pending tasks; removes from pending every task it settles."""
    # The child ends with this process however it ends (worker.py asks for it, with this pid).
    child = _Child({"tasks": sorted(pending.items()), "deadline": deadline, "parent": os.getpid()})
    watch = _Watch(deadline)
    try:
        killed = _follow(child, watch, pending, on_result, stalled)
    except BaseException:  # Ctrl-C, or a progress callback that raised: the child is in a session
        child.kill()       # of its own, where the terminal's signal does not reach it
        child.finish()
        raise
    returncode, stderr = child.finish()
    if killed:
        return  # what else was running starts again in the next child
    reason = describe_exit(returncode)
    if watch.importing is not None:
        # The child died while importing: that library cannot be loaded beside the others.
        stalled[watch.importing[0]] = f"importing it killed the process ({reason})"
        return
    died_in = watch.lanes.get("main") or watch.lanes.get("isolated")
    if died_in is not None:
        index = died_in[0]
        task = pending.pop(index)
        error = exchange.crash_error(task, reason, crash_detail(stderr))
        on_result(index, exchange.settled(task, exchange.CRASH, error))
    elif not watch.progressed and pending:
        # Died before doing anything: report the rest rather than start it again forever.
        for index, task in sorted(pending.items()):
            on_result(index, exchange.settled(task, exchange.CRASH, exchange.crash_error(task, reason)))
        pending.clear()


def run_tasks(libraries, tasks, progress=None, deadline: float = DEADLINE) -> tuple[list, dict]:
    """(results in task order, {library: why it was left out} for those that hang or kill
    their import). progress(done, total) is called as results arrive."""
    total = len(tasks)
    results = [None] * total
    count = [0]
    stalled = {}

    def on_result(index, result):
        results[index] = result
        count[0] += 1
        if progress:
            progress(count[0], total)

    pending = dict(schedule(tasks))
    while pending:
        for index, task in sorted(pending.items()):
            if (name := _involves(task, stalled)) is not None:
                pending.pop(index)
                on_result(index, exchange.settled(task, exchange.NA, note=f"{name} {stalled[name]}"))
        before = (len(pending), len(stalled))
        if pending:
            _round(pending, deadline, on_result, stalled)
        if pending and (len(pending), len(stalled)) == before:
            # A child that settles nothing would be followed by another like it: stop here.
            for index, task in sorted(pending.items()):
                on_result(index, exchange.settled(task, exchange.CRASH, exchange.crash_error(task, "no answer")))
            pending.clear()
    return results, stalled
