"""The serve loop of a driver process on a test host (tests/python/multihost_*_driver.py): one JSON request
per line on stdin, {"call": NAME, "kwargs": {...}}, answered with one JSON line, {"value": ...} or
{"error": {...}}, on the stdout it started with. Everything else the process prints (an engine's logs)
goes to stderr, so that it cannot corrupt the answers. tests/support/worker_interpreter.py is the other
end."""

from __future__ import annotations

import json
import os
import sys
import traceback


def serve(functions: dict) -> None:
    answers = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    for line in sys.stdin:
        request = json.loads(line)
        try:
            answer = {"value": functions[request["call"]](**request.get("kwargs", {}))}
        except BaseException as exc:  # noqa: BLE001 - every failure is the answer, the loop goes on
            answer = {"error": {"type": type(exc).__name__, "message": str(exc)[:4000],
                                "traceback": traceback.format_exc()[-4000:]}}
        answers.write(json.dumps(answer) + "\n")
        answers.flush()
