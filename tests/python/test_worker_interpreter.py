"""The fuzzers' worker interpreter (tests/support/worker_interpreter.py) reports a worker that
crashes or hangs instead of failing with it, and starts a new one for the next request."""

import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "support"))
from worker_interpreter import WorkerInterpreter  # noqa: E402

SERVE = """
import json, os, sys, time
for line in sys.stdin:
    request = json.loads(line)
    if request == "crash":
        os.abort()
    if request == "hang":
        time.sleep(60)
    print(json.dumps({"echo": request}), flush=True)
"""


def test_answers_crashes_and_hangs_are_each_reported():
    worker = WorkerInterpreter([sys.executable, "-c", SERVE], dict(os.environ))
    try:
        assert worker.run("hello", timeout=30) == {"echo": "hello"}
        crashed = worker.run("crash", timeout=30)
        assert isinstance(crashed, str) and "died with exit status" in crashed
        assert worker.run("again", timeout=30) == {"echo": "again"}
        hung = worker.run("hang", timeout=1)
        assert isinstance(hung, str) and "hung" in hung
        assert worker.run("after", timeout=30) == {"echo": "after"}
    finally:
        worker.stop()
