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

# Seconds one library import or one exchange may take (`dlbridge doctor --timeout`). TensorFlow's
# import, the slowest step, takes ~7 s on an idle 2-core machine and ~30 s on a heavily loaded one.
DEADLINE = 120.0
# The isolated lane's forks keep their own deadline; this is how much later the parent steps in.
_GRACE = 30.0

# Direct exchanges measured to kill the process: (consumer, case). PyTorch 2.13 aborts
# on negative strides; pyarrow 26.0.1's FixedShapeTensorArray.from_dlpack dies of
# SIGFPE on an empty tensor and SIGSEGV on a 0-d one. An exchange not listed here
# that kills its child is still reported as a crash: a new child goes on after it.
_ABORTS = {("torch", "negative"), ("arrow", "size-0"), ("arrow", "0-d")}


def _may_abort(task) -> bool:
    return task.get("route") == "direct" and (task.get("consumer"), task.get("case")) in _ABORTS


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


def _round(pending: dict, deadline: float, on_result, stalled: dict) -> None:
    """One child over the pending tasks; removes from pending every task it settles."""
    child = _Child({"tasks": sorted(pending.items()), "deadline": deadline})
    lanes = {}          # lane -> (index, started)
    importing = None    # (name, started)
    progressed = killed = False
    while True:
        now = time.monotonic()
        waits = [started + deadline - now for _, started in filter(None, [importing])]
        waits += [started + deadline + (_GRACE if lane == "isolated" else 0) - now
                  for lane, (_, started) in lanes.items()]
        try:
            message = child.lines.get(timeout=max(0.0, min(waits)) if waits else None)
        except queue.Empty:
            message = "expired"
        if message is None:
            break
        if message == "expired":
            now = time.monotonic()
            if importing and now - importing[1] >= deadline:
                stalled[importing[0]] = f"hangs: its import did not finish within {deadline:g} s"
                child.kill()
                importing, killed = None, True
                break
            late = [(lane, index) for lane, (index, started) in lanes.items()
                    if now - started >= deadline + (_GRACE if lane == "isolated" else 0)]
            if late:
                lane, index = late[0]
                task = pending.pop(index)
                on_result(index, exchange.settled(task, exchange.HANGS, exchange.hang_error(task, deadline)))
                child.kill()
                killed = True
                break
            continue
        progressed = True
        if "importing" in message:
            importing = (message["importing"], time.monotonic())
        elif "imported" in message:
            importing = None
        elif "start" in message:
            lanes[message["lane"]] = (message["start"], time.monotonic())
        elif "done" in message:
            lanes.pop(message["lane"], None)
            if pending.pop(message["done"], None) is not None:
                on_result(message["done"], message["result"])
    returncode, stderr = child.finish()
    if killed:
        return  # what else was running starts again in the next child
    reason = describe_exit(returncode)
    if importing is not None:
        # The child died while importing: that library cannot be loaded beside the others.
        stalled[importing[0]] = f"importing it killed the process ({reason})"
        return
    died_in = lanes.get("main") or lanes.get("isolated")
    if died_in is not None:
        index = died_in[0]
        task = pending.pop(index)
        error = exchange.crash_error(task, reason, crash_detail(stderr))
        on_result(index, exchange.settled(task, exchange.CRASH, error))
    elif not progressed and pending:
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
