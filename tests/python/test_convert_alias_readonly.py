"""The explicit road to the direct call (issue 36): alias_readonly=True, or a
`with dlbridge.alias_readonly():` block, hands read-only or writability-unknown memory to a
target that cannot see READ_ONLY zero-copy, exactly as that library's own from_dlpack would.
Never the default; copy=False keeps its meaning; plan_convert says when it was used."""

import contextvars
import threading

import numpy as np
import pytest

import dlbridge

torch = pytest.importorskip("torch")


def read_only():
    a = np.arange(6, dtype=np.float32)
    a.flags.writeable = False
    return a


def test_the_default_is_still_one_private_copy():
    a = read_only()
    out = dlbridge.convert(a, "torch")
    assert out.data_ptr() != a.ctypes.data
    plan = dlbridge.plan_convert(a, "torch")
    assert plan.reasons == ("read_only",) and not plan.alias_readonly


def test_alias_readonly_true_shares_read_only_numpy_memory_with_torch():
    a = read_only()
    for copy in (None, False):
        out = dlbridge.convert(a, "torch", copy=copy, alias_readonly=True)
        assert out.data_ptr() == a.ctypes.data
        np.testing.assert_array_equal(out.numpy(), a)
        plan = dlbridge.plan_convert(a, "torch", copy=copy, alias_readonly=True)
        assert plan.zero_copy and plan.alias_readonly
        assert "alias_readonly" in plan.why and "read-only" in plan.why


def test_alias_readonly_shares_jax_memory_with_torch_as_torch_from_dlpack_does():
    jnp = pytest.importorskip("jax.numpy")
    x = jnp.arange(1024, dtype=jnp.float32)
    direct = torch.from_dlpack(x)
    out = dlbridge.convert(x, "torch", alias_readonly=True)
    assert out.data_ptr() == x.unsafe_buffer_pointer() == direct.data_ptr()
    assert "writability-unknown" in dlbridge.plan_convert(x, "torch", alias_readonly=True).why
    assert dlbridge.convert(x, "torch").data_ptr() != x.unsafe_buffer_pointer()


def test_copy_true_is_a_private_copy_even_with_alias_readonly():
    a = read_only()
    out = dlbridge.convert(a, "torch", copy=True, alias_readonly=True)
    assert out.data_ptr() != a.ctypes.data
    assert not dlbridge.plan_convert(a, "torch", copy=True, alias_readonly=True).alias_readonly


def test_a_target_that_sees_read_only_needs_no_consent():
    a = read_only()
    out = dlbridge.convert(a, "numpy", alias_readonly=True)
    assert not out.flags.writeable
    assert not dlbridge.plan_convert(a, "numpy", alias_readonly=True).alias_readonly


def test_a_layout_copy_is_still_made_with_alias_readonly():
    a = np.arange(12.0).reshape(3, 4)[:, ::-1]
    a.flags.writeable = False
    plan = dlbridge.plan_convert(a, "torch", alias_readonly=True)
    assert plan.reasons == ("layout",) and not plan.alias_readonly


def test_the_scope_sets_the_default_for_calls_inside_it():
    a = read_only()
    with dlbridge.alias_readonly():
        assert dlbridge.convert(a, "torch").data_ptr() == a.ctypes.data
        assert dlbridge.plan_convert(a, "torch").alias_readonly
        # An explicit keyword wins over the scope; blocks nest.
        assert dlbridge.convert(a, "torch", alias_readonly=False).data_ptr() != a.ctypes.data
        with dlbridge.alias_readonly(False):
            assert dlbridge.convert(a, "torch").data_ptr() != a.ctypes.data
        assert dlbridge.convert(a, "torch").data_ptr() == a.ctypes.data
    assert dlbridge.convert(a, "torch").data_ptr() != a.ctypes.data


def test_the_scope_ends_when_its_block_raises():
    a = read_only()
    with pytest.raises(RuntimeError), dlbridge.alias_readonly():
        raise RuntimeError
    assert dlbridge.convert(a, "torch").data_ptr() != a.ctypes.data


def test_the_scope_belongs_to_its_thread_and_context():
    a = read_only()
    seen = []

    def other_thread():
        seen.append(dlbridge.convert(a, "torch").data_ptr() == a.ctypes.data)

    with dlbridge.alias_readonly():
        t = threading.Thread(target=other_thread)
        t.start()
        t.join()
        # A copied context carries it, as contextvars do.
        seen.append(contextvars.copy_context().run(lambda: dlbridge.convert(a, "torch").data_ptr() == a.ctypes.data))
    assert seen == [False, True]


@pytest.mark.parametrize("bad", [1, "yes", np.bool_(True)])
def test_alias_readonly_takes_only_bools(bad):
    with pytest.raises(TypeError, match="alias_readonly"):
        dlbridge.convert(read_only(), "torch", alias_readonly=bad)
    with pytest.raises(TypeError, match="alias_readonly"):
        with dlbridge.alias_readonly(bad):
            pass
