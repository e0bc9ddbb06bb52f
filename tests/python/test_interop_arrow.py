"""PyArrow (pinned in requirements/libs.txt) as producer through from_dlpack and as convert's "arrow" target."""

import numpy as np
import pytest

import dlbridge

pa = pytest.importorskip("pyarrow", reason="pyarrow is not installed (scripts/setup installs requirements/libs.txt)")

PRIMITIVE = ["int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "float16", "float32", "float64"]


def address(arr) -> int:
    """Where element 0 of a primitive Array is."""
    return arr.buffers()[1].address + arr.offset * arr.type.bit_width // 8


@pytest.mark.parametrize("name", PRIMITIVE)
def test_primitive_arrays_import_zero_copy_and_read_only(name):
    arr = pa.array(np.arange(7).astype(name))
    t = dlbridge.from_dlpack(arr)
    assert (t.dtype.name, t.shape, t.data_ptr) == (name, (7,), address(arr))
    assert t.readonly  # Arrow buffers are immutable, and the flag says so
    np.testing.assert_array_equal(np.from_dlpack(t), np.arange(7).astype(name))


def test_slices_keep_their_offset():
    arr = pa.array(np.arange(10, dtype=np.int32)).slice(3, 4)
    t = dlbridge.from_dlpack(arr)
    assert t.data_ptr == address(arr) == arr.buffers()[1].address + 12
    np.testing.assert_array_equal(np.from_dlpack(t), [3, 4, 5, 6])


def test_nulls_are_refused_with_the_fix():
    arr = pa.array([1, None, 3], pa.int32())
    # Finding: pyarrow's own export refuses with an uncoded ArrowTypeError.
    with pytest.raises(pa.ArrowTypeError, match="no nulls"):
        arr.__dlpack__()
    with pytest.raises(dlbridge.LayoutError, match="1 null") as info:
        dlbridge.from_dlpack(arr)
    assert info.value.code == "unsupported_layout" and "fill_null" in info.value.hint
    # convert reads its source through from_dlpack, so it refuses the same way.
    with pytest.raises(dlbridge.LayoutError):
        dlbridge.convert(arr, "numpy")


def test_a_slice_without_the_nulls_imports():
    arr = pa.array([1, None, 3, 4], pa.int32()).slice(2)
    np.testing.assert_array_equal(np.from_dlpack(dlbridge.from_dlpack(arr)), [3, 4])


def test_booleans_are_unpacked_into_a_copy():
    arr = pa.array([True, False, True, True, False, False, True, False, True]).slice(1)
    # Finding: Arrow stores booleans one bit each and its export refuses them.
    with pytest.raises(pa.ArrowTypeError, match="Bit-packed boolean"):
        arr.__dlpack__()
    t = dlbridge.from_dlpack(arr)
    assert t.dtype.name == "bool" and not t.readonly
    np.testing.assert_array_equal(np.from_dlpack(t), [False, True, True, False, False, True, False, True])
    with pytest.raises(dlbridge.CopyRequiredError):
        dlbridge.from_dlpack(arr, copy=False)
    # convert's C++ route hands Arrow's refusals to the same second look.
    np.testing.assert_array_equal(dlbridge.convert(arr, "numpy"), np.from_dlpack(t))


def test_chunked_arrays():
    one = pa.chunked_array([np.arange(4, dtype=np.int64)])
    assert dlbridge.from_dlpack(one).data_ptr == address(one.chunk(0))
    two = pa.chunked_array([np.arange(2, dtype=np.int64), np.arange(2, 5, dtype=np.int64)])
    np.testing.assert_array_equal(np.from_dlpack(dlbridge.from_dlpack(two)), np.arange(5))
    with pytest.raises(dlbridge.CopyRequiredError):
        dlbridge.from_dlpack(two, copy=False)


@pytest.mark.parametrize("make", [lambda: pa.array(["a", "b"]), lambda: pa.array([]), lambda: pa.array([[1], [2]])],
                         ids=["strings", "nulls", "lists"])
def test_non_numeric_arrays_are_refused_with_a_code(make):
    # pyarrow refuses with ArrowTypeError, not a BufferError: dlbridge reports it as the
    # coded ProducerError, pyarrow's exception kept as the cause.
    with pytest.raises(dlbridge.ProducerError, match="not compatible with DLPack") as excinfo:
        dlbridge.from_dlpack(make())
    assert excinfo.value.code == "producer_refused"
    assert isinstance(excinfo.value.__cause__, pa.ArrowTypeError)


def test_fixed_shape_tensor_array_imports_with_its_shape():
    host = np.arange(24, dtype=np.float32).reshape(4, 2, 3)
    arr = pa.FixedShapeTensorArray.from_numpy_ndarray(host)
    t = dlbridge.from_dlpack(arr)
    assert (t.shape, t.strides, t.readonly) == ((4, 2, 3), (6, 3, 1), True)
    assert t.data_ptr == arr.storage.values.buffers()[1].address
    np.testing.assert_array_equal(np.from_dlpack(t), host)


def test_fixed_shape_tensor_array_with_a_null_tensor_is_refused():
    storage = pa.FixedSizeListArray.from_arrays(pa.array(np.arange(4, dtype=np.float32)), 2)
    storage = pa.array([[0.0, 1.0], None], storage.type)
    arr = pa.ExtensionArray.from_storage(pa.fixed_shape_tensor(pa.float32(), [2]), storage)
    with pytest.raises(dlbridge.LayoutError, match="null"):
        dlbridge.from_dlpack(arr)


@pytest.mark.parametrize("name", PRIMITIVE)
def test_convert_one_dimensional_zero_copy(name):
    host = np.arange(5).astype(name)
    out = dlbridge.convert(host, "arrow", copy=False)
    assert isinstance(out, pa.Array) and out.type == pa.from_numpy_dtype(host.dtype)
    assert address(out) == host.__array_interface__["data"][0]
    np.testing.assert_array_equal(out.to_numpy(), host)


def test_convert_n_dimensional_to_fixed_shape_tensor_array():
    host = np.arange(24, dtype=np.int16).reshape(2, 3, 4)
    out = dlbridge.convert(host, "arrow", copy=False)
    assert isinstance(out, pa.FixedShapeTensorArray)
    assert (len(out), out.type.shape) == (2, [3, 4])
    assert out.storage.values.buffers()[1].address == host.__array_interface__["data"][0]
    back = out.to_numpy_ndarray()
    assert back.strides == host.strides
    np.testing.assert_array_equal(back, host)


@pytest.mark.parametrize("layout", ["transposed", "strided", "negative"])
def test_convert_re_lays_out_what_arrow_misreads(layout):
    host = np.arange(24, dtype=np.float32).reshape(2, 4, 3)
    view = {"transposed": host.transpose(0, 2, 1), "strided": host[:, ::2], "negative": host[:, ::-1]}[layout]
    out = dlbridge.convert(view, "arrow")
    np.testing.assert_array_equal(out.to_numpy_ndarray(), view)
    with pytest.raises(dlbridge.LayoutError):
        dlbridge.convert(view, "arrow", copy=False)


def test_finding_arrow_reads_strided_tensors_as_wrong_values():
    view = np.arange(24, dtype=np.float32).reshape(2, 4, 3)[:, ::2]
    direct = pa.FixedShapeTensorArray.from_dlpack(dlbridge.from_dlpack(view))
    assert not np.array_equal(direct.to_numpy_ndarray(), view)


@pytest.mark.parametrize("shape", [(9,), (3, 3)])
def test_convert_packs_booleans(shape):
    host = (np.arange(9) % 3 == 0).reshape(shape)
    out = dlbridge.convert(host, "arrow")
    flat = out if len(shape) == 1 else out.storage.values
    assert flat.type == pa.bool_() and flat.buffers()[1].size == 2  # 9 bits in 2 bytes
    np.testing.assert_array_equal(flat.to_numpy(zero_copy_only=False), host.reshape(-1))
    with pytest.raises(dlbridge.CopyRequiredError):
        dlbridge.convert(host, "arrow", copy=False)


@pytest.mark.parametrize("shape", [(0,), (0, 6), (0, 2, 2)])
def test_convert_empty_tensors(shape):
    # Finding: pyarrow 26.0.1's own importers refuse an empty 1-d tensor and die (SIGFPE) on an empty n-d one.
    out = dlbridge.convert(np.zeros(shape, np.float32), "arrow")
    assert len(out) == 0
    if len(shape) == 1:
        assert out.type == pa.float32()
    else:
        assert out.type.shape == list(shape[1:]) and out.type.value_type == pa.float32()


def test_convert_refuses_what_arrow_cannot_hold():
    with pytest.raises(dlbridge.LayoutError, match="at least one dimension"):
        dlbridge.convert(np.float32(1.0), "arrow")
    with pytest.raises(dlbridge.LayoutError, match="inner dimensions"):
        dlbridge.convert(np.zeros((3, 0), np.float32), "arrow")
    with pytest.raises(dlbridge.UnsupportedDTypeError):
        dlbridge.convert(np.zeros(3, np.complex64), "arrow")


def test_convert_read_only_stays_zero_copy():
    host = np.arange(4, dtype=np.float64)
    host.flags.writeable = False
    out = dlbridge.convert(host, "arrow", copy=False)  # Arrow never writes its buffers
    assert address(out) == host.__array_interface__["data"][0]


def test_arrow_to_torch_through_convert():
    import torch

    arr = pa.array(np.arange(6, dtype=np.float32))
    for copy in (None, True):  # read-only source: torch gets a private copy
        out = dlbridge.convert(arr, "torch", copy=copy)
        assert torch.equal(out, torch.arange(6, dtype=torch.float32))
        assert out.data_ptr() != arr.buffers()[1].address
    with pytest.raises(dlbridge.ReadOnlyError):
        dlbridge.convert(arr, "torch", copy=False)


def test_check_findings():
    from dlbridge import check

    found = {r["rule"]: r for r in check.run(check.load_target("arrow"))}
    # Versioned only: a legacy request is refused with ArrowNotImplementedError, and every array is READ_ONLY.
    assert found["P2.versioned"]["status"] == found["P8.flags_readonly"]["status"] == check.PASS
    assert found["P2.legacy"]["status"] == check.FAIL and "ArrowNotImplementedError" in found["P2.legacy"]["evidence"]
    assert found["P8.flags_default"]["status"] == check.FAIL and "0x1" in found["P8.flags_default"]["evidence"]
    assert found["P8.edge_shapes"]["status"] == check.NA


def test_an_empty_tensor_with_a_dimension_arrow_cannot_hold_is_refused_with_a_code():
    # It used to reach pyarrow as a raw OverflowError about int32_t.
    with pytest.raises(dlbridge.LayoutError) as excinfo:
        dlbridge.convert(dlbridge.empty((0, 2**40), "float32"), "arrow")
    assert "2147483647" in str(excinfo.value)
