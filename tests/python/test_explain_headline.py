"""explain's first advice works: the headline fix of every record (its dlbridge call, printed by
``dlbridge explain --brief``) runs on the record's own failing input and gives the values its
tested fix gives; it does no work that ``convert`` does itself; and a record prints, as
``str(record)``, what the command prints."""

from __future__ import annotations

import ast
import io
import re

import numpy as np
import pytest

import dlbridge
from dlbridge import catalogue
from dlbridge.explain import main as explain_main

from test_catalogue_foreign import RUNNABLE, _param, _run

WITH_HEADLINE = [r for r in RUNNABLE if r.fields["dlbridgeCall"] and not r.fields["exampleFix"].get("abortsProcess")]
# The names a record's fix gives its result (test_catalogue_foreign.test_after_works_on_the_same_input).
RESULT_NAMES = ("t", "t2", "a", "j", "capsule")


def _values(value):
    """What a result holds, as NumPy sees it (a capsule is read through dlbridge)."""
    if type(value).__name__ == "PyCapsule":
        value = dlbridge.from_dlpack(value)
    if not isinstance(value, np.ndarray):
        try:
            value = dlbridge.convert(value, "numpy")
        except dlbridge.UnsupportedDeviceError:
            value = dlbridge.convert(value, "numpy", device="cpu")
    return np.asarray(value)


def _same(a, b) -> bool:
    a, b = _values(a), _values(b)
    return a.shape == b.shape and a.dtype == b.dtype and a.tobytes() == b.tobytes()


@pytest.mark.parametrize("record", [_param(r) for r in WITH_HEADLINE])
def test_the_headline_fix_works_on_the_records_input_with_the_tested_fixs_values(record):
    namespace = _run(record, "")  # one input for both (some are uninitialised memory)
    result = eval(record.headline, namespace)
    after = dict(namespace)
    try:
        exec(record.fields["exampleFix"]["after"], after)  # its asserts check the values
    except dlbridge.ConsumedCapsuleError:  # the input is a capsule, which the headline took
        namespace = _run(record, "")
        after = dict(namespace)
        exec(record.fields["exampleFix"]["after"], after)
    produced = [after[name] for name in RESULT_NAMES if name in after and name not in namespace]
    assert produced, record.id
    assert _same(result, produced[0]), f"{record.id}: {record.headline} gives other values than its fix"


def _convert_call(text: str):
    """(argument source, the rest of the call) of a dlbridge.convert(...) headline, else None."""
    call = ast.parse(text, mode="eval").body
    if not (isinstance(call, ast.Call) and ast.unparse(call.func) == "dlbridge.convert" and call.args):
        return None
    return ast.unparse(call.args[0]), call


@pytest.mark.parametrize("record", [_param(r) for r in WITH_HEADLINE])
def test_the_headline_does_no_work_that_convert_does_itself(record):
    # The class of the conjugate-bit record's advice (convert(x.resolve_conj(), ...), though
    # convert resolves it): a headline that changes x first, where convert(x, ...) alone gives
    # the same values, sends users the long way round.
    found = _convert_call(record.headline)
    if found is None or "x" not in {n.id for n in ast.walk(found[1].args[0]) if isinstance(n, ast.Name)} \
            or found[0] == "x":
        return  # not convert, or x as it is, or another input (a capsule the user holds)
    _, call = found
    call.args[0] = ast.Name("x", ast.Load())
    plain = ast.unparse(call)
    namespace = _run(record, "")
    try:
        simpler = eval(plain, namespace)
    except Exception:
        return  # convert cannot do it alone: the headline's own step is needed
    assert not _same(simpler, eval(record.headline, namespace)), \
        f"{record.id}: {plain} gives the same values as the headline {record.headline}"


def test_the_bfloat16_and_conjugate_headlines_are_the_plain_convert():
    by_id = catalogue.by_id()
    assert by_id["numpy.dtype_not_exportable"].headline == 'dlbridge.convert(x, "torch")'
    assert by_id["torch.export_conjugate_bit"].headline == 'dlbridge.convert(x, "numpy")'


def test_a_bfloat16_numpy_array_the_headline_hands_to_torch_zero_copy():
    ml_dtypes = pytest.importorskip("ml_dtypes")
    torch = pytest.importorskip("torch")
    x = np.array([1.5, -2.0, 3.25], dtype=ml_dtypes.bfloat16)
    with pytest.raises(BufferError) as refused:
        torch.from_dlpack(x)
    [record] = dlbridge.explain(f"BufferError: {refused.value}")
    t = eval(record.headline, {"dlbridge": dlbridge, "x": x})
    assert t.dtype == torch.bfloat16 and t.data_ptr() == x.ctypes.data
    assert t.float().tolist() == [1.5, -2.0, 3.25]


def _command(*args: str) -> str:
    out, err = io.StringIO(), io.StringIO()
    explain_main(*args[:1], out=out, err=err, short="--brief" in args)
    return out.getvalue()


def test_str_of_a_record_is_what_the_command_prints():
    record = catalogue.by_code()["read_only"]
    assert _command("read_only") == str(record) + "\n"
    assert str(record).startswith("dlbridge error `read_only` (dlbridge.ReadOnlyError)")
    assert repr(record) == "Record(id='dlbridge.read_only')"


def test_brief_prints_one_line_per_match_with_the_headline_and_the_entry():
    message = "Storage size calculation overflowed with sizes=[2, 3] and strides=[3, -1]"
    lines = _command(message, "--brief").splitlines()
    found = dlbridge.explain(message)
    assert len(lines) == len(found) >= 1
    for line, record in zip(lines, found):
        assert record.headline in line and record.link in line and record.id in line
    assert len(_command(message).splitlines()) > 10 * len(lines)


def test_brief_through_the_cli(capsys):
    from dlbridge.cli import main

    assert main(["explain", "read_only", "--brief"]) == 0
    out = capsys.readouterr().out
    assert out.count("\n") == 1 and re.match(r"dlbridge `read_only` \(dlbridge.ReadOnlyError\): ", out)
    with pytest.raises(SystemExit) as exited:
        main(["explain", "read_only", "--brief", "--json"])
    assert exited.value.code == 2
