"""``python -m perf compare BASE.json NEW.json``: which rows got slower, faster, or stayed the same.

Rows are matched by name.  Each row present and ok in both files gets a verdict from
perf/stats.py (threshold and the noise of both runs).  Every other row is listed too:
``only in base``, ``only in new``, ``broken`` (ok in BASE, an error in NEW), ``fixed`` (not ok
in BASE, ok in NEW), ``skipped`` (not ok in NEW for another reason, e.g. a missing device).

Exit status: 1 when a row is ``slower`` (beyond the threshold and the noise) or ``broken``;
0 otherwise.  Informational rows (ratios derived from other rows) never fail.
``numpy new/base`` shows how numpy's own time moved between the runs: when it moved as much
as Ember's, the machine changed, not Ember.

Either side may be several runs of one tree (``BASE1.json,BASE2.json``), taken in turn with the
other tree's (base, new, new, base, ...) on a machine whose speed drifts: ``pool`` makes them one
document whose rows hold every run's samples, so a row's median and its noise band span the
drift that alternation exposed to both trees alike.
"""
import json
import math
from dataclasses import asdict, dataclass
from typing import Optional

from perf import report
from perf.stats import SLOWER, judge, ratio_of

ENV_KEYS = ("cpu", "cpus_usable", "python", "numpy", "numpy_blas", "numba",
            "numba_threading_layer", "numba_threads", "torch")


@dataclass
class RowComparison:
    name: str
    unit: str
    verdict: str
    base: Optional[float]          # Ember's median in BASE
    new: Optional[float]
    ratio: Optional[float]         # new / base
    noise: Optional[float]         # relative noise band (see perf/stats.py)
    reason: str
    informational: bool = False
    numpy_ratio: Optional[float] = None
    fails: bool = False


def _median(row, lib="ember"):
    s = row["results"].get(lib) if row else None
    return None if s is None else s["median"]


def compare_rows(b, n, threshold):
    """The comparison of one row, ``b`` or ``n`` None when it is missing from that file."""
    row = n or b
    c = RowComparison(row["name"], row["unit"], "", _median(b), _median(n), None, None, "",
                      informational=row.get("informational", False))
    if n is None:
        c.verdict, c.reason = "only in base", "missing from NEW"
    elif b is None:
        c.verdict, c.reason = "only in new", "missing from BASE"
    elif b["status"] == "ok" and n["status"] == "ok":
        v = judge(b["results"]["ember"], n["results"]["ember"], threshold, row["unit"])
        c.verdict, c.ratio, c.noise, c.reason = v.verdict, v.ratio, v.noise, v.reason
        c.fails = v.verdict == SLOWER and not c.informational
        nb, nn = _median(b, "numpy"), _median(n, "numpy")
        if nb is not None and nn is not None:
            c.numpy_ratio = ratio_of(nn, nb)
    elif b["status"] == "ok" and n["status"] == "error":
        c.verdict, c.reason, c.fails = "broken", f"NEW: {n['error']}", True
    elif n["status"] == "ok":
        c.verdict, c.reason = "fixed", f"BASE was {b['status']}: {b['error']}"
    else:
        c.verdict, c.reason = "skipped", f"NEW is {n['status']}: {n['error']}"
    return c


def pool(docs):
    """One document from several runs of one tree: rows matched by name (the first run's order,
    then rows only later runs have); a row ok in every run that has it gets each library's
    samples pooled and summarised again, any other row is the first run's not-ok one; the
    environment is the first run's, with the highest load average of all."""
    from ember.benchmark import summarize

    if len(docs) == 1:
        return docs[0]
    by_name = {}
    for doc in docs:
        for r in doc["rows"]:
            by_name.setdefault(r["name"], []).append(r)
    rows = []
    for name, runs in by_name.items():
        if any(r["status"] != "ok" for r in runs):
            rows.append(next(r for r in runs if r["status"] != "ok"))
            continue
        results = {}
        for lib in runs[0]["results"]:
            parts = [r["results"].get(lib) for r in runs]
            if any(s is None for s in parts):
                continue
            samples = [x for s in parts for x in (s.get("samples") or [s["median"]])]
            stats = summarize(samples).__dict__.copy()
            stats.update(number=None, samples=samples)
            results[lib] = stats
        rows.append(dict(runs[0], results=results))
    env = dict(docs[0].get("environment", {}))
    loads = [d.get("environment", {}).get("loadavg") for d in docs]
    loads = [x for x in loads if x]
    if loads:
        env["loadavg"] = [max(x[i] for x in loads) for i in range(len(loads[0]))]
    return dict(docs[0], environment=env, rows=rows)


def compare(base_doc, new_doc, threshold=0.1):
    """Row comparisons: BASE's rows in order, then the rows only NEW has."""
    base = {r["name"]: r for r in base_doc["rows"]}
    new = {r["name"]: r for r in new_doc["rows"]}
    names = list(base) + [name for name in new if name not in base]
    return [compare_rows(base.get(name), new.get(name), threshold) for name in names]


def environment_differences(base_doc, new_doc):
    eb, en = base_doc.get("environment", {}), new_doc.get("environment", {})
    return {k: [eb.get(k), en.get(k)] for k in ENV_KEYS if eb.get(k) != en.get(k)}


def counts(comparisons):
    out = {}
    for c in comparisons:
        out[c.verdict] = out.get(c.verdict, 0) + 1
    return out


def exit_status(comparisons):
    return 1 if any(c.fails for c in comparisons) else 0


def _cells(c):
    noise = "-" if c.noise is None else f"±{100 * c.noise:.0f}%"
    verdict = c.verdict + (" (info)" if c.informational and c.verdict in ("slower", "faster") else "")
    return [c.name, report.format_value(c.base, c.unit), report.format_value(c.new, c.unit),
            report.format_ratio(c.ratio), noise, verdict, report.format_ratio(c.numpy_ratio)]


HEAD = ["benchmark", "base", "new", "new/base", "noise", "verdict", "numpy new/base"]


def _summary(comparisons, threshold):
    parts = [f"{k} {v}" for k, v in sorted(counts(comparisons).items())]
    status = "REGRESSION" if exit_status(comparisons) else "ok"
    return f"{status}: {', '.join(parts)} (threshold {100 * threshold:.0f}%, noise: see perf/stats.py)"


def load_warnings(base_doc, new_doc):
    """A warning per run whose 1- or 5-minute load average exceeded half the cores."""
    out = []
    for which, doc in (("BASE", base_doc), ("NEW", new_doc)):
        env = doc.get("environment", {})
        load, cores = env.get("loadavg"), env.get("cpus_usable") or env.get("cpu_count")
        if load and cores and max(load[:2]) > 0.5 * cores:
            out.append(f"the machine was busy during {which} (load average {load[0]:.1f} / "
                       f"{load[1]:.1f} over 1 / 5 min on {cores} cores): verdicts may reflect "
                       "the load (see numpy new/base)")
    return out


def _notes(comparisons, differences, warnings):
    reasons = {}   # reason -> names of the rows it applies to, in order
    for c in comparisons:
        if c.verdict not in ("same", "slower", "faster"):
            reasons.setdefault(c.reason, []).append(c.name)
    out = []
    if reasons:
        out += ["", "rows not compared:"] + [f"  {', '.join(names)}: {reason}"
                                             for reason, names in reasons.items()]
    if differences:
        out += ["", "the runs' environments differ:"]
        out += [f"  {k}: {b} -> {n}" for k, (b, n) in differences.items()]
    if warnings:
        out += [""] + [f"warning: {w}" for w in warnings]
    return out


def format_table(comparisons, threshold, differences, warnings=()):
    lines = [_cells(c) for c in comparisons]
    out, fmt = report.align(HEAD, lines)
    out += [fmt(cells) for cells in lines]
    out += _notes(comparisons, differences, warnings) + ["", _summary(comparisons, threshold)]
    return "\n".join(out)


def format_markdown(comparisons, threshold, differences, warnings=()):
    out = [f"**perf compare: {_summary(comparisons, threshold)}**", "",
           "| " + " | ".join(HEAD) + " |", "|" + "---|" * len(HEAD)]
    for c in comparisons:
        cells = _cells(c)
        if c.fails:
            cells[5] = f"**{cells[5]}**"
        out.append("| " + " | ".join(x.replace("|", "\\|") for x in cells) + " |")
    out += _notes(comparisons, differences, warnings)
    return "\n".join(out)


def format_json(comparisons, threshold, differences, warnings=()):
    def finite(row):  # JSON has no infinity (a ratio against a zero)
        return {k: None if isinstance(v, float) and not math.isfinite(v) else v
                for k, v in row.items()}

    return json.dumps({"threshold": threshold, "regression": bool(exit_status(comparisons)),
                       "counts": counts(comparisons), "environment_differences": differences,
                       "warnings": list(warnings),
                       "rows": [finite(asdict(c)) for c in comparisons]}, indent=1,
                      allow_nan=False, default=str)


FORMATS = {"table": format_table, "markdown": format_markdown, "json": format_json}
