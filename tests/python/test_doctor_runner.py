"""How the doctor runs its exchanges (doctor/runner.py, doctor/worker.py): one child imports
the libraries once; exchanges known to kill their process run in forks of it; an unknown
crash costs a new child; and every step has a deadline, so a library whose import or
exchange hangs is reported as hanging while the run goes on.

Hangs and crashes are staged with fake libraries that stand in for MLX and Warp through a
PYTHONPATH entry, which the doctor's children inherit."""

import importlib.util
import os
import subprocess
import sys
import textwrap

import pytest

from dlbridge.doctor import runner

HAS_TORCH = importlib.util.find_spec("torch") is not None


def case(producer, consumer, name, route="direct"):
    return {"kind": "case", "producer": producer, "consumer": consumer, "case": name, "route": route}


def test_known_crashes_are_isolated_and_the_rest_is_not():
    tasks = [{"kind": "producer", "producer": "numpy"}, case("numpy", "torch", "negative"),
             case("numpy", "torch", "negative", route="dlbridge"), case("numpy", "arrow", "size-0"),
             case("numpy", "arrow", "0-d"), case("numpy", "jax", "negative")]
    isolated = [i for i, t in runner.schedule(tasks) if t.get("isolate")]
    assert isolated == [1, 3, 4]


def test_nothing_to_run_gives_nothing():
    assert runner.run_tasks([], []) == ([], {})


@pytest.fixture
def children(monkeypatch):
    """How many worker processes a run starts."""
    started = []
    real = runner._Child

    def counting(plan):
        started.append(plan)
        return real(plan)

    monkeypatch.setattr(runner, "_Child", counting)
    return started


@pytest.mark.skipif(not HAS_TORCH, reason="needs torch, which aborts on negative strides")
def test_a_known_crash_costs_a_fork_not_a_new_child(children):
    tasks = [case("numpy", "numpy", "float32"), case("numpy", "torch", "negative"), case("numpy", "numpy", "int8"),
             case("dlbridge", "torch", "negative")]
    results, stalled = runner.run_tasks(["numpy", "torch", "dlbridge"], tasks)
    assert [r["status"] for r in results] == ["zero-copy", "crash", "zero-copy", "crash"]
    assert len(children) == 1 and stalled == {}
    assert results[1]["error"]["type"] == "SIGABRT"
    assert "Storage size calculation overflowed" in results[1]["error"]["message"]
    assert set(results[1]) == set(results[0])  # a crash reads like any other case


@pytest.mark.skipif(not HAS_TORCH, reason="needs torch, which aborts on negative strides")
def test_an_unlisted_crash_is_reported_and_a_new_child_goes_on(monkeypatch, children):
    monkeypatch.setattr(runner, "direct_aborts", lambda consumer: ())
    tasks = [case("numpy", "numpy", "float32"), case("numpy", "torch", "negative"), case("numpy", "numpy", "int8")]
    results, _ = runner.run_tasks(["numpy", "torch"], tasks)
    assert [r["status"] for r in results] == ["zero-copy", "crash", "zero-copy"]
    assert len(children) == 2
    assert results[1]["error"]["type"] == "SIGABRT"
    assert "Storage size calculation overflowed" in results[1]["error"]["message"]


FAKE_MLX_CORE = """
    import threading

    import numpy as np

    __version__ = "0.0-fake"


    class array:
        def __init__(self, data, dtype=None):
            self._data = np.asarray(data)

        def __dlpack__(self, **kwargs):
            return self._data.__dlpack__(**kwargs)

        def __dlpack_device__(self):
            return self._data.__dlpack_device__()


    bool_ = int8 = int32 = int64 = uint8 = float16 = float32 = float64 = complex64 = bfloat16 = object()


    def from_dlpack(x, copy=None):
        threading.Event().wait()  # never returns
"""


def _fake(tmp_path, monkeypatch, files: dict):
    for name, text in files.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))


def test_a_library_whose_import_hangs_is_reported_and_left_out(tmp_path, monkeypatch, children):
    _fake(tmp_path, monkeypatch, {"mlx/__init__.py": "", "mlx/core.py": "import threading\nthreading.Event().wait()\n"})
    tasks = [case("numpy", "numpy", "float32"), case("numpy", "mlx", "float32"), case("mlx", "numpy", "int8"),
             case("numpy", "numpy", "int8")]
    results, stalled = runner.run_tasks(["numpy", "mlx"], tasks, deadline=8)
    assert stalled == {"mlx": "hangs: its import did not finish within 8 s"}
    assert [r["status"] for r in results] == ["zero-copy", "n/a", "n/a", "zero-copy"]
    assert results[1]["note"] == "mlx hangs: its import did not finish within 8 s"
    assert len(children) == 2  # the hung child is killed, and a new one runs the rest


def test_an_exchange_that_hangs_is_reported_and_the_run_goes_on(tmp_path, monkeypatch):
    _fake(tmp_path, monkeypatch, {"mlx/__init__.py": "", "mlx/core.py": FAKE_MLX_CORE})
    tasks = [case("numpy", "mlx", "float32"), case("numpy", "numpy", "int8"), case("numpy", "mlx", "int8")]
    results, stalled = runner.run_tasks(["numpy", "mlx"], tasks, deadline=8)
    assert stalled == {}
    assert [r["status"] for r in results] == ["hangs", "zero-copy", "hangs"]
    hang = "mlx's from_dlpack did not return within 8 s on float32 data"
    assert results[0]["error"] == {"type": "Hang", "message": hang, "code": None, "hint": None}


def test_a_library_whose_import_kills_the_process_is_left_out(tmp_path, monkeypatch):
    _fake(tmp_path, monkeypatch, {"warp/__init__.py": "import os, signal\nos.kill(os.getpid(), signal.SIGSEGV)\n"})
    tasks = [case("numpy", "warp", "float32"), case("numpy", "numpy", "int8")]
    results, stalled = runner.run_tasks(["numpy", "warp"], tasks)
    assert stalled == {"warp": "importing it killed the process (SIGSEGV)"}
    assert [r["status"] for r in results] == ["n/a", "zero-copy"]


def test_an_isolated_exchange_that_hangs_is_stopped_by_its_fork_deadline(tmp_path, monkeypatch):
    _fake(tmp_path, monkeypatch, {"mlx/__init__.py": "", "mlx/core.py": FAKE_MLX_CORE})
    monkeypatch.setattr(runner, "direct_aborts", lambda consumer: ("float32",) if consumer == "mlx" else ())
    tasks = [case("numpy", "mlx", "float32"), case("numpy", "numpy", "int8")]
    results, _ = runner.run_tasks(["numpy", "mlx"], tasks, deadline=8)
    assert [r["status"] for r in results] == ["hangs", "zero-copy"]


def test_an_interrupted_run_leaves_no_child_behind(tmp_path, monkeypatch):
    # The child runs in a session of its own (so a hang can be killed with its forks), where
    # the terminal's Ctrl-C does not reach it: the runner must end it itself.
    _fake(tmp_path, monkeypatch, {"mlx/__init__.py": "", "mlx/core.py": FAKE_MLX_CORE})
    made = []
    real = runner._Child
    monkeypatch.setattr(runner, "_Child", lambda plan: made.append(real(plan)) or made[-1])

    def interrupt(done, total):
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        runner.run_tasks(["numpy", "mlx"], [case("numpy", "numpy", "float32"), case("numpy", "mlx", "int8")],
                         progress=interrupt)  # the second would hang for the whole deadline
    [child] = made
    assert child.proc.poll() is not None
    with pytest.raises(ProcessLookupError):
        os.killpg(child.proc.pid, 0)


def test_a_case_tensorflow_cannot_make_is_not_applicable_without_importing_it():
    code = (
        "import sys\n"
        "from dlbridge.doctor import worker\n"
        "task = {'kind': 'case', 'producer': 'tensorflow', 'consumer': 'numpy', 'case': 'negative', 'route': 'direct'}\n"
        "r = worker._run(task, worker._Libraries())\n"
        "print(r['status'], r['note'], 'tensorflow' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "n/a tensorflow tensors are always compact row-major False"


def test_the_words_of_a_dead_process():
    assert runner.describe_exit(-6) == "SIGABRT" and runner.describe_exit(3) == "exit status 3"
    stderr = ("terminate called after throwing an instance of 'c10::Error'\n"
              "  what():  Storage size overflowed\nAborted\n")
    assert runner.crash_detail(stderr) == "Storage size overflowed"
    assert runner.crash_detail("!!!!!!! Segfault encountered !!!!!!!\n  File \"<unknown>\", line 0\n") == ""


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie is gone for every purpose but its entry; it is its parent's to reap.
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


@pytest.mark.parametrize("how", ["SIGTERM", "SIGKILL"])
def test_a_doctor_ended_from_outside_takes_its_worker_with_it(tmp_path, monkeypatch, how):
    # The worker sits in a session of its own, where no signal sent to the doctor reaches it;
    # it must still end when the doctor ends, however that is, even inside a hanging import
    # (one that ignores SIGTERM, as the did).
    import signal
    import time

    pid_file = tmp_path / "worker.pid"
    _fake(tmp_path, monkeypatch, {
        "mlx/__init__.py": "",
        "mlx/core.py": f"import os, signal, threading\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
                       f"open({str(pid_file)!r}, 'w').write(str(os.getpid()))\nthreading.Event().wait()\n",
    })
    doctor = subprocess.Popen([sys.executable, "-m", "dlbridge", "doctor", "--libraries", "numpy,mlx",
                               "--timeout", "600", "--no-progress"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(1200):
            if pid_file.exists() and pid_file.read_text():
                break
            time.sleep(0.1)
        else:
            raise AssertionError("the worker never reached the hanging import")
        worker = int(pid_file.read_text())
        assert _alive(worker)
        doctor.send_signal(getattr(signal, how))
        doctor.wait(timeout=60)
        for _ in range(100):
            if not _alive(worker):
                break
            time.sleep(0.1)
        else:
            os.kill(worker, signal.SIGKILL)
            raise AssertionError(f"the worker outlived a doctor ended by {how}")
    finally:
        if doctor.poll() is None:
            doctor.kill()
            doctor.wait()


def test_a_child_that_asked_ends_when_its_parent_is_killed():
    # What check's negative-strides child asks for: a plain subprocess, not in a session of its own.
    import signal
    import time

    parent = subprocess.Popen([sys.executable, "-c", textwrap.dedent("""
        import subprocess, sys
        child = subprocess.Popen([sys.executable, "-c",
            "import sys, threading; from dlbridge._parent_death import end_with_parent; "
            "end_with_parent(int(sys.argv[1])); print('ready', flush=True); threading.Event().wait()",
            str(__import__('os').getpid())], stdout=subprocess.PIPE, text=True)
        print(child.pid, child.stdout.readline().strip(), flush=True)
        child.wait()
    """)], stdout=subprocess.PIPE, text=True)
    child, ready = parent.stdout.readline().split()
    assert ready == "ready"
    parent.send_signal(signal.SIGKILL)
    parent.wait()
    for _ in range(100):
        if not _alive(int(child)):
            break
        time.sleep(0.1)
    else:
        os.kill(int(child), signal.SIGKILL)
        raise AssertionError("the child outlived its parent")
