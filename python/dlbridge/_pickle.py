"""The names that pickles of dlbridge.Tensor call on load.

Pickle stores a reconstructor by module and name, and cannot store a
function of the extension; these forward to it. Their names are part of
the pickle format: keep them.
"""

from __future__ import annotations

from . import _core


def rebuild_tensor(buffer, layout, private_bytes=False):
    """A tensor over a received buffer (protocol 5) or bytes (protocol < 5)."""
    return _core._rebuild_tensor(buffer, layout, private_bytes)


def rebuild_shared_tensor(name, ticket, layout):
    """A tensor over the shared-memory segment that a pickle names."""
    return _core._rebuild_shared_tensor(name, ticket, layout)


def rebuild_cuda_tensor(name, ticket, layout):
    """A tensor over CUDA memory another process shared (CUDA IPC)."""
    return _core._rebuild_cuda_tensor(name, ticket, layout)
