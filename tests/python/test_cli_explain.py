import json
import subprocess
import sys

JAX_SENTENCE = "The device specification passed to to_dlpack contains an unsupported device type (DLDeviceType: 7)"


def run(*args, stdin=None):
    return subprocess.run([sys.executable, "-m", "dlbridge", *args], capture_output=True, text=True, timeout=60,
                          input=stdin)


def test_help_lists_the_commands():
    out = run("--help")
    assert out.returncode == 0
    for command in ("version", "doctor", "check", "explain"):
        assert command in out.stdout


def test_explain_prints_the_entry_of_a_code():
    out = run("explain", "unsupported_device_type")
    assert out.returncode == 0
    assert out.stdout.startswith("dlbridge error `unsupported_device_type` (dlbridge.UnsupportedDeviceError)")
    assert "fix, in order:" in out.stdout and "dl_device=None" in out.stdout


def test_explain_jax_sentence_prints_jax_record_then_dlbridges_entry():
    out = run("explain", JAX_SENTENCE)
    assert out.returncode == 0, out.stderr
    jax_at = out.stdout.index("JAX (0.10.2) raised BufferError: jax.unsupported_device_type")
    own_at = out.stdout.index("dlbridge error `unsupported_device_type`")
    assert jax_at < own_at


def test_explain_torch_abort_names_pytorch_negative_strides_and_convert():
    out = run("explain", "Storage size calculation overflowed with sizes=[4, 6] and strides=[6, -1]")
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("PyTorch (2.13.0)")
    assert "negative strides" in out.stdout
    assert 'with dlbridge: dlbridge.convert(x, "torch")' in out.stdout


def test_explain_reads_a_piped_traceback_and_prints_json():
    tail = "jax.errors.JaxRuntimeError: UNIMPLEMENTED: Only DLPack tensors with trivial (compact) striding are supported"
    out = run("explain", "--json", "-", stdin=f"Traceback (most recent call last):\n  ...\n{tail}\n")
    assert out.returncode == 0, out.stderr
    assert [m["id"] for m in json.loads(out.stdout)["matches"]] == ["jax.non_compact_strides"]


def test_explain_unknown_code_exits_2():
    out = run("explain", "bogus")
    assert out.returncode == 2
    assert "known codes:" in out.stderr and "read_only" in out.stderr
