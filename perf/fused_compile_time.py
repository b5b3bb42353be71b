"""Cold compile time of fused elementwise chains, by length.

    python perf/fused_compile_time.py 16 32 64 128

For each length, a chain of that many elementwise ops (exp, tanh, mul, add and sub in a
pattern that differs per length, so no two chains share a kernel) on 100 float64 values is
built and read once, in a fresh kernel cache directory (a temporary ``EMBER_CACHE_DIR``,
set before ``ember`` is imported): the seconds include compiling the chain's kernel and, for
the first chain, the per-op loops it calls (shared by later chains). ``MAX_NODES`` is
raised so that each chain is one kernel, and ``HOT_RUNS`` lowered to 1 so that it compiles
at its one read. Prints one JSON line per length.
"""
import json
import os
import sys
import tempfile
import time


def main(lengths):
    os.environ["EMBER_CACHE_DIR"] = tempfile.mkdtemp(prefix="ember-compile-")
    import numpy as np

    import ember
    from ember import fusion

    fusion.MAX_NODES = max(lengths) * 2
    fusion.HOT_RUNS = 1   # each chain is read once: it must compile at that read
    fusion.SHORT_CHAIN = 0   # (short ones too)
    x = ember.tensor(np.linspace(0.1, 0.9, 100))
    ops = (lambda y: y * 0.999, lambda y: y + 0.001, lambda y: y.exp(), lambda y: y * 0.5,
           lambda y: y.tanh())
    for n in lengths:
        y = x
        for i in range(n):
            y = ops[(i + n) % len(ops)](y)
            if i % 7 == n % 7:
                y = y - 0.0001
        fusion.stats(reset=True)
        start = time.perf_counter()
        y.numpy()
        seconds = time.perf_counter() - start
        st = fusion.stats(reset=True)
        print(json.dumps({"ops": st["fused_ops"], "kernels": st["kernels"],
                          "seconds": round(seconds, 2)}), flush=True)


if __name__ == "__main__":
    main([int(a) for a in sys.argv[1:]] or [16, 32, 64, 128])
