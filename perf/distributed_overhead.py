"""All-reduce overhead of backward: a 10M-parameter MLP, data-parallel over MPI ranks.

    python perf/distributed_overhead.py                 # the single-process baseline
    mpiexec -n 2 python perf/distributed_overhead.py  # 2 ranks on one machine

Each rank runs the same model on its own batch of ``BATCH`` rows (the per-rank work is the
same as the single process's), and times, interleaved, ``backward()`` with the parameters'
gradients all-reduced (distributed) and the same backward under ``no_sync()`` (local).
Prints one JSON line (rank 0), medians in ms: ``overhead_ms`` is the distributed minus the
local backward of the same run; compare ``backward_distributed_ms`` of the 2-rank run with
``backward_local_ms`` of the single-process run for the cost against one process.  With one
rank, ``backward()`` skips the reduction (sum and mean of one rank are the gradient itself).
``all_reduce_alone_ms`` is ``ember.distributed.all_reduce`` of as many floats, for reference.
Run with OPENBLAS_NUM_THREADS=1 NUMBA_NUM_THREADS=1 so that each rank owns one core of a
2-core machine.
"""
import json
import statistics
import time

import numpy as np

import ember
import ember.distributed as dist
import ember.nn.functional as F

WIDTH, LAYERS, BATCH, ITERS = 1600, 4, 32, 15


def model(device):
    rng = np.random.default_rng(0)
    ps = []
    for _ in range(LAYERS):
        ps.append(ember.tensor(rng.normal(0, WIDTH ** -0.5, (WIDTH, WIDTH)).astype(np.float32), device=device))
        ps.append(ember.tensor(np.zeros(WIDTH, np.float32), device=device))
    return [p.set_distributed() for p in ps]


def loss_of(ps, x):
    h = x
    for i in range(0, len(ps), 2):
        h = F.linear(h, ps[i], ps[i + 1]).tanh()
    return (h * h).mean()


def measure():
    dist.init()
    r, n = dist.rank(), dist.world_size()
    dev = ember.Device.cpu().autodiff()
    ps = model(dev)
    x = ember.tensor(np.random.default_rng(1 + r).normal(size=(BATCH, WIDTH)).astype(np.float32))
    times = {"distributed": [], "local": []}
    for it in range(ITERS + 2):                     # 2 warm-up rounds
        for kind in ("local", "distributed"):
            loss = loss_of(ps, x)
            dist.barrier()
            t0 = time.perf_counter()
            if kind == "local":
                with dist.no_sync():
                    loss.backward()
            else:
                loss.backward()
            dt = time.perf_counter() - t0
            if it >= 2:
                times[kind].append(dt)
    # the raw all-reduce of as many floats, for reference
    buf = np.ones(sum(p.numel() for p in ps), np.float32)
    raw = []
    for it in range(7):
        dist.barrier()
        t0 = time.perf_counter()
        dist.all_reduce(ember.from_numpy(buf))
        raw.append(time.perf_counter() - t0)
    med = {k: statistics.median(v) * 1e3 for k, v in times.items()}
    return {"ranks": n, "parameters": sum(p.numel() for p in ps), "batch_per_rank": BATCH,
            "backward_local_ms": round(med["local"], 2),
            "backward_distributed_ms": round(med["distributed"], 2),
            "overhead_ms": round(med["distributed"] - med["local"], 2),
            "all_reduce_alone_ms": round(statistics.median(raw[2:]) * 1e3, 2)}


if __name__ == "__main__":
    result = measure()
    if dist.rank() == 0:
        print(json.dumps(result))
