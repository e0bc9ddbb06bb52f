"""The coded errors adapters raise, looked up late: dlbridge imports this package while it loads."""

from __future__ import annotations


def fail(cls_name: str, message: str, hint: str):
    import dlbridge

    return getattr(dlbridge, cls_name)(message, hint)
