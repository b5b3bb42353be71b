"""The speed goals of issue 9, checked against one results file.

``python -m perf run`` and ``python -m perf report`` end with this table.  For most goals the
figure is a ratio: Ember's median over the best median among its peers in the same run (numpy
and PyTorch as users write them: allocating their results), or over PyTorch's alone where the
goal says "vs torch"; below 1, Ember is faster.  The last column is Ember against numpy writing
into a preallocated array (``out=``), for information: Ember's ops always allocate.  Two goals are absolute times.  A goal whose row did not
run (another suite, a filter, an error) shows ``-``.  Like ``report``, this needs neither
Ember nor numpy.
"""
from typing import NamedTuple, Optional

from perf.report import align, format_seconds, median

PEERS = ("numpy", "torch")


class Goal(NamedTuple):
    row: str                     # the benchmark row's name
    workload: str                # the goal as the issue states it
    limit: float                 # the largest figure that meets the goal
    peers: tuple = PEERS         # ratio against the best of these; () for an absolute time


GOALS = [
    Goal("add 16M f32", "a + b, 16M elements, allocating", 1.0),
    Goal("exp 16M f32", "exp(a), 16M", 1.0),
    Goal("tanh(a*b + c) * 0.5 + a 16M f32", "tanh(a*b + c) * 0.5 + a, 16M", 0.5),
    Goal("sum all 4096x4096", "sum(a), 16M", 1.0),
    Goal("sum dim=0 4096x4096", "sum(m, dim=0), 4096x4096", 1.0),
    Goal("softmax 4096x1024 dim=-1", "softmax(x, 1), 4096x1024", 1.25),
    Goal("matmul 256 f32", "a @ b, 256", 1.15),
    Goal("matmul 1024 f32", "a @ b, 1024", 1.15),
    Goal("add 1 element", "x + y on 1-element tensors (time per op)", 2.5e-6, ()),
    Goal("autodiff 50 x tanh(h*1.001 + 0.001) 1000 f32: forward+backward",
         "autodiff: 50 x tanh(h*1.001 + 0.001), 1000 elements, fwd + bwd, vs torch", 1.0, ("torch",)),
    Goal("MLP 784-512-10 b256 f32: forward+backward step",
         "MLP 784-512-10, batch 256, fwd + bwd, vs torch", 1.2, ("torch",)),
    Goal("python -c 'import ember' (a new process)", "python -c \"import ember\"", 0.5, ()),
    # issue 21: against the best of numpy, scipy (workers=2) and torch
    Goal("fft 2^20 c64", "fft of 2^20 complex64", 1.1, ("numpy", "scipy", "torch")),
    Goal("rfft 2^20 f32", "rfft of 2^20 float32", 1.1, ("numpy", "scipy", "torch")),
    Goal("fft2 2048x2048 c64", "fft2 of 2048x2048 complex64", 1.1, ("numpy", "scipy", "torch")),

    # issue 21 (the linalg suite): numpy.linalg, scipy.linalg and torch.linalg as peers
    *[Goal(f"{op} 512 f64" + (" (512 right-hand sides)" if op == "solve" else ""),
           f"linalg.{op}, 512x512 f64", 1.1, ("numpy", "scipy", "torch"))
      for op in ("cholesky", "solve", "inv", "svd", "eigh", "qr")],
    Goal("batched solve 10000 x 4x4 f32", "batched solve 10000 x 4x4 f32, vs torch", 1.0, ("torch",)),
    Goal("batched cholesky 10000 x 4x4 f32", "batched cholesky 10000 x 4x4 f32, vs torch", 1.0,
         ("torch",)),
    Goal("GP neg. log marginal likelihood n=1000 f64: value + gradient",
         "GP marginal likelihood + gradient, n=1000, vs torch", 1.1, ("torch",)),
    Goal("einsum bij,bjk->bik 64 x 128^3 f64", "einsum bij,bjk->bik vs numpy optimize=True", 1.1,
         ("numpy",)),
    Goal("einsum ij,jk,kl->il 1000x100,100x1000,1000x10 f64",
         "einsum ij,jk,kl->il vs numpy optimize=True", 1.1, ("numpy",)),
]


def figure(goal, row) -> Optional[tuple]:
    """(figure, the peer it is measured against or None) for ``goal`` in ``row``; None: no data."""
    if row is None or row["status"] != "ok" or row["unit"] != "s":
        return None
    ember = median(row, "ember")
    if ember is None:
        return None
    if not goal.peers:
        return ember, None
    peers = [(median(row, p), p) for p in goal.peers if median(row, p)]
    if not peers:
        return None
    best, peer = min(peers)
    return ember / best, peer


def table(doc):
    """The goals as a text table: workload, Ember, best peer, figure, goal, met or missed."""
    rows = {r["name"]: r for r in doc["rows"]}
    head = ["goal (issue 9)", "ember", "best peer", "figure", "goal", "", "vs numpy out="]
    lines = []
    for goal in GOALS:
        row = rows.get(goal.row)
        f = figure(goal, row)
        if f is None:
            lines.append([goal.workload, "-", "-", "-", _limit(goal), "no data", "-"])
            continue
        value, peer = f
        peer_cell = "-" if peer is None else f"{format_seconds(median(row, peer))} ({peer})"
        shown = format_seconds(value) if not goal.peers else f"{value:.2f}x"
        out = median(row, "numpy_out")
        lines.append([goal.workload, format_seconds(median(row, "ember")), peer_cell, shown,
                      _limit(goal), "met" if value <= goal.limit else "MISSED",
                      f"{median(row, 'ember') / out:.2f}x" if out else "-"])
    out, fmt = align(head, lines)
    return "\n".join(out + [fmt(c) for c in lines])


def _limit(goal):
    return f"<= {format_seconds(goal.limit)}" if not goal.peers else f"<= {goal.limit:g}x"
