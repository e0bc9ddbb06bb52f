"""The one freed large host buffer dlbridge keeps for the next allocation of its size
(include/dlbridge/platform/host_memory.hpp, KeptBuffer), seen from Python: a result's memory
comes back for the next result of the same size, never while the first is alive, and
DLBRIDGE_KEEP_FREED=0 keeps none. 64 MiB, so that the C library's own allocator maps new,
zeroed memory for every request (above its largest mmap threshold)."""

import os
import subprocess
import sys
import textwrap

import numpy as np

import dlbridge

SIZE = 64 << 20

PROGRAM = textwrap.dedent(f"""
    import numpy as np
    import dlbridge
    first = np.from_dlpack(dlbridge.empty(({SIZE},), "uint8"))
    first[:] = 7
    del first
    again = np.from_dlpack(dlbridge.empty(({SIZE},), "uint8"))
    print(int(again[0]), int(again[-1]))
""")


def run(env_value):
    env = dict(os.environ)
    env.pop("DLBRIDGE_KEEP_FREED", None)
    if env_value is not None:
        env["DLBRIDGE_KEEP_FREED"] = env_value
    done = subprocess.run([sys.executable, "-c", PROGRAM], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout.split()


def test_a_freed_result_comes_back_for_the_next_of_its_size():
    assert run(None) == ["7", "7"]


def test_keep_freed_0_keeps_nothing():
    assert run("0") == ["0", "0"]


def test_a_live_result_is_never_handed_out_again():
    a = np.arange(SIZE // 4, dtype=np.float32).reshape(4096, 4096)
    first = dlbridge.from_dlpack(a.T).copy()
    second = dlbridge.from_dlpack(a.T).copy()
    assert first.data_ptr != second.data_ptr
    assert np.array_equal(np.from_dlpack(first), a.T) and np.array_equal(np.from_dlpack(second), a.T)
