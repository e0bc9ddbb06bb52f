import subprocess
import sys


def run(*args):
    return subprocess.run([sys.executable, "-m", "dlbridge", *args], capture_output=True, text=True, timeout=60)


def test_help_lists_the_commands():
    out = run("--help")
    assert out.returncode == 0
    for command in ("version", "doctor", "check", "explain"):
        assert command in out.stdout


def test_explain_prints_the_documented_entry():
    out = run("explain", "unsupported_device_type")
    assert out.returncode == 0
    assert "The device specification passed to to_dlpack contains an unsupported device type" in out.stdout
    assert "**Solutions**" in out.stdout


def test_explain_unknown_code_exits_2():
    out = run("explain", "bogus")
    assert out.returncode == 2
    assert "known codes:" in out.stderr and "read_only" in out.stderr
