"""Tables (and a chart) of one results file: ``python -m perf report FILE.json [--plot out.png]``.

The same table ends ``python -m perf run``.  Columns: Ember's median and its ``spread``, half
the interquartile range of its samples relative to the median (the middle half of the samples
lies within about median ± spread); numpy's and PyTorch's medians with ``vs numpy`` = numpy / Ember and ``vs torch`` =
torch / Ember (above 1: Ember is faster); ``numpy out=`` is numpy writing into a preallocated
array; ``1st call`` is Ember's first call (compiling its kernels, or loading them from the disk
cache).  This module needs neither Ember nor numpy (matplotlib only for ``--plot``).
"""
import math

from perf.schema import LIBRARIES


def format_seconds(t):
    if t is None:
        return "-"
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("µs", 1e-6)):
        if abs(t) >= scale:
            return f"{t / scale:.3g} {unit}" if t / scale < 100 else f"{t / scale:.0f} {unit}"
    return f"{t * 1e9:.0f} ns"


def format_bytes(b):
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if abs(b) >= scale:
            return f"{b / scale:.3g} {unit}"
    return f"{b:.0f} B"


def format_value(v, unit):
    if v is None:
        return "-"
    if unit == "B":
        return format_bytes(v)
    if unit == "x":
        return f"{v:.3g}x"
    return format_seconds(v)


def format_ratio(r):
    return "-" if r is None or not math.isfinite(r) else f"{r:.2f}x"


def median(row, lib):
    s = row["results"].get(lib)
    return None if s is None else s["median"]


def speedup(row, lib):
    """``lib``'s median / Ember's: above 1, Ember is faster (time rows only)."""
    e, p = median(row, "ember"), median(row, lib)
    if row["unit"] != "s" or row["status"] != "ok" or not e or p is None:
        return None
    return p / e


def relative_spread(row):
    s = row["results"].get("ember")
    if s is None or s.get("iqr") is None or not s["median"] or s.get("n", 2) == 1:
        return "-"
    return f"±{50 * s['iqr'] / s['median']:.1f}%"


def align(head, lines):
    """Columns padded to their widest cell; the first column left-aligned, the others right."""
    widths = [max(len(c[i]) for c in [head] + lines) for i in range(len(head))]

    def fmt(cells):
        return "  ".join(c.ljust(w) if i == 0 else c.rjust(w)
                         for i, (c, w) in enumerate(zip(cells, widths))).rstrip()

    out = [fmt(head), "-" * len(fmt(head))]
    return out, fmt


def table(doc):
    """The rows of one results file as a text table, then the reasons of non-ok rows."""
    rows = doc["rows"]
    # the peers beyond numpy that some row has, each as a column and a ratio
    extra = [lib for lib in ("torch", "scipy", "torch_compile", "jax", "numba")
             if any(lib in r["results"] for r in rows)]
    head = ["benchmark", "ember", "spread", "numpy", "vs numpy", "numpy out=", "1st call"]
    for lib in extra:
        head += [lib, f"vs {lib}"]
    lines, suites = [], []
    for r in rows:
        status = r["status"]
        cells = [r["name"] + ("  (MISMATCH)" if r.get("error") and status == "ok" else ""),
                 format_value(median(r, "ember"), r["unit"]) if status == "ok" else status,
                 relative_spread(r), format_value(median(r, "numpy"), r["unit"]),
                 format_ratio(speedup(r, "numpy")), format_value(median(r, "numpy_out"), r["unit"]),
                 format_seconds(r.get("first_call_s"))]
        for lib in extra:
            cells += [format_value(median(r, lib), r["unit"]), format_ratio(speedup(r, lib))]
        lines.append(cells)
        suites.append(r["suite"])
    out, fmt = align(head, lines)
    previous = None
    for suite, cells in zip(suites, lines):
        if suite != previous:
            out.append(f"[{suite}]")
            previous = suite
        out.append(fmt(cells))
    reasons = {}   # reason -> names of the rows it applies to, in order
    for r in rows:
        if r.get("error"):
            reasons.setdefault(r["error"], []).append(r["name"])
    if reasons:
        out += ["", "not ok:"] + [f"  {', '.join(names)}: {reason}" for reason, names in reasons.items()]
    return "\n".join(out)


def describe(doc):
    """Two lines about the machine and the settings of a run."""
    env, s = doc.get("environment", {}), doc.get("settings", {})
    torch = f", torch {env['torch']}" if env.get("torch") else ""
    lines = [f"{env.get('cpu')}, {env.get('cpus_usable') or env.get('cpu_count')} cores; "
             f"numpy {env.get('numpy')} ({env.get('numpy_blas')}), numba {env.get('numba')} "
             f"({env.get('numba_threading_layer')}, {env.get('numba_threads')} threads){torch}",
             f"commit {env.get('git_commit')}; {doc.get('created')}; median of up to "
             f"{s.get('repeat')} samples of >= {1e3 * (s.get('min_time') or 0):.0f} ms"
             f"{' (--quick)' if s.get('quick') else ''}; vs numpy = numpy / ember "
             "(> 1: ember faster)"]
    settings = ", ".join(f"{k}={v}" for k, v in env.get("env", {}).items())
    if settings:
        lines.append(f"environment variables: {settings}")
    load = env.get("loadavg")
    cores = env.get("cpus_usable") or env.get("cpu_count")
    if load and cores and max(load[:2]) > 0.5 * cores:
        lines.append(f"warning: the machine was busy (load average {load[0]:.1f} / {load[1]:.1f} "
                     f"over 1 / 5 min on {cores} cores): timings are noisy, parallel kernels "
                     "suffer most")
    return "\n".join(lines)


def plot(doc, path):
    """A bar chart of the time rows: each library's median per row (log scale)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = [r for r in doc["rows"] if r["unit"] == "s" and r["status"] == "ok"]
    libs = [lib for lib in LIBRARIES if any(lib in r["results"] for r in rows)]
    height = 0.8 / max(len(libs), 1)
    fig, ax = plt.subplots(figsize=(10, 1.0 + 0.45 * len(rows) * max(len(libs), 1) ** 0.5))
    for k, lib in enumerate(libs):
        ys = [i + k * height for i, r in enumerate(rows) if lib in r["results"]]
        xs = [r["results"][lib]["median"] for r in rows if lib in r["results"]]
        ax.barh(ys, xs, height=height, label=lib)
    ax.set_yticks([i + 0.4 - height / 2 for i in range(len(rows))], [r["name"] for r in rows],
                  fontsize=8)
    ax.invert_yaxis()
    ax.set_xscale("log")
    ax.set_xlabel("median seconds per call (log scale; shorter is faster)")
    env = doc.get("environment", {})
    ax.set_title(f"Ember vs peers: {env.get('cpu')}, commit {str(env.get('git_commit'))[:12]}",
                 fontsize=10)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
