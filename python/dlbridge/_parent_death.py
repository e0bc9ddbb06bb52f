"""A process the package starts ends with the process that started it, however that one ends.

The doctor's worker runs in a session of its own (so that a hang can be killed with its forks),
where neither the terminal's signals nor the parent's exit reach it; a doctor ended by SIGTERM
or SIGKILL while a library's import hangs would leave it sleeping for good. On Linux the kernel
is asked to kill the process when its parent dies (``prctl(PR_SET_PDEATHSIG)``); elsewhere a
daemon thread watches the parent. Either way a parent that is already gone is noticed at once.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys
import threading

_PR_SET_PDEATHSIG = 1  # <linux/prctl.h>
# How often the watching thread (not on Linux) looks for its parent, in seconds.
_WATCH_INTERVAL = 0.5


def _ask_the_kernel() -> bool:
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def _watch(parent: int) -> None:
    def run():
        while os.getppid() == parent:
            threading.Event().wait(_WATCH_INTERVAL)
        os.kill(os.getpid(), signal.SIGKILL)

    threading.Thread(target=run, name="dlbridge-parent-watch", daemon=True).start()


def end_with_parent(parent: int) -> None:
    """Kill this process when ``parent`` (the pid that started it) ends; at once if it has.

    Call it first thing in the child, and in every fork of the child (the kernel's request is
    not inherited by a fork, and a watching thread does not survive one). On Linux the request
    is bound to the thread that started the child: the tools start a child from the thread that
    then waits for it.
    """
    if not _ask_the_kernel():
        _watch(parent)
    # The parent may have died before the request was made: then nothing will be sent.
    if os.getppid() != parent:
        os.kill(os.getpid(), signal.SIGKILL)
