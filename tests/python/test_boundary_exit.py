"""A daemon thread that is inside a dlbridge copy when the interpreter exits
must not abort the process (it did: std::terminate, exit status 134)."""

import pathlib
import re

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
