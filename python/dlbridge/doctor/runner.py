"""Runs the doctor's tasks in child processes, restarting after a crash."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import threading


def _crash_reason(returncode: int, stderr: str) -> dict:
    if returncode < 0:
        try:
            kind = signal.Signals(-returncode).name
        except ValueError:
            kind = f"signal {-returncode}"
    else:
        kind = f"exit status {returncode}"
    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    # C++ aborts name the cause on the "what():" line; otherwise the last line says most.
    what = next((line for line in lines if line.startswith("what():")), lines[-1] if lines else "")
    return {"type": kind, "message": f"process died: {what}"[:300], "code": None, "hint": None}


def _run_batch(libraries, tasks, on_result):
    """Run tasks [(index, task)] in children until all have a result."""
    pending = list(tasks)
    while pending:
        with tempfile.TemporaryFile(mode="w+") as err:
            proc = subprocess.Popen(
                [sys.executable, "-m", "dlbridge.doctor.worker"],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err, text=True,
                env={**os.environ, "PYTHONFAULTHANDLER": ""},
            )
            proc.stdin.write(json.dumps({"libraries": libraries, "tasks": pending}))
            proc.stdin.close()
            started, done = None, set()
            for line in proc.stdout:
                try:
                    msg = json.loads(line)
                except ValueError:
                    continue  # a library printing to stdout
                if "start" in msg:
                    started = msg["start"]
                elif "done" in msg:
                    done.add(msg["done"])
                    on_result(msg["done"], msg["result"])
                    started = None
            proc.wait()
            err.seek(0)
            stderr = err.read()
        by_index = dict(pending)
        if started is not None:
            task = by_index[started]
            on_result(started, {**task, "status": "crash", "error": _crash_reason(proc.returncode, stderr)})
            done.add(started)
        elif proc.returncode != 0 and len(done) < len(pending):
            # Died before any task started: report the rest rather than loop forever.
            reason = _crash_reason(proc.returncode, stderr)
            for index, task in pending:
                if index not in done:
                    on_result(index, {**task, "status": "crash", "error": reason})
            return
        pending = [(i, t) for i, t in pending if i not in done]


# Direct exchanges measured to kill the process: (consumer or "*", case).
# PyTorch aborts on negative strides; pyarrow 26.0.1's FixedShapeTensorArray.from_dlpack
# dies of SIGFPE on an empty tensor and SIGSEGV on a 0-d one.
_ABORTS = {("*", "negative"), ("arrow", "size-0"), ("arrow", "0-d")}


def _may_abort(task) -> bool:
    return task.get("route") == "direct" and bool(
        {("*", task.get("case")), (task.get("consumer"), task.get("case"))} & _ABORTS)


def run_tasks(libraries, tasks, workers=None, progress=None) -> list:
    """Results in task order. progress(done, total) is called from worker threads."""
    total = len(tasks)
    results = [None] * total
    lock = threading.Lock()
    count = [0]

    def on_result(index, result):
        with lock:
            results[index] = result
            count[0] += 1
            if progress:
                progress(count[0], total)

    workers = max(1, min(workers or os.cpu_count() or 1, 4, total or 1))
    indexed = list(enumerate(tasks))
    # Exchanges that may kill the consumer get a child of their own, ordered by consumer, so each restart
    # re-imports a library or two instead of every library the other children hold.
    risky = sorted((it for it in indexed if _may_abort(it[1])), key=lambda it: (it[1]["consumer"], it[1]["producer"]))
    safe = [it for it in indexed if not _may_abort(it[1])]
    # Interleave so that each child gets a share of the slow libraries.
    batches = [safe[w::workers] for w in range(workers)] + ([risky] if risky else [])
    threads = [threading.Thread(target=_run_batch, args=(libraries, b, on_result)) for b in batches]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return results
