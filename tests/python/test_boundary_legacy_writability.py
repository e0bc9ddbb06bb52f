"""A legacy ("dltensor") capsule cannot say whether its memory may be
written. JAX's arrays are immutable and arrive that way, and dlbridge used
to hand out writable views of them. The rule (docs/boundary.md): such a
tensor's writability is unknown, so it is read-only to the buffer protocol,
__array_interface__ and versioned exports, and may still leave as a legacy
capsule, which claims no more than the one that delivered it."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import dlbridge
from dlbridge._core import _testing


def test_jax_memory_cannot_be_written_through_dlbridge():
    x = jnp.arange(4.0)
    t = dlbridge.from_dlpack(x)
    assert t.readonly
    with pytest.raises(ValueError, match="read-only"):
        np.asarray(t)[0] = 99
    with pytest.raises(TypeError):
        memoryview(t)[0] = 99.0
    assert t.__array_interface__["data"][1] is True
    assert not np.from_dlpack(t).flags.writeable
    assert float(x[0]) == 0.0


def test_versioned_exports_carry_read_only():
    t = dlbridge.from_dlpack(jnp.arange(4.0))
    assert dlbridge.inspect_capsule(t.__dlpack__(max_version=(1, 3)))["flags"] & 1


@pytest.mark.parametrize("leave", [lambda t: t.__dlpack__(), lambda t: dlbridge.to_dlpack(t)])
def test_it_may_leave_again_as_a_legacy_capsule(leave):
    t = dlbridge.from_dlpack(jnp.arange(4.0))
    capsule = leave(t)
    assert dlbridge.inspect_capsule(capsule)["name"] == "dltensor"


def test_jax_round_trip_through_dlbridge_keeps_working():
    x = jnp.arange(6.0).reshape(2, 3)
    t = dlbridge.from_dlpack(x)
    back = jnp.from_dlpack(t)
    np.testing.assert_array_equal(np.asarray(back), np.asarray(x))
    np.testing.assert_array_equal(np.asarray(jax.dlpack.from_dlpack(dlbridge.from_dlpack(t))), np.asarray(x))
    np.testing.assert_array_equal(np.asarray(dlbridge.convert(x, "jax")), np.asarray(x))


def test_the_unknown_survives_reimport_and_device_relabel():
    t = dlbridge.from_dlpack(jnp.arange(4.0))
    again = dlbridge.from_dlpack(t, device="cpu")
    assert again.readonly
    assert dlbridge.inspect_capsule(again.__dlpack__())["name"] == "dltensor"


def test_a_copy_is_known_writable():
    c = dlbridge.from_dlpack(jnp.arange(4.0)).copy()
    assert not c.readonly
    np.asarray(c)[0] = 7.0
    assert dlbridge.from_dlpack(jnp.arange(4.0), copy=True).readonly is False


def test_every_legacy_capsule_is_read_only_on_import():
    t = dlbridge.from_dlpack(_testing.make_capsule(versioned=False))
    assert t.readonly
    assert not dlbridge.from_dlpack(_testing.make_capsule(versioned=True)).readonly
