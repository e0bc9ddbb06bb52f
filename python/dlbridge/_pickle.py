"""The names that pickles of dlbridge.Tensor call on load.

Pickle stores a reconstructor by module and name, and cannot store a
function of the extension; these forward to it. Their names, and the fields
they take, are part of the pickle format: keep them. The extension checks
every field (a forged pickle gets InvalidTensorError), so these take the
fields as pickle passes them, positionally. They are the sharing module's
(dlbridge._share): a dlbridge built without it (DLBRIDGE_SHARE=OFF) cannot
load a pickled tensor, and says so (ModuleNotFoundError).
"""

from __future__ import annotations

from . import _share


def rebuild_tensor(*fields):
    """A tensor over a received buffer (protocol 5) or bytes (protocol < 5):
    (buffer, layout[, private_bytes[, writability_unknown]])."""
    return _share._rebuild_tensor(*fields)


def rebuild_shared_tensor(*fields):
    """A tensor over the shared-memory segment that a pickle names:
    (name, ticket, layout[, writability_unknown])."""
    return _share._rebuild_shared_tensor(*fields)


def rebuild_cuda_tensor(*fields):
    """A tensor over CUDA memory another process shared (CUDA IPC):
    (name, ticket, layout[, writability_unknown])."""
    return _share._rebuild_cuda_tensor(*fields)
