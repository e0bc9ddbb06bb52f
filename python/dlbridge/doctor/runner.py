"""Runs the doctor's tasks in child processes, restarting after a crash."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import threading

from .libraries import direct_aborts, import_seconds


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


# Direct exchanges measured to kill the process are the consumers' DIRECT_ABORTS
# (dlbridge/libraries/). An exchange not listed there that kills its child is still
# reported as a crash: its child restarts and goes on.
def _may_abort(task) -> bool:
    return task.get("route") == "direct" and task.get("case") in direct_aborts(task.get("consumer") or "")


def schedule(tasks, workers=1) -> list:
    """Batches of (index, task), one child process each.

    Importing the libraries costs far more than the exchanges (measured with all ten
    libraries: about 9 s of CPU for the imports against 3 s for 3,400 exchanges), so
    by default one child runs every exchange that is not known to crash: a second
    would import everything again and, on two cores, finish later. The exchanges
    that kill their process run in a child of their own beside it, grouped by
    consumer, so a restart re-imports the crashing pair's libraries rather than
    every library a long-lived child holds.
    """
    indexed = list(enumerate(tasks))
    risky = sorted((it for it in indexed if _may_abort(it[1])),
                   key=lambda it: (it[1]["consumer"], import_seconds(it[1]["producer"]), it[1]["producer"]))
    safe = [it for it in indexed if not _may_abort(it[1])]
    workers = max(1, min(workers, len(safe) or 1))
    by_consumer = {}
    for it in risky:
        by_consumer.setdefault(it[1]["consumer"], []).append(it)
    batches = [safe[w::workers] for w in range(workers)] + list(by_consumer.values())
    return [b for b in batches if b]


def run_tasks(libraries, tasks, workers=None, progress=None) -> list:
    """Results in task order. progress(done, total) is called from worker threads.
    workers: how many children share the exchanges not known to crash (default 1)."""
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

    threads = [threading.Thread(target=_run_batch, args=(libraries, b, on_result))
               for b in schedule(tasks, workers or 1)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return results
