# Type stubs for dlbridge._core (the nanobind extension). Started from
# `python -m nanobind.stubgen -m dlbridge._core`, then narrowed by hand where
# the binding accepts object but documents a narrower set of values;
# tests/python/test_stubs.py keeps the parameter names in step with the binding.
import enum
from collections.abc import Iterator
from typing import Any, Literal, SupportsIndex, TypeAlias

from typing_extensions import CapsuleType


__version__: str
DLPACK_VERSION: tuple[int, int]
FLAG_READ_ONLY: int
FLAG_IS_COPIED: int
FLAG_IS_SUBBYTE_TYPE_PADDED: int

# What the binding reads as a device: "cpu", "cuda:1", (type, id), a type
# number, a Device, or another library's device object.
DeviceLike: TypeAlias = str | tuple[int, int] | int | Device | Any
# A DLPack name ("bfloat16"), a (code, bits, lanes) triple, a DType, or a
# numpy / ml_dtypes / torch / jax dtype.
DTypeLike: TypeAlias = str | tuple[int, int, int] | DType | Any

class DeviceType(enum.IntEnum):
    """DLPack 1.3 device types (DLDeviceType)."""

    kDLCPU = 1
    kDLCUDA = 2
    kDLCUDAHost = 3
    kDLOpenCL = 4
    kDLVulkan = 7
    kDLMetal = 8
    kDLVPI = 9
    kDLROCM = 10
    kDLROCMHost = 11
    kDLExtDev = 12
    kDLCUDAManaged = 13
    kDLOneAPI = 14
    kDLWebGPU = 15
    kDLHexagon = 16
    kDLMAIA = 17
    kDLTrn = 18

class Device:
    """An immutable (device_type, device_id) pair: Device('cpu'), Device('cuda:1'), Device((2, 1)), Device(DeviceType.kDLCUDA, 1)."""

    def __init__(self, spec: DeviceLike, id: int | None = None) -> None: ...
    @property
    def type(self) -> DeviceType | int:
        """A DeviceType, or the bare number for a type DLPack 1.3 does not define."""
    @property
    def id(self) -> int: ...
    def __iter__(self) -> Iterator[DeviceType | int]: ...
    def __len__(self) -> Literal[2]: ...
    def __getitem__(self, arg: int, /) -> DeviceType | int: ...
    def __hash__(self) -> int: ...
    def __eq__(self, arg: object, /) -> bool: ...
    def __ne__(self, arg: object, /) -> bool: ...

class DType:
    """An immutable DLPack dtype (code, bits, lanes): DType('float32'), DType((2, 32, 1)), DType(numpy.float32), DType(torch.bfloat16)."""

    def __init__(self, spec: DTypeLike) -> None: ...
    @property
    def code(self) -> int: ...
    @property
    def bits(self) -> int: ...
    @property
    def lanes(self) -> int: ...
    @property
    def name(self) -> str: ...
    @property
    def itemsize(self) -> int:
        """Bytes per element when not packed (ceil(bits * lanes / 8))."""
    def __iter__(self) -> Iterator[int]: ...
    def __hash__(self) -> int: ...
    def __eq__(self, arg: object, /) -> bool: ...
    def __ne__(self, arg: object, /) -> bool: ...

class Tensor:
    """A validated DLPack tensor: a zero-copy view of another library's memory, or the owner of its own."""

    __dlpack_c_exchange_api__: CapsuleType
    @property
    def shape(self) -> tuple[int, ...]: ...
    @property
    def strides(self) -> tuple[int, ...]:
        """Strides in elements, always filled in."""
    @property
    def ndim(self) -> int: ...
    @property
    def size(self) -> int: ...
    @property
    def nbytes(self) -> int:
        """Bytes of a compact copy (packed for sub-byte dtypes)."""
    @property
    def dtype(self) -> DType: ...
    @property
    def device(self) -> Device: ...
    @property
    def readonly(self) -> bool: ...
    @property
    def flags(self) -> int:
        """DLPack flag bits (READ_ONLY=1, IS_SUBBYTE_TYPE_PADDED=4)."""
    @property
    def data_ptr(self) -> int:
        """Address of element 0 (data + byte_offset)."""
    @property
    def is_c_contiguous(self) -> bool: ...
    @property
    def is_f_contiguous(self) -> bool: ...
    def __dlpack__(
        self,
        *,
        stream: int | None = None,
        max_version: tuple[int, int] | None = None,
        dl_device: tuple[int, int] | DeviceLike | None = None,
        copy: bool | None = None,
    ) -> CapsuleType:
        """Export as a DLPack capsule: versioned (1, 3) when max_version >= (1, 0), legacy otherwise; dl_device and copy as the DLPack spec defines them."""
    def __dlpack_device__(self) -> tuple[DeviceType | int, int]: ...
    def __buffer__(self, flags: int, /) -> memoryview: ...
    @property
    def __array_interface__(self) -> dict[str, Any]:
        """NumPy's array interface (version 3) for host tensors; dtypes without a NumPy type code are '|V<itemsize>'."""
    def copy(self, device: DeviceLike | None = None) -> Tensor:
        """A new, writable, compact (C-order) copy."""
    def copy_unpacked(self) -> Tensor:
        """A new, writable, compact host copy with one element per byte: sub-byte values padded (IS_SUBBYTE_TYPE_PADDED) and vector lanes split into a trailing axis."""
    # Pickling and sharing between processes (docs/distributed.md).
    def __reduce_ex__(self, protocol: int) -> tuple[object, tuple[object, ...]]:
        """Pickle support: protocol 5 sends the data as one out-of-band buffer, without a copy when the tensor is dense; older protocols send one bytes copy; a shared tensor (share_memory(), host or CUDA) sends only its segment's name."""
    def __copy__(self) -> Tensor:
        """A new Tensor object over the same memory."""
    def __deepcopy__(self, memo: object) -> Tensor:
        """A new tensor with its own copy of the data and the same flags."""
    def share_memory(self) -> Tensor:
        """This tensor if it already lives in shared memory, else a copy in a new POSIX shared-memory segment (compact, same flags); for a CUDA tensor, a device copy exported with CUDA IPC. Pickles of it carry a segment's name, so other processes on this machine map the same pages (or open the same device memory)."""
    @property
    def is_shared(self) -> bool:
        """True when the tensor's memory is a shared-memory segment, or CUDA memory exported for other processes, that pickles pass by name."""

def from_dlpack(x: object, /, *, device: DeviceLike | None = None, copy: bool | None = None) -> Tensor:
    """Import x (a DLPack producer, a DLPack capsule, or any object with the buffer protocol, __array_interface__ or __cuda_array_interface__) as a dlbridge.Tensor, zero-copy whenever the request allows. copy=True never aliases; copy=False never copies."""

def convert(x: object, to: object, /, *, device: DeviceLike | None = None, copy: bool | None = None) -> Any:
    """Hand x to `to` ("numpy", "torch", "jax", "cupy", "tensorflow", "tvm_ffi", "dlbridge", or a module/callable with from_dlpack), zero-copy where the target allows, with the one smallest copy where it must, and an error rather than a silently wrong result."""

def to_dlpack(
    x: object,
    /,
    *,
    stream: int | None = None,
    max_version: tuple[int, int] | None = None,
    dl_device: tuple[int, int] | DeviceLike | None = None,
    copy: bool | None = None,
) -> CapsuleType:
    """Export any array-like object as a DLPack capsule with the DLPack producer rules."""

def empty(shape: SupportsIndex | tuple[int, ...] | list[int], dtype: DTypeLike = "float32", device: DeviceLike = "cpu", *, shared: bool = False) -> Tensor:
    """A new, writable, compact tensor with uninitialised contents; shared=True places it in POSIX shared memory (zero-filled), or for device="cuda:N" in CUDA memory exported with CUDA IPC, that pickles pass to other processes by name."""

def strides_fit(shape: tuple[int, ...], strides: tuple[int, ...], rule: str) -> bool:
    """Whether a layout (strides in elements) is one a consumer's rule admits: any, nonnegative, row_major or permuted_compact. Size-1 dims take any stride."""

def inspect_capsule(capsule: CapsuleType) -> dict[str, Any]:
    """Describe a DLPack capsule without consuming it: name, version, flags, device, dtype, shape, strides, and the validation problem if any."""
