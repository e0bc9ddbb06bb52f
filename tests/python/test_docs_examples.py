"""Every fenced Python block of README.md and docs/*.md runs as printed, and shows what it
says (docs_examples.py has the rules): one test per block, named by its page and line.

A block runs in a fresh interpreter, after the blocks above it on its page; it must exit
cleanly, with no traceback on stderr and no "leaked" line of the resource tracker. A block that needs a library which is not installed is
skipped with that reason; a block marked ``# not run: REASON`` on its first line is skipped
with that reason, and the marks are counted (they are for fragments, and few).

docs/errors.md is generated from the catalogue: its blocks are checked to be the text of
their records, whose example fixes test_catalogue.py and test_catalogue_foreign.py run.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

import docs_examples

HERE = os.path.dirname(os.path.abspath(__file__))
GENERATED = "docs/errors.md"
# The pages may mark at most this many blocks as not run: the marks are for fragments.
MOST_NOT_RUN = 3


def _cases():
    for page in docs_examples.pages():
        name = page.relative_to(docs_examples.ROOT).as_posix()
        if name == GENERATED:
            continue
        for line, code in docs_examples.blocks(page):
            yield pytest.param(name, line, code, id=f"{name}:{line}")


CASES = list(_cases())


@pytest.mark.parametrize("page, line, code", CASES)
def test_the_docs_example_runs_as_printed(page, line, code):
    reason = docs_examples.not_run_reason(code)
    if reason is not None:
        pytest.skip(f"marked not run: {reason}")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [HERE, os.environ.get("PYTHONPATH")]))}
    env.pop("PYTHONWARNINGS", None)
    result = subprocess.run([sys.executable, os.path.join(HERE, "docs_examples.py"), page, str(line)],
                            capture_output=True, text=True, timeout=300, env=env, cwd=docs_examples.ROOT)
    if result.returncode == docs_examples.SKIP_STATUS:
        pytest.skip(result.stderr.strip())
    assert result.returncode == 0, result.stderr
    # What a block leaves behind at exit: an exception, or a shared segment the tracker removes.
    for sign in ("Traceback", "leaked"):
        assert sign not in result.stderr, result.stderr


def test_the_pages_have_python_examples_and_few_are_not_run():
    assert len(CASES) >= 7
    marked = [c.values[:2] for c in CASES if docs_examples.not_run_reason(c.values[2]) is not None]
    assert len(marked) <= MOST_NOT_RUN, marked


def _record_texts() -> set[str]:
    """What the generator writes into the page's blocks (dlbridge/catalogue/markdown.py)."""
    from dlbridge import catalogue

    texts = set()
    for record in catalogue.records():
        fix = record.fields["exampleFix"]
        setup = fix["setup"] + "\n" if fix["setup"] else ""
        if fix.get("language", "python") == "python":
            texts |= {setup + fix["before"], setup + fix["after"]}
        texts.add(record.fields["tryCatchPattern"])
    return {t.strip() for t in texts}


def test_every_block_of_the_generated_error_page_is_the_text_of_a_record():
    # The records' example fixes are run by the catalogue's tests (those that need other
    # hardware say so on the page); a block here that is no record's text would be run by nobody.
    texts = _record_texts()
    found = docs_examples.blocks(docs_examples.ROOT / GENERATED)
    assert len(found) > 100
    strays = [line for line, code in found if code.strip() not in texts]
    assert strays == [], f"blocks of {GENERATED} that are no record's text, at lines {strays}"


def test_a_fragment_of_the_generated_page_at_least_compiles():
    page = docs_examples.ROOT / GENERATED
    for line, code in docs_examples.blocks(page):
        compile(code, f"{GENERATED}:{line}", "exec")


def test_the_runner_catches_a_wrong_output_and_a_missing_raise(tmp_path, monkeypatch):
    # The rules themselves: a comment that shows a value or names an error is held to it.
    namespace = {}
    with pytest.raises(docs_examples.Failed, match="gives '3', the page says '4'"):
        docs_examples.run_plain("1 + 2   # 4\n", namespace, "page.md:1")
    with pytest.raises(docs_examples.Failed, match="should raise ValueError"):
        docs_examples.run_plain("int('1')   # ValueError: not a number\n", namespace, "page.md:1")
    with pytest.raises(docs_examples.Failed, match="prints|gives"):
        docs_examples.run_plain("print('a')   # 'b'\n", namespace, "page.md:1")
    docs_examples.run_plain("1 + 2   # 3, the sum\nint('x')   # ValueError: not a number\n"
                            "x = 5   # prose: anything\nx   # 5\n", namespace, "page.md:1")
    with pytest.raises(docs_examples.Failed):
        docs_examples.run_session(">>> 1 + 2\n4\n", {}, "page.md:1")
    assert re.search("not run", docs_examples.__doc__)
