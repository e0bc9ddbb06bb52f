"""examples/nanobind_scale and examples/pybind11_scale, built against the
wheel, called with NumPy, PyTorch and JAX arrays."""

from __future__ import annotations

import importlib

import numpy as np
import pytest

import dlbridge
from conftest import run

EXAMPLES = ["scale_nanobind", "scale_pybind11"]


@pytest.fixture(params=EXAMPLES)
def example(request, extension_path):
    return importlib.import_module(request.param)


def test_scales_numpy_in_place(example):
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    assert example.scale(x, 2.0) is None
    np.testing.assert_array_equal(x, np.arange(6, dtype=np.float32).reshape(2, 3) * 2)


def test_refuses_read_only_numpy_with_the_coded_error_and_writes_nothing(example):
    x = np.ones(3, dtype=np.float32)
    x.flags.writeable = False
    with pytest.raises(dlbridge.ReadOnlyError) as caught:
        example.scale(x, 5.0)
    assert caught.value.code == "read_only" and "x.copy()" in caught.value.hint
    np.testing.assert_array_equal(x, np.ones(3, dtype=np.float32))


def test_refuses_float64_with_the_coded_error(example):
    with pytest.raises(dlbridge.UnsupportedDTypeError, match="takes float32 tensors; got float64"):
        example.scale(np.ones(3), 2.0)


def test_scales_torch_in_place(example):
    torch = pytest.importorskip("torch")
    t = torch.arange(4, dtype=torch.float32)
    example.scale(t, 0.5)
    assert t.tolist() == [0.0, 0.5, 1.0, 1.5]


def test_scale_refuses_a_lazily_negated_torch_tensor_instead_of_scaling_a_hidden_copy(example):
    # torch._neg_view(x)'s memory holds x's values; only a copy holds the negation, and scale
    # returned normally after scaling that copy, the caller's tensor unchanged.
    torch = pytest.importorskip("torch")
    lazy = torch._neg_view(torch.ones(4))
    with pytest.raises(dlbridge.CopyRequiredError) as refused:
        example.scale(lazy, 2.0)
    assert refused.value.code == "copy_required"
    assert lazy.tolist() == [-1.0] * 4


def test_scale_refuses_a_jax_array(example):
    # docs/cpp-extensions.md: a JAX array arrives read-only, and scale never writes into it.
    jnp = pytest.importorskip("jax.numpy")
    x = jnp.arange(3, dtype=jnp.float32)
    with pytest.raises(dlbridge.ReadOnlyError):
        example.scale(x, 2.0)
    np.testing.assert_array_equal(np.asarray(x), [0.0, 1.0, 2.0])


def test_scaled_takes_a_jax_array_and_returns_a_dlpack_tensor(example):
    jnp = pytest.importorskip("jax.numpy")
    x = jnp.arange(3, dtype=jnp.float32)
    out = example.scaled(x, 3.0)
    assert isinstance(out, dlbridge.Tensor) and hasattr(out, "__dlpack__")
    np.testing.assert_array_equal(np.asarray(jnp.from_dlpack(out)), [0.0, 3.0, 6.0])
    np.testing.assert_array_equal(np.asarray(x), [0.0, 1.0, 2.0])  # the input is untouched


@pytest.mark.parametrize("module, call", [("scale_nanobind", "scale(x, 2.0)"), ("scale_pybind11", "scale(x, 2.0)"),
                                          ("casters_nanobind", "writable(x)"), ("casters_pybind11", "writable(x)")])
def test_refusal_class_needs_no_prior_import_of_dlbridge(module, call, extensions, wheel_python):
    # A fresh interpreter with only the wheel: the extension loads dlbridge
    # itself -- the examples at import (require_dlbridge), the caster test
    # modules at their first tensor argument -- and the exception is
    # dlbridge's own class.
    code = (
        "import sys, numpy as np\n"
        f"sys.path.insert(0, {str(extensions)!r})\n"
        f"import {module}\n"
        "print('dlbridge' in sys.modules)\n"
        "x = np.ones(2, dtype=np.float32); x.flags.writeable = False\n"
        "try:\n"
        f"    {module}.{call}\n"
        "except Exception as e:\n"
        "    import dlbridge\n"
        "    print(type(e) is dlbridge.ReadOnlyError, e.code, dlbridge.__file__)\n"
    )
    said = run([wheel_python, "-c", code]).stdout.split()
    assert said[0] == str(module.startswith("scale_"))
    assert said[1:3] == ["True", "read_only"]
    assert "wheel-venv" in said[3]
