import json
import subprocess
import sys


def run(*args):
    return subprocess.run([sys.executable, "-m", "dlbridge", "check", *args], capture_output=True, text=True,
                          timeout=120)


def test_one_line_per_rule_plain_text_and_failing_exit_status():
    out = run("torch")
    assert out.returncode == 1  # torch copies on copy=True without setting IS_COPIED
    lines = [line for line in out.stdout.splitlines() if line[:4] in ("PASS", "FAIL", "N/A ")]
    assert len(lines) >= 20
    assert "\033[" not in out.stdout  # not a TTY: no colour
    assert all("evidence:" in block for block in out.stdout.split("\n", 1)[1].split("\nPASS")[1:])


def test_json_and_passing_exit_status():
    out = run("dlbridge", "--json")
    assert out.returncode == 0, out.stdout
    report = json.loads(out.stdout)
    assert report["target"] == "dlbridge"
    assert all(r["status"] in ("pass", "n/a") for r in report["results"])
