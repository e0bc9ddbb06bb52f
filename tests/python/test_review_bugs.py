"""Bugs found in review, each reproduced; the fixes belong in the core."""

import ctypes

import dlbridge
from dlbridge._core import FLAG_IS_SUBBYTE_TYPE_PADDED, _testing


def _padded_uint4(values):
    capsule = _testing.make_capsule(shape=[len(values)], strides=[1], dtype=(1, 4, 1),
                                    flags=FLAG_IS_SUBBYTE_TYPE_PADDED, data_bytes=len(values))
    t = dlbridge.from_dlpack(capsule)
    ctypes.memmove(t.data_ptr, bytes(values), len(values))
    return t


def test_padded_subbyte_tensor_is_not_misread_after_a_legacy_export():
    """A legacy capsule cannot carry IS_SUBBYTE_TYPE_PADDED, so a padded
    sub-byte tensor exported legacy (no max_version) is read back as packed:
    [1, 2, 3, 4] arrives as [1, 0, 2, 0]. The export must refuse (BufferError)
    or hand over data that means the same values (plan_export refuses only
    READ_ONLY for legacy; make_legacy and ManagedTensor::release_legacy drop
    the padded flag silently)."""
    t = _padded_uint4([1, 2, 3, 4])
    assert dlbridge.convert(t, "numpy").astype(int).tolist() == [1, 2, 3, 4]
    try:
        capsule = t.__dlpack__()
    except BufferError:
        return
    back = dlbridge.from_dlpack(capsule)
    assert dlbridge.convert(back, "numpy").astype(int).tolist() == [1, 2, 3, 4]


def test_dtype_and_device_hash_like_what_they_equal():
    """DType('float32') == 'float32' and Device('cpu') == 'cpu' (api.md), yet
    their hashes differ from the strings', so dict and set lookups by name
    miss: equal objects must hash equal (Python data model)."""
    assert dlbridge.DType("float32") == "float32"
    assert "float32" in {dlbridge.DType("float32")}
    assert dlbridge.Device("cpu") == "cpu"
    assert "cpu" in {dlbridge.Device("cpu")}


def test_padded_subbyte_legacy_refusal_is_documented():
    import re

    from dlbridge import catalogue

    t = _padded_uint4([1, 2, 3, 4])
    try:
        t.__dlpack__()
    except dlbridge.LayoutError as e:
        assert e.code == "unsupported_layout"
        assert "max_version=(1, 3)" in e.hint
        assert re.search(catalogue.by_code()["unsupported_layout"].pattern, str(e))
    else:
        raise AssertionError("a padded sub-byte tensor left as a legacy capsule")
