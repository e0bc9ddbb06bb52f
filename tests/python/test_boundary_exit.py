"""A daemon thread that is inside a dlbridge copy when the interpreter exits
must not abort the process (it did: std::terminate, exit status 134)."""

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
