"""Without the sharing module (dlbridge._share, which -DDLBRIDGE_SHARE=OFF leaves out) dlbridge.Tensor
refuses what needs it, with the reason, and everything else works. Each case runs in a fresh
interpreter in which `import dlbridge._share` fails as it does in such a build (the core looks for the
module on first use), so the refusals are tested in every build; scripts/test-no-share runs them
against a real one."""

from __future__ import annotations

import pickle
import subprocess
import sys
import textwrap

import pytest

import dlbridge

PRELUDE = """
import sys
sys.modules["dlbridge._share"] = None  # what a -DDLBRIDGE_SHARE=OFF build finds
import copy, pickle
import numpy as np
import dlbridge
t = dlbridge.from_dlpack(np.arange(6.0))
"""


def run_without_share(body: str) -> subprocess.CompletedProcess:
    code = PRELUDE + textwrap.dedent(body)
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)


def refusal(body: str) -> str:
    """The `type: message` that body's last statement raised."""
    done = run_without_share(f"""
        try:
            {body}
        except Exception as e:
            print(f"{{type(e).__name__}}: {{e}}")
        else:
            print("no error")
        """)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


@pytest.mark.parametrize("protocol", [2, 5])
def test_pickling_is_a_type_error_that_names_the_left_out_module(protocol):
    said = refusal(f"pickle.dumps(t, protocol={protocol})")
    assert said.startswith("TypeError: cannot pickle 'dlbridge.Tensor' object: ")
    assert "dlbridge._share" in said and "DLBRIDGE_SHARE=OFF" in said


@pytest.mark.parametrize("call", ["copy.copy(t)", "copy.deepcopy(t)"])
def test_copies_are_type_errors_that_name_the_left_out_module(call):
    said = refusal(call)
    assert said.startswith("TypeError: cannot copy 'dlbridge.Tensor' object: ") and "DLBRIDGE_SHARE=OFF" in said


def test_share_memory_is_a_type_error_that_names_the_left_out_module():
    said = refusal("t.share_memory()")
    assert said.startswith("TypeError: dlbridge.Tensor.share_memory() is not available: ")
    assert "DLBRIDGE_SHARE=OFF" in said


def test_empty_shared_is_a_value_error_that_names_the_left_out_module():
    said = refusal("dlbridge.empty((3,), 'float32', shared=True)")
    assert said.startswith("ValueError: shared=True is not available: ") and "DLBRIDGE_SHARE=OFF" in said


def test_no_tensor_is_shared_and_the_core_works():
    done = run_without_share("""
        assert t.is_shared is False
        u = dlbridge.empty((3,), "float32")
        assert not u.is_shared and u.shape == (3,)
        assert np.from_dlpack(dlbridge.convert(t, "numpy")).tolist() == [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]
        print("ok")
        """)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr


@pytest.mark.sharing
def test_a_pickle_from_a_sharing_build_names_the_missing_module_on_load():
    import numpy as np

    blob = pickle.dumps(dlbridge.from_dlpack(np.arange(3.0)), protocol=5)
    said = refusal(f"pickle.loads({blob!r})")
    assert said.startswith("ModuleNotFoundError: ") and "dlbridge._share" in said
