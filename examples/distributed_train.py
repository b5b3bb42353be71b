"""Data-parallel training with ember.distributed: each process trains on its shard of the data.

    mpiexec -n 2 python examples/distributed_train.py [--epochs 30]

(``pip install -e ".[distributed]"`` brings mpi4py and MPICH's ``mpiexec``; without mpiexec
the script runs as one process.)  A small MLP learns to tell apart the two arms of a spiral.
Every rank builds the same data set and takes every ``world_size``-th point; the parameters
start from a different random draw on each rank and are broadcast from rank 0, then marked
with ``set_distributed()``.  In each step every rank computes the loss of its own
mini-batch; ``backward()`` averages the parameters' gradients over the ranks (while it
runs), so every rank takes the same Adam step and the models stay identical — as if one
process had trained on the concatenated mini-batches.  Rank 0 prints the progress.
"""
import argparse
import time

import numpy as np

import ember
import ember.distributed as dist
import ember.nn.functional as F

HIDDEN = 64


def spirals(points, seed=0):
    """Two interleaved spirals: ``points`` 2-D inputs and their class (0 or 1)."""
    rng = np.random.default_rng(seed)
    t = np.sqrt(rng.uniform(0, 1, points)) * 3 * np.pi
    label = rng.integers(0, 2, points)
    sign = np.where(label == 0, 1.0, -1.0)
    x = np.stack([sign * t * np.cos(t), sign * t * np.sin(t)], axis=1) / (3 * np.pi)
    return (x + rng.normal(0, 0.02, x.shape)).astype(np.float32), label.astype(np.int64)


def init_params(device, seed):
    rng = np.random.default_rng(seed)

    def layer(n_out, n_in):
        bound = 1 / np.sqrt(n_in)
        return (rng.uniform(-bound, bound, (n_out, n_in)).astype(np.float32),
                rng.uniform(-bound, bound, n_out).astype(np.float32))

    arrays = [*layer(HIDDEN, 2), *layer(HIDDEN, HIDDEN), *layer(2, HIDDEN)]
    return [ember.tensor(a, device=device) for a in arrays]


def forward(params, x):
    w1, b1, w2, b2, w3, b3 = params
    h = F.linear(x, w1, b1).tanh()
    h = F.linear(h, w2, b2).tanh()
    return F.linear(h, w3, b3)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--epochs", type=int, default=30)
    ap.add_argument("--points", type=int, default=4096, help="size of the whole data set")
    ap.add_argument("--batch", type=int, default=64, help="mini-batch size on each rank")
    ap.add_argument("--lr", type=float, default=0.01)
    args = ap.parse_args()

    dist.init()                                    # mean of the gradients over the ranks
    rank, size = dist.rank(), dist.world_size()
    device = ember.Device.cpu().autodiff()

    x_all, y_all = spirals(args.points)
    x_mine, y_mine = x_all[rank::size], y_all[rank::size]       # this rank's shard

    # the same starting point everywhere: rank 0's draw, then marked for gradient averaging
    params = [dist.broadcast(p).set_distributed() for p in init_params(device, seed=rank)]
    opt = ember.optim.Adam(params, lr=args.lr)

    # every rank must take the same number of steps (each backward is a collective): the least
    steps = -int(dist.all_reduce(ember.tensor([-(len(x_mine) // args.batch)]), op="max").item())
    rng = np.random.default_rng(1000 + rank)
    if rank == 0:
        print(f"{size} rank(s), {len(x_mine)} points each, {steps} steps of {args.batch} per epoch")
    start = time.perf_counter()
    for epoch in range(1, args.epochs + 1):
        order = rng.permutation(len(x_mine))
        total = 0.0
        for i in range(steps):
            idx = order[i * args.batch:(i + 1) * args.batch]
            x = ember.tensor(x_mine[idx], device=device)
            y = ember.tensor(y_mine[idx])
            loss = F.cross_entropy(forward(params, x), y)
            params = opt.step(loss.backward())      # gradients are already averaged here
            total += loss.item()
        mean_loss = dist.all_reduce(ember.tensor([total / steps]), op="mean").item()
        if rank == 0 and (epoch % 5 == 0 or epoch == 1):
            print(f"epoch {epoch:3d}  loss {mean_loss:.4f}")

    logits = forward([p.without_autodiff() for p in params], ember.tensor(x_all))
    accuracy = float((logits.argmax(dim=1).numpy() == y_all).mean())
    # every rank took the same steps: its parameters do not differ from rank 0's
    drift = max(float(np.abs(p.numpy() - dist.broadcast(p.without_autodiff()).numpy()).max())
                for p in params)
    drift = dist.all_reduce(ember.tensor([drift]), op="max").item()
    if rank == 0:
        print(f"accuracy on all {args.points} points: {accuracy:.3f}; "
              f"largest parameter difference between ranks: {drift}; "
              f"{time.perf_counter() - start:.1f} s")


if __name__ == "__main__":
    main()
