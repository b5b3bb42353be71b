"""``python -m perf run``: run the suites with a progress bar, print the table, write the JSON.

Rows that fail (an op raising) or cannot run (a feature or device missing) are recorded with
their reason, never dropped, and do not stop the run.  The exit status is 0 unless the file
written would not validate (a bug of perf/ itself).
"""
import datetime
import gc
import json
import os
import sys
import time

import ember
from ember.benchmark import environment
from perf import goals, report, schema, suites

QUICK = dict(repeat=5, min_time=0.005, max_time=1.0, warmup=2)
FULL = dict(repeat=21, min_time=0.02, max_time=None, warmup=2)


def optional_torch():
    try:
        import torch
    except ImportError:
        return None
    return torch


class Progress:
    """``[#####.....]  5/24  suite: name``: redrawn in place on a terminal, one line per case
    otherwise (CI logs)."""

    WIDTH = 20

    def __init__(self, total, stream=None):
        self.total = total
        self.stream = stream or sys.stderr
        self.tty = self.stream.isatty()

    def bar(self, done):
        filled = round(self.WIDTH * done / max(self.total, 1))
        return f"[{'#' * filled}{'.' * (self.WIDTH - filled)}] {done:2d}/{self.total}"

    def start(self, i, label):
        if self.tty:
            self.stream.write(f"\r\033[K{self.bar(i)}  {label} ...")
            self.stream.flush()

    def done(self, i, label, summary):
        self.stream.write(("\r\033[K" if self.tty else "") + f"{self.bar(i + 1)}  {label}: {summary}\n")
        self.stream.flush()


def summary(rows, seconds):
    parts = []
    for r in rows[:1]:
        if r["status"] != "ok":
            parts.append(f"{r['status']}: {r['error']}")
        else:
            parts += [f"{lib} {report.format_value(s['median'], r['unit'])}"
                      for lib, s in r["results"].items() if lib != "numpy_out"]
    more = f" (+{len(rows) - 1} rows)" if len(rows) > 1 else ""
    return ", ".join(parts) + more + f"  [{seconds:.1f} s]"


def resolve_device(name):
    if name == "cpu":
        return ember.Device.cpu()
    if os.environ.get("NUMBA_ENABLE_CUDASIM", "0") not in ("", "0"):
        raise suites.NotAvailable("NUMBA_ENABLE_CUDASIM is set: the CUDA simulator proves logic, "
                                  "not speed (run on a GPU without it)")
    return ember.Device.cuda()


def run_case(case, settings):
    device_name = case.device or settings.device
    try:
        rows = case.run(settings, resolve_device(device_name))
    except (ember.DeviceError, suites.NotAvailable) as e:
        rows = suites.failed_rows(case, "unavailable", str(e))
    except Exception as e:  # never lose the other rows to one broken case
        rows = suites.failed_rows(case, "error", suites.error_text(e))
    if case.device is None and settings.device != "cpu":
        for r in rows:
            r["name"] += f" [{settings.device}]"
    return rows


def parse_shard(text):
    """``"K/N"`` -> (K, N), 1 <= K <= N; ValueError otherwise."""
    try:
        k, n = (int(x) for x in text.split("/"))
    except ValueError:
        raise ValueError(f"--shard takes K/N (e.g. 1/2), not {text!r}") from None
    if not 1 <= k <= n:
        raise ValueError(f"--shard {text}: K must be between 1 and N")
    return k, n


def run(suite_names, quick=False, device="cpu", name_filter="", progress=True, torch=True,
        shard=None):
    """Runs the suites; returns the results document (schema version ``schema.SCHEMA_VERSION``).

    ``torch=False`` leaves PyTorch out (not even imported: its thread pools stay out of the
    process)."""
    opts = QUICK if quick else FULL
    settings = suites.Settings(device=device, torch=optional_torch() if torch else None, **opts)
    selected = [c for c in suites.cases(suite_names, device)
                if any(name_filter in n for n in c.names)]
    if shard is not None:   # (k, n): every n-th case from the k-th, so n processes share them
        selected = selected[shard[0] - 1::shard[1]]
    bar = Progress(len(selected)) if progress else None
    rows = []
    for i, case in enumerate(selected):
        label = f"[{case.suite}] {case.names[0]}"
        if bar:
            bar.start(i, label)
        start = time.perf_counter()
        case_rows = run_case(case, settings)
        gc.collect()
        rows += case_rows
        if bar:
            bar.done(i, label, summary(case_rows, time.perf_counter() - start))
    return {
        "schema": schema.SCHEMA, "schema_version": schema.SCHEMA_VERSION,
        "created": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "settings": {"quick": quick, "suites": list(suite_names), "device": device,
                     "filter": name_filter, "torch": settings.torch is not None,
                     "shard": None if shard is None else f"{shard[0]}/{shard[1]}", **opts},
        "environment": environment(),
        "rows": rows,
    }


def main(args):
    names = suites.SUITES if args.suite == "all" else args.suite.split(",")
    try:
        shard = parse_shard(args.shard) if getattr(args, "shard", None) else None
        doc = run(names, quick=args.quick, device=args.device, name_filter=args.k,
                  torch=not getattr(args, "no_torch", False), shard=shard)
    except ValueError as e:   # an unknown suite, a bad --shard
        print(f"perf run: {e}", file=sys.stderr)
        return 2
    print()
    print(report.describe(doc))
    print()
    print(report.table(doc))
    print()
    print(goals.table(doc))
    problems = schema.validate(doc)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(doc, f, indent=1, allow_nan=False)
        print(f"\nwrote {args.json} (schema {schema.SCHEMA} version {schema.SCHEMA_VERSION})")
    if problems:
        print("perf run: the results do not follow the schema (a bug of perf/):\n  "
              + "\n  ".join(problems), file=sys.stderr)
        return 1
    return 0
