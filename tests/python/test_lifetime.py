"""Ownership across chains of exports and imports: every deleter exactly once."""

import gc

import numpy as np
import torch

import dlbridge
from dlbridge._core import _testing


def test_deleter_once_across_an_export_import_chain(deleters):
    t = dlbridge.from_dlpack(_testing.make_capsule(shape=[4]))
    # dlbridge → capsule → dlbridge → numpy → dlbridge → torch
    second = dlbridge.from_dlpack(t.__dlpack__(max_version=(1, 3)))
    legacy = dlbridge.from_dlpack(second.__dlpack__())
    view = np.from_dlpack(legacy)
    third = dlbridge.from_dlpack(view)
    y = torch.from_dlpack(third)
    del t, second, legacy, third
    assert deleters.settled() == 0  # view and y still read the buffer
    del view
    assert deleters.settled() == 0
    y.fill_(1.0)
    del y
    assert deleters.settled() == 1


def test_exported_capsules_never_consumed_release_their_share(deleters):
    t = dlbridge.from_dlpack(_testing.make_capsule())
    capsules = [t.__dlpack__(max_version=(1, 3)) for _ in range(5)] + [t.__dlpack__() for _ in range(5)]
    del t
    assert deleters.settled() == 0
    del capsules
    assert deleters.settled() == 1


def test_copies_free_the_source_independently(deleters):
    t = dlbridge.from_dlpack(_testing.make_capsule())
    c = t.copy()
    d = dlbridge.from_dlpack(t, copy=True)
    del t
    assert deleters.settled() == 1
    assert np.from_dlpack(c).shape == np.from_dlpack(d).shape == (2, 3)


def test_buffer_views_keep_the_tensor_alive(deleters):
    t = dlbridge.from_dlpack(_testing.make_capsule(shape=[8], dtype=(1, 8, 1)))
    m = memoryview(t)
    del t
    assert deleters.settled() == 0
    assert m.tolist() == [0] * 8
    m.release()
    del m
    assert deleters.settled() == 1


def test_interpreter_shutdown_with_live_capsules_and_tensors(run_python):
    result = run_python("""
        import dlbridge, numpy as np, torch
        from dlbridge._core import _testing
        keep = [_testing.make_capsule(), _testing.make_capsule(versioned=False)]
        t = dlbridge.from_dlpack(_testing.make_capsule())
        exported = [t.__dlpack__(max_version=(1, 3)), t.__dlpack__()]
        view = np.from_dlpack(dlbridge.from_dlpack(np.arange(3.0)))
        y = torch.from_dlpack(dlbridge.empty(4))
        cycle = [dlbridge.from_dlpack(bytearray(8))]
        cycle.append(cycle)
        print("ok")
    """)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "ok"
    assert "leaked" not in result.stderr  # nanobind's refcount audit at exit


def test_deleters_on_other_threads(deleters):
    import threading

    tensors = [dlbridge.from_dlpack(_testing.make_capsule()) for _ in range(8)]

    def drop(i):
        tensors[i] = None

    threads = [threading.Thread(target=drop, args=(i,)) for i in range(8)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    gc.collect()
    assert deleters.settled() == 8


def test_shutdown_with_a_tensor_borrowing_a_main_class_instance(run_python):
    # The owner (an instance of a class of __main__) references __main__,
    # which holds the tensor: a cycle through C++ that the GC cannot see.
    result = run_python("""
        import dlbridge, numpy as np

        class Interface:
            def __init__(self):
                self.a = np.arange(4.0)

            @property
            def __array_interface__(self):
                return self.a.__array_interface__

        t = dlbridge.from_dlpack(Interface())
        print(float(np.from_dlpack(t).sum()))
    """)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "6.0"
    assert "leaked" not in result.stderr
