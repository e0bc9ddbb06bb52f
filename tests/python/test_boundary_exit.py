"""A daemon thread that is inside a dlbridge copy when the interpreter exits
must not abort the process (it did: std::terminate, exit status 134)."""

import concurrent.futures
import pathlib
import re
import subprocess
import sys

import pytest

DAEMON_COPYING_AT_EXIT = """
import threading, time
import dlbridge
t = dlbridge.empty((1 << 20,), "float64")
started = threading.Event()
def work():
    started.set()
    while True:
        t.copy()
        t.copy_unpacked()
        dlbridge.from_dlpack(t, copy=True)
threading.Thread(target=work, daemon=True).start()
started.wait()
time.sleep(0.02)
"""


@pytest.mark.parametrize("run", range(4))
def test_daemon_thread_copying_at_interpreter_exit_exits_cleanly(run_python, run):
    result = run_python(DAEMON_COPYING_AT_EXIT, timeout=60)
    assert "terminate called" not in result.stderr
    assert result.returncode == 0, result.stderr


# Eight daemon threads inside dlbridge when the main thread returns: each calls into
# Python from dlbridge (a module import, a lock, a producer's __dlpack__, pickle's
# reducer), where interpreter exit ends a thread; the exit then unwound dlbridge's
# frames without the GIL (a segfault in tupledealloc or std::rethrow_exception, or
# "terminate called"), in most runs of the first script.
EIGHT_DAEMONS_AT_EXIT = {
    "convert": "dlbridge.convert(small[::2], 'numpy')",
    "pickle": "pickle.loads(pickle.dumps(dlbridge.from_dlpack(small[::2]), protocol=5))",
    "import_and_copy": "dlbridge.from_dlpack(small).copy()",
}
EIGHT_DAEMONS_SCRIPT = """
import pickle, threading
import numpy as np
import dlbridge
small = np.arange(64.0)
def work():
    while True:
        {call}
for _ in range(8):
    threading.Thread(target=work, daemon=True).start()
"""
EXITS_PER_SCRIPT = 12
# CPython 3.13t's own exit deadlock, not dlbridge's: a daemon thread that is handed a dict's lock
# (sys.modules) as exit ends it keeps the lock, and finalization waits for it for good. Eight
# pure-Python daemon threads looping sys.modules.get("numpy") hang in about a third of the exits there.
CPYTHON_HANGS_AT_EXIT = sys.version_info < (3, 14) and not getattr(sys, "_is_gil_enabled", lambda: True)()


def exit_failure(result) -> str | None:
    """What was wrong with one exit, or None for a clean one."""
    if isinstance(result, subprocess.TimeoutExpired):
        return None if CPYTHON_HANGS_AT_EXIT else "hung"
    if "terminate called" in result.stderr:
        return "terminate called"
    if result.returncode != 0:
        return f"exit status {result.returncode}: {result.stderr[-300:]}"
    return None


@pytest.mark.parametrize("script", sorted(EIGHT_DAEMONS_AT_EXIT))
def test_eight_daemon_threads_inside_dlbridge_at_interpreter_exit_exit_cleanly(run_python, script):
    code = EIGHT_DAEMONS_SCRIPT.format(call=EIGHT_DAEMONS_AT_EXIT[script])

    def one_exit(_):
        try:
            return run_python(code, timeout=10)
        except subprocess.TimeoutExpired as hung:
            return hung

    with concurrent.futures.ThreadPoolExecutor(3) as pool:
        failures = [f for f in map(exit_failure, pool.map(one_exit, range(EXITS_PER_SCRIPT))) if f]
    assert failures == [], f"{len(failures)} of {EXITS_PER_SCRIPT} exits failed: {failures}"


RAW_GIL_CALLS = re.compile(r"gil_scoped_(release|acquire)|PyGILState_Ensure|PyEval_(SaveThread|RestoreThread)"
                           r"|Py_(BEGIN|END)_ALLOW_THREADS")


def test_the_extension_releases_and_retakes_the_gil_only_through_gil_hpp():
    # One mechanism for every GIL release: a raw one (nanobind's
    # gil_scoped_release among them) aborts a daemon thread at exit.
    sources = pathlib.Path(__file__).resolve().parents[2] / "src" / "python"
    raw = [f"{path.name}:{number}: {line.strip()}"
           for path in sorted(sources.glob("*.[ch]pp")) if path.stem != "gil"
           for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
           if RAW_GIL_CALLS.search(line)]
    assert raw == []
