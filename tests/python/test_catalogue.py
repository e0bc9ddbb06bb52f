"""The catalogue itself: every field present and typed, patterns that compile and tell the
messages of one library apart, docs/errors.md generated from it, and shipped in the wheel."""

import copy
import pathlib
import re
import tomllib

import pytest

import dlbridge
from dlbridge import catalogue
from dlbridge.catalogue import markdown

ROOT = pathlib.Path(__file__).resolve().parents[2]


def test_the_catalogue_has_no_problems():
    assert catalogue.problems() == []


def test_every_record_has_every_field_typed():
    for r in catalogue.records():
        assert list(r.fields) == list(catalogue.SCHEMA), r.id
        for name, expected in catalogue.SCHEMA.items():
            value = r.fields[name]
            if expected == "list[str]":
                assert isinstance(value, list) and all(isinstance(v, str) for v in value), (r.id, name)
            else:
                assert isinstance(value, expected), (r.id, name)
        re.compile(r.pattern)


def test_covers_dlbridge_and_every_library():
    per_library = {lib: [r for r in catalogue.records() if r.library == lib] for lib in catalogue.LIBRARIES}
    assert all(per_library.values()), {lib: len(rs) for lib, rs in per_library.items()}
    assert set(catalogue.by_code()) == set(dlbridge.errors.ERROR_CLASSES)


def _broken(mutate):
    records = [catalogue.Record(copy.deepcopy(r.fields)) for r in catalogue.records()]
    mutate({r.id: r.fields for r in records})
    return catalogue.problems(records)


@pytest.mark.parametrize("mutate, complaint", [
    (lambda f: f["numpy.non_native_byte_order"].pop("solutions"), "fields"),
    (lambda f: f["jax.non_compact_strides"].update(solutions="copy it"), "solutions is not"),
    (lambda f: f["torch.export_conjugate_bit"].update(messagePattern="(unclosed"), "does not compile"),
    (lambda f: f["torch.export_conjugate_bit"].update(messagePattern="conjugate|gradient"), "also matched by"),
    (lambda f: f["numpy.stream_not_none"].update(messageExamples=["NumPy wants no streams"]), "misses its example"),
    (lambda f: f["cupy.vector_dtype"].update(dlbridgeCode="no_such_code"), "has no dlbridge record"),
    (lambda f: f["jax.unaligned_copy_false"].update(dlbridgeCall="dlbridge.convert(y, 'jax')"), "dlbridgeCall"),
    (lambda f: f["tvm_ffi.not_aligned"].update(handlingStrategy="pray"), "handlingStrategy"),
    (lambda f: f["dlbridge.read_only"].update(errorCode=None), "carry their code"),
    (lambda f: f["cupy.vector_dtype"].update(evidence={"kind": "hearsay", "where": "a forum"}), "evidence needs"),
])
def test_problems_are_found(mutate, complaint):
    found = _broken(mutate)
    assert any(complaint in p for p in found), found


def test_docs_page_is_generated_from_the_catalogue():
    page = (ROOT / "docs" / "errors.md").read_text(encoding="utf-8")
    assert page == markdown.render(), "docs/errors.md is stale: python -m dlbridge.catalogue.markdown docs/errors.md"


def test_docs_page_has_every_record_under_its_anchor():
    page = markdown.render()
    for r in catalogue.records():
        heading = f"## `{r.code}`" if r.library == "dlbridge" else f'<a id="{r.anchor}"></a>\n### `{r.id}`'
        assert heading in page, r.id
        assert r.link == f"docs/errors.md#{r.anchor}"


def test_generator_writes_the_file(tmp_path):
    out = tmp_path / "errors.md"
    assert markdown.main([str(out)]) == 0
    assert out.read_text(encoding="utf-8") == markdown.render()


def test_the_catalogue_ships_inside_the_wheel_package():
    # scikit-build-core puts every file under wheel.packages into the wheel.
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["scikit-build"]
    assert "python/dlbridge" in config["wheel"]["packages"]
    assert "exclude" not in config.get("wheel", {})
    # The package's own folder, in the tree and in any installation of it (scripts/test-no-share's too).
    assert catalogue.catalogue_dir() == pathlib.Path(dlbridge.__file__).resolve().parent / "catalogue"
    in_tree = ROOT / "python" / "dlbridge" / "catalogue"
    assert sorted(p.stem for p in in_tree.glob("*.json")) == sorted(catalogue.LIBRARIES)


def test_every_dlpack_error_carries_its_record_and_link():
    for code, cls in dlbridge.errors.ERROR_CLASSES.items():
        err = cls("message", "hint")
        assert err.record is catalogue.by_code()[code]
        assert err.link == f"docs/errors.md#{code}"
    assert dlbridge.DLPackError("no code of its own").record is None
    assert dlbridge.DLPackError("no code of its own").link is None


def test_identify_links_codes_messages_and_unknowns():
    assert catalogue.identify("anything", "ReadOnlyError", "read_only") == "dlbridge.read_only"
    assert catalogue.identify("DLPack only supports native byte order.", "BufferError") == "numpy.non_native_byte_order"
    assert catalogue.identify("process died: what():  Storage size calculation overflowed with sizes=[6] and "
                              "strides=[-1]", "SIGABRT") == "torch.negative_strides_abort"
    assert catalogue.identify("the moon is made of cheese", "ValueError") == catalogue.UNCATALOGUED


def _cuda_usable() -> bool:
    try:
        dlbridge.empty((1,), device="cuda:0")
    except dlbridge.DLPackError:
        return False
    return True


OWN_RUNNABLE = [r for r in catalogue.by_code().values() if r.fields["exampleFix"]["runnable"]]


@pytest.mark.parametrize("record", OWN_RUNNABLE, ids=[r.id for r in OWN_RUNNABLE])
def test_dlbridge_example_fix_fails_before_and_works_after(record):
    if record.code == "device_unavailable" and _cuda_usable():
        pytest.skip("this machine has the CUDA device that the example lacks")
    fix = record.fields["exampleFix"]
    with pytest.raises(dlbridge.DLPackError) as excinfo:
        exec(compile(fix["setup"] + "\n" + fix["before"], record.id, "exec"), {})
    assert excinfo.value.code == record.code
    assert record.matches(f"{type(excinfo.value).__name__}: {excinfo.value}")
    exec(compile(fix["setup"] + "\n" + fix["after"], record.id, "exec"), {})
