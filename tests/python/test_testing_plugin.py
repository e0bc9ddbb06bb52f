"""dlbridge.testing, the pytest plugin: run as another library's CI would, against the pinned libraries."""

import subprocess
import sys
import xml.etree.ElementTree as ET

import pytest

from dlbridge import check, check_consumer


def run_plugin(tmp_path, *options):
    """Runs pytest with the plugin in a child and returns ({test id: outcome}, {test id: message})."""
    report = tmp_path / "report.xml"
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "dlbridge.testing", "-p", "no:cacheprovider", "-q",
         f"--junitxml={report}", *options],
        cwd=tmp_path, capture_output=True, text=True, timeout=600)
    outcomes, messages = {}, {}
    for case in ET.parse(report).getroot().iter("testcase"):
        ident = case.get("name").split("[", 1)[1].rstrip("]")
        outcome = "passed"
        for kind in ("failure", "skipped", "error"):
            node = case.find(kind)
            if node is not None:
                outcome, messages[ident] = kind, (node.get("message") or "") + (node.text or "")
        outcomes[ident] = outcome
    return proc, outcomes, messages


@pytest.fixture(scope="module")
def producers(tmp_path_factory):
    args = [a for spec in ("numpy", "torch", "jax", "tvm_ffi", "dlbridge") for a in ("--dlpack-producer", spec)]
    return run_plugin(tmp_path_factory.mktemp("producers"), *args)


@pytest.fixture(scope="module")
def consumers(tmp_path_factory):
    args = [a for spec in ("numpy", "torch", "jax", "dlbridge") for a in ("--dlpack-consumer", spec)]
    return run_plugin(tmp_path_factory.mktemp("consumers"), *args)


def test_one_test_per_rule_and_producer(producers):
    proc, outcomes, _ = producers
    assert len(outcomes) == 5 * len(check.RULES), proc.stdout[-2000:]
    assert proc.returncode == 1  # the known findings below fail


def test_producer_findings_match_dlbridge_check(producers):
    _, outcomes, messages = producers
    # The findings `dlbridge check` reports for the pinned versions.
    assert outcomes["numpy::P1.device"] == "failure" and "types int, int" in messages["numpy::P1.device"]
    assert outcomes["torch::P4.copy_true"] == "failure" and "flags 0x0" in messages["torch::P4.copy_true"]
    assert outcomes["jax::P2.versioned"] == "failure" and "'dltensor'" in messages["jax::P2.versioned"]
    assert outcomes["tvm_ffi::P4.copy_true"] == "failure"
    # A rule that cannot be seen is a skip that says why, not a pass.
    assert outcomes["torch::P8.flags_readonly"] == "skipped" and "read-only" in messages["torch::P8.flags_readonly"]
    dlbridge_bad = {k: v for k, v in outcomes.items() if k.startswith("dlbridge::") and v == "failure"}
    assert not dlbridge_bad


def test_failure_message_quotes_rule_and_evidence(producers):
    _, _, messages = producers
    text = messages["jax::P2.versioned"]
    assert "max_version=(1, 3) gives 'dltensor_versioned'" in text and "evidence:" in text


def test_consumer_findings(consumers):
    proc, outcomes, messages = consumers
    assert len(outcomes) == 4 * len(check_consumer.RULES), proc.stdout[-2000:]
    # torch aborts on negative strides, writes into read-only data and raises RuntimeError for DLPack 2.0.
    assert outcomes["torch::C4.negative_strides"] == "failure"
    assert "status -6" in messages["torch::C4.negative_strides"]
    assert outcomes["torch::C5.read_only"] == "failure"
    assert outcomes["torch::C2.future_major"] == "failure" and "RuntimeError" in messages["torch::C2.future_major"]
    # JAX asks for legacy capsules only and rejects strided views.
    assert outcomes["jax::C1.max_version"] == "failure"
    assert outcomes["jax::C2.future_major"] == "skipped"
    assert outcomes["jax::C4.offset_view"] == "failure"
    for spec in ("numpy", "dlbridge"):
        assert not [k for k, v in outcomes.items() if k.startswith(spec + "::") and v == "failure"], outcomes


def test_without_options_the_plugin_adds_nothing(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "pytest", "-p", "dlbridge.testing", "-p", "no:cacheprovider", "-q"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 5, proc.stdout  # pytest's "no tests collected"


def test_unloadable_producer_fails_with_reason(tmp_path):
    proc, outcomes, messages = run_plugin(tmp_path, "--dlpack-producer", "no_such_module_xyz:make")
    assert set(outcomes.values()) == {"failure"}
    assert "cannot load producer 'no_such_module_xyz:make'" in next(iter(messages.values()))
