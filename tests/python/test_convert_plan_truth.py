"""plan_convert tells the truth about every copy convert makes (issue 38, items 1-3): a torch
lazy view's resolve is the one copy and is in the plan; one-value-per-byte sub-byte data is
refused by the plan exactly as by convert for a target that takes legacy capsules only; data
in the other byte order is one aligned copy that dlbridge makes, which no target copies again."""

import numpy as np
import pytest

import dlbridge


@pytest.fixture
def torch():
    return pytest.importorskip("torch")


def lazy_views(torch):
    z = torch.tensor([1 + 2j, 3 - 1j])
    return {"conj": lambda: z.conj(), "neg": lambda: torch.ones(4)._neg_view()}


@pytest.mark.parametrize("kind", ["conj", "neg"])
@pytest.mark.parametrize("target", ["numpy", "dlbridge", "jax"])
def test_a_lazy_torch_view_is_resolved_into_the_one_copy_the_plan_names(torch, kind, target):
    if target == "jax":
        pytest.importorskip("jax")
    x = lazy_views(torch)[kind]()
    expected = x.resolve_conj().resolve_neg().numpy()
    for copy in (None, True):
        plan = dlbridge.plan_convert(x, target, copy=copy)
        assert not plan.zero_copy
        assert plan.reasons[0] == "lazy_view"
        assert "requested" not in plan.reasons  # the resolve is the copy copy=True asks for
        assert "lazy view" in plan.why
        out = dlbridge.convert(x, target, copy=copy)
        got = np.asarray(dlbridge.convert(out, "numpy")) if target == "dlbridge" else np.asarray(out)
        np.testing.assert_array_equal(got, expected)
    with pytest.raises(dlbridge.CopyRequiredError):
        dlbridge.plan_convert(x, target, copy=False)


def test_a_resolved_lazy_view_is_private_and_writable(torch):
    x = lazy_views(torch)["conj"]()
    before = x.resolve_conj().clone()
    out = dlbridge.convert(x, "numpy", copy=True)
    assert out.flags.writeable
    out[0] = 0
    assert torch.equal(x.resolve_conj(), before)


@pytest.mark.parametrize("name", ["int4", "uint4", "float4_e2m1fn"])
def test_one_value_per_byte_sub_byte_data_is_refused_by_the_plan_as_by_convert_for_tvm_ffi(name):
    ml_dtypes = pytest.importorskip("ml_dtypes")
    pytest.importorskip("tvm_ffi")
    a = np.zeros(8, dtype=getattr(ml_dtypes, name))
    for copy in (None, True, False):
        with pytest.raises(dlbridge.LayoutError) as planned:
            dlbridge.plan_convert(a, "tvm_ffi", copy=copy)
        with pytest.raises(dlbridge.LayoutError) as converted:
            dlbridge.convert(a, "tvm_ffi", copy=copy)
        assert str(planned.value) == str(converted.value)
        assert "legacy" in str(planned.value)


@pytest.mark.parametrize("dtype", [">f8", ">i4", ">c16", ">u2"])
def test_the_other_byte_order_into_jax_is_exactly_one_aligned_copy(dtype):
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    a = np.arange(100_000).astype(dtype)
    plan = dlbridge.plan_convert(a, "jax")
    assert (plan.copy, plan.reasons) == ("dlbridge", ("byte_order",))
    out = dlbridge.convert(a, "jax")
    assert out.unsafe_buffer_pointer() % 64 == 0
    np.testing.assert_array_equal(np.asarray(out), a)


@pytest.mark.parametrize("target", ["dlbridge", "torch"])
def test_the_other_byte_order_is_one_native_copy_for_every_target(target):
    # (NumPy itself gets its own array back as it is.)
    if target == "torch":
        pytest.importorskip("torch")
    a = np.arange(12.0).astype(">f8").reshape(3, 4)[:, ::-1]
    for copy in (None, True):
        plan = dlbridge.plan_convert(a, target, copy=copy)
        assert plan.reasons == ("byte_order",)
        out = dlbridge.convert(a, target, copy=copy)
        got = np.asarray(dlbridge.convert(out, "numpy"))
        assert got.dtype == np.float64 and got.dtype.isnative
        np.testing.assert_array_equal(got, a)
    with pytest.raises(dlbridge.UnsupportedDTypeError) as planned:
        dlbridge.plan_convert(a, target, copy=False)
    with pytest.raises(dlbridge.UnsupportedDTypeError) as converted:
        dlbridge.convert(a, target, copy=False)
    assert str(planned.value) == str(converted.value)


def test_the_test_only_general_route_is_gone():
    assert not hasattr(dlbridge._core, "_convert_general")
