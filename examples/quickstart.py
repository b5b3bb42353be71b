"""Ember quickstart: train a small neural network on two interleaved spirals.

    python examples/quickstart.py [--device cpu|cuda] [--quick] [--eager]

A 2-64-64-2 MLP (tanh) learns to tell the two arms of a noisy spiral apart: Adam on
mini-batches of 128, with a progress bar showing the loss (``tqdm`` when it is installed:
``pip install -e ".[examples]"``).  Each training step (forward, ``loss.backward()``,
``opt.step``) is one ``ember.compile``d function: traced on the first batch, replayed on the
others; ``--eager`` runs it op by op instead.  Then:

1. its gradients, checked against a numpy forward pass with a hand-written backward;
2. gradient checkpointing: the same step under ``CheckpointingStrategy.BALANCED`` gives the
   same gradients and keeps less memory between forward and backward;
3. quantized inference: the trained weights as 8-bit (Q8S) and packed 4-bit (Q4S) integers
   with one float32 scale per block of 32 weights: accuracy and bytes;
4. timings: the compiled step against the eager one and numpy (a training step, inference).

The first op compiles Numba kernels (a cold start) or loads them from the disk cache
(``~/.cache/ember``: a warm start); the script says which, and how long it all took.
``--quick`` trains for a few epochs and skips the timings (the test suite runs it so).
"""
import time

START = time.perf_counter()

import argparse  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402
import tracemalloc  # noqa: E402

import numpy as np  # noqa: E402

import ember  # noqa: E402
import ember.nn.functional as F  # noqa: E402

HIDDEN = 64
POINTS, BATCH, EPOCHS, LR = 2048, 128, 30, 0.01


# --- data and model --------------------------------------------------------------------------
def spirals(points, seed=0):
    """Two interleaved spirals, 1.5 turns each: ``points`` 2-D inputs and their class (0 or 1)."""
    rng = np.random.default_rng(seed)
    t = np.sqrt(rng.uniform(0, 1, points)) * 3 * np.pi
    label = rng.integers(0, 2, points)
    sign = np.where(label == 0, 1.0, -1.0)
    x = np.stack([sign * t * np.cos(t), sign * t * np.sin(t)], axis=1) / (3 * np.pi)
    return (x + rng.normal(0, 0.02, x.shape)).astype(np.float32), label.astype(np.int64)


def init_params(seed=0):
    """PyTorch's default initialisation of three Linear layers, as numpy arrays."""
    rng = np.random.default_rng(seed)
    params = []
    for n_out, n_in in ((HIDDEN, 2), (HIDDEN, HIDDEN), (2, HIDDEN)):
        bound = 1 / np.sqrt(n_in)
        params += [rng.uniform(-bound, bound, (n_out, n_in)).astype(np.float32),
                   rng.uniform(-bound, bound, n_out).astype(np.float32)]
    return params


def forward(params, x):
    """The logits of the MLP."""
    w1, b1, w2, b2, w3, b3 = params
    h = F.linear(x, w1, b1).tanh()
    h = F.linear(h, w2, b2).tanh()
    return F.linear(h, w3, b3)


def accuracy(params, x, y):
    """The fraction of points classified right (no autodiff: inference only)."""
    logits = forward([p.without_autodiff() for p in params], x.without_autodiff())
    return float((logits.argmax(dim=1) == y).cast(ember.float32).mean().item())


def training_step(opt, compiled=True):
    """One step on a batch ``(x, y)``: forward, backward, Adam; returns the loss.  Compiled, the
    first call traces it and the others replay what it launched (``opt`` is read and updated
    at every call, as in eager mode)."""
    def step(x, y):
        loss = F.cross_entropy(forward(opt.params, x), y)
        opt.step(loss.backward())
        return loss

    return ember.compile(step) if compiled else step


def train(x_np, y_np, device, epochs, on_epoch=None, seed=0, compiled=True):
    """Adam on shuffled mini-batches; returns the parameters (autodiff leaves) and the last loss."""
    params = [ember.tensor(p, device=device).require_grad() for p in init_params(seed)]
    opt = ember.optim.Adam(params, lr=LR)
    step = training_step(opt, compiled)
    rng = np.random.default_rng(seed + 1)
    steps = len(x_np) // BATCH
    loss_value = float("nan")
    for epoch in range(epochs):
        order = rng.permutation(len(x_np))
        total = 0.0
        for i in range(steps):
            idx = order[i * BATCH:(i + 1) * BATCH]
            x = ember.tensor(x_np[idx], device=device)
            y = ember.tensor(y_np[idx], device=device.base())
            total += step(x, y).item()
        loss_value = total / steps
        if on_epoch is not None:
            on_epoch(epoch + 1, epochs, loss_value, opt.params)
    return opt.params, loss_value


# --- numpy reference: the same forward pass and its hand-written backward ----------------------
def numpy_step(params, x, y):
    """Loss and gradients of the MLP (mean cross entropy) in numpy, backward by hand."""
    w1, b1, w2, b2, w3, b3 = params
    h1 = np.tanh(x @ w1.T + b1)
    h2 = np.tanh(h1 @ w2.T + b2)
    z = h2 @ w3.T + b3
    z = z - z.max(axis=1, keepdims=True)
    p = np.exp(z)
    p /= p.sum(axis=1, keepdims=True)
    n = len(x)
    loss = -np.log(p[np.arange(n), y]).mean()
    dz = p
    dz[np.arange(n), y] -= 1
    dz /= n
    dh2 = (dz @ w3) * (1 - h2 * h2)
    dh1 = (dh2 @ w2) * (1 - h1 * h1)
    grads = [dh1.T @ x, dh1.sum(0), dh2.T @ h1, dh2.sum(0), dz.T @ h2, dz.sum(0)]
    return loss, grads


def numpy_predict(params, x):
    w1, b1, w2, b2, w3, b3 = params
    h = np.tanh(x @ w1.T + b1)
    h = np.tanh(h @ w2.T + b2)
    return (h @ w3.T + b3).argmax(1)


# --- small helpers -----------------------------------------------------------------------------
def count_compilations():
    """A list that grows by one name per kernel Numba compiles (loads from the cache don't count)."""
    from numba.core import event

    compiled = []

    class Listener(event.Listener):
        def on_start(self, ev):
            compiled.append(ev.data["dispatcher"].py_func.__name__)

        def on_end(self, ev):
            pass

    event.register("numba:compile", Listener())
    return compiled


def progress(epochs):
    """An ``on_epoch`` callback: a tqdm bar when tqdm is installed and stdout is a terminal,
    else a plain line every 10 epochs."""
    try:
        from tqdm import tqdm
    except ImportError:
        tqdm = None
    if tqdm is not None and sys.stdout.isatty():
        bar = tqdm(total=epochs, desc="   training", unit="epoch", ncols=80)

        def show(epoch, epochs, loss, params):
            bar.set_postfix(loss=f"{loss:.4f}")
            bar.update(1)
            if epoch == epochs:
                bar.close()
        return show

    start = time.perf_counter()

    def show(epoch, epochs, loss, params):
        if epoch % 10 == 0 or epoch == epochs:
            print(f"   epoch {epoch:3d}/{epochs}  loss {loss:.4f}  {time.perf_counter() - start:5.1f} s",
                  flush=True)
    return show


def median_times(fns, repeats=7):
    """Median seconds per call of each fn; samples (>= 10 ms of calls) alternate between the fns."""
    numbers = []
    for fn in fns:
        fn()  # warm-up
        number = 1
        while True:
            start = time.perf_counter()
            for _ in range(number):
                fn()
            t = time.perf_counter() - start
            if t >= 0.01:
                break
            number *= 2 if t > 0.002 else 10
        numbers.append(number)
    samples = [[] for _ in fns]
    for _ in range(repeats):
        for fn, number, out in zip(fns, numbers, samples):
            start = time.perf_counter()
            for _ in range(number):
                fn()
            out.append((time.perf_counter() - start) / number)
    return [statistics.median(s) for s in samples]


def fmt(t):
    return f"{t * 1e3:.2f} ms" if t >= 1e-3 else f"{t * 1e6:.0f} µs"


def kept_by_graph(device, params_np, x_np, y_np):
    """Gradients of one step on ``device`` and the bytes allocated between forward and backward."""
    params = [ember.tensor(p, device=device).require_grad() for p in params_np]
    x = ember.tensor(x_np, device=device)
    y = ember.tensor(y_np)
    ember.empty_cache()    # buffers reused from Ember's pool would be invisible to tracemalloc
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    loss = F.cross_entropy(forward(params, x), y)
    ember.empty_cache()    # what the forward's temporaries gave back is freed: only kept bytes count
    kept = tracemalloc.get_traced_memory()[0] - before
    tracemalloc.stop()
    grads = loss.backward()
    return [p.grad(grads).numpy() for p in params], kept


# --- the demo ----------------------------------------------------------------------------------
def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--device", default="cpu", choices=("cpu", "cuda"))
    parser.add_argument("--quick", action="store_true", help="10 epochs, no timing table")
    parser.add_argument("--eager", action="store_true",
                        help="train op by op instead of with an ember.compile'd step")
    args = parser.parse_args()
    try:
        base = ember.Device.cpu() if args.device == "cpu" else ember.Device.cuda()
    except ember.DeviceError as e:
        print(f"--device {args.device}: {e}")
        return 1
    device = base.autodiff()
    epochs = 10 if args.quick else EPOCHS
    compiled = count_compilations()
    import numba

    print(f"Ember {ember.__version__} quickstart on {base} (numpy {np.__version__}, "
          f"numba {numba.__version__}, {numba.get_num_threads()} threads)")

    # training
    x_np, y_np = spirals(POINTS)
    x_test, y_test = spirals(POINTS, seed=1)
    print(f"\nTraining a 2-{HIDDEN}-{HIDDEN}-2 MLP on {POINTS} spiral points: Adam (lr {LR}), "
          f"batches of {BATCH}, {epochs} epochs, {'eager' if args.eager else 'compiled'} steps")
    start = time.perf_counter()
    params, loss = train(x_np, y_np, device, epochs, progress(epochs), compiled=not args.eager)
    print(f"   trained in {time.perf_counter() - start:.1f} s")
    x_all, y_all = ember.tensor(x_np, device=base), ember.tensor(y_np, device=base)
    acc = accuracy(params, x_all, y_all)
    test_acc = accuracy(params, ember.tensor(x_test, device=base), ember.tensor(y_test, device=base))
    print(f"   final loss {loss:.4f}, training accuracy {100 * acc:.1f} %, "
          f"accuracy on {POINTS} new points {100 * test_acc:.1f} %")
    trained = [p.numpy() for p in params]

    # 1. gradients against numpy
    batch = slice(0, 512)
    grads_np = numpy_step(trained, x_np[batch], y_np[batch])[1]
    grads, _ = kept_by_graph(device, trained, x_np[batch], y_np[batch])
    rel = max(float(np.abs(g - r).max() / np.abs(r).max()) for g, r in zip(grads, grads_np))
    print(f"\n1. Gradients of a 512-point batch vs numpy's hand-written backward: "
          f"largest relative difference {rel:.1e}")

    # 2. gradient checkpointing
    wide = 16384
    xw, yw = spirals(wide, seed=2)
    g_none, kept_none = kept_by_graph(device, trained, xw, yw)
    balanced = base.gradient_checkpointing(ember.CheckpointingStrategy.BALANCED)
    g_bal, kept_bal = kept_by_graph(balanced, trained, xw, yw)
    same = all(np.array_equal(a, b) for a, b in zip(g_none, g_bal))
    print(f"2. Checkpointing, one step on {wide} points: memory kept by the graph after forward "
          f"NONE {kept_none / 2**20:.1f} MiB, BALANCED {kept_bal / 2**20:.1f} MiB; "
          f"gradients {'identical' if same else 'DIFFERENT'}")

    # 3. quantized inference
    print(f"3. Quantized inference on the {POINTS} training points "
          f"(float32: {100 * acc:.1f} %):")
    weights = [p.without_autodiff() for p in params]
    for value, store in ((ember.QuantValue.Q8S, ember.QuantStore.NATIVE),
                         (ember.QuantValue.Q4S, ember.QuantStore.PACKED_U32)):
        scheme = ember.QuantScheme(value, block_size=[32], store=store)
        q = [w.quantize(scheme) if w.ndim == 2 else w for w in weights]   # weights, not biases
        q_bytes = sum(w.nbytes for w in q[0::2])
        f_bytes = sum(w.nbytes for w in weights[0::2])
        err = max(float((w.dequantize() - f).abs().max().item()) for w, f in zip(q[0::2], weights[0::2]))
        print(f"   {value.name} {store.name:<10}: accuracy {100 * accuracy(q, x_all, y_all):.1f} %, "
              f"weight values {q_bytes} bytes ({f_bytes / q_bytes:.0f}x smaller), "
              f"largest weight error {err:.4f}")

    # 4. timings
    if not args.quick:
        xb, yb = x_np[:BATCH], y_np[:BATCH]
        xb_t, yb_t = ember.tensor(xb, device=device), ember.tensor(yb, device=base)
        steps = [training_step(ember.optim.Adam(
            [ember.tensor(p, device=device).require_grad() for p in trained], lr=LR), compiled)
            for compiled in (True, False)]
        plain = [ember.tensor(p, device=base) for p in trained]
        infer = [ember.compile(lambda x: forward(plain, x).argmax(dim=1)),
                 lambda x: forward(plain, x).argmax(dim=1)]

        def numpy_train_step():   # numpy's step: forward and its hand-written backward
            return numpy_step(trained, xb, yb)

        cases = [   # (name, ember compiled, ember eager, numpy)
            (f"training step (batch {BATCH})", lambda: ember.fusion.force(steps[0](xb_t, yb_t)),
             lambda: ember.fusion.force(steps[1](xb_t, yb_t)), numpy_train_step),
            (f"inference ({POINTS} points)", lambda: ember.fusion.force(infer[0](x_all)),
             lambda: ember.fusion.force(infer[1](x_all)), lambda: numpy_predict(trained, x_np)),
        ]
        print(f"4. Timings (median per call)     {'compiled':>9}  {'eager':>9}  {'numpy':>9}  "
              "numpy/compiled")
        for name, fc, fe, fn in cases:
            tc, te, tn = median_times([fc, fe, fn])
            print(f"   {name:<29}  {fmt(tc):>9}  {fmt(te):>9}  {fmt(tn):>9}  {tn / tc:9.2f}x")

    total = time.perf_counter() - START
    print(f"\nDone in {total:.1f} s, {len(compiled)} kernels compiled this run"
          + (" (run again: they load from the disk cache)" if compiled else
             " (warm start: every kernel came from the disk cache)"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
