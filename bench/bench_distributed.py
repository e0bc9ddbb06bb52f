"""Tensors between processes: dlbridge.Tensor against a NumPy array of the
same bytes, through the same engine, side by side in one run.

    python bench/bench_distributed.py [--quick] [--out bench/results/distributed.json]

  pickle-5   pickle.dumps(x, protocol=5, buffer_callback=...) + pickle.loads(data, buffers=...)
  ray        ray.put(x) in the driver + ray.get of it in a worker task (ray.init(num_cpus=2))
  dask       client.scatter(x) + client.submit(reader, future).result()
             (LocalCluster, 2 worker processes, TCP on loopback)

A float32 tensor of 256 MiB (4 MiB with --quick). Each engine's sides take
turns, several rounds; the figure is the median per transfer. Bytes copied are
observed, not assumed: a receiver whose data pointer is the sender's (pickle)
or lies in the object store's mapping (Ray) made no copy of its own.
"""
from __future__ import annotations

import pickle
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import benchlib  # noqa: E402

import numpy as np  # noqa: E402

import dlbridge  # noqa: E402

MiB = 1 << 20


def data_ptr(x) -> int:
    return x.data_ptr if isinstance(x, dlbridge.Tensor) else x.ctypes.data


def in_object_store(address: int) -> bool:
    with open("/proc/self/maps") as maps:
        for line in maps:
            fields = line.split()
            low, high = (int(v, 16) for v in fields[0].split("-"))
            if low <= address < high:
                return "plasma" in " ".join(fields[5:])
    return False


def reader(x) -> dict:
    """What a worker sees of what it received; returns no data."""
    return {"type": type(x).__name__, "in_store": in_object_store(data_ptr(x)),
            "readonly": x.readonly if isinstance(x, dlbridge.Tensor) else not x.flags.writeable}


def alternate(sides: dict, rounds: int) -> dict:
    """Median seconds per call of each side's function, taking turns."""
    samples = {name: [] for name in sides}
    for r in range(rounds):
        for k in range(len(sides)):
            name = list(sides)[(r + k) % len(sides)]
            start = time.perf_counter()
            sides[name]()
            samples[name].append(time.perf_counter() - start)
    return {name: {"s": statistics.median(s), "s_min": min(s), "rounds": len(s)} for name, s in samples.items()}


def row(engine: str, timing: dict, nbytes: int, **facts) -> dict:
    d, n = timing["dlbridge"]["s"], timing["numpy"]["s"]
    return {"engine": engine, "bytes": nbytes, "dlbridge_s": d, "numpy_s": n, "ratio": d / n,
            "dlbridge_gbps": nbytes / d / 1e9, "numpy_gbps": nbytes / n / 1e9, **facts}


def bench_pickle(arrays: dict, nbytes: int, quick: bool) -> dict:
    def round_trip(x):
        buffers = []
        data = pickle.dumps(x, protocol=5, buffer_callback=buffers.append)
        return pickle.loads(data, buffers=buffers)

    copied = {name: 0 if data_ptr(round_trip(x)) == data_ptr(x) else nbytes for name, x in arrays.items()}
    timing = benchlib.compare({name: (round_trip, x) for name, x in arrays.items()},
                              batch_s=0.02 if quick else 0.2, reps=3 if quick else 15)
    timing = {name: {"s": t["ns"] / 1e9} for name, t in timing.items()}
    return row("pickle-5 dumps+loads (out-of-band)", timing, nbytes,
               bytes_copied={name: copied[name] for name in arrays})


def bench_ray(arrays: dict, nbytes: int, quick: bool) -> dict:
    import ray
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False,
             object_store_memory=max(4 * nbytes, 128 * MiB))
    try:
        remote_reader = ray.remote(reader)
        seen = {}

        def transfer(name):
            def run():
                ref = ray.put(arrays[name])
                seen[name] = ray.get(remote_reader.remote(ref))
                del ref
            return run

        for name in arrays:  # the first task also starts a worker
            transfer(name)()
        timing = alternate({name: transfer(name) for name in arrays}, 3 if quick else 11)
        return row("ray.put + ray.get in a worker", timing, nbytes, seen=seen,
                   bytes_copied={name: {"put (into the store)": nbytes,
                                        "get in the worker": 0 if seen[name]["in_store"] else nbytes}
                                 for name in arrays})
    finally:
        ray.shutdown()


def bench_dask(arrays: dict, nbytes: int, quick: bool) -> dict:
    import logging
    from distributed import Client, LocalCluster
    cluster = LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
                           dashboard_address=None, silence_logs=logging.ERROR)
    client = Client(cluster)
    try:
        seen = {}

        def transfer(name):
            def run():
                future = client.scatter(arrays[name], direct=True)
                seen[name] = client.submit(reader, future, pure=False).result()
                del future
            return run

        for name in arrays:
            transfer(name)()
        timing = alternate({name: transfer(name) for name in arrays}, 3 if quick else 11)
        return row("dask scatter + submit", timing, nbytes, seen=seen,
                   bytes_copied={name: "sent over TCP: serialised without a copy (out-of-band frame), "
                                       "one kernel copy each way through the socket, received into a "
                                       "new buffer that the worker's object wraps" for name in arrays})
    finally:
        client.close()
        cluster.close()


ENGINES = {"pickle": bench_pickle, "ray": bench_ray, "dask": bench_dask}


def run(quick: bool, engines: list[str]) -> dict:
    nbytes = (4 if quick else 256) * MiB
    a = np.arange(nbytes // 4, dtype=np.float32)
    arrays = {"dlbridge": dlbridge.from_dlpack(a.copy()), "numpy": a}
    results = [ENGINES[name](arrays, nbytes, quick) for name in engines]
    machine = benchlib.machine_info()
    machine["versions"] |= {name: benchlib._version(name) for name in ("ray", "dask", "distributed")}
    return {
        "benchmark": "distributed",
        "machine": machine,
        "settings": {"quick": quick, "bytes": nbytes, "dtype": "float32"},
        "targets": {"pickle-5": 1.05, "ray": 1.1, "dask": 1.1},
        "results": results,
    }


def main(argv: list[str] | None = None) -> int:
    import argparse
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true",
                        help="4 MiB and few rounds: checks that the script works, times nothing")
    parser.add_argument("--out", type=Path, default=benchlib.ROOT / "bench" / "results" / "distributed.json")
    parser.add_argument("--engines", default="pickle,ray,dask",
                        help="comma-separated subset of pickle, ray, dask")
    args = parser.parse_args(argv)
    engines = args.engines.split(",")
    if not set(engines) <= set(ENGINES):
        parser.error(f"--engines takes {', '.join(ENGINES)}")
    payload = run(args.quick, engines)
    benchlib.write_json(args.out, payload)
    for r in payload["results"]:
        print(f"{r['engine']:40s} dlbridge {r['dlbridge_s'] * 1e3:9.3f} ms   numpy {r['numpy_s'] * 1e3:9.3f} ms"
              f"   ratio {r['ratio']:.3f}")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
