"""Soak: a million round trips through dlbridge must not grow the process.

Each round trip imports a NumPy array into dlbridge and hands it on to NumPy
or PyTorch, then drops everything; a leaked capsule, context or reference per
trip (a hundred bytes or more) would add ~100 MiB over the run. RSS is read
from /proc/self/statm after a warm-up and at the end.
"""

import gc
import os
import sys

import numpy as np
import pytest
import torch

import dlbridge

ROUND_TRIPS = 500_000  # per consumer; two consumers make 10^6
# Allocator slack and the odd cache fill; a per-trip leak is far above this.
MARGIN_BYTES = 24 << 20

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"),
                                reason="RSS is read from /proc/self/statm (Linux only)")


def rss_bytes() -> int:
    gc.collect()
    with open("/proc/self/statm") as f:
        resident_pages = int(f.read().split()[1])
    return resident_pages * os.sysconf("SC_PAGE_SIZE")


def round_trips(consume, count: int) -> None:
    source = np.arange(4.0)
    for i in range(count):
        out = consume(dlbridge.from_dlpack(source))
        if i % 50_000 == 0:  # now and then, the values too
            assert np.asarray(out).tolist() == [0.0, 1.0, 2.0, 3.0]


@pytest.mark.parametrize("consume", [np.from_dlpack, torch.from_dlpack], ids=["numpy", "torch"])
def test_round_trips_keep_rss_flat(consume):
    round_trips(consume, ROUND_TRIPS // 10)  # warm-up: caches and pools fill here
    before = rss_bytes()
    round_trips(consume, ROUND_TRIPS)
    grown = rss_bytes() - before
    assert grown < MARGIN_BYTES, f"RSS grew by {grown / 2**20:.1f} MiB over {ROUND_TRIPS} round trips"
