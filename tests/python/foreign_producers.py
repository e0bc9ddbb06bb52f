"""Producers that behave as other libraries' arrays do, for tests that must not depend on those libraries."""


class DTypeRaises:
    """A DLPack producer whose dtype property raises, as tvm_ffi 0.1.15's does for complex tensors."""

    def __init__(self, inner):
        self._inner = inner

    def __dlpack__(self, **kwargs):
        return self._inner.__dlpack__(**kwargs)

    def __dlpack_device__(self):
        return self._inner.__dlpack_device__()

    @property
    def dtype(self):
        raise ValueError("no dtype here")
