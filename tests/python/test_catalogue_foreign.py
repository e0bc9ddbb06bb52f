"""Other libraries' DLPack errors, raised for real with the pinned versions: each record's
pattern matches the real message, its recorded dlbridge fix works on the same input, and
dlbridge's code for the same situation is the one recorded. Failures that raise nothing (a
crash, a wrong value, read-only data made writable) are raised here too; the doctor's own
words for them are checked in test_catalogue_doctor.py."""

import importlib.metadata
import importlib.util
import re
import subprocess
import sys

import numpy as np
import pytest

import dlbridge
from dlbridge import catalogue
from dlbridge._core import _testing

# The distribution that pins each library (requirements/dev.txt, requirements/libs.txt).
DISTRIBUTIONS = {"numpy": "numpy", "torch": "torch", "jax": "jax", "tvm_ffi": "apache-tvm-ffi",
                 "tensorflow": "tensorflow-cpu", "paddle": "paddlepaddle", "mlx": "mlx", "arrow": "pyarrow",
                 "warp": "warp-lang"}
MODULES = {"arrow": "pyarrow", "mlx": "mlx.core"}
# Read from the library's source, not raised here, and why.
SOURCE_ONLY = {
    "cupy": "CuPy needs a CUDA device, which this machine lacks",
    "tensorflow.export_unsupported_device": "needs a TPU or another device that is neither CPU nor GPU",
    "tensorflow.remote_tensor": "needs a remote TensorFlow device",
}
# torch.quantize_per_tensor warns that quantized tensors are deprecated; the record is about them.
# Warp's capsule destructor raising inside a consumer's error path is the record warp.deleter_swallows_error.
pytestmark = pytest.mark.filterwarnings("ignore:.*quantized tensor creation:UserWarning",
                                        "ignore::DeprecationWarning",
                                        "ignore::pytest.PytestUnraisableExceptionWarning")


def _installed(library: str) -> bool:
    return importlib.util.find_spec(MODULES.get(library, library).split(".")[0]) is not None


def _param(record):
    absent = not _installed(record.library)
    return pytest.param(record, id=record.id, marks=pytest.mark.skipif(
        absent, reason=f"{record.library} is not installed (requirements/libs.txt)"))


# Older releases' records are raised where those releases are installed (test_catalogue_releases.py).
RECORDS = [r for r in catalogue.records() if r.library != "dlbridge"
           and r.fields["evidence"] == {"kind": "reproduced", "where": "tests/python/test_catalogue_foreign.py"}]
FIX = {r.id: r.fields["exampleFix"] for r in RECORDS}
RUNNABLE = [r for r in RECORDS if FIX[r.id]["runnable"]]
RAISING = [r for r in RUNNABLE if not FIX[r.id].get("abortsProcess") and not FIX[r.id].get("silentlyWrong")]
SILENT = [r for r in RUNNABLE if FIX[r.id].get("silentlyWrong")]
ABORTING = [r for r in RECORDS if FIX[r.id].get("abortsProcess")]


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
# Records whose failing call runs here although their fix does not (it needs a GPU).
RAISED_BY_BEFORE = {"arrow.cpu_only", "mlx.cuda_import", "warp.opaque_pointer"}
# Records whose failing call ends the process after raising, so they run in a child.
RAISED_THEN_ABORTS = {"tensorflow.unknown_gpu"}


def test_every_reproduced_record_is_raised_here():
    not_runnable = {r.id for r in RECORDS if not FIX[r.id]["runnable"] and not FIX[r.id].get("abortsProcess")}
    not_raised = not_runnable - set(SYNTHETIC) - RAISED_BY_BEFORE - RAISED_THEN_ABORTS
    assert not not_raised, f"records that no test raises: {sorted(not_raised)}"
    assert set(SYNTHETIC) | RAISED_BY_BEFORE | RAISED_THEN_ABORTS <= {r.id for r in RECORDS}


def test_only_what_needs_other_hardware_is_read_from_sources():
    for r in catalogue.records():
        if r.library == "dlbridge":
            continue
        why = SOURCE_ONLY.get(r.id) or SOURCE_ONLY.get(r.library)
        assert (r.fields["evidence"]["kind"] == "source") == (why is not None), r.id
        if why is not None:
            assert r.fields["libraryVersions"] == [] and not r.fields["exampleFix"]["runnable"], r.id
            assert re.search(r"\w+/\w+: \S+", r.fields["evidence"]["where"]), r.id


def test_every_installed_library_has_records():
    for library in DISTRIBUTIONS:
        if _installed(library):
            assert any(r.library == library for r in RECORDS), library


@pytest.mark.parametrize("record", [_param(r) for r in RECORDS])
def test_versions_and_evidence_are_the_pinned_ones(record):
    installed = importlib.metadata.version(DISTRIBUTIONS[record.library]).split("+")[0]  # 2.13.0+cpu
    assert record.fields["libraryVersions"] == [installed]
    assert record.fields["evidence"] == {"kind": "reproduced", "where": "tests/python/test_catalogue_foreign.py"}


@pytest.mark.parametrize("record", [_param(r) for r in RAISING])
def test_before_raises_the_catalogued_message(record):
    with pytest.raises(Exception) as excinfo:
        _run(record, FIX[record.id]["before"])
    _assert_is_the_record(record, excinfo.value)


@pytest.mark.parametrize("record", [_param(r) for r in RECORDS if r.id in RAISED_BY_BEFORE])
def test_the_failing_call_raises_here_though_the_fix_needs_a_gpu(record):
    with pytest.raises(Exception) as excinfo:
        _run(record, FIX[record.id]["before"])
    _assert_is_the_record(record, excinfo.value)


@pytest.mark.parametrize("record", [_param(r) for r in SILENT])
def test_silent_failures_raise_nothing(record):
    # What is wrong about the result is checked through the doctor (test_catalogue_doctor.py).
    _run(record, FIX[record.id]["before"])


@pytest.mark.parametrize("record", [_param(r) for r in RECORDS if r.id in RAISED_THEN_ABORTS])
def test_raised_then_the_process_aborts(record):
    fix = FIX[record.id]
    code = fix["setup"] + "\ntry:\n" + "\n".join("    " + line for line in fix["before"].splitlines()) + \
        "\nexcept Exception as exc:\n    print(type(exc).__name__, exc, flush=True)\n"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    name, _, message = out.stdout.strip().partition(" ")
    assert name == record.exception.rsplit(".", 1)[-1] and record.matches(message), out.stdout
    assert catalogue.matching(message)[0] is record


@pytest.mark.parametrize("record", [_param(r) for r in ABORTING])
def test_the_failing_call_kills_the_process(record):
    fix = FIX[record.id]
    out = subprocess.run([sys.executable, "-c", fix["setup"] + "\n" + fix["before"]],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode < 0 or out.returncode >= 128, f"expected a death by signal, got exit status {out.returncode}"
    said = [line for line in out.stderr.splitlines() if record.matches(line)]
    if said:  # the library says why before it dies; otherwise only the doctor's report names it
        assert catalogue.matching(said[0])[0] is record


@pytest.mark.parametrize("record", [_param(r) for r in RUNNABLE])
def test_after_works_on_the_same_input(record):
    namespace = _run(record, FIX[record.id]["after"])
    assert record.fields["dlbridgeCall"] is None or record.fields["dlbridgeCall"] in FIX[record.id]["after"]
    produced = [v for k, v in namespace.items() if k in ("t", "t2", "a", "j", "capsule")]
    assert produced, f"{record.id}: the fix names no result"


def test_the_torch_fix_gives_the_reversed_values():
    record = catalogue.by_id()["torch.negative_strides_abort"]
    namespace = _run(record, FIX[record.id]["after"])
    np.testing.assert_array_equal(namespace["t"].numpy(), namespace["x"])


REFUSING = [r for r in RUNNABLE if r.fields["dlbridgeRefusal"]]


@pytest.mark.parametrize("record", [_param(r) for r in REFUSING])
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


def test_paddle_and_torch_say_the_same_sentence_and_get_their_own_records():
    torch_words = "from_dlpack received an invalid capsule. Note that DLTensor capsules can be consumed only once"
    assert catalogue.matching(torch_words)[0].id == "torch.invalid_capsule"
    assert catalogue.matching(f"(InvalidArgument) {torch_words}")[0].id == "paddle.invalid_capsule"
