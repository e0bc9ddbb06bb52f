"""A child interpreter that answers one JSON request per line, for the fuzzers whose cases may
crash or hang what they test (tests/python/test_fuzz_boundary.py, tests/outside/test_casters_fuzz.py):
a dead or silent worker is a finding, described with the end of its stderr, and the next request
starts a new one."""

from __future__ import annotations

import json
import selectors
import subprocess
import tempfile


class WorkerInterpreter:
    """Runs `argv` (a script's serve mode) with `env`, restarted after it dies."""

    def __init__(self, argv: list[str], env: dict[str, str]):
        self.argv, self.env = argv, env
        self.process = None
        self.stderr = None

    def run(self, request, timeout: float):
        """The worker's JSON answer to request, or a text saying how the worker hung or died."""
        if self.process is None or self.process.poll() is not None:
            # A file, not a pipe: a chatty worker must not block on a full pipe.
            self.stderr = tempfile.TemporaryFile(mode="w+")
            self.process = subprocess.Popen(self.argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                            stderr=self.stderr, text=True, env=self.env)
        process = self.process
        process.stdin.write(json.dumps(request) + "\n")
        process.stdin.flush()
        with selectors.DefaultSelector() as selector:
            selector.register(process.stdout, selectors.EVENT_READ)
            ready = selector.select(timeout)
        line = process.stdout.readline() if ready else ""
        if line:
            return json.loads(line)
        if not ready:
            process.kill()
        process.wait()
        self.stderr.seek(0)
        stderr = self.stderr.read()[-3000:]
        self.process = None
        what = "hung" if not ready else f"died with exit status {process.returncode}"
        return f"the worker interpreter {what}; its stderr ends:\n{stderr}"

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.stdin.close()
            self.process.wait(timeout=30)
