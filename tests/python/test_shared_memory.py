"""Tensors in POSIX shared memory: pickles carry the segment's name, other
processes map the same pages, and the name is unlinked by whoever lets go
last -- also when the creator exits first or a holder is killed."""

from __future__ import annotations

import concurrent.futures
import gc
import multiprocessing
import os
import pickle
import subprocess
import sys
import time

import numpy as np
import pytest

pytest.importorskip("dlbridge._share", reason="needs dlbridge._share, which this build left out (-DDLBRIDGE_SHARE=OFF)")
pytestmark = pytest.mark.sharing
import dlbridge
from dlbridge._share import _shared_memory_info
from dlbridge._pickle import rebuild_shared_tensor
from conftest import check_error

import shared_workers

START_METHODS = ["spawn", "forkserver"]


def segment_names() -> set[str]:
    return {name for name in os.listdir("/dev/shm") if name.startswith("dlbridge-")}


def name_of(t) -> str:
    return _shared_memory_info(t)[0]


def exists(name: str) -> bool:
    return os.path.exists("/dev/shm" + name)


def wait_until_gone(name: str, seconds: float = 20.0) -> bool:
    deadline = time.monotonic() + seconds
    while exists(name):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


@pytest.fixture(autouse=True, scope="module")
def no_segment_left_behind():
    before = segment_names()
    yield
    gc.collect()
    deadline = time.monotonic() + 10
    while segment_names() - before and time.monotonic() < deadline:
        time.sleep(0.05)
    assert segment_names() - before == set(), "this module left segments in /dev/shm"


def test_empty_shared_is_zero_filled_and_shared():
    t = dlbridge.empty((3, 4), "float32", shared=True)
    assert t.is_shared and not t.readonly
    assert t.is_c_contiguous
    np.testing.assert_array_equal(np.from_dlpack(t), np.zeros((3, 4), np.float32))
    assert exists(name_of(t))
    assert not dlbridge.empty((3, 4)).is_shared


def test_empty_shared_refuses_devices_and_bad_shapes():
    with pytest.raises(dlbridge.DeviceUnavailableError) as excinfo:
        dlbridge.empty(4, device="cuda:0", shared=True)
    check_error(excinfo, dlbridge.DeviceUnavailableError, "device_unavailable")
    for shape in [(-1,), 2**70, -1]:
        with pytest.raises(ValueError):
            dlbridge.empty(shape, shared=True)
        with pytest.raises(ValueError):
            dlbridge.empty(shape)


def test_share_memory_copies_once_and_keeps_the_flags():
    a = np.arange(12.0).reshape(3, 4).T
    a.flags.writeable = False
    shared = dlbridge.from_dlpack(a).share_memory()
    assert shared.is_shared and shared.readonly
    np.testing.assert_array_equal(np.from_dlpack(shared), a)
    assert shared.share_memory() is shared, "already shared: nothing to do"


def test_views_of_shared_memory_travel_by_name_too():
    t = dlbridge.empty((10,), "float64", shared=True)
    view = dlbridge.from_dlpack(np.from_dlpack(t)[2:8:2])
    assert view.is_shared
    loaded = pickle.loads(pickle.dumps(view))
    np.from_dlpack(loaded)[...] = 5.0
    assert np.from_dlpack(t).tolist() == [0, 0, 5, 0, 5, 0, 5, 0, 0, 0]


def test_the_pickle_carries_only_the_name_and_the_layout():
    t = dlbridge.empty((1 << 18,), "float32", shared=True)
    buffers = []
    data = pickle.dumps(t, protocol=5, buffer_callback=buffers.append)
    assert buffers == []
    assert len(data) < 300
    assert name_of(t).encode() in data
    pickle.loads(data)  # a pickle never loaded would hold the name until the program ends


def test_a_loaded_pickle_maps_the_same_pages():
    t = dlbridge.empty((4,), "int32", shared=True)
    loaded = pickle.loads(pickle.dumps(t))
    assert loaded.data_ptr != t.data_ptr, "a second mapping"
    np.from_dlpack(loaded)[1] = 9
    assert np.from_dlpack(t)[1] == 9


def test_the_last_holder_unlinks_the_name():
    t = dlbridge.empty((4,), shared=True)
    name = name_of(t)
    loaded = pickle.loads(pickle.dumps(t))
    assert _shared_memory_info(loaded)[1] == 2
    del t
    gc.collect()
    assert exists(name)
    del loaded
    gc.collect()
    assert not exists(name)


def test_a_pickle_keeps_the_name_after_the_sender_lets_go():
    t = dlbridge.empty((3,), "float64", shared=True)
    np.from_dlpack(t)[...] = [1, 2, 3]
    name, data = name_of(t), pickle.dumps(t)
    del t
    gc.collect()
    assert exists(name)
    loaded = pickle.loads(data)
    assert np.from_dlpack(loaded).tolist() == [1, 2, 3]
    del loaded
    gc.collect()
    assert not exists(name)


def test_a_pickle_loaded_twice_gives_two_holders():
    t = dlbridge.empty((3,), shared=True)
    name, data = name_of(t), pickle.dumps(t)
    first, second = pickle.loads(data), pickle.loads(data)
    del t, first
    gc.collect()
    assert np.from_dlpack(second).shape == (3,)
    assert exists(name)
    del second
    gc.collect()
    assert not exists(name)


class Forged:
    def __init__(self, *args):
        self.args = args

    def __reduce__(self):
        return rebuild_shared_tensor, self.args


F64 = (2, 64, 1)


@pytest.mark.parametrize("name", ["/etc/passwd", "/psm_0001", "/dlbridge-../x"])
def test_a_pickle_naming_something_else_is_refused(name):
    with pytest.raises(dlbridge.InvalidTensorError) as excinfo:
        pickle.loads(pickle.dumps(Forged(name, 0, (1, F64, (1,), (1,), 0, 0))))
    check_error(excinfo, dlbridge.InvalidTensorError, "invalid_tensor")


@pytest.mark.parametrize("fields, why", [
    ((42, 0, (1, F64, (1,), (1,), 0, 0)), "name is not a str"),
    ((b"/dlbridge-0-0-0", 0, (1, F64, (1,), (1,), 0, 0)), "name is not a str"),
    (("/dlbridge-\udcff", 0, (1, F64, (1,), (1,), 0, 0)), "not valid text"),
    (("/dlbridge-0-0-0", "0", (1, F64, (1,), (1,), 0, 0)), "ticket is not an int"),
    (("/dlbridge-0-0-0", None, (1, F64, (1,), (1,), 0, 0)), "ticket is not an int"),
    (("/dlbridge-0-0-0", 0, None), "layout is not a tuple"),
    (("/dlbridge-0-0-0", 0, (1, F64, (1,), (1,), 0, 0), "yes"), "not True or False"),
    (("/dlbridge-0-0-0", 0, (1, F64, (1,), (1,), 0, 0), 1), "not True or False"),
    (("/dlbridge-0-0-0", 0), "takes 3 to 4 fields, not 2"),
    (("/dlbridge-0-0-0", 0, (1, F64, (1,), (1,), 0, 0), False, None), "takes 3 to 4 fields, not 5"),
])
def test_a_pickle_with_fields_of_the_wrong_type_is_invalid_tensor(fields, why):
    # Each field is checked by dlbridge: the error is coded and names the
    # field, never a binding's signature.
    with pytest.raises(dlbridge.InvalidTensorError) as excinfo:
        pickle.loads(pickle.dumps(Forged(*fields)))
    message = check_error(excinfo, dlbridge.InvalidTensorError, "invalid_tensor")
    assert why in message
    assert "incompatible function arguments" not in message


def test_a_refused_flag_field_gives_the_ticket_back():
    t = dlbridge.empty((2,), "float64", shared=True)
    fn, (name, ticket, layout) = t.__reduce_ex__(5)
    with pytest.raises(dlbridge.InvalidTensorError):
        fn(name, ticket, layout, "yes")
    assert _shared_memory_info(t)[1] == 1, "the refused load gave its reference back"


def test_a_pickle_of_a_released_segment_is_device_unavailable():
    t = dlbridge.empty((2,), "float64", shared=True)
    name = name_of(t)
    del t
    gc.collect()
    with pytest.raises(dlbridge.DeviceUnavailableError) as excinfo:
        pickle.loads(pickle.dumps(Forged(name, 0, (1, F64, (2,), (1,), 0, 0))))
    assert "keep the sender's tensor alive" in check_error(
        excinfo, dlbridge.DeviceUnavailableError, "device_unavailable")


@pytest.mark.parametrize("layout, cls", [
    ((1, F64, (3,), (1,), 0, 0), dlbridge.InvalidTensorError),   # 24 bytes in a 16-byte segment
    ((1, F64, (2,), (-1,), 0, 0), dlbridge.InvalidTensorError),  # reaches before byte 0
    ((1, (99, 64, 1), (2,), (1,), 0, 0), dlbridge.UnsupportedDTypeError),
    ((1, F64, (True,), (1,), 0, 0), dlbridge.InvalidTensorError),   # a bool is not an int here
    ((1, F64, (2**64,), (1,), 0, 0), dlbridge.InvalidTensorError),  # does not fit in int64
])
def test_a_layout_outside_the_segment_is_refused_and_gives_the_ticket_back(layout, cls):
    t = dlbridge.empty((2,), "float64", shared=True)
    name = name_of(t)
    fn, (pickled_name, ticket, _) = t.__reduce_ex__(5)
    with pytest.raises(cls):
        fn(pickled_name, ticket, layout)
    assert _shared_memory_info(t)[1] == 1, "the refused load gave its reference back"
    del t
    gc.collect()
    assert not exists(name)


@pytest.fixture(scope="module", params=START_METHODS)
def context(request):
    return multiprocessing.get_context(request.param)


def test_a_queue_hands_the_same_pages_to_a_child(context):
    t = dlbridge.empty((5,), "float64", shared=True)
    inbox, outbox = context.Queue(), context.Queue()
    child = context.Process(target=shared_workers.relay, args=(inbox, outbox))
    child.start()
    inbox.put(t)
    assert outbox.get(timeout=60) == name_of(t)
    assert np.from_dlpack(t).tolist() == [1.0] * 5, "the child wrote into our pages"
    inbox.put("leave")
    child.join(60)
    assert child.exitcode == 0
    assert _shared_memory_info(t)[1] == 1, "the child gave its reference back at exit"


def test_a_pool_reads_and_returns_shared_tensors(context):
    t = dlbridge.empty((100,), "float64", shared=True)
    np.from_dlpack(t)[...] = 1.0
    with context.Pool(2) as pool:
        assert pool.map(shared_workers.total, [t, t, t]) == [100.0] * 3
        plain = dlbridge.from_dlpack(np.full(10, 2.0))  # not shared: travels as bytes
        assert pool.apply(shared_workers.total, (plain,)) == 20.0
        results = pool.map(shared_workers.make_shared, [3, 4])
        # Leaving the with block terminates the workers (SIGTERM), which can
        # catch one before it lets go of a tensor; close + join ends them
        # normally, so they give their references back.
        pool.close()
        pool.join()
    assert [r.is_shared for r in results] == [True, True]
    assert [np.from_dlpack(r).tolist() for r in results] == [[0, 1, 2], [0, 1, 2, 3]]
    names = [name_of(r) for r in results]
    del results
    gc.collect()
    assert not any(exists(name) for name in names), "the parent was the last holder"


def test_a_process_pool_executor_writes_into_shared_memory(context):
    t = dlbridge.empty((4,), "float64", shared=True)
    with concurrent.futures.ProcessPoolExecutor(1, mp_context=context) as pool:
        assert pool.submit(shared_workers.add_one_in_place, t).result(timeout=60) == name_of(t)
    assert np.from_dlpack(t).tolist() == [1.0] * 4


def test_the_creator_may_exit_before_the_receiver_loads(context):
    queue = context.Queue()
    child = context.Process(target=shared_workers.put_and_exit, args=(queue, 6))
    child.start()
    child.join(60)
    assert child.exitcode == 0, "the creator has exited"
    received = queue.get(timeout=60)
    assert np.from_dlpack(received).tolist() == [0, 1, 2, 3, 4, 5]
    name = name_of(received)
    assert _shared_memory_info(received)[1] == 1, "only the receiver holds it now"
    del received
    gc.collect()
    assert not exists(name)


KILLED_CHILD = """
import gc, multiprocessing, os, signal, sys
import numpy as np
sys.path.insert(0, {tests!r})
import dlbridge, shared_workers
from dlbridge._share import _shared_memory_info

if __name__ == "__main__":
    ctx = multiprocessing.get_context("spawn")
    t = dlbridge.empty((3,), "float64", shared=True)
    name = _shared_memory_info(t)[0]
    queue, ready = ctx.Queue(), ctx.Queue()
    child = ctx.Process(target=shared_workers.hold_until_killed, args=(queue, ready))
    child.start()
    queue.put(t)
    os.kill(ready.get(timeout=60), signal.SIGKILL)
    child.join(60)
    print(name, np.from_dlpack(t)[0], child.exitcode)
    del t
    gc.collect()
    print(os.path.exists("/dev/shm" + name))
    never_loaded = dlbridge.empty((3,), shared=True)
    import pickle; pickle.dumps(never_loaded)
    print(_shared_memory_info(never_loaded)[0])
"""


def test_a_killed_holder_leaves_nothing_once_the_program_ends(run_python):
    tests = os.path.dirname(__file__)
    result = run_python(KILLED_CHILD.format(tests=tests))
    assert result.returncode == 0, result.stderr
    first, second, never_loaded = result.stdout.split("\n")[:3]
    name, value, exitcode = first.split()
    assert (value, exitcode) == ("7.0", "-9")
    assert second == "True", "the killed child's reference keeps the name while the program runs"
    assert wait_until_gone(name), "the resource tracker unlinks it when the program ends"
    assert wait_until_gone(never_loaded), "and the name that an unloaded pickle held"


CLEAN_RUN = """
import multiprocessing, sys
sys.path.insert(0, {tests!r})
import dlbridge, shared_workers
from dlbridge._share import _shared_memory_info

if __name__ == "__main__":
    ctx = multiprocessing.get_context("forkserver")
    t = dlbridge.empty((8,), "float64", shared=True)
    with ctx.Pool(2) as pool:
        kept = pool.map(shared_workers.make_shared, [2, 3])
        pool.map(shared_workers.total, [t] * 4)
        pool.close()
        pool.join()
    print(_shared_memory_info(t)[0], *(_shared_memory_info(k)[0] for k in kept))
"""


def test_a_clean_run_leaves_no_segment_and_no_warning(run_python):
    result = run_python(CLEAN_RUN.format(tests=os.path.dirname(__file__)))
    assert result.returncode == 0, result.stderr
    names = result.stdout.split()
    assert len(names) == 3
    assert "leaked" not in result.stderr, result.stderr
    assert not any(exists(name) for name in names), "released at exit, not by the tracker"


# --- the header is another process's to write ---------------------------------

REWRITTEN_SIZE = """
import ctypes, gc, mmap, struct
import numpy as np
import dlbridge
from dlbridge._share import _shared_memory_info

t = dlbridge.empty((512,), "float64", shared=True)
name = _shared_memory_info(t)[0]
# Another process rewrites the size word of the header (offset 8), as any
# process of this user may: 2**40 bytes, or a negative count.
with open("/dev/shm" + name, "r+b") as f, mmap.mmap(f.fileno(), 4096) as header:
    header[8:16] = struct.pack("<q", {size})
np.from_dlpack(t)[...] = 1.0  # this process's mapping keeps the size it checked
assert not dlbridge.from_dlpack(np.zeros(4)).is_shared
try:  # a new mapping reads the damaged header, and refuses it
    __import__("pickle").loads(__import__("pickle").dumps(t))
    print("loaded")
except dlbridge.InvalidTensorError as e:
    print(e.code)
del t
gc.collect()
# Still mapped: the interpreter's own libraries (a teardown that unmapped
# 2**40 bytes past the segment took them with it).
print(ctypes.CDLL(None).getpid() > 0, np.arange(4).sum(), flush=True)
"""


@pytest.mark.parametrize("size", [1 << 32, 1 << 40, -(1 << 40), 0])
def test_a_rewritten_header_size_changes_nothing_this_process_maps(run_python, size):
    result = run_python(REWRITTEN_SIZE.format(size=size), timeout=60)
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.split() == ["invalid_tensor", "True", "6"]


# --- the fork start method ------------------------------------------------------


# The suite imported JAX, whose threads make Python warn at every fork; the
# child here runs only NumPy and dlbridge.
@pytest.mark.filterwarnings("ignore:os.fork\\(\\) was called:RuntimeWarning")
def test_a_forked_child_sends_an_inherited_shared_tensor_on():
    fork = multiprocessing.get_context("fork")
    t = dlbridge.empty((4,), "float64", shared=True)
    np.from_dlpack(t)[...] = [1, 2, 3, 4]
    queue = fork.Queue()
    child = fork.Process(target=shared_workers.write_and_send_on, args=(t, queue))
    child.start()
    sent = queue.get(timeout=60)
    child.join(60)
    assert child.exitcode == 0
    assert isinstance(sent, bytes), sent
    received = pickle.loads(sent)
    assert _shared_memory_info(received)[0] == name_of(t)
    assert np.from_dlpack(received).tolist() == [10, 2, 3, 4]
    name = name_of(t)
    del t, received
    gc.collect()
    assert not exists(name), "the forked child's ticket was redeemed; no reference is left"


# The suite imported JAX, whose threads make Python warn at every fork; the
# child here runs only NumPy and dlbridge.
@pytest.mark.filterwarnings("ignore:os.fork\\(\\) was called:RuntimeWarning")
def test_a_forked_child_cannot_send_a_name_every_holder_let_go():
    fork = multiprocessing.get_context("fork")
    t = dlbridge.empty((4,), "float64", shared=True)
    queue, go = fork.Queue(), fork.Event()
    child = fork.Process(target=shared_workers.wait_then_send_on, args=(t, queue, go))
    child.start()
    name = name_of(t)
    del t
    gc.collect()
    assert not exists(name)
    go.set()
    sent = queue.get(timeout=60)
    child.join(60)
    assert "device_unavailable" in sent and "every process that held it let go" in sent


# --- two programs that share a segment ------------------------------------------

SENDER = """
import os, pickle, sys, time
import numpy as np
import dlbridge
t = dlbridge.empty((3,), "float64", shared=True)
np.from_dlpack(t)[...] = [1, 2, 3]
blob = pickle.dumps(t)
if {drop_first}:
    del t  # the pickle's ticket alone holds the name for this program now
with open(sys.argv[1] + ".tmp", "wb") as f:
    f.write(blob)
os.rename(sys.argv[1] + ".tmp", sys.argv[1])
while not os.path.exists(sys.argv[2]):  # the receiver has loaded it
    time.sleep(0.02)
import multiprocessing.resource_tracker as tracker
print(tracker._resource_tracker._pid, flush=True)  # the program's tracker, which outlives it briefly
"""

RECEIVER = """
import os, pickle, sys, time
import numpy as np
import dlbridge
from dlbridge._share import _shared_memory_info
while not os.path.exists(sys.argv[1]):
    time.sleep(0.02)
t = pickle.loads(open(sys.argv[1], "rb").read())
print(_shared_memory_info(t)[0], flush=True)
open(sys.argv[2], "w").close()
while not os.path.exists(sys.argv[3]):  # the sender has exited
    time.sleep(0.02)
with open(sys.argv[4] + ".tmp", "wb") as f:
    f.write(pickle.dumps(t))
os.rename(sys.argv[4] + ".tmp", sys.argv[4])
while not os.path.exists(sys.argv[5]):  # the third program has loaded it
    time.sleep(0.02)
print(np.from_dlpack(t).tolist(), flush=True)
"""

THIRD = """
import os, pickle, sys, time
import numpy as np
import dlbridge
while not os.path.exists(sys.argv[1]):
    time.sleep(0.02)
t = pickle.loads(open(sys.argv[1], "rb").read())
np.from_dlpack(t)[0] = 7.0
open(sys.argv[2], "w").close()
print(np.from_dlpack(t).tolist(), flush=True)
"""


def wait_for_exit(pid: int, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while os.path.exists(f"/proc/{pid}") and "Z" not in status_of(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def status_of(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0]
    except OSError:
        return "Z"


def start_program(code: str, *args: str) -> subprocess.Popen:
    env = dict(os.environ)
    env.pop("PYTHONWARNINGS", None)
    return subprocess.Popen([sys.executable, "-c", code, *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env)


@pytest.mark.parametrize("drop_first", [False, True], ids=["sender-holds", "sender-drops-first"])
def test_two_unrelated_programs_share_a_segment_and_the_last_holder_unlinks(tmp_path, drop_first):
    blob, loaded, sender_gone = tmp_path / "blob", tmp_path / "loaded", tmp_path / "sender-gone"
    second_blob, second_loaded = tmp_path / "blob2", tmp_path / "loaded2"
    sender = start_program(SENDER.format(drop_first=drop_first), str(blob), str(loaded))
    receiver = start_program(RECEIVER, str(blob), str(loaded), str(sender_gone), str(second_blob),
                             str(second_loaded))
    try:
        sender_out, sender_err = sender.communicate(timeout=120)
        assert sender.returncode == 0, sender_err
        name = receiver.stdout.readline().strip()
        assert name.startswith("/dlbridge-")
        # The sender's program has ended; once its resource tracker has too,
        # the name must still be there for the receiver, and a third program.
        assert wait_for_exit(int(sender_out.split()[0]), 20), "the sender's tracker did not end"
        assert exists(name), "the sender's tracker unlinked a name another program holds"
        sender_gone.touch()
        third = start_program(THIRD, str(second_blob), str(second_loaded))
        third_out, third_err = third.communicate(timeout=120)
        assert third.returncode == 0, third_err
        assert third_out.split("\n")[0] == "[7.0, 2.0, 3.0]"
        receiver_out, receiver_err = receiver.communicate(timeout=120)
        assert receiver.returncode == 0, receiver_err
        assert receiver_out.strip() == "[7.0, 2.0, 3.0]", "the third program wrote into the same pages"
    finally:
        for p in (sender, receiver):
            if p.poll() is None:
                p.kill()
    for err in (sender_err, third_err, receiver_err):
        assert "leaked" not in err and "Traceback" not in err, err
    assert wait_until_gone(name, 10), "the last holder unlinks the name"


CHAIN_LINK = """
import os, pickle, sys, time
import dlbridge
from dlbridge._share import _shared_memory_info
mine, loaded_mine, following, loaded_following = sys.argv[1:5]
if mine == "-":
    t = dlbridge.empty((3,), "float64", shared=True)
else:
    while not os.path.exists(mine):
        time.sleep(0.01)
    t = pickle.loads(open(mine, "rb").read())
    open(loaded_mine, "w").close()
print(*_shared_memory_info(t), flush=True)  # name, count, this program's share (-1: no entry)
with open(following + ".tmp", "wb") as f:
    f.write(pickle.dumps(t))
os.rename(following + ".tmp", following)
while not os.path.exists(loaded_following):  # the next program has it: this one may end
    time.sleep(0.01)
"""


def test_a_segment_handed_along_50_programs_leaves_nothing_when_the_last_is_killed(tmp_path):
    # Never more than two of the programs hold the segment at once, but 50 hold it in turn:
    # each must find an entry in its header (given back by the programs before it), so the
    # last one's tracker knows the name and removes it when that program is killed.
    blob = [str(tmp_path / f"blob{i}") for i in range(52)]
    loaded = [str(tmp_path / f"loaded{i}") for i in range(52)]
    links, shares, name = [], [], None
    try:
        for i in range(50):
            links.append(start_program(CHAIN_LINK, "-" if i == 0 else blob[i], loaded[i], blob[i + 1],
                                       loaded[i + 1]))
            name, _, share = links[i].stdout.readline().split()
            shares.append(int(share))
            if i > 0:  # the previous program ends once this one has loaded
                out, err = links[i - 1].communicate(timeout=120)
                assert links[i - 1].returncode == 0, err
                assert "leaked" not in err and "Traceback" not in err, err
        assert shares == [1] * 50, "a program holding the segment had no entry of its own"
        assert exists(name), "the last program holds it"
        links[-1].kill()
        links[-1].communicate(timeout=60)
        assert wait_until_gone(name), "the killed program's tracker knew the name and removed it"
    finally:
        for link in links:
            if link.poll() is None:
                link.kill()
                link.communicate()


# --- the limits of one process ---------------------------------------------------

FULL_MAPPING_TABLE = """
import ctypes, mmap
import dlbridge
keep = dlbridge.empty((8,), shared=True)  # the tracker and the exit finaliser are set up
libc = ctypes.CDLL(None, use_errno=True)
libc.mmap.restype = ctypes.c_void_p
libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
page, MAP_FAILED = mmap.PAGESIZE, ctypes.c_void_p(-1).value
# One-page mappings whose protections alternate, so the kernel cannot merge
# neighbours: each is one entry of the process's mapping table, until
# vm.max_map_count refuses more. Then room for two is made, one for the
# interpreter and one more for the segment it will not get.
made = []
while True:
    p = libc.mmap(None, page, 1 if len(made) % 2 else 0, mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS, -1, 0)
    if p in (None, MAP_FAILED):
        break
    made.append(p)
libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
for p in made[-2:]:
    libc.munmap(p, page)
errors, kept = [], []
for _ in range(16):
    try:
        kept.append(dlbridge.empty((8,), shared=True))
    except (MemoryError, dlbridge.DLPackError) as e:
        errors.append(e)
        break
e = errors[0]
print(type(e).__name__, getattr(e, "code", None), flush=True)
print(str(e), flush=True)
"""


@pytest.mark.skipif("libasan" in os.environ.get("LD_PRELOAD", ""),
                    reason="AddressSanitizer maps memory of its own for every allocation; a full mapping "
                           "table ends it before dlbridge is reached (scripts/test runs this without it)")
def test_a_full_mapping_table_is_named_as_the_limit_not_as_a_full_dev_shm(run_python):
    result = run_python(FULL_MAPPING_TABLE, timeout=120)
    assert result.returncode == 0, result.stderr[-3000:]
    first, message = result.stdout.split("\n")[:2]
    assert first == "DeviceUnavailableError device_unavailable"
    assert "memory mappings, the most that vm.max_map_count" in message
    assert "sysctl -w vm.max_map_count" in message, "the hint says how to raise it"
    assert "Free space in /dev/shm" not in message


# --- a daemon thread at interpreter exit ------------------------------------------

SHARING_AT_EXIT = """
import threading, time
import numpy as np
import dlbridge
t = dlbridge.from_dlpack(np.zeros(1 << 21)[::2])
started = threading.Event()
def work():
    started.set()
    while True:
        t.share_memory()
threading.Thread(target=work, daemon=True).start()
started.wait()
time.sleep(0.05)
"""


@pytest.mark.parametrize("run", range(3))
def test_share_memory_in_a_daemon_thread_at_interpreter_exit_exits_cleanly(run_python, run):
    result = run_python(SHARING_AT_EXIT, timeout=60)
    assert "terminate called" not in result.stderr
    assert result.returncode == 0, result.stderr[-3000:]


# --- a tensor whose writability is unknown (from a legacy capsule) ----------------


def test_share_memory_of_a_tensor_of_unknown_writability_keeps_it():
    import jax.numpy as jnp

    x = jnp.arange(6.0)
    s = dlbridge.from_dlpack(x).share_memory()
    assert s.is_shared and s.readonly
    assert dlbridge.inspect_capsule(s.__dlpack__())["name"] == "dltensor", "may still leave as legacy"
    for back in (s, pickle.loads(pickle.dumps(s))):
        np.testing.assert_array_equal(np.asarray(jnp.from_dlpack(back)), np.asarray(x))
