"""dlbridge.explain(exc_or_text) and explain.main: records for codes, exceptions and pasted
messages; an honest "not recognised" with the closest records otherwise."""

import io
import json

import numpy as np
import pytest

import dlbridge
from dlbridge import catalogue
from dlbridge.explain import main, related

JAX_SENTENCE = "The device specification passed to to_dlpack contains an unsupported device type (DLDeviceType: 7)"
TORCH_ABORT = "Storage size calculation overflowed with sizes=[4, 6] and strides=[6, -1]"


def ids(records):
    return [r.id for r in records]


def test_explain_is_the_public_function():
    assert callable(dlbridge.explain) and "explain" in dlbridge.__all__


def test_a_dlpack_error_is_explained_by_its_code():
    with pytest.raises(dlbridge.LayoutError) as excinfo:
        dlbridge.convert(np.arange(6.0)[::-1], "jax", copy=False)
    assert ids(dlbridge.explain(excinfo.value)) == ["dlbridge.unsupported_layout"]


def test_a_foreign_exception_is_explained_by_its_message():
    with pytest.raises(BufferError) as excinfo:
        np.arange(4, dtype=">f4").__dlpack__()
    assert ids(dlbridge.explain(excinfo.value)) == ["numpy.non_native_byte_order"]


@pytest.mark.parametrize("key", ["read_only", "dlbridge.read_only", "  read_only\n"])
def test_codes_and_ids_are_looked_up(key):
    assert ids(dlbridge.explain(key)) == ["dlbridge.read_only"]


def test_a_foreign_id_is_looked_up():
    assert ids(dlbridge.explain("jax.non_compact_strides")) == ["jax.non_compact_strides"]


def test_jax_sentence_gives_the_jax_record_and_dlbridges_entry():
    found = dlbridge.explain(JAX_SENTENCE)
    assert ids(found) == ["jax.unsupported_device_type"]
    assert ids(related(found)) == ["dlbridge.unsupported_device_type"]


def test_dlbridges_own_sentence_needs_its_class_to_be_called_dlbridges():
    # The same words with dlbridge's class in front are dlbridge's entry (and JAX's pattern
    # still matches the sentence: both are offered, JAX's first).
    text = f"dlbridge.errors.UnsupportedDeviceError: {JAX_SENTENCE.replace('7', 'kDLVulkan')}. dlbridge serves kDLCPU."
    assert ids(dlbridge.explain(text)) == ["dlbridge.unsupported_device_type"]


def test_torch_abort_names_pytorch_negative_strides_and_the_convert_call():
    (record,) = dlbridge.explain(TORCH_ABORT)
    assert record.library == "torch"
    assert record.fields["dlbridgeCall"] == 'dlbridge.convert(x, "torch")'
    assert "negative stride" in " ".join(record.fields["triggerScenarios"])


def test_unknown_text_is_not_a_match():
    assert dlbridge.explain("the moon is made of cheese") == []
    # dlbridge's loose layout pattern matches "stride", but the text does not name dlbridge's class.
    assert dlbridge.explain("the stride of my walk is long") == []


def test_bad_argument_is_a_type_error():
    with pytest.raises(TypeError, match="exception or a message"):
        dlbridge.explain(42)


def run_main(text, as_json=False, stdin=None):
    out, err = io.StringIO(), io.StringIO()
    status = main(text, as_json=as_json, out=out, err=err, stdin=stdin)
    return status, out.getvalue(), err.getvalue()


def test_main_prints_record_and_related_entry():
    status, out, err = run_main(JAX_SENTENCE)
    assert status == 0 and not err
    assert out.startswith("JAX (0.10.2) raised BufferError: jax.unsupported_device_type")
    assert "what dlbridge says in the same situation:\ndlbridge error `unsupported_device_type`" in out
    assert "entry: docs/errors.md#jax-unsupported_device_type" in out


def test_main_reads_stdin_for_dash():
    traceback = f'Traceback (most recent call last):\n  File "app.py", line 9\nRuntimeError: {TORCH_ABORT}\n'
    status, out, _ = run_main("-", stdin=io.StringIO(traceback))
    assert status == 0 and out.startswith("PyTorch (2.13.0)")


def test_main_json_has_the_record_structure():
    status, out, _ = run_main(TORCH_ABORT, as_json=True)
    data = json.loads(out)
    assert status == 0 and data["recognised"] is True
    assert [m["id"] for m in data["matches"]] == ["torch.negative_strides_abort"]
    assert list(data["matches"][0]) == list(catalogue.SCHEMA)
    assert [m["id"] for m in data["related"]] == ["dlbridge.unsupported_layout"]


def test_main_unrecognised_text_offers_closest_records_not_matches():
    status, out, err = run_main("DLPack capsule major version mismatch in my own library", as_json=True)
    data = json.loads(out)
    assert status == 2 and data["recognised"] is False and data["matches"] == []
    assert data["closest"] and all(0 < c["score"] < 1 for c in data["closest"])
    status, out, err = run_main("DLPack capsule major version mismatch in my own library")
    assert status == 2 and out == ""
    assert "not recognised" in err and "closest records (not matches):" in err


def test_main_unknown_code_lists_the_known_ones():
    status, out, err = run_main("no_such_code")
    assert status == 2 and out == ""
    assert "unknown error code 'no_such_code'" in err and all(code in err for code in catalogue.by_code())
