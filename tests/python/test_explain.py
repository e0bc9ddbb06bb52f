import io

import pytest

from dlbridge import explain

CODES = ["unsupported_device_type", "device_unavailable", "unsupported_dtype", "unsupported_layout", "read_only",
         "unsupported_version", "copy_required", "invalid_stream", "capsule_consumed", "invalid_tensor"]


def test_the_page_is_found_from_the_package():
    path = explain.errors_doc_path()
    assert path is not None and path.name == "errors.md" and path.parent.name == "docs"


@pytest.mark.parametrize("code", CODES)
def test_every_entry_has_every_field_in_order(code):
    entry = explain.load()[code]
    assert list(entry.fields) == list(explain.FIELDS)
    assert all(entry.fields[f] for f in explain.FIELDS)
    assert "```python" in entry.fields["Example fix"]


def test_main_prints_the_entry():
    out = io.StringIO()
    assert explain.main("read_only", out=out) == 0
    text = out.getvalue()
    assert text.startswith("## `read_only`") and "copy=True" in text
    assert "## `" not in text[3:]  # one entry, not the page


def test_unknown_code_lists_the_known_ones(capsys):
    assert explain.main("no_such_code") == 2
    err = capsys.readouterr().err
    assert "no_such_code" in err and all(code in err for code in CODES)


def test_missing_page_is_an_error_not_a_traceback(monkeypatch, tmp_path, capsys):
    monkeypatch.setenv("DLBRIDGE_ERRORS_DOC", str(tmp_path / "absent.md"))
    assert explain.main("read_only") == 1
    assert "absent.md" in capsys.readouterr().err


def test_the_reference_is_installed_beside_the_extension_for_wheels(monkeypatch, tmp_path):
    # A wheel has no docs/ folder: the build installs errors.md next to
    # _core, and explain finds it there when no source tree is around.
    import pathlib

    import dlbridge
    from dlbridge import explain as explain_module

    root = pathlib.Path(__file__).resolve().parents[2]
    installed = pathlib.Path(dlbridge._core.__file__).resolve().parent / "errors.md"
    assert installed.read_text() == (root / "docs" / "errors.md").read_text()
    monkeypatch.delenv("DLBRIDGE_ERRORS_DOC", raising=False)
    monkeypatch.setattr(explain_module, "__file__", str(tmp_path / "a" / "b" / "explain.py"))
    assert explain_module.errors_doc_path() == installed
