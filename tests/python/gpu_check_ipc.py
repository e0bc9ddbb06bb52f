"""The CUDA IPC step of scripts/gpu-check: what the driver does where the
simulator had to choose (docs/cuda-simulator.md), printed, not asserted --
the receiver's view after the exporter exits, and the error for a handle
whose exporter is gone. A file, not code on standard input: the spawned
exporter re-imports the parent's main module, which must be a file.

    python tests/python/gpu_check_ipc.py

Exit status 0 when every step ran (whatever the driver answered), 1 when one
could not run at all.
"""

from __future__ import annotations

import multiprocessing
import os
import pickle
import sys

import numpy as np

import dlbridge
from cuda_ipc_workers import produce


def main() -> int:
    ctx = multiprocessing.get_context("spawn")
    queue = ctx.Queue()
    exporter = ctx.Process(target=produce, args=(queue, True))
    exporter.start()
    t = pickle.loads(queue.get(timeout=120))
    late = queue.get(timeout=120)
    print("received:", np.from_dlpack(dlbridge.from_dlpack(t, device="cpu")).tolist(), flush=True)
    exporter.join(120)
    print("exporter exited with", exporter.exitcode,
          "(its stderr above says whether it gave up waiting)", flush=True)
    if exporter.exitcode != 0:
        return 1
    try:
        after = np.from_dlpack(dlbridge.from_dlpack(t, device="cpu")).tolist()
        print("after the exporter's exit:", after)
    except dlbridge.DLPackError as e:
        print("after the exporter's exit, reading fails:", e.code, "-", str(e).splitlines()[0])
    try:
        pickle.loads(late)
        print("a pickle loaded after the exporter's exit opened (unexpected)")
    except dlbridge.DLPackError as e:
        print("a pickle loaded after the exporter's exit:", e.code, "-", str(e).splitlines()[0])
    return 0


if __name__ == "__main__":
    os.environ.setdefault("DLBRIDGE_CUDA_IPC_EXIT_WAIT", "1")
    sys.exit(main())
