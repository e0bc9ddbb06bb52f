"""The command line as a whole: --version on both entry points, and every command into a
pipe whose reader has gone (`dlbridge explain X --json | head`)."""

import os
import shutil
import subprocess
import sys

import pytest

import dlbridge
from dlbridge import cli

EXPECTED = f"dlbridge {dlbridge.__version__} (DLPack {dlbridge.DLPACK_VERSION[0]}.{dlbridge.DLPACK_VERSION[1]})"
MODULE = [sys.executable, "-m", "dlbridge"]


def _script():
    found = shutil.which("dlbridge", path=os.path.dirname(sys.executable))
    if found is None:
        pytest.skip("the dlbridge console script is not installed beside this Python (pip install -e .)")
    return [found]


@pytest.mark.parametrize("entry", ["script", "module"])
def test_version_flag(entry):
    command = _script() if entry == "script" else MODULE
    out = subprocess.run([*command, "--version"], capture_output=True, text=True, timeout=60)
    assert (out.returncode, out.stdout, out.stderr) == (0, EXPECTED + "\n", "")


def test_version_flag_and_subcommand_agree():
    out = subprocess.run([*MODULE, "version"], capture_output=True, text=True, timeout=60)
    assert out.stdout == EXPECTED + "\n"


def _into_closed_pipe(args, stdin=None):
    """Run the command with stdout a pipe whose read end is already closed."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        out = subprocess.run([*MODULE, *args], stdout=write_end, stderr=subprocess.PIPE, text=True, timeout=300,
                             input=stdin)
    finally:
        os.close(write_end)
    return out


@pytest.mark.parametrize("args", [
    ["--version"],
    ["--includedir"],
    ["version"],
    ["explain", "read_only"],
    ["explain", "read_only", "--json"],
    ["explain", "-"],
    ["check", "numpy", "--json"],
    ["doctor", "--libraries", "numpy", "--json"],
    ["doctor", "--libraries", "numpy"],
], ids=" ".join)
def test_a_closed_pipe_ends_the_command_quietly(args):
    out = _into_closed_pipe(args, stdin="Storage size calculation overflowed with sizes=[2] and strides=[-1]")
    assert out.stderr == ""
    assert out.returncode == cli.EXIT_BROKEN_PIPE


def test_guard_pipe_passes_the_status_and_other_errors_through():
    assert cli.guard_pipe(lambda: 3) == 3
    with pytest.raises(ValueError):
        cli.guard_pipe(lambda: (_ for _ in ()).throw(ValueError("not a pipe")))
