"""The issue's newcomer one-liner, run exactly as a user would."""

import re
import subprocess
import sys

ONE_LINER = ("import dlbridge, numpy as np; "
             "t = dlbridge.from_dlpack(np.arange(6.).reshape(2,3)[:, ::-1]); "
             "print(t, np.from_dlpack(t))")


def test_one_liner_prints_the_reversed_view():
    result = subprocess.run([sys.executable, "-c", ONE_LINER], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    out = result.stdout
    assert out.startswith("dlbridge.Tensor(shape=(2, 3), dtype=float64, device=cpu, strides=(3, -1)) ")
    # numpy's own printing of [[2, 1, 0], [5, 4, 3]]: the view, not a copy in another order.
    numbers = [float(n) for n in re.findall(r"\d+\.", out.split(") ", 1)[1])]
    assert numbers == [2.0, 1.0, 0.0, 5.0, 4.0, 3.0]
    assert out.rstrip().endswith("[[2. 1. 0.]\n [5. 4. 3.]]")


def readme_python_block():
    import pathlib

    text = (pathlib.Path(__file__).resolve().parents[2] / "README.md").read_text()
    return re.search(r"## Python in one screen\n\n```python\n(.*?)```", text, re.S).group(1)


def test_readme_python_block_does_what_its_comments_say():
    # Each statement runs in order; where the comment names an exception, that
    # exception (and nothing else) must be raised; where it shows a repr, the
    # value must print that way.
    import ast

    import dlbridge

    source = readme_python_block()
    lines = source.splitlines()
    namespace = {}
    for statement in ast.parse(source).body:
        own = lines[statement.lineno - 1: statement.end_lineno]
        following = []
        for line in lines[statement.end_lineno:]:  # comment-only lines continue it
            if not line.strip().startswith("#"):
                break
            following.append(line)
        comment = " ".join(line.split("#", 1)[1].strip() for line in own + following if "#" in line)
        code = compile(ast.Module([statement], []), "README.md", "exec")
        expected = re.match(r"(\w+Error)\b", comment)
        if expected:
            error = getattr(dlbridge, expected.group(1))
            try:
                exec(code, namespace)
            except error as e:
                assert e.code in comment or expected.group(1) in comment
            else:
                raise AssertionError(f"line {statement.lineno} should raise {expected.group(1)}")
            continue
        if isinstance(statement, ast.Expr) and comment.startswith("dlbridge.Tensor("):
            value = eval(compile(ast.Expression(statement.value), "README.md", "eval"), namespace)
            assert repr(value) == comment
            continue
        exec(code, namespace)
    assert namespace["t"].strides == (3, -1)
