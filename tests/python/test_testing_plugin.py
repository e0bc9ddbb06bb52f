"""dlbridge.testing, the pytest plugin: run as another library's CI would, against the pinned libraries."""

import re
import subprocess
import sys
import xml.etree.ElementTree as ET

import pytest

from dlbridge import check, check_consumer

# Factories as a library's maintainer writes them, with the mistakes the setup check must catch.
USER_FACTORIES = '''\
import math

import array_api_strict
import numpy as np
import torch


def make(shape, dtype, readonly=False):
    a = np.arange(math.prod(shape), dtype=dtype).reshape(shape)
    a.flags.writeable = not readonly
    return a


def make_refusing_readonly(shape, dtype, readonly=False):
    if readonly:
        raise NotImplementedError("this library has no read-only arrays")
    return np.zeros(shape, dtype)


def make_ignoring_readonly(shape, dtype, readonly=False):
    return np.zeros(shape, dtype)


def make_strict(shape, dtype, readonly=False):
    if readonly:
        raise NotImplementedError("array_api_strict has no read-only arrays")
    return array_api_strict.reshape(array_api_strict.arange(math.prod(shape), dtype=getattr(array_api_strict, dtype)),
                                    shape)


def make_torch(shape, dtype):
    return torch.zeros(shape, dtype=getattr(torch, dtype))


def one_argument(shape):
    return np.zeros(shape)


def float64_always(shape, dtype):
    return np.zeros(shape)


def broken(shape, dtype):
    return {}[shape]


def not_an_array(shape, dtype):
    return [0.0] * math.prod(shape)


NOT_CALLABLE = 3
'''


def line_of(name: str) -> int:
    return next(i for i, text in enumerate(USER_FACTORIES.splitlines(), 1) if text.startswith(f"def {name}("))


def run_plugin(tmp_path, *options, report=True):
    """Runs pytest with the plugin in a child; returns (process, {id: outcome}, {id: message}), ids being
    'spec::rule'."""
    (tmp_path / "userlib.py").write_text(USER_FACTORIES)
    xml = tmp_path / "report.xml"
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "dlbridge.testing", "-p", "no:cacheprovider", "-q", "-rs",
         f"--junitxml={xml}", *options],
        cwd=tmp_path, capture_output=True, text=True, timeout=600)
    outcomes, messages = {}, {}
    if xml.exists():
        for case in ET.parse(xml).getroot().iter("testcase"):
            assert case.get("classname") in ("dlpack-producer", "dlpack-consumer")
            rule, spec = re.fullmatch(r"([^\[]+)\[(.*)\]", case.get("name")).groups()
            ident = f"{spec}::{rule}"
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


@pytest.fixture(scope="module")
def user_factories(tmp_path_factory):
    specs = ("userlib:make", "userlib:make_refusing_readonly", "userlib:make_ignoring_readonly",
             "userlib:make_strict", "userlib:make_torch")
    return run_plugin(tmp_path_factory.mktemp("user"), *[a for s in specs for a in ("--dlpack-producer", s)])


def test_one_test_per_rule_and_producer(producers):
    proc, outcomes, _ = producers
    assert len(outcomes) == 5 * len(check.RULES), proc.stdout[-2000:]
    assert proc.returncode == 1  # the known findings below fail


def test_producer_findings_match_dlbridge_check(producers):
    _, outcomes, messages = producers
    # The findings `dlbridge check` reports for the pinned versions.
    assert outcomes["torch::P4.copy_true"] == "failure" and "flags 0x0" in messages["torch::P4.copy_true"]
    assert outcomes["jax::P2.versioned"] == "failure" and "'dltensor'" in messages["jax::P2.versioned"]
    assert outcomes["tvm_ffi::P4.copy_true"] == "failure"
    # A rule that cannot be seen is a skip that says why, not a pass.
    assert outcomes["torch::P8.flags_readonly"] == "skipped" and "read-only" in messages["torch::P8.flags_readonly"]
    for spec in ("numpy", "dlbridge"):
        assert not [k for k, v in outcomes.items() if k.startswith(spec + "::") and v == "failure"], outcomes


def test_device_rule_accepts_numpy_and_array_api_strict_ints(producers, user_factories):
    # Both return (1, 0) as plain ints; the standard's Enum is not required.
    assert producers[1]["numpy::P1.device"] == "passed"
    assert user_factories[1]["userlib:make_strict::P1.device"] == "passed"


def test_failure_message_quotes_rule_and_evidence_and_names_the_factory(producers):
    _, _, messages = producers
    text = messages["jax::P2.versioned"]
    assert "max_version=(1, 3) gives 'dltensor_versioned'" in text and "evidence:" in text
    assert "--dlpack-producer jax (" in text and "libraries/jax.py:" in text  # dlbridge's built-in jax factory


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
    # A consumer's failure points at the callable: torch.from_dlpack is defined in torch/utils/dlpack.py.
    assert "--dlpack-consumer torch (" in messages["torch::C5.read_only"]
    assert "dlpack.py:" in messages["torch::C5.read_only"]


def test_without_options_the_plugin_adds_nothing(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "pytest", "-p", "dlbridge.testing", "-p", "no:cacheprovider", "-q"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 5, proc.stdout  # pytest's "no tests collected"


def test_misspelled_module_is_one_usage_error_and_no_rule_runs(tmp_path):
    proc, outcomes, _ = run_plugin(tmp_path, "--dlpack-producer", "nupmy:asarray")
    assert proc.returncode == 4  # pytest's usage error
    assert not outcomes and not (tmp_path / "report.xml").exists()
    assert proc.stderr.count("ERROR:") == 1 and "passed" not in proc.stdout and "failed" not in proc.stdout
    assert "--dlpack-producer nupmy:asarray: there is no module 'nupmy'" in proc.stderr
    assert "did you mean 'numpy'?" in proc.stderr


def test_every_setup_mistake_is_reported_together_before_any_rule(tmp_path):
    proc, outcomes, _ = run_plugin(
        tmp_path,
        "--dlpack-producer", "numpy:asarray",  # ignores the shape it is given
        "--dlpack-producer", "numpy:asaray",
        "--dlpack-producer", "nupmy",
        "--dlpack-producer", "userlib:one_argument",
        "--dlpack-producer", "userlib:float64_always",
        "--dlpack-producer", "userlib:broken",
        "--dlpack-producer", "userlib:not_an_array",
        "--dlpack-producer", "userlib:NOT_CALLABLE",
        "--dlpack-producer", "userlib:make",  # fine: not reported
        "--dlpack-consumer", "nmupy:from_dlpack",
        "--dlpack-consumer", "numpy:from_dlpak")
    assert proc.returncode == 4 and not outcomes
    assert proc.stderr.count("ERROR:") == 1
    problems = proc.stderr.split("no DLPack rule was run:\n", 1)[1].strip().splitlines()
    assert len(problems) == 10, proc.stderr
    text = proc.stderr
    assert "--dlpack-producer numpy:asarray: your factory" in text and "returned shape (2,) for (2, 3)" in text
    assert "'numpy' has no attribute 'asaray'; did you mean 'asarray'?" in text
    assert "--dlpack-producer nupmy: not a short name" in text and "did you mean 'numpy'?" in text
    assert "one_argument(shape) cannot be called as factory(shape, dtype)" in text
    assert f"userlib.py:{line_of('float64_always')}) returned dtype float64 for 'float32'" in text
    assert f"userlib.py:{line_of('broken')}) raised KeyError for ((2, 3), 'float32')" in text
    assert f"(at {tmp_path / 'userlib.py'}:{line_of('broken') + 1})" in text  # the line that raised
    assert "returned a list, which has no __dlpack__" in text
    assert "userlib.NOT_CALLABLE is a int, not a factory" in text
    assert "there is no module 'nmupy'" in text
    assert "has no attribute 'from_dlpak'; did you mean 'from_dlpack'?" in text
    assert "userlib:make:" not in text


def test_factory_that_cannot_make_read_only_arrays_has_those_rules_skipped(user_factories):
    proc, outcomes, messages = user_factories
    readonly_rules = ("P2.readonly_legacy", "P8.flags_readonly")
    for rule in readonly_rules:
        assert outcomes[f"userlib:make::{rule}"] == "passed"  # a factory that honours readonly
        refused = messages[f"userlib:make_refusing_readonly::{rule}"]
        assert outcomes[f"userlib:make_refusing_readonly::{rule}"] == "skipped"
        assert "cannot make read-only arrays: it raised NotImplementedError for readonly=True" in refused
        ignored = messages[f"userlib:make_ignoring_readonly::{rule}"]
        assert outcomes[f"userlib:make_ignoring_readonly::{rule}"] == "skipped"
        assert "returned a writable array for readonly=True (its flags.writeable is True)" in ignored
    # Nothing else is skipped for that reason.
    assert sum("read-only" in m for m in messages.values()) == 3 * len(readonly_rules), messages


def test_skips_and_failures_point_at_the_users_factory(user_factories):
    proc, outcomes, messages = user_factories
    out = proc.stdout
    assert proc.returncode == 1
    # Skips: the -rs summary names the factory's file and line, never the plugin's files.
    skip_lines = [line for line in out.splitlines() if line.startswith("SKIPPED")]
    assert skip_lines
    assert all(re.match(r"SKIPPED \[\d+\] userlib\.py:\d+: ", line) for line in skip_lines), skip_lines
    assert f"userlib.py:{line_of('make_refusing_readonly')}: P8.flags_readonly (userlib:make_refusing_readonly)" in out
    # Failures: torch's P4.copy_true, reported under the factory's name, file and line.
    assert outcomes["userlib:make_torch::P4.copy_true"] == "failure"
    header = "P4.copy_true[userlib:make_torch]"
    assert re.search(rf"_+ {re.escape(header)} _+", out)
    assert re.search(rf"--dlpack-producer userlib:make_torch \(\S*userlib\.py:{line_of('make_torch')}\) "
                     r"breaks P4\.copy_true", out)
    for plugin_file in ("conformance_items.py", "conformance_setup.py", "testing.py"):
        assert plugin_file not in out


def test_selection_and_ids(tmp_path):
    proc, outcomes, _ = run_plugin(tmp_path, "--dlpack-producer", "userlib:make", "-k", "P1 or P2.legacy")
    assert set(outcomes) == {"userlib:make::P1.keywords", "userlib:make::P1.device", "userlib:make::P2.legacy"}
    assert proc.returncode == 0
    listed = subprocess.run([sys.executable, "-m", "pytest", "-p", "dlbridge.testing", "-p", "no:cacheprovider",
                             "--collect-only", "-q", "--dlpack-producer", "userlib:make"],
                            cwd=tmp_path, capture_output=True, text=True, timeout=300).stdout
    assert "dlpack-producer::P2.versioned[userlib:make]" in listed
    assert f"{len(check.RULES)} tests collected" in listed


def test_importing_the_plugin_module_needs_no_pytest():
    # The docs build imports dlbridge.testing (autodoc) in environments without pytest.
    code = ("import sys; sys.modules['pytest'] = sys.modules['_pytest'] = None\n"
            "import dlbridge.testing, dlbridge.conformance_setup\n"
            "print(dlbridge.testing.pytest_configure.__name__)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and out.stdout.strip() == "pytest_configure", out.stderr


def test_a_short_name_whose_library_is_missing_is_a_usage_error(tmp_path):
    # As where jax is not installed: importing it fails as Python fails it then.
    code = ("import sys\n"
            "class NoJax:\n"
            "    def find_spec(self, name, path=None, target=None):\n"
            "        if name.split('.')[0] == 'jax':\n"
            "            raise ModuleNotFoundError(\"No module named 'jax'\", name='jax')\n"
            "sys.meta_path.insert(0, NoJax())\n"
            "import pytest\n"
            "sys.exit(pytest.main(['-p', 'dlbridge.testing', '-p', 'no:cacheprovider', '-q',\n"
            "                      '--dlpack-producer', 'jax', '--dlpack-consumer', 'jax']))")
    proc = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 4 and proc.stderr.count("ERROR:") == 1, proc.stdout + proc.stderr
    assert "--dlpack-producer jax: dlbridge's built-in factory (" in proc.stderr
    assert "raised ModuleNotFoundError for ((2, 3), 'float32'): No module named 'jax'" in proc.stderr
    assert "--dlpack-consumer jax (jax.dlpack:from_dlpack): there is no module 'jax'" in proc.stderr
