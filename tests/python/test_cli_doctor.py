import json
import os
import subprocess
import sys
import textwrap

import pytest


def run(*args, env=None, timeout=300):
    return subprocess.run([sys.executable, "-m", "dlbridge", "doctor", *args], capture_output=True, text=True,
                          timeout=timeout, env={**os.environ, **(env or {})})


def test_plain_table_json_and_html(tmp_path):
    page = tmp_path / "report.html"
    out = run("--libraries", "numpy,dlbridge", "--html", str(page))
    report = json.loads(run("--libraries", "numpy,dlbridge", "--json").stdout)
    assert out.returncode == report["summary"]["exit_status"], out.stderr
    assert "Verdict" in out.stdout and "\033[" not in out.stdout
    assert out.stderr == ""  # no progress bar when stderr is not a terminal
    html = page.read_text()
    assert 'id="verdict"' in html and "http" not in html
    assert {lib["name"] for lib in report["libraries"]} == {"numpy", "dlbridge"}
    assert report["schema_version"] == 3


def test_the_dlbridge_route_is_tried_whatever_the_libraries(tmp_path):
    report = json.loads(run("--libraries", "numpy", "--json").stdout)
    assert report["dlbridge_exchanges"] is True and [lib["name"] for lib in report["libraries"]] == ["numpy"]
    assert {r["route"] for r in report["results"]} == {"direct", "dlbridge"}
    assert all(m["dlbridge"] != "n/a" for m in report["summary"]["matrix"])


def test_verbose_lists_every_failing_case():
    default, verbose = run("--libraries", "numpy"), run("--libraries", "numpy", "-v")
    assert "Every failing case" not in default.stdout
    assert "Every failing case" in verbose.stdout and "numpy -> numpy bfloat16 (direct): fails" in verbose.stdout


def test_an_unknown_library_is_a_usage_error():
    out = run("--libraries", "numpy,nosuchlib")
    assert out.returncode == 2 and out.stdout == ""
    assert out.stderr.startswith("dlbridge doctor: unknown to the doctor: nosuchlib; known: numpy, torch")


def test_bad_timeout_is_a_usage_error():
    out = run("--timeout", "0")
    assert out.returncode == 2 and "must be more than 0 seconds" in out.stderr


@pytest.mark.parametrize("seconds", ["1e10", "inf", "Infinity", "1e309"])
def test_a_timeout_beyond_what_a_wait_can_take_is_a_usage_error_not_a_traceback(seconds):
    # It reached threading's wait as an OverflowError: a traceback and exit status 1, which the
    # doctor's help reserves for "dlbridge fails somewhere".
    out = run("--timeout", seconds)
    assert out.returncode == 2, out.stderr
    assert "must be at most 604800 seconds" in out.stderr and "Traceback" not in out.stderr


def test_a_library_whose_import_hangs_is_reported_and_the_doctor_finishes_with_exit_1(tmp_path):
    (tmp_path / "mlx").mkdir()
    (tmp_path / "mlx" / "__init__.py").write_text("")
    (tmp_path / "mlx" / "core.py").write_text("import threading\nthreading.Event().wait()\n")
    path = os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")])
    out = run("--libraries", "numpy,mlx", "--timeout", "10", env={"PYTHONPATH": path}, timeout=120)
    assert "mlx was left out: hangs: its import did not finish within 10 s." in out.stdout
    report = json.loads(run("--libraries", "numpy,mlx", "--timeout", "10", "--json", env={"PYTHONPATH": path},
                            timeout=120).stdout)
    assert report["missing"] == {"mlx": "hangs: its import did not finish within 10 s"}
    assert [lib["name"] for lib in report["libraries"]] == ["numpy"]
    # Nothing was checked for an installed library it could not drive: that is a finding (docs/doctor.md).
    assert out.returncode == report["summary"]["exit_status"] == 1


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
    report = json.loads(out.stdout)
    assert out.returncode == report["summary"]["exit_status"], out.stderr
    assert {lib["name"] for lib in report["libraries"]} == {"numpy", "dlbridge"}
    assert report["missing"]["torch"] == "not installed"
    assert "bfloat16" not in report["cases"]  # needs ml_dtypes
    assert report["pairs"] and report["summary"]["uncatalogued"] == []
