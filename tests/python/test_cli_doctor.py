import json
import os
import subprocess
import sys
import textwrap


def run(*args, env=None, timeout=120):
    return subprocess.run([sys.executable, "-m", "dlbridge", "doctor", *args], capture_output=True, text=True,
                          timeout=timeout, env={**os.environ, **(env or {})})


def test_plain_table_json_and_html(tmp_path):
    page = tmp_path / "report.html"
    out = run("--libraries", "numpy,dlbridge", "--html", str(page))
    assert out.returncode == 0, out.stderr
    assert "numpy -> dlbridge" in out.stdout and "\033[" not in out.stdout
    assert out.stderr == ""  # no progress bar when stderr is not a terminal
    html = page.read_text()
    assert "numpy → dlbridge" in html and "http" not in html
    report = json.loads(run("--libraries", "numpy,dlbridge", "--json").stdout)
    assert {lib["name"] for lib in report["libraries"]} == {"numpy", "dlbridge"}


def test_runs_with_only_numpy_installed(tmp_path):
    # Hide every other array library from the doctor and its workers.
    (tmp_path / "sitecustomize.py").write_text(textwrap.dedent("""
        import sys
        HIDDEN = {"torch", "jax", "jaxlib", "tvm_ffi", "ml_dtypes", "cupy", "tensorflow", "paddle", "mlx", "pyarrow", "warp"}
        class Hide:
            def find_spec(self, name, path=None, target=None):
                if name.split(".")[0] in HIDDEN:
                    raise ModuleNotFoundError(name)
        sys.meta_path.insert(0, Hide())
    """))
    path = os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")])
    out = run("--json", env={"PYTHONPATH": path})
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    assert {lib["name"] for lib in report["libraries"]} == {"numpy", "dlbridge"}
    assert report["missing"]["torch"] == "not installed"
    assert "bfloat16" not in report["cases"]  # needs ml_dtypes
    assert report["pairs"]
