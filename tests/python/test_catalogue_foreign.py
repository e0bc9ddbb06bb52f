"""Other libraries' DLPack errors, raised for real with the pinned versions: each record's
pattern matches the real message, its recorded dlbridge fix works on the same input, and
dlbridge's code for the same situation is the one recorded."""

import importlib.metadata
import re
import subprocess
import sys

import numpy as np
import pytest

import dlbridge
from dlbridge import catalogue
from dlbridge._core import _testing

REPRODUCED = ("numpy", "torch", "jax", "tvm_ffi")
# torch.quantize_per_tensor warns that quantized tensors are deprecated; the record is about them.
pytestmark = pytest.mark.filterwarnings("ignore:.*quantized tensor creation:UserWarning")
DISTRIBUTIONS = {"numpy": "numpy", "torch": "torch", "jax": "jax", "tvm_ffi": "apache-tvm-ffi"}
RECORDS = [r for r in catalogue.records() if r.library in REPRODUCED]
RUNNABLE = [r for r in RECORDS if r.fields["exampleFix"]["runnable"]]


def _ids(records):
    return [r.id for r in records]


def _run(record, part: str) -> dict:
    fix = record.fields["exampleFix"]
    namespace = {}
    exec(compile(fix["setup"] + "\n" + part, record.id, "exec"), namespace)
    return namespace


def _assert_is_the_record(record, exc: BaseException):
    assert type(exc).__name__ == record.exception.rsplit(".", 1)[-1], f"{record.id}: {type(exc).__name__}: {exc}"
    assert record.matches(str(exc)), f"{record.id}: {record.pattern!r} misses the real message {str(exc)!r}"
    assert catalogue.matching(str(exc))[0] is record


class _Producer:
    """Hands over a prepared capsule, the way a foreign producer would."""

    def __init__(self, capsule, device=(1, 0)):
        self._capsule, self._device = capsule, device

    def __dlpack__(self, **kwargs):
        return self._capsule

    def __dlpack_device__(self):
        return self._device


def _cuda_capsule_to_torch():
    import torch

    if torch.cuda.is_available():
        pytest.skip("this PyTorch has CUDA: the message is only raised by CPU-only builds")
    torch.from_dlpack(_Producer(_testing.make_capsule(device=(2, 0)), (2, 0)))


def _used_capsule_to_tvm_ffi():
    import tvm_ffi

    capsule = np.arange(3.0).__dlpack__()
    tvm_ffi.from_dlpack(capsule)
    tvm_ffi.from_dlpack(_Producer(capsule))


# Messages whose example fix needs what this machine lacks (a GPU, a future or foreign
# producer): raised here with a synthetic producer instead.
SYNTHETIC = {
    "numpy.import_unsupported_device": lambda: np.from_dlpack(_Producer(_testing.make_capsule(device=(7, 0)), (7, 0))),
    "numpy.import_unsupported_lanes": lambda: np.from_dlpack(_Producer(_testing.make_capsule(dtype=(2, 32, 4)))),
    "numpy.import_version_too_high": lambda: np.from_dlpack(_Producer(_testing.make_capsule(version=(2, 0)))),
    "torch.import_lanes": lambda: __import__("torch").from_dlpack(_Producer(_testing.make_capsule(dtype=(2, 32, 4)))),
    "torch.import_unsupported_device": lambda: __import__("torch").from_dlpack(
        _Producer(_testing.make_capsule(device=(7, 0)), (7, 0))),
    "torch.import_major_version": lambda: __import__("torch").from_dlpack(
        _Producer(_testing.make_capsule(version=(2, 0)))),
    "torch.not_compiled_with_cuda": _cuda_capsule_to_torch,
    "jax.import_unsupported_device": lambda: __import__("jax").dlpack.from_dlpack(
        _Producer(_testing.make_capsule(device=(7, 0), versioned=False), (7, 0))),
    "jax.capsule_name": lambda: __import__("jax").dlpack.from_dlpack(_Producer(np.arange(3.0).__dlpack__(max_version=(1, 0)))),
    "tvm_ffi.expects_dltensor_field": _used_capsule_to_tvm_ffi,
}


def test_every_reproducible_record_is_raised_here():
    not_raised = {r.id for r in RECORDS if not r.fields["exampleFix"]["runnable"]} - set(SYNTHETIC)
    assert not not_raised, f"records of {REPRODUCED} that no test raises: {sorted(not_raised)}"
    assert set(SYNTHETIC) <= {r.id for r in RECORDS}


@pytest.mark.parametrize("record", RECORDS, ids=_ids(RECORDS))
def test_versions_and_evidence_are_the_pinned_ones(record):
    installed = importlib.metadata.version(DISTRIBUTIONS[record.library]).split("+")[0]  # 2.13.0+cpu
    assert record.fields["libraryVersions"] == [installed]
    assert record.fields["evidence"]["kind"] == "reproduced"


@pytest.mark.parametrize("record", [r for r in RUNNABLE if not r.fields["exampleFix"].get("abortsProcess")],
                         ids=_ids(r for r in RUNNABLE if not r.fields["exampleFix"].get("abortsProcess")))
def test_before_raises_the_catalogued_message(record):
    with pytest.raises(Exception) as excinfo:
        _run(record, record.fields["exampleFix"]["before"])
    _assert_is_the_record(record, excinfo.value)


def test_the_torch_abort_is_the_catalogued_message():
    aborting = [r for r in RUNNABLE if r.fields["exampleFix"].get("abortsProcess")]
    assert [r.id for r in aborting] == ["torch.negative_strides_abort"]
    record = aborting[0]
    fix = record.fields["exampleFix"]
    out = subprocess.run([sys.executable, "-c", fix["setup"] + "\n" + fix["before"]],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode < 0, f"expected an abort, got exit status {out.returncode}"
    message = next(line for line in out.stderr.splitlines() if "Storage size" in line)
    assert record.matches(message), message
    assert catalogue.matching(out.stderr)[0] is record


@pytest.mark.parametrize("record", RUNNABLE, ids=_ids(RUNNABLE))
def test_after_works_on_the_same_input(record):
    namespace = _run(record, record.fields["exampleFix"]["after"])
    assert record.fields["dlbridgeCall"] is None or record.fields["dlbridgeCall"] in record.fields["exampleFix"]["after"]
    produced = [v for k, v in namespace.items() if k in ("t", "t2", "a", "j", "capsule")]
    assert produced, f"{record.id}: the fix names no result"


def test_the_torch_fix_gives_the_reversed_values():
    record = catalogue.by_id()["torch.negative_strides_abort"]
    namespace = _run(record, record.fields["exampleFix"]["after"])
    np.testing.assert_array_equal(namespace["t"].numpy(), namespace["x"])


REFUSING = [r for r in RUNNABLE if r.fields["dlbridgeRefusal"]]


@pytest.mark.parametrize("record", REFUSING, ids=_ids(REFUSING))
def test_dlbridge_code_for_the_same_situation(record):
    with pytest.raises(dlbridge.DLPackError) as excinfo:
        _run(record, record.fields["dlbridgeRefusal"])
    assert excinfo.value.code == record.fields["dlbridgeCode"]
    assert excinfo.value.record is record.dlbridge_record


@pytest.mark.parametrize("ident", sorted(SYNTHETIC))
def test_synthetic_producer_raises_the_catalogued_message(ident):
    record = catalogue.by_id()[ident]
    with pytest.raises(Exception) as excinfo:
        SYNTHETIC[ident]()
    _assert_is_the_record(record, excinfo.value)


def test_numpy_message_with_a_real_traceback_prefix():
    # What `python app.py 2>&1 | dlbridge explain -` receives: the last line names the class.
    torch = pytest.importorskip("torch")
    with pytest.raises(BufferError) as info:
        torch.from_dlpack(np.arange(4, dtype=">f4"))
    exc = info.value
    text = f"Traceback (most recent call last):\n  File \"app.py\", line 3\n{type(exc).__name__}: {exc}\n"
    assert [r.id for r in dlbridge.explain(text)] == ["numpy.non_native_byte_order"]


def test_source_only_records_say_so():
    for r in catalogue.records():
        if r.library in ("cupy", "tensorflow"):
            assert r.fields["evidence"]["kind"] == "source" and r.fields["libraryVersions"] == []
            assert not r.fields["exampleFix"]["runnable"]
            assert re.search(r"\w+/\w+: \S+", r.fields["evidence"]["where"])
