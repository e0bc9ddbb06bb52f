"""How the doctor spreads its exchanges over child processes (doctor/runner.py): one child
for everything not known to crash, one per crashing consumer, and crashes reported per task."""

import importlib.util

import pytest

from dlbridge.doctor import runner


def case(producer, consumer, name, route="direct"):
    return {"kind": "case", "producer": producer, "consumer": consumer, "case": name, "route": route}


TASKS = [
    {"kind": "producer", "producer": "numpy"},
    case("tensorflow", "torch", "negative"),
    case("numpy", "torch", "negative"),
    case("numpy", "torch", "negative", route="dlbridge"),
    case("torch", "arrow", "0-d"),
    case("numpy", "arrow", "size-0"),
    case("numpy", "jax", "negative"),
    case("numpy", "arrow", "float32"),
]


def test_known_crashes_get_a_child_per_consumer_and_the_rest_share_one():
    batches = runner.schedule(TASKS)
    assert [[i for i, _ in b] for b in batches] == [[0, 3, 6, 7], [5, 4], [2, 1]]


def test_cheap_producers_crash_first_so_heavy_imports_are_not_repeated():
    arrow, torch_batch = runner.schedule(TASKS)[1:]
    assert [t["producer"] for _, t in arrow] == ["numpy", "torch"]
    assert [t["producer"] for _, t in torch_batch] == ["numpy", "tensorflow"]


def test_more_workers_split_the_safe_exchanges():
    batches = runner.schedule(TASKS, workers=2)
    assert [[i for i, _ in b] for b in batches] == [[0, 6], [3, 7], [5, 4], [2, 1]]


def test_nothing_to_run_gives_no_batches():
    assert runner.schedule([]) == []


@pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="needs torch, which aborts on negative strides")
def test_an_unlisted_crash_is_reported_and_its_child_restarts(monkeypatch):
    # With no crash known in advance, torch's abort happens in the shared child; the
    # exchanges after it still run in a fresh child.
    monkeypatch.setattr(runner, "direct_aborts", lambda consumer: ())
    tasks = [case("numpy", "numpy", "float32"), case("numpy", "torch", "negative"), case("numpy", "numpy", "int8")]
    results = runner.run_tasks(["numpy", "torch"], tasks)
    assert [r["status"] for r in results] == ["zero-copy", "crash", "zero-copy"]
    assert results[1]["error"]["type"] == "SIGABRT"
    assert "Storage size calculation overflowed" in results[1]["error"]["message"]


def test_a_case_tensorflow_cannot_make_is_not_applicable_without_importing_it():
    import subprocess
    import sys

    code = (
        "import sys\n"
        "from dlbridge.doctor import worker\n"
        "task = {'kind': 'case', 'producer': 'tensorflow', 'consumer': 'numpy', 'case': 'negative', 'route': 'direct'}\n"
        "r = worker._run(task, worker._Libraries())\n"
        "print(r['status'], r['note'], 'tensorflow' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "n/a tensorflow tensors are always compact row-major False"
