"""The fenced Python blocks of README.md and docs/*.md, and how one is run and checked.

Used by test_docs_examples.py, which runs each block in a fresh interpreter as
``python docs_examples.py FILE LINE`` (so that what a block leaves at exit, a warning of
multiprocessing's resource tracker for one, is seen too). A block runs after the blocks
above it on the same page, as a reader runs them (each checked the same way), and each of
its statements is checked against what the page says of it:

- a trailing comment that starts with an exception name (``# ReadOnlyError [read_only]: ...``)
  says the statement raises it: that class (dlbridge's, else a builtin) must be raised, and a
  code in brackets must be the error's ``.code``;
- a trailing comment that starts with a value (``# True``, ``# 'the data ...'``,
  ``# dlbridge.Tensor(...)``, a number, a list) says what an expression statement gives, or
  what a ``print(...)`` prints: its repr (or the printed text) must begin the comment;
- a block written as a session (``>>>`` lines) is run as a doctest, output compared;
- any other comment is prose.

A block that cannot run as printed says so on its first line, visibly: ``# not run: REASON``.
A block that imports a library which is not installed is skipped with that reason (the
runner exits with SKIP_STATUS). docs/errors.md is generated from the catalogue: its blocks
are the records' example fixes, run by test_catalogue.py and test_catalogue_foreign.py, and
test_docs_examples.py checks that each block is the text of its record.
"""

from __future__ import annotations

import ast
import contextlib
import doctest
import io
import pathlib
import re
import sys
import tokenize

ROOT = pathlib.Path(__file__).resolve().parents[2]
NOT_RUN = re.compile(r"#\s*not run:\s*(.+)")
SKIP_STATUS = 3
FAIL_STATUS = 4
_FENCE = re.compile(r"^```python[ \t]*\n(.*?)^```[ \t]*$", re.S | re.M)
_CLAIM = re.compile(r"(True|False|None)\b|['\"\[\({\d-]|[A-Za-z_][\w.]*\(")


def pages() -> list[pathlib.Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def blocks(page: pathlib.Path) -> list[tuple[int, str]]:
    """(line of the opening fence, code) for every ```python block of page."""
    text = page.read_text()
    return [(text.count("\n", 0, m.start()) + 1, m.group(1)) for m in _FENCE.finditer(text)]


def not_run_reason(code: str) -> str | None:
    first = code.lstrip("\n").split("\n", 1)[0]
    m = NOT_RUN.match(first.strip())
    return m.group(1).strip() if m else None


class Failed(Exception):
    pass


def _comment_of(lines: list[str], statement: ast.stmt) -> str:
    own = lines[statement.lineno - 1: statement.end_lineno]
    following = []
    for line in lines[statement.end_lineno:]:  # comment-only lines continue it
        if not line.strip().startswith("#"):
            break
        following.append(line)
    parts = []
    for line in own + following:
        try:
            tokens = list(tokenize.generate_tokens(io.StringIO(line).readline))
        except (tokenize.TokenError, SyntaxError):  # a line of a statement that spans several
            tokens = []
        comment = next((t.string for t in tokens if t.type == tokenize.COMMENT), None)
        if comment is not None:
            parts.append(comment[1:].strip())
    return " ".join(parts)


def _error_class(name: str):
    import dlbridge

    return getattr(dlbridge, name, None) or getattr(__import__("builtins"), name, None)


def _claims(comment: str, shown: str, where: str) -> None:
    if not comment.startswith(shown) or comment[len(shown):len(shown) + 1].isalnum():
        raise Failed(f"{where}: gives {shown!r}, the page says {comment!r}")


def run_plain(code: str, namespace: dict, where: str) -> None:
    lines = code.splitlines()
    for statement in ast.parse(code).body:
        compiled = compile(ast.Module([statement], []), where, "exec")
        comment = _comment_of(lines, statement)
        at = f"{where}+{statement.lineno - 1}"
        raised = re.match(r"(\w+(?:Error|Exception|Warning))\b(?:\s*\[(\w+)\])?", comment)
        if raised:
            error = _error_class(raised.group(1))
            if error is None:
                raise Failed(f"{at}: the page names {raised.group(1)}, which is no exception here")
            try:
                exec(compiled, namespace)
            except error as e:
                if raised.group(2) and getattr(e, "code", None) != raised.group(2):
                    raise Failed(f"{at}: raised code {getattr(e, 'code', None)!r}, the page says "
                                 f"{raised.group(2)!r}") from e
            else:
                raise Failed(f"{at}: should raise {raised.group(1)}, as the page says")
            continue
        claims = bool(comment) and _CLAIM.match(comment) is not None
        if claims and isinstance(statement, ast.Expr):
            call = statement.value
            if isinstance(call, ast.Call) and isinstance(call.func, ast.Name) and call.func.id == "print":
                out = io.StringIO()
                with contextlib.redirect_stdout(out):
                    exec(compiled, namespace)
                _claims(comment, out.getvalue().rstrip("\n"), at)
            else:
                value = eval(compile(ast.Expression(statement.value), where, "eval"), namespace)
                _claims(comment, repr(value), at)
            continue
        exec(compiled, namespace)


def run_session(code: str, namespace: dict, where: str) -> None:
    test = doctest.DocTestParser().get_doctest(code, namespace, where, where, 0)
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    out = io.StringIO()
    runner.run(test, out=out.write, clear_globs=False)
    if runner.failures:
        raise Failed(out.getvalue())


def run_block(code: str, namespace: dict, where: str) -> None:
    if code.lstrip().startswith(">>>"):
        run_session(code, namespace, where)
    else:
        run_plain(code, namespace, where)


def main(page_name: str, line: int) -> int:
    page = ROOT / page_name
    namespace: dict = {"__name__": "__main__"}
    for start, code in blocks(page):
        if not_run_reason(code) is not None:
            continue
        where = f"{page_name}:{start}"
        try:
            run_block(code, namespace, where)
        except ModuleNotFoundError as e:
            top = (e.name or "").split(".")[0]
            import importlib.util

            if top and importlib.util.find_spec(top) is None:
                print(f"needs {top}, which is not installed", file=sys.stderr)
                return SKIP_STATUS
            raise
        except Failed as e:
            print(f"FAILED {e}", file=sys.stderr)
            return FAIL_STATUS
        if start == line:
            return 0
    raise SystemExit(f"no block at {page_name}:{line}")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], int(sys.argv[2])))
