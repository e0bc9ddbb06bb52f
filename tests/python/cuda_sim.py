"""The simulated CUDA runtime (tests/cudasim) from Python: the library that
DLBRIDGE_CUDART_PATH names, opened with ctypes. The path is the very file
dlbridge loads, so both share one runtime (dlopen returns the loaded copy):
tests set up device memory, streams and faults through it, independently of
dlbridge, and read simulated device memory directly (it is host memory)."""

from __future__ import annotations

import ctypes
import os

SUCCESS = 0
MEMORY_ALLOCATION = 2
NON_BLOCKING = 1
# A slow "kernel": far longer than any queue delay or stall between two calls.
SLOW_US = 300_000


def library_path() -> str | None:
    path = os.environ.get("DLBRIDGE_CUDART_PATH", "")
    return path if os.path.basename(path).startswith("libcudart_sim") else None


class Sim:
    def __init__(self, path: str) -> None:
        lib = ctypes.CDLL(path)
        vp, sz, c_int, c_uint = ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_uint
        for name, args in {
            "cudaMalloc": [ctypes.POINTER(vp), sz], "cudaFree": [vp],
            "cudaMallocManaged": [ctypes.POINTER(vp), sz, c_uint],
            "cudaMemsetAsync": [vp, c_int, sz, vp],
            "cudaMemcpyAsync": [vp, vp, sz, c_int, vp],
            "cudaStreamCreateWithFlags": [ctypes.POINTER(vp), c_uint],
            "cudaStreamDestroy": [vp], "cudaStreamSynchronize": [vp],
            "cudaSetDevice": [c_int], "cudaGetDevice": [ctypes.POINTER(c_int)],
            "cudaDeviceSynchronize": [], "cudasim_sleep_async": [c_uint, vp],
            "cudasim_fail_next": [ctypes.c_char_p, c_int, c_int],
            "cudasim_set_ignore_stream_waits": [c_int], "cudasim_count": [ctypes.c_char_p],
            "cudasim_reset_counts": [], "cudasim_fresh_byte": [],
            "cudaPointerGetAttributes": [vp, vp], "cudaGetLastError": [],
        }.items():
            fn = getattr(lib, name)
            fn.argtypes = args
            fn.restype = ctypes.c_longlong if name == "cudasim_count" else c_int
        self.lib = lib

    def check(self, status: int) -> None:
        assert status == SUCCESS, f"simulated CUDA call failed with {status}"

    def malloc(self, nbytes: int, device: int = 0) -> int:
        previous = self.current_device()
        self.check(self.lib.cudaSetDevice(device))
        p = ctypes.c_void_p()
        self.check(self.lib.cudaMalloc(ctypes.byref(p), nbytes))
        self.check(self.lib.cudaSetDevice(previous))
        return p.value

    def malloc_managed(self, nbytes: int) -> int:
        p = ctypes.c_void_p()
        self.check(self.lib.cudaMallocManaged(ctypes.byref(p), nbytes, 1))
        return p.value

    def free(self, p: int) -> None:
        self.check(self.lib.cudaFree(p))

    def stream(self, device: int = 0) -> int:
        previous = self.current_device()
        self.check(self.lib.cudaSetDevice(device))
        s = ctypes.c_void_p()
        self.check(self.lib.cudaStreamCreateWithFlags(ctypes.byref(s), NON_BLOCKING))
        self.check(self.lib.cudaSetDevice(previous))
        return s.value

    def current_device(self) -> int:
        d = ctypes.c_int(-1)
        self.check(self.lib.cudaGetDevice(ctypes.byref(d)))
        return d.value

    def pending_write(self, p: int, value: int, nbytes: int, stream: int, slow_us: int = SLOW_US) -> None:
        """A slow kernel on `stream` that will fill p with `value`."""
        self.check(self.lib.cudasim_sleep_async(slow_us, stream))
        self.check(self.lib.cudaMemsetAsync(p, value, nbytes, stream))

    def settle(self) -> None:
        previous = self.current_device()
        for d in (0, 1):
            self.check(self.lib.cudaSetDevice(d))
            self.check(self.lib.cudaDeviceSynchronize())
        self.check(self.lib.cudaSetDevice(previous))

    def peek(self, p: int, nbytes: int) -> bytes:
        """The bytes at p now, without waiting for any stream."""
        return ctypes.string_at(p, nbytes)

    def is_device_memory(self, p: int) -> bool:
        """Whether p lies in a live device allocation (or an opened import)."""
        attributes = ctypes.create_string_buffer(128)
        status = self.lib.cudaPointerGetAttributes(attributes, p)
        if status != SUCCESS:
            self.lib.cudaGetLastError()
            return False
        return int.from_bytes(attributes.raw[:4], "little") == 2  # cudaMemoryTypeDevice

    def count(self, what: str) -> int:
        return self.lib.cudasim_count(what.encode())

    @property
    def fresh_byte(self) -> int:
        return self.lib.cudasim_fresh_byte()
