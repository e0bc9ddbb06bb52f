"""Fuzzing of the Python binding boundary with Hypothesis.

Hypothesis draws small programs: hostile producers (``__dlpack_device__``
returning anything, ``__dlpack__`` returning wrong capsules or raising,
``__array_interface__`` dicts whose fields lie, odd buffer exporters), calls
of the public entry points with keyword values of every type, forged pickles
(every field of the three reconstructors' tuples), shared-memory names and
headers rewritten as another process may, and CUDA IPC records forged over a
live export on the simulated runtime. Each program
runs in a worker interpreter that serves many programs in a row, so a crash
or a hang fails the test with the program printed instead of losing the run;
the program alone reproduces it:

    .venv/bin/python tests/python/test_fuzz_boundary.py --run 'PROGRAM'

The rule every call keeps: it returns, or raises TypeError, ValueError, a
dlbridge.DLPackError (with a code and a hint), MemoryError for sizes no
machine has, or the producer's own exception; never a crash, a RuntimeError or
SystemError, an AttributeError from inside dlbridge, or C++ text in a message.
DLBRIDGE_FUZZ_EXAMPLES sets the examples per property (150, the same ones each
run, unless DLBRIDGE_FUZZ_RANDOM=1; ``scripts/fuzz --python N`` draws N fresh ones).
"""

from __future__ import annotations

import ctypes
import json
import os
import sys
import traceback
from pathlib import Path

EXAMPLES = int(os.environ.get("DLBRIDGE_FUZZ_EXAMPLES", "150"))
# Unset: the same examples every run (the test command); "1": fresh ones.
RANDOM = os.environ.get("DLBRIDGE_FUZZ_RANDOM") == "1"

# --- Building blocks the programs use (run inside the worker) ---------------


class Boom(Exception):
    """What a hostile producer raises; it may pass through dlbridge."""


class Interrupt(KeyboardInterrupt):
    """A Ctrl-C raised inside a producer; it may pass through dlbridge."""


class Violation(Exception):
    pass


class LyingTuple(tuple):
    """A tuple whose len() is not its length."""

    def __new__(cls, items, length):
        self = super().__new__(cls, items)
        self.length = length
        return self

    def __len__(self):
        return self.length


class BadIndex:
    def __index__(self):
        raise Boom("__index__")

    def __int__(self):
        raise Boom("__int__")


class BadLen:
    def __len__(self):
        raise Boom("__len__")

    def __iter__(self):
        raise Boom("__iter__")


def behave(spec, *args):
    """A producer method's behaviour: 'boom', 'interrupt', or a factory."""
    if spec == "boom":
        raise Boom("producer")
    if spec == "interrupt":
        raise Interrupt()
    return spec()


def producer_class(*, device=None, dlpack=None, iface=None, keywords="any"):
    """A new producer type (dlbridge caches per type, so each is unseen).
    A behaviour of None leaves the attribute out; it may be changed later."""

    def __dlpack__(self, **kwargs):
        if keywords == "none" and kwargs:
            raise TypeError("__dlpack__() takes no keyword arguments")
        return behave(type(self).dlpack_spec)

    def __dlpack_device__(self):
        return behave(type(self).device_spec)

    def __array_interface__(self):
        return behave(type(self).iface_spec)

    namespace = {"dlpack_spec": dlpack, "device_spec": device, "iface_spec": iface}
    if dlpack is not None:
        namespace["__dlpack__"] = __dlpack__
    if device is not None:
        namespace["__dlpack_device__"] = __dlpack_device__
    if iface is not None:
        namespace["__array_interface__"] = property(__array_interface__)
    return type("Hostile", (), namespace)


_kept_alive = []


def buffer_address():
    """An address with 32 KiB of readable memory on both sides: every honest
    layout the programs draw fits, so a crash is dlbridge's, not the lie's."""
    import numpy as np

    block = np.zeros(1 << 16, dtype=np.uint8)
    _kept_alive.append(block)
    return block.ctypes.data + (1 << 15)


def capsule(kind):
    import numpy as np

    from dlbridge._core import _testing

    source = np.arange(6.0).reshape(2, 3)
    if kind == "versioned":
        return source.__dlpack__(max_version=(1, 0))
    if kind == "legacy":
        return source.__dlpack__()
    if kind == "readonly":
        source.flags.writeable = False
        return source.__dlpack__(max_version=(1, 0))
    if kind == "consumed":
        import dlbridge

        used = source.__dlpack__(max_version=(1, 0))
        dlbridge.from_dlpack(used)
        return used
    if kind == "non_utf8_name":
        new = ctypes.pythonapi.PyCapsule_New
        new.restype = ctypes.py_object
        new.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
        _kept_alive.append(source)
        return new(source.ctypes.data, b"dltensor\xff", None)
    if kind.startswith("testing:"):
        return _testing.make_capsule(**eval(kind[len("testing:"):]))
    raise AssertionError(kind)


def exporter(kind):
    """A real buffer exporter: these cannot lie about their memory."""
    import array
    import numpy as np

    made = {
        "bytes": lambda: b"abcdefgh",
        "bytearray": lambda: bytearray(b"abcdefgh"),
        "half_view": lambda: memoryview(bytearray(8)).cast("e"),
        "bool_view": lambda: memoryview(bytearray(4)).cast("?"),
        "big_endian": lambda: np.arange(4, dtype=">f4"),
        "datetime_scalar": lambda: np.datetime64(1, "s"),
        "timedelta_array": lambda: np.arange(3, dtype="m8[s]"),
        "void": lambda: np.zeros(2, dtype="V3"),
        "structured": lambda: np.zeros(2, dtype=[("a", "<i4"), ("b", "<f8")]),
        "strided": lambda: np.arange(10.0)[::3],
        "negative": lambda: np.arange(10.0)[::-2],
        "readonly": lambda: np.frombuffer(b"abcdefgh", dtype=np.uint8),
        "zero_d": lambda: np.array(3.5),
        "float16": lambda: np.ones(3, dtype=np.float16),
        "objects": lambda: np.array([None, 1], dtype=object),
        "unicode": lambda: np.array(["ab"]),
        "array_u": lambda: array.array("u", "ab"),
        "array_q": lambda: array.array("q", [1, 2]),
        "ctypes_struct": lambda: (type("S", (ctypes.Structure,), {"_fields_": [("a", ctypes.c_int)]}) * 2)(),
        "released": lambda: _released_view(),
        "size1_stride": lambda: np.lib.stride_tricks.as_strided(np.zeros(4), (1, 2), (2**62, 8)),
        "complex": lambda: np.arange(3, dtype=np.complex64),
    }
    return made[kind]()


def _released_view():
    view = memoryview(bytearray(8))
    view.release()
    return view


def honest_tensor():
    import numpy as np

    import dlbridge

    return dlbridge.from_dlpack(np.arange(6.0).reshape(2, 3))


# -- Forged pickles, shared-memory segments and CUDA records --------------------

_made_segments = []  # names of segments this program made: removed after it
_made_tensors = []   # the tensors made with them, same order


class Forged:
    """Pickles as a call of `fn` with the given fields: a forged reduce tuple."""

    def __init__(self, fn, fields):
        self.fn, self.fields = fn, tuple(fields)

    def __reduce__(self):
        return self.fn, self.fields


def reconstructor(kind):
    from dlbridge import _pickle

    return getattr(_pickle, f"rebuild_{kind}")


def shared_tensor(nbytes=64, fill=b""):
    """A live shared tensor of uint8, its first bytes set; its name is removed
    after the program (segment_name(t) gives it, as it was made)."""
    import numpy as np

    import dlbridge
    from dlbridge._share import _shared_memory_info

    t = dlbridge.empty((nbytes,), "uint8", shared=True)
    np.from_dlpack(t)[: len(fill)] = np.frombuffer(bytes(fill), np.uint8)
    _made_segments.append(_shared_memory_info(t)[0])
    _made_tensors.append(t)
    return t


def segment_name(t):
    return _made_segments[[id(x) for x in _made_tensors].index(id(t))]


def name_and_ticket(t):
    _, (name, ticket, *_) = t.__reduce_ex__(5)
    return name, ticket


# The header's words (include/dlbridge/shared_memory.hpp, SegmentHeader).
HEADER_WORDS = {"magic": 0, "data_bytes": 8, "references": 16, "next_ticket": 24, "lock": 32,
                "program_key": 40, "program_count": 48, "program_registered": 56,
                "last_program_count": 40 + 15 * 24 + 8, "tickets": 424, "last_tickets": 424 + 255 * 8}


def forge_header(name, word, value):
    """Rewrites one 8-byte word of a segment's header, as any process may."""
    import mmap
    import struct

    offset = HEADER_WORDS[word]
    with open("/dev/shm" + name, "r+b") as f, mmap.mmap(f.fileno(), 4096) as page:
        page[offset:offset + 8] = struct.pack("<Q", value % 2**64)


def foreign_segment(size, magic=0):
    """A segment under dlbridge's prefix that dlbridge did not make."""
    import secrets
    import struct

    name = f"/dlbridge-0-0-{secrets.token_hex(8)}"
    with open("/dev/shm" + name, "wb") as f:
        f.write(struct.pack("<QQ", magic, 64)[:size].ljust(size, b"\0"))
    _made_segments.append(name)
    return name


def dead_pid():
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    os.waitpid(pid, 0)
    return pid


_exporter = []


def remote_record():
    """The 152-byte record of a 64-byte CUDA share made by a helper process
    that stays alive (CUDA opens a handle only in another process), and that
    process's pid."""
    if not _exporter:
        import multiprocessing

        import cuda_ipc_workers

        ctx = multiprocessing.get_context("spawn")
        mine, theirs = ctx.Pipe()
        helper = ctx.Process(target=cuda_ipc_workers.export_and_wait, args=(theirs,), daemon=True)
        helper.start()
        _exporter.extend([helper, mine, mine.recv()])
    return bytearray(_exporter[2]), _exporter[0].pid


def patch(record, offset, width, value):
    record[offset:offset + width] = (value % 2 ** (8 * width)).to_bytes(width, "little")
    return record


def remove_made_segments():
    for name in _made_segments:
        try:
            os.unlink("/dev/shm" + name)
        except OSError:
            pass
    _made_segments.clear()
    _made_tensors.clear()


def _allowed(exc):
    """None when exc is an allowed outcome, else why not."""
    import dlbridge

    if isinstance(exc, (Boom, Interrupt)):
        return None
    text = str(exc)
    if "std::" in text or "terminate called" in text:
        return f"C++ text in the message: {type(exc).__name__}: {text}"
    if isinstance(exc, dlbridge.DLPackError):
        if not isinstance(exc.code, str) or not exc.code or not exc.hint:
            return f"DLPackError without code or hint: {exc!r}"
        return None
    if type(exc) in (TypeError, ValueError, MemoryError) or isinstance(exc, (TypeError, ValueError)):
        return None
    return f"{type(exc).__module__}.{type(exc).__name__}: {text}"


def _touch(result):
    """Uses what a call returned the way a user would; each use keeps the
    same rule as the call."""
    import numpy as np

    import dlbridge

    uses = []
    if isinstance(result, dlbridge.Tensor):
        uses = [repr, lambda t: (t.shape, t.strides, t.dtype, t.device, t.readonly, t.nbytes),
                lambda t: t.__array_interface__, lambda t: t.__dlpack__(),
                lambda t: t.__dlpack__(max_version=(1, 3))]
        # Uses that read every byte, on tensors small enough for that: a
        # drawn dlbridge.empty(2**31) is 8 GiB, and copying it four times
        # over took the worker past its deadline on a 23 GB machine.
        if result.nbytes <= 1 << 28:
            uses += [memoryview, np.asarray, lambda t: t.copy(), lambda t: t.copy_unpacked()]
    elif type(result).__name__ == "PyCapsule":
        uses = [dlbridge.inspect_capsule, dlbridge.from_dlpack]
    elif isinstance(result, bytes):  # a pickle: loading it, and what it gives, keep the same rule
        import pickle

        uses = [lambda blob: _touch(pickle.loads(blob))]
    elif isinstance(result, (dlbridge.Device, dlbridge.DType)):
        uses = [str, repr, hash, tuple]
    for use in uses:
        try:
            out = use(result)
            if isinstance(out, memoryview):
                out.tobytes()
            if isinstance(out, np.ndarray) and out.dtype.kind not in "OV":
                out.sum()
        except BaseException as exc:  # noqa: BLE001 (the rule decides)
            if (why := _allowed(exc)) is not None:
                raise Violation(f"using the result: {why}") from exc


def check(call, coded=False, most_bytes=None):
    """Runs one entry-point call under the rule; raises Violation if broken.
    coded: the stricter rule of pickle loading (docs/distributed.md), where
    every refusal is a DLPackError and no TypeError or ValueError is allowed.
    most_bytes: the memory behind what the call may return; a tensor that
    spans more was built on a lie."""
    try:
        result = call()
    except BaseException as exc:  # noqa: BLE001 (the rule decides)
        if (why := _allowed(exc)) is not None:
            raise Violation(why) from exc
        import dlbridge

        if coded and not isinstance(exc, (dlbridge.DLPackError, Boom, Interrupt)):
            raise Violation(f"an uncoded refusal: {type(exc).__name__}: {exc}") from exc
        return
    if most_bytes is not None and getattr(result, "nbytes", 0) > most_bytes:
        raise Violation(f"a tensor of {result.nbytes} bytes over {most_bytes} bytes of memory")
    _touch(result)


def _namespace():
    import numpy as np

    import dlbridge
    from dlbridge import DeviceType

    names = dict(globals())
    names.update(np=np, dlbridge=dlbridge, DeviceType=DeviceType)
    return names


def run_program(program):
    """Runs one program; returns None, or what went wrong with a traceback."""
    names = _namespace()
    try:
        exec(compile(program, "<program>", "exec"), names)
    except Violation as exc:
        return f"{exc}\n{''.join(traceback.format_exception(exc.__cause__))}"
    except BaseException:  # noqa: BLE001 (a building block failed: the harness's bug)
        return "the program itself failed:\n" + traceback.format_exc()
    return None


def serve():
    """Worker loop: one JSON program per line in, one JSON verdict per line out."""
    import gc

    import dlbridge  # noqa: F401  (import costs paid once, not per program)
    import jax.numpy  # noqa: F401
    import torch  # noqa: F401

    # The libraries' long-lived objects out of the collector's reach: the
    # collect after each program then costs microseconds, not 0.3 s.
    gc.freeze()

    # Verdicts go to the parent on a private copy of stdout; anything a
    # library prints goes to stderr and cannot garble them.
    verdicts = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    for line in sys.stdin:
        problem = run_program(json.loads(line))
        gc.collect()  # deleters and finalizers run inside this program's turn
        remove_made_segments()
        verdicts.write(json.dumps(problem) + "\n")
        verdicts.flush()


# --- The parent side: workers and Hypothesis strategies ---------------------

if __name__ != "__main__":
    import pytest
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "support"))
    from worker_interpreter import WorkerInterpreter

    def new_worker(**env):
        """A worker interpreter serving this file's programs, with `env` added to ours."""
        return WorkerInterpreter([sys.executable, __file__, "--serve"],
                                 dict(os.environ, JAX_PLATFORMS="cpu", PYTHONFAULTHANDLER="1", **env))

    @pytest.fixture(scope="module")
    def worker():
        w = new_worker()
        yield w
        w.stop()

    def expect_clean(worker, program):
        problem = worker.run(program, timeout=30.0)
        assert problem is None, (
            f"{problem}\nreproduce with:\n  .venv/bin/python tests/python/test_fuzz_boundary.py "
            f"--run {json.dumps(program)}\nprogram:\n{program}")

    fuzz_settings = settings(
        max_examples=EXAMPLES,
        derandomize=not RANDOM,
        deadline=None, database=None,
        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])

    # Python expressions for values of every type a keyword might get.
    ATOMS = [
        "None", "True", "False", "0", "1", "-1", "2", "3", "13", "99", "2**31", "2**63 - 1",
        "2**63", "-2**63", "2**64", "10**30", "1.5", "float('nan')", "''", "'cpu'", "'cuda'",
        "'cuda:0'", "'cpu:1'", "'kDLCPU'", "'cuda:-1'", "'cpu:99999999999'", "'float32'",
        "'int4'", "'complex64'", "'float8_e4m3fn'", "'bogus'", "'\\udcff'", "b'cpu'",
        "bytearray(b'x')", "object()", "[]", "{}", "()", "(1,)", "(1, 0)", "(2, 0)", "(1, 0, 0)",
        "[1, 0]", "(None, 0)", "('cpu', 0)", "(1.0, 0)", "(1, -1)", "(1, 2**40)", "(99, 0)",
        "(2**40, 0)", "(1, 3)", "(0, 8)", "(2, 0)", "(1, 3, 5)", "(-1, 0)", "(2**32, 0)",
        "DeviceType.kDLCPU", "DeviceType.kDLCUDA", "dlbridge.Device('cpu')", "dlbridge.DType('float32')",
        "np.int64(1)", "np.float32(1)", "np.array(1)", "np.arange(3)", "LyingTuple((1, 0), 5)",
        "LyingTuple((1, 0), 0)", "LyingTuple((), 2)", "LyingTuple((1, 3), 64)", "BadIndex()",
        "BadLen()", "int", "type", "(BadIndex(), 0)", "(1, BadIndex())", "[2, 3]", "(2, -3)",
        "(2**62, 4)", "honest_tensor()", "capsule('versioned')", "capsule('legacy')",
    ]
    atoms = st.sampled_from(ATOMS)
    values = st.one_of(
        atoms,
        st.lists(atoms, max_size=3).map(lambda items: "(" + "".join(i + ", " for i in items) + ")"),
    )

    BEHAVIOUR_VALUES = ATOMS + ["capsule('consumed')", "capsule('readonly')",
                                "capsule('non_utf8_name')", "capsule('testing:{\"name\": \"x\"}')",
                                "capsule('testing:{\"device\": (2, 0)}')",
                                "capsule('testing:{\"dtype\": (99, 8, 1)}')",
                                "capsule('testing:{\"versioned\": False, \"device\": (13, 0)}')",
                                "capsule('testing:{\"version\": (2, 0)}')"]
    behaviours = st.one_of(
        st.none(), st.sampled_from(["'boom'", "'interrupt'"]),
        st.sampled_from(BEHAVIOUR_VALUES).map(lambda v: f"lambda: {v}"),
    )

    @st.composite
    def producers(draw):
        """An expression making a hostile producer instance."""
        device, dlpack = draw(behaviours), draw(behaviours)
        keywords = draw(st.sampled_from(["any", "none"]))
        return (f"producer_class(device={device}, dlpack={dlpack}, "
                f"keywords={keywords!r})()")

    def keywords(names):
        return st.dictionaries(st.sampled_from(names), values, max_size=len(names)).map(
            lambda kw: "".join(f", {k}={v}" for k, v in kw.items()))

    @st.composite
    def calls(draw, subject):
        """A call of a public entry point on the expression subject."""
        form = draw(st.sampled_from([
            "dlbridge.from_dlpack({x}{kw})", "dlbridge.to_dlpack({x}{kw})",
            "dlbridge.convert({x}, {to}{kw})", "dlbridge.Device({x})",
            "dlbridge.Device('cpu') == {x}", "dlbridge.empty((2,), device={x})",
            "honest_tensor().copy(device={x})", "honest_tensor().__dlpack__(dl_device={x})",
            "dlbridge.from_dlpack(honest_tensor(), device={x})", "dlbridge.inspect_capsule({x})",
        ]))
        kw = ""
        if "from_dlpack({x}" in form:
            kw = draw(keywords(["device", "copy"]))
        elif "to_dlpack" in form:
            kw = draw(keywords(["stream", "max_version", "dl_device", "copy"]))
        elif "convert" in form:
            kw = draw(keywords(["device", "copy"]))
        to = draw(st.sampled_from(["'numpy'", "'torch'", "'jax'", "'dlbridge'"]) | values)
        return "check(lambda: " + form.format(x=subject, kw=kw, to=to) + ")"

    @given(producer=producers(), data=st.data())
    @fuzz_settings
    def test_hostile_producers_never_crash_dlbridge(worker, producer, data):
        call = data.draw(calls(producer))
        expect_clean(worker, call + "\n")

    @given(data=st.data())
    @fuzz_settings
    def test_keyword_values_of_every_type(worker, data):
        form = data.draw(st.sampled_from([
            "dlbridge.from_dlpack(np.arange(6.0){kw})", "dlbridge.to_dlpack(np.arange(6.0){kw})",
            "honest_tensor().__dlpack__({kw})", "dlbridge.convert(np.arange(6.0), 'numpy'{kw})",
            "dlbridge.empty({v}{kw})", "dlbridge.Device({v}{kw})", "dlbridge.DType({v})",
            "honest_tensor().copy({v})", "dlbridge.Device({v}, {v2})",
        ]))
        names = {"from_dlpack": ["device", "copy"], "convert": ["device", "copy"],
                 "to_dlpack": ["stream", "max_version", "dl_device", "copy"],
                 "__dlpack__": ["stream", "max_version", "dl_device", "copy"],
                 "empty": ["dtype", "device"], "Device": ["id"]}
        kw = next((data.draw(keywords(v)) for k, v in names.items() if k in form), "")
        if form.startswith("honest_tensor().__dlpack__"):
            kw = kw[2:]  # no positional argument before the keywords
        call = form.format(kw=kw, v=data.draw(values), v2=data.draw(values))
        expect_clean(worker, f"check(lambda: {call})\n")

    # Fields of an __array_interface__ dict: honest values mixed with lies of
    # every type. Numeric lies are negative or beyond int64 only: an in-range
    # lie about a real pointer's extent cannot be detected by any consumer.
    SMALL = ["0", "1", "2", "3", "4"]
    FIELDS = {
        "shape": ["({}, )".format(s) for s in SMALL] + ["(2, 3)", "()", "(0, 5)", "(-1,)", "(2**63,)",
                                                         "(2**64, 0)", "('x',)", "None", "3", "[2, 3]",
                                                         "(1.5,)", "LyingTuple((2,), 7)"],
        "typestr": ["'<f8'", "'<i4'", "'|u1'", "'>f4'", "'<c16'", "'|b1'", "'<M8[s]'", "'|V4'",
                    "'<f2'", "'<U1'", "'|O'", "'<i3'", "''", "b'<f8'", "8", "None", "'<f8x'",
                    "'\\udcff'"],
        "data": ["(buffer_address(), False)", "(buffer_address(), True)", "(0, False)",
                 "(-1, False)", "(2**64, False)", "(2**70, True)", "('x', False)", "None",
                 "(buffer_address(),)", "(buffer_address(), 'yes')", "(buffer_address(), None)",
                 "(buffer_address(), 2)", "buffer_address()", "(1.5, False)", "b'abcd'",
                 "bytearray(16)"],
        "strides": ["None", "(8,)", "(-8,)", "(0,)", "(24, 8)", "(8, -16)", "(2**63,)", "('x',)",
                    "(1,)", "(3, 1)", "()", "8", "(1.5,)", "(4, 2**63)"],
        "version": ["3", "2", "4", "'3'", "None"],
        "offset": ["0", "8", "-8", "2**64", "'x'"],
        "descr": ["[('', '<f8')]", "'x'", "None"],
    }

    @st.composite
    def interfaces(draw):
        fields = {}
        for name in ["shape", "typestr", "data", "strides", "version", "offset", "descr"]:
            required = name in ("shape", "typestr", "data", "version")
            if required and draw(st.integers(0, 9)) or draw(st.integers(0, 3)) == 0:
                fields[name] = draw(st.sampled_from(FIELDS[name]))
        body = "{" + ", ".join(f"{k!r}: {v}" for k, v in fields.items()) + "}"
        return draw(st.sampled_from([f"lambda: {body}", f"lambda: {body}", "'boom'",
                                     "'interrupt'", "lambda: None", "lambda: [('shape', (2,))]"]))

    @given(iface=interfaces(), data=st.data())
    @fuzz_settings
    def test_array_interface_lies(worker, iface, data):
        subject = f"producer_class(iface={iface})()"
        use = data.draw(st.sampled_from([
            "dlbridge.from_dlpack({x})", "dlbridge.from_dlpack({x}, copy=True)",
            "dlbridge.to_dlpack({x})", "dlbridge.convert({x}, 'numpy')",
            "dlbridge.convert({x}, 'torch')",
        ]))
        expect_clean(worker, f"check(lambda: {use.format(x=subject)})\n")

    @given(kind=st.sampled_from(sorted([
        "bytes", "bytearray", "half_view", "bool_view", "big_endian", "datetime_scalar",
        "timedelta_array", "void", "structured", "strided", "negative", "readonly", "zero_d",
        "float16", "objects", "unicode", "array_u", "array_q", "ctypes_struct", "released",
        "size1_stride", "complex"])),
        data=st.data())
    @fuzz_settings
    def test_buffer_exporters(worker, kind, data):
        call = data.draw(calls(f"exporter({kind!r})"))
        expect_clean(worker, call + "\n")

    @given(first=behaviours, second=behaviours, data=st.data())
    @fuzz_settings
    def test_producer_type_changing_its_answers(worker, first, second, data):
        """dlbridge remembers things per producer type: a type whose answers
        change between imports must not make it trust a stale one."""
        dlpack = data.draw(behaviours)
        program = (f"P = producer_class(device=lambda: (2, 0), dlpack={dlpack})\n"
                   f"check(lambda: dlbridge.from_dlpack(P()))\n"
                   f"P.device_spec = {first}\n"
                   f"P.dlpack_spec = {second}\n"
                   "if not hasattr(P, '__dlpack_device__'):\n"
                   "    P.__dlpack_device__ = lambda self: behave(type(self).device_spec)\n"
                   f"check(lambda: dlbridge.from_dlpack(P()))\n"
                   f"check(lambda: dlbridge.from_dlpack(P(), copy=True))\n")
        expect_clean(worker, program)


    # --- Forged pickles: every field of the three reconstructors' tuples ----

    LAYOUT_FIELDS = [
        ["1", "2", "0", "-1", "2**63", "True", "'1'", "None", "1.0"],
        ["(2, 32, 1)", "(1, 8, 1)", "(99, 32, 1)", "(2, 32)", "(2, 32, 1, 1)", "(2, 0, 1)", "(2, 32, 0)",
         "(6, 16, 1)", "(2, 2**40, 1)", "[2, 32, 1]", "None", "(BadIndex(), 32, 1)", "LyingTuple((2, 32, 1), 2)"],
        ["(16,)", "(4, 4)", "(17,)", "()", "(0,)", "(-1,)", "(2**62, 4)", "(2**70,)", "(True,)", "('16',)",
         "[16]", "None", "LyingTuple((16,), 70)", "(1,) * 65"],
        ["(1,)", "(4, 1)", "(-1,)", "(0,)", "(2**62,)", "(2**63,)", "()", "None", "(1.0,)", "[1]"],
        ["0", "4", "-4", "60", "64", "2**63", "-2**63", "None", "'0'", "True"],
        ["0", "1", "2", "4", "8", "3", "2**63", "-1", "None", "1.5"],
    ]
    FLAGS = ["True", "False", "'yes'", "1", "0", "None", "b''", "BadIndex()"]

    @st.composite
    def layouts(draw):
        """A pickled layout: the honest one for 16 bytes of uint8-sized data,
        with some fields replaced, or something that is no layout at all."""
        honest = ["1", "(1, 8, 1)", "(16,)", "(1,)", "0", "0"]
        fields = [draw(st.sampled_from(choices)) if draw(st.integers(0, 2)) == 0 else honest[i]
                  for i, choices in enumerate(LAYOUT_FIELDS)]
        shape = draw(st.sampled_from(["full", "short", "long", "list", "other"]))
        if shape == "short":
            fields = fields[:draw(st.integers(0, 5))]
        elif shape == "long":
            fields = fields + ["0"]
        text = "(" + "".join(f + ", " for f in fields) + ")"
        return {"list": "[" + text[1:-1] + "]", "other": draw(st.sampled_from(ATOMS))}.get(shape, text)

    BUFFERS = ["bytearray(16)", "bytes(16)", "memoryview(bytearray(32))[::2]", "np.zeros(2)", "np.zeros((4, 4), np.uint8).T",
               "memoryview(bytearray(16)).toreadonly()", "bytearray(0)", "exporter('released')"]

    @st.composite
    def reconstructor_calls(draw):
        """A reconstructor and its fields: honest ones replaced, added or left out."""
        kind = draw(st.sampled_from(["tensor", "shared_tensor", "cuda_tensor"]))
        lay = draw(layouts())
        if kind == "tensor":
            honest = [draw(st.sampled_from(BUFFERS)), lay, draw(st.sampled_from(FLAGS)),
                      draw(st.sampled_from(FLAGS))]
            prelude = ""
        else:
            prelude = ("t = shared_tensor(64 if %r == 'shared_tensor' else 152)\n"
                       "name, ticket = name_and_ticket(t)\n" % kind)
            names = ["name", "name + '0'", "name.upper()", "name.encode()", "'/dlbridge-'", "'/etc/passwd'",
                     "'/dlbridge-' + 'f' * 300", "'/dlbridge-../x'", "'/dlbridge-\\udcff'", "42", "None"]
            tickets = ["ticket", "ticket + 1", "ticket | (5 << 32)", "ticket | (200 << 32)", "0", "-1",
                       "2**63", "2**64", "'0'", "None", "True"]
            honest = [draw(st.sampled_from(names)), draw(st.sampled_from(tickets)), lay,
                      draw(st.sampled_from(FLAGS))]
        count = draw(st.sampled_from([len(honest) - 1, len(honest), len(honest), len(honest) - 2, 0, 5]))
        fields = [honest[i] if i < len(honest) and draw(st.integers(0, 4)) else draw(st.sampled_from(ATOMS))
                  for i in range(count)]
        return prelude, kind, "[" + ", ".join(fields) + "]"

    @pytest.mark.sharing
    @given(call=reconstructor_calls(), via=st.sampled_from(["direct", "pickle"]))
    @fuzz_settings
    def test_forged_pickles(worker, call, via):
        """Every refusal of a forged pickle is a coded DLPackError."""
        prelude, kind, fields = call
        body = f"fields = {fields}\nload = lambda: reconstructor({kind!r})(*fields)\n"
        if via == "pickle":
            body += (f"try:\n"
                     f"    blob = pickle.dumps(Forged(reconstructor({kind!r}), fields), protocol=5)\n"
                     f"    pickle.loads(pickle.dumps(fields, protocol=5))\n"
                     f"    load = lambda: pickle.loads(blob)\n"
                     f"except Exception:\n"
                     f"    pass  # fields pickle cannot carry or rebuild (a memoryview): called directly\n")
        expect_clean(worker, "import pickle\n" + prelude + body + "check(load, coded=True)\n")

    # --- Shared-memory names and headers ---------------------------------

    HEADER_VALUES = ["0", "1", "-1", "2**63 - 1", "2**63", "2**40", "2**32", "64", "65", "4096", "os.getpid()",
                     "dead_pid()", "0x32304d4853424c44"]
    # A live process's pid in the lock word costs a bounded wait (1 s) per
    # operation; tests/cpp/test_shared_memory.cpp checks that one.
    LOCK_VALUES = ["0", "os.getpid()", "dead_pid()", "2**63", "-1", "2**31"]
    header_writes = st.one_of(
        st.tuples(st.sampled_from(sorted(set(HEADER_WORDS) - {"lock"})), st.sampled_from(HEADER_VALUES)),
        st.tuples(st.just("lock"), st.sampled_from(LOCK_VALUES)))
    SEGMENT_USES = [
        "check(lambda: pickle.dumps(t))",
        "check(lambda: pickle.loads(pickle.dumps(t)))",
        "check(lambda: reconstructor('shared_tensor')(*name_and_ticket(t), (1, (1, 8, 1), (64,), (1,), 0, 0)))",
        "check(lambda: t.share_memory())",
        "check(lambda: dlbridge.from_dlpack(np.from_dlpack(t)[::2]))",
        "check(lambda: t.copy())",
        "del t\ngc.collect()\nt = shared_tensor()\nname = segment_name(t)",
    ]

    @pytest.mark.sharing
    @given(writes=st.lists(header_writes, min_size=1, max_size=3),
           uses=st.lists(st.sampled_from(SEGMENT_USES), min_size=1, max_size=3))
    @fuzz_settings
    def test_shared_memory_headers_rewritten_by_another_process(worker, writes, uses):
        program = ("import gc, pickle\nt = shared_tensor()\nname = segment_name(t)\n"
                   "loaded = pickle.loads(pickle.dumps(t))\n")
        program += "".join(f"forge_header(name, {word!r}, {value})\n" for word, value in writes)
        program += "".join(use + "\n" for use in uses)
        program += "del t, loaded\ngc.collect()\n"
        expect_clean(worker, program)

    SEGMENT_NAMES = ["foreign_segment(8192)", "foreign_segment(100)", "foreign_segment(8192, 0x32304d4853424c44)",
                     "foreign_segment(4096, 0x32304d4853424c44)", "foreign_segment(8192, 0x31304d4853424c44)",
                     "'/dlbridge-'", "'/dlbridge-0'", "'/dlbridge-' + 'a' * 191", "'/dlbridge-' + 'a' * 300",
                     "'/dlbridge-0-0-0'", "'/dlbridge-../../etc/passwd'", "'/dlbridge-0\\x00'",
                     "'/dlbridge-ABC'", "'dlbridge-0-0-0'", "'/etc/passwd'", "''", "'/'"]

    @pytest.mark.sharing
    @given(name=st.sampled_from(SEGMENT_NAMES), ticket=st.sampled_from(["0", "1", "2**62", "(3 << 32) | 7"]),
           kind=st.sampled_from(["shared_tensor", "cuda_tensor"]))
    @fuzz_settings
    def test_shared_memory_names(worker, name, ticket, kind):
        expect_clean(worker, f"check(lambda: reconstructor({kind!r})({name}, {ticket}, "
                             f"(1, (1, 8, 1), (64,), (1,), 0, 0)), coded=True)\n")

    # --- CUDA IPC records on the simulated runtime -------------------------

    def simulator_path():
        path = os.environ.get("DLBRIDGE_CUDART_PATH", "")
        if os.path.basename(path).startswith("libcudart_sim"):
            return path
        built = os.path.join(os.path.dirname(__file__), "..", "..", "build", "test-werror", "tests", "cpp",
                             "cudasim", "libcudart_sim.so")
        return os.path.abspath(built) if os.path.exists(built) else None

    @pytest.fixture(scope="module")
    def simulated_cuda_worker():
        path = simulator_path()
        if path is None:
            pytest.skip("needs the CUDA simulator's library: build the target dlbridge_cudasim in "
                        "build/test-werror (scripts/test does) or set DLBRIDGE_CUDART_PATH")
        w = new_worker(DLBRIDGE_CUDART_PATH=path, DLBRIDGE_CUDA_IPC_EXIT_WAIT="0")
        yield w
        w.stop()

    # Fields of a record (src/python/cuda_ipc.cpp, ShareRecord) and of the
    # simulated memory handle inside it (tests/cudasim/ipc.cpp, MemoryWire),
    # as (offset, width).
    RECORD_FIELDS = {"magic": (0, 8), "bytes": (8, 8), "device": (16, 4), "pid": (20, 4),
                     "handle.magic": (24, 4), "handle.pid": (28, 4), "handle.token": (32, 8),
                     "handle.table_fd": (40, 4), "handle.memory_fd": (44, 4), "handle.slot": (48, 4),
                     "handle.device": (52, 4), "handle.id": (56, 8), "handle.offset": (64, 8),
                     "handle.bytes": (72, 8), "event.magic": (88, 4), "event.pid": (92, 4),
                     "event.slot": (108, 4), "event.serial": (112, 8)}
    RECORD_VALUES = ["0", "1", "-1", "64", "65", "64 << 20", "2**31 - 1", "2**63", "exporter", "os.getpid()",
                     "dead_pid()", "4096", "255"]
    # A size claimed larger than the allocation, drawn as often as all the other lies together.
    record_patches = st.one_of(st.tuples(st.sampled_from(sorted(RECORD_FIELDS)), st.sampled_from(RECORD_VALUES)),
                               st.tuples(st.sampled_from(["bytes", "handle.bytes"]),
                                         st.sampled_from(["65", "4096", "64 << 20"])))
    RECORD_LAYOUTS = ["(1, (2, 32, 1), (16,), (1,), 0, 0)", "(1, (2, 32, 1), (16 << 20,), (1,), 0, 0)",
                      "(1, (2, 32, 1), (16 << 20,), (1,), 0, 0)", "(1, (2, 32, 1), (1024,), (1,), 0, 0)",
                      "(1, (2, 32, 1), (17,), (1,), 0, 0)", "(1, (2, 32, 1), (4,), (1,), 60, 0)",
                      "(1, (2, 32, 1), (16,), (-1,), 60, 0)", "(1, (1, 8, 1), (0,), (1,), 64, 0)"]

    @pytest.mark.sharing
    @given(patches=st.lists(record_patches, max_size=3),
           layout=st.sampled_from(RECORD_LAYOUTS), load_twice=st.booleans())
    @fuzz_settings
    def test_cuda_ipc_records_on_the_simulator(simulated_cuda_worker, patches, layout, load_twice):
        program = "record, exporter = remote_record()\n"
        for field, value in patches:
            offset, width = RECORD_FIELDS[field]
            program += f"patch(record, {offset}, {width}, {value})\n"
        program += ("t = shared_tensor(152, record)\n"
                    "for _ in range(2 if %r else 1):\n"
                    "    check(lambda: reconstructor('cuda_tensor')(*name_and_ticket(t), %s), coded=True,"
                    " most_bytes=64)\n"
                    % (load_twice, layout))
        expect_clean(simulated_cuda_worker, program)


if __name__ == "__main__":
    if sys.argv[1:2] == ["--serve"]:
        serve()
    elif sys.argv[1:2] == ["--run"]:
        problem = run_program(sys.argv[2])
        print(problem or "no problem: the program kept the rule")
        sys.exit(1 if problem else 0)
    else:
        sys.exit(__doc__)
