"""torch through dlbridge: the lazy conjugate/negative bits are resolved (or
refused with copy=False) on every path, and torch's refusals arrive as coded
DLPackErrors, never as RuntimeError with a C++ stack trace.

torch's C exchange API exports a conjugated tensor as its unconjugated
memory, and torch's own __dlpack__ does the same for the negative bit; NumPy
shows the second mistake, dlbridge must show neither."""

import warnings

import jax
import numpy as np
import pytest
import torch

import dlbridge
from conftest import check_error


def lazy_tensors():
    z = torch.tensor([1 + 1j, 2 - 2j, -3 + 0.5j])
    return [
        ("conj", torch.conj(z)),
        ("neg-view", torch._neg_view(torch.tensor([1.0, -2.0, 3.0]))),
        ("conj-imag", torch.conj(z).imag),
        ("conj-strided", torch.conj((torch.arange(8.0) * (1 + 2j)).reshape(2, 4))[:, ::2]),
        ("conj-of-neg", torch.conj(torch._neg_view(z))),
        # A subclass goes through torch's __dlpack__, which refuses the conjugate bit
        # that the C exchange API exports silently: both roads end in the resolved copy.
        ("conj-subclass", torch.conj(z).as_subclass(LazySubclass)),
        ("conj-complex128", torch.conj(z.to(torch.complex128))),
        ("conj-requires-grad", torch.conj(z.clone().requires_grad_())),
    ]


class LazySubclass(torch.Tensor):
    pass


def meant(x):
    return x.detach().resolve_conj().resolve_neg().numpy()


@pytest.mark.parametrize("name, x", lazy_tensors(), ids=[n for n, _ in lazy_tensors()])
def test_lazy_bits_are_resolved_on_import(name, x):
    assert x.is_conj() or x.is_neg()
    expected = meant(x)
    np.testing.assert_array_equal(np.asarray(dlbridge.from_dlpack(x)), expected)
    np.testing.assert_array_equal(np.asarray(dlbridge.from_dlpack(x, copy=True)), expected)
    np.testing.assert_array_equal(np.asarray(dlbridge.from_dlpack(dlbridge.to_dlpack(x, max_version=(1, 3)))), expected)
    np.testing.assert_array_equal(dlbridge.convert(x, "numpy"), expected)
    assert dlbridge.convert(x, "torch") is x  # torch's own tensor, lazy bits and all
    np.testing.assert_array_equal(dlbridge.convert(x, "torch", copy=True).numpy(), expected)
    np.testing.assert_array_equal(np.asarray(dlbridge.convert(x, "jax")), expected)


@pytest.mark.parametrize("name, x", lazy_tensors(), ids=[n for n, _ in lazy_tensors()])
def test_lazy_bits_with_copy_false_are_refused(name, x):
    with pytest.raises(dlbridge.CopyRequiredError) as info:
        dlbridge.from_dlpack(x, copy=False)
    assert "resolve_conj" in check_error(info, dlbridge.CopyRequiredError, "copy_required")


def test_resolving_lazy_bits_leaves_the_source_untouched():
    z = torch.tensor([1 + 1j])
    x = torch.conj(z)
    t = dlbridge.from_dlpack(x)
    assert t.data_ptr != z.data_ptr()
    assert x.is_conj() and z[0] == 1 + 1j


def test_plain_torch_tensors_stay_zero_copy():
    x = torch.arange(6.0)
    assert dlbridge.from_dlpack(x).data_ptr == x.data_ptr()
    assert dlbridge.from_dlpack(x[::2]).data_ptr == x.data_ptr()


def refusing_tensors():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        quantized = torch.quantize_per_tensor(torch.tensor([1.0, 2.0]), 0.1, 10, torch.quint8)
    return [
        ("quantized", quantized, dlbridge.UnsupportedDTypeError, "unsupported_dtype", "dequantize"),
        ("meta", torch.empty(2, device="meta"), dlbridge.DeviceUnavailableError, "device_unavailable",
         "Materialise"),
        ("sparse", torch.eye(2).to_sparse(), dlbridge.LayoutError, "unsupported_layout", "to_dense"),
    ]


@pytest.mark.parametrize("case", refusing_tensors(), ids=[c[0] for c in refusing_tensors()])
@pytest.mark.parametrize("entry", ["from_dlpack", "to_dlpack"])
def test_torch_refusals_are_coded_dlpack_errors(case, entry):
    _, x, cls, code, fix = case
    with pytest.raises(cls) as info:
        getattr(dlbridge, entry)(x)
    message = check_error(info, cls, code)
    assert fix in info.value.hint
    assert "torch.Tensor.__dlpack__ refused" in message
    assert "Exception raised from" not in message and "std::" not in message
    assert isinstance(info.value.__cause__, BufferError)


def test_requires_grad_is_imported_read_only_on_every_path():
    # torch's own __dlpack__ refuses it; dlbridge imports the detached view, read-only,
    # whichever path the request takes (the exchange API, or __dlpack__ for copy=False).
    x = torch.ones(2, requires_grad=True)
    for kwargs in ({}, {"copy": False}, {"device": "cpu"}):
        t = dlbridge.from_dlpack(x, **kwargs)
        assert t.readonly and t.data_ptr == x.data_ptr(), kwargs
    assert not dlbridge.from_dlpack(x, copy=True).readonly  # a private copy


def test_generic_producer_refusal_is_a_producer_error_with_the_cause():
    class Refusing:
        def __dlpack__(self, **kwargs):
            raise BufferError("no, not today")

        def __dlpack_device__(self):
            return (1, 0)

    with pytest.raises(dlbridge.ProducerError) as info:
        dlbridge.from_dlpack(Refusing())
    assert "no, not today" in check_error(info, dlbridge.ProducerError, "producer_refused")
    assert str(info.value.__cause__) == "no, not today"


def test_subclass_that_replaces_dunder_dlpack_is_asked_through_it():
    # The exchange API would bypass the subclass's own checks.
    class Guarded(torch.Tensor):
        def __dlpack__(self, **kwargs):
            raise BufferError("guarded")

    x = torch.arange(3.0).as_subclass(Guarded)
    with pytest.raises(dlbridge.ProducerError, match="guarded"):
        dlbridge.from_dlpack(x)
