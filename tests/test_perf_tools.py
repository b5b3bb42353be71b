"""The benchmark tooling: ``ember.benchmark``, and perf/'s statistics, verdicts, schema and CLI.

No test here asserts a speed: the timings it checks are orders of magnitude apart (a Numba
compile against a call), and the verdict logic runs on synthetic result files.
"""
import json
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

import ember
from ember.benchmark import Timer, benchmark_many, summarize

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # perf/ is a folder of the checkout, not an installed package
    sys.path.insert(0, str(ROOT))

from perf import cli, compare, schema, stats, timing  # noqa: E402


# --- statistics --------------------------------------------------------------------------------
def test_summary_matches_numpy_percentiles():
    rng = np.random.default_rng(0)
    for n in (2, 3, 5, 8, 21):
        xs = rng.lognormal(size=n)
        s = summarize(list(xs))
        assert s.n == n
        assert s.median == pytest.approx(np.median(xs))
        assert s.q1 == pytest.approx(np.percentile(xs, 25))
        assert s.q3 == pytest.approx(np.percentile(xs, 75))
        assert s.iqr == pytest.approx(s.q3 - s.q1)
        assert (s.min, s.max) == (xs.min(), xs.max())
        assert s.mean == pytest.approx(xs.mean())
        assert s.stdev == pytest.approx(xs.std(ddof=1))


def test_summary_of_one_sample_and_of_none():
    s = summarize([2.5])
    assert (s.median, s.q1, s.q3, s.iqr, s.stdev, s.n) == (2.5, 2.5, 2.5, 0.0, 0.0, 1)
    with pytest.raises(ValueError):
        summarize([])


# --- ember.benchmark ---------------------------------------------------------------------------
def test_benchmark_result():
    calls = []
    r = ember.benchmark(lambda: calls.append(1), repeat=5, min_time=0.001)
    assert r.n == len(r.samples) == 5
    assert r.min <= r.q1 <= r.median <= r.q3 <= r.max
    assert r.iqr == pytest.approx(r.q3 - r.q1)
    assert len(calls) >= 2 + 5 * r.number   # warm-up, calibration, samples
    for key in ("cpu", "cpu_count", "python", "numpy", "numba", "numba_threading_layer",
                "git_commit", "env", "loadavg"):
        assert key in r.environment
    assert r.device == "cpu"
    assert "5 samples" in str(r)
    assert set(r.to_dict()) >= {"median", "min", "max", "q1", "q3", "iqr", "n", "environment"}


def test_calls_per_sample_adapt_to_min_time_and_clock():
    r = ember.benchmark(lambda: None, repeat=3, min_time=0.002)
    assert r.number > 100                   # ~50 ns a call: thousands of calls per sample
    assert r.median * r.number > 0.5 * 0.002
    r = ember.benchmark(lambda: None, repeat=3, min_time=0.0)
    assert r.number > 10                    # still >= 10,000 ticks of a nanosecond clock
    # a warm call slowed by another process (here: said to have taken 1 s) is timed again
    assert Timer(lambda: None).calibrate(1e-4, last=1.0) > 10
    r = ember.benchmark(lambda: time.sleep(0.003), repeat=3, min_time=0.001, warmup=1)
    assert r.number == 1


def test_benchmark_excludes_compile_time():
    numba = pytest.importorskip("numba")

    @numba.njit  # a new dispatcher: its first call compiles
    def kernel(a):
        s = 0.0
        for x in a:
            s += x * 1.5
        return s

    a = np.ones(64)
    r = ember.benchmark(lambda: kernel(a), warmup=1, repeat=5, min_time=0.001)
    assert r.first_call_s > 0.01            # the compile happened, in the first call
    assert r.max < r.first_call_s / 20      # and no sample contains it


def test_setup_is_untimed_and_fresh_per_call():
    seen = []

    def setup():
        time.sleep(0.002)
        return object()

    def fn(x):
        seen.append(x)

    r = ember.benchmark(fn, setup=setup, repeat=3, min_time=0.001, warmup=1)
    assert r.median < 0.001                 # the 2 ms of setup are not in the samples
    assert len({id(x) for x in seen}) == len(seen)   # (all alive in `seen`: ids are unique)


def test_interleaved_groups_and_fixed_number():
    results = benchmark_many({"a": lambda: None, "b": Timer(lambda x: x, setup=lambda: 1)},
                             repeat=4, number=3, min_time=0.0)
    assert [r.number for r in results.values()] == [3, 3]
    assert all(r.n == 4 for r in results.values())


def test_max_time_keeps_at_least_three_samples():
    r = ember.benchmark(lambda: time.sleep(0.002), repeat=50, min_time=0.001, max_time=0.001)
    assert 3 <= r.n < 50


# --- perf's blocked timing ----------------------------------------------------------------------
def test_blocks_time_each_library_in_consecutive_samples():
    log = []
    fns = {"a": lambda: log.append("a"), "b": Timer(lambda x: log.append("b"), setup=lambda: 1)}
    results = timing.benchmark_blocks(fns, warmup=1, repeat=9, number=1, min_time=0.0, rounds=3)
    # per round and library: one warm-up call (the first call in round 0), then three samples
    assert "".join(log) == "aaaabbbb" * 3
    assert all(r.n == 9 and r.number == 1 and r.first_call_s >= 0 for r in results.values())
    log.clear()
    timing.benchmark_blocks(fns, warmup=1, repeat=6, number=1, min_time=0.0, rounds=3)
    assert "".join(log) == "aaaabbbb" * 2   # rounds of at least three samples
    assert {r.name for r in results.values()} == {"a", "b"}
    log.clear()
    results = timing.benchmark_blocks({"a": lambda: log.append("a")}, warmup=2, repeat=5,
                                      number=2, min_time=0.0)
    assert results["a"].n == 5 and len(log) == 2 + 5 * 2    # 5 samples: one round
    r = timing.benchmark_blocks({"a": lambda: time.sleep(0.002)}, repeat=50, min_time=0.001,
                                max_time=0.001)["a"]
    assert 3 <= r.n < 50                    # max_time still keeps at least three samples


def test_wait_idle_waits_for_spinning_threads():
    stop = threading.Event()
    spun = []

    def spin():                             # a worker thread busy-waiting, as BLAS pools do
        while not stop.is_set():
            spun.append(1)
            del spun[:]

    worker = threading.Thread(target=spin)
    worker.start()
    try:
        stopper = threading.Timer(0.1, stop.set)
        stopper.start()
        timing.wait_idle(limit=10.0)
        assert stop.is_set()                # it returned only once the worker stopped
        stopper.join()
        stop.clear()
        worker.join()
        worker = threading.Thread(target=spin)
        worker.start()
        assert timing.wait_idle(limit=0.05) >= 0.05   # a thread that never sleeps: the limit
    finally:
        stop.set()
        worker.join()
    assert timing.wait_idle() < 10.0        # nothing else runs: returns at once


def test_synchronize():
    assert ember.synchronize() is None
    ember.synchronize("cpu")
    ember.synchronize(ember.Device.cpu())
    ember.synchronize(ember.Device.cpu().autodiff())
    try:
        cuda = ember.Device.cuda()
    except ember.DeviceError:               # no GPU and no simulator: synchronize says so too
        with pytest.raises(ember.DeviceError):
            ember.synchronize("cuda")
    else:
        ember.synchronize(cuda)


# --- synthetic result files ----------------------------------------------------------------------
ENV = {"cpu": "test cpu", "cpu_count": 2, "python": "3.11", "numpy": "2.0", "numba": "0.60",
       "numba_threading_layer": "omp", "git_commit": None, "torch": None}


def measured(samples, scale=1.0):
    s = summarize([x * scale for x in samples]).__dict__.copy()
    s.update(number=1, samples=[x * scale for x in samples])
    return s


def row(name, samples=None, scale=1.0, unit="s", status="ok", error=None, informational=False,
        numpy=None):
    results = {} if samples is None else {"ember": measured(samples, scale)}
    if numpy is not None:
        results["numpy"] = measured(numpy)
    return {"suite": "test", "name": name, "unit": unit, "status": status, "error": error,
            "informational": informational, "first_call_s": None, "max_rel_error": None,
            "results": results}


def document(rows):
    return {"schema": schema.SCHEMA, "schema_version": schema.SCHEMA_VERSION,
            "created": "2025-01-01T00:00:00+00:00",
            "settings": {"quick": True, "suites": ["test"], "device": "cpu", "repeat": 5,
                         "min_time": 0.005, "max_time": 1.0, "warmup": 2, "filter": ""},
            "environment": dict(ENV), "rows": rows}


TIGHT = [0.99, 1.0, 1.0, 1.01, 1.02]        # IQR 1 %
WIDE = [0.7, 0.9, 1.0, 1.2, 1.4]            # IQR 30 %


def verdict(base_samples, new_samples, unit="s"):
    return stats.judge(measured(base_samples), measured(new_samples), 0.1, unit)


def test_verdicts():
    v = verdict(TIGHT, [x * 1.5 for x in TIGHT])
    assert (v.verdict, v.reason) == ("slower", "beyond threshold and noise")
    assert v.ratio == pytest.approx(1.5)
    assert verdict(TIGHT, [x * 0.6 for x in TIGHT]).verdict == "faster"
    assert verdict(TIGHT, [x * 1.05 for x in TIGHT]).reason == "within threshold"
    assert verdict(TIGHT, [x * 1.2 for x in TIGHT]).verdict == "slower"
    wide = verdict(WIDE, [x * 1.2 for x in WIDE])       # the same 20 %, on a noisy machine
    assert (wide.verdict, wide.reason) == ("same", "within noise")
    assert wide.noise == pytest.approx(0.3, rel=0.01)
    assert verdict(WIDE, [x * 0.8 for x in WIDE]).verdict == "same"
    assert verdict(WIDE, [x * 2.0 for x in WIDE]).verdict == "slower"
    # bytes: a change below 1 MiB is allocator noise, whatever the ratio
    assert verdict([45e3], [90e3], unit="B").verdict == "same"
    assert verdict([400e6], [500e6], unit="B").verdict == "slower"
    # medians only (schema 0): the threshold alone decides
    v = stats.judge({"median": 1.0}, {"median": 1.2})
    assert (v.verdict, v.noise) == ("slower", None)


def write(tmp_path, name, doc):
    path = tmp_path / name
    path.write_text(json.dumps(doc))
    return str(path)


def test_compare_files_and_exit_codes(tmp_path, capsys):
    base = document([row("steady", TIGHT), row("regressed", TIGHT), row("improved", TIGHT),
                     row("noisy", WIDE), row("gone", TIGHT), row("breaks", TIGHT),
                     row("ratio", TIGHT, unit="x", informational=True)])
    new = document([row("steady", TIGHT, 1.02), row("regressed", TIGHT, 1.5),
                    row("improved", TIGHT, 0.5), row("noisy", WIDE, 1.2), row("added", TIGHT),
                    row("breaks", status="error", error="TypeError: boom"),
                    row("ratio", TIGHT, 3.0, unit="x", informational=True)])
    comparisons = {c.name: c for c in compare.compare(base, new)}
    assert {name: c.verdict for name, c in comparisons.items()} == {
        "steady": "same", "regressed": "slower", "improved": "faster", "noisy": "same",
        "gone": "only in base", "added": "only in new", "breaks": "broken", "ratio": "slower"}
    assert [name for name, c in comparisons.items() if c.fails] == ["regressed", "breaks"]

    b, n = write(tmp_path, "base.json", base), write(tmp_path, "new.json", new)
    assert cli.main(["compare", b, n]) == 1
    out = capsys.readouterr().out
    for name in ("gone", "added", "missing from NEW", "missing from BASE", "REGRESSION"):
        assert name in out
    assert cli.main(["compare", b, n, "--format", "json"]) == 1
    data = json.loads(capsys.readouterr().out)
    assert data["regression"] and data["counts"]["only in base"] == 1
    assert cli.main(["compare", b, n, "--format", "markdown"]) == 1
    assert "| regressed |" in capsys.readouterr().out

    # without the regression and the breakage: exit 0, missing rows still listed
    for doc in (base, new):
        doc["rows"] = [r for r in doc["rows"] if r["name"] not in ("regressed", "breaks")]
    b, n = write(tmp_path, "base2.json", base), write(tmp_path, "new2.json", new)
    assert cli.main(["compare", b, n]) == 0
    out = capsys.readouterr().out
    assert "only in base" in out and "only in new" in out and out.rstrip().splitlines()[-1].startswith("ok")
    assert cli.main(["compare", b, n, "--threshold", "0.01"]) == 1   # "steady" moved 2 %

    assert cli.main(["compare", b, str(tmp_path / "missing.json")]) == 2


def test_compare_notes_machine_drift(tmp_path, capsys):
    base = document([row("op", TIGHT, numpy=TIGHT)])
    new = document([row("op", TIGHT, 1.5, numpy=[x * 1.5 for x in TIGHT])])
    new["environment"] = dict(ENV, cpu="another cpu")
    assert cli.main(["compare", write(tmp_path, "a.json", base), write(tmp_path, "b.json", new)]) == 1
    out = capsys.readouterr().out
    assert "1.50x" in out                     # numpy moved as much: the machine changed
    assert "another cpu" in out


def test_compare_pools_alternating_runs(tmp_path, capsys):
    # the machine ran 1.3x slower during the second pair: base1 new1 (fast), new2 base2 (slow)
    base1 = document([row("op", TIGHT, numpy=TIGHT), row("flaky", TIGHT), row("gone", TIGHT)])
    new1 = document([row("op", TIGHT, 1.02), row("flaky", TIGHT), row("added", TIGHT)])
    new2 = document([row("op", TIGHT, 1.3 * 1.02), row("flaky", status="error", error="E: boom")])
    base2 = document([row("op", TIGHT, 1.3, numpy=TIGHT), row("flaky", TIGHT)])
    base2["environment"]["loadavg"] = [1.8, 1.5, 1.0]
    files = {name: write(tmp_path, f"{name}.json", doc)
             for name, doc in (("b1", base1), ("n1", new1), ("n2", new2), ("b2", base2))}

    pooled = compare.pool([base1, base2])
    op = {r["name"]: r for r in pooled["rows"]}["op"]["results"]
    samples = TIGHT + [x * 1.3 for x in TIGHT]
    assert op["ember"]["samples"] == samples and op["ember"]["n"] == 10
    assert op["ember"]["median"] == pytest.approx(summarize(samples).median)
    assert op["numpy"]["samples"] == TIGHT + TIGHT
    assert [r["name"] for r in pooled["rows"]] == ["op", "flaky", "gone"]
    assert pooled["environment"]["loadavg"] == [1.8, 1.5, 1.0]

    # alone, the second pair says "slower" (1.3x); pooled, the drift is in both trees' samples
    assert compare.compare(base1, new2)[0].verdict == "slower"
    comparisons = {c.name: c for c in compare.compare(pooled, compare.pool([new1, new2]))}
    assert comparisons["op"].verdict == "same" and comparisons["op"].ratio == pytest.approx(1.02)
    assert comparisons["flaky"].verdict == "broken"        # an error in any run is not pooled away
    assert cli.main(["compare", f"{files['b1']},{files['b2']}", f"{files['n1']},{files['n2']}"]) == 1
    out = capsys.readouterr().out
    assert "busy during BASE" in out and "only in new" in out
    assert cli.main(["compare", f"{files['b1']},{tmp_path / 'missing.json'}", files["n1"]]) == 2


# --- schema ------------------------------------------------------------------------------------
V0 = {"environment": {"date": "2024-12-01T00:00:00+00:00", "cpu": "AMD EPYC", "repeats": 5},
      "rows": [{"name": "add 1M f32", "ember_s": 0.0012, "numpy_s": 0.0004, "numpy_out_s": 0.0003,
                "torch_s": None, "ember_first_call_s": 0.5, "ember_error": 0.0, "error": None,
                "ratio": 0.33},
               {"name": "exp 1M f32", "ember_s": None, "numpy_s": 0.001, "numpy_out_s": None,
                "torch_s": None, "ember_first_call_s": None, "ember_error": None,
                "error": "NotImplementedError: exp"}]}


def test_validate_old_and_new_files(tmp_path, capsys):
    new = document([row("add 1M f32", TIGHT), row("exp 1M f32", TIGHT),
                    row("gpu", status="unavailable", error="DeviceError: no CUDA")])
    good_new, good_old = write(tmp_path, "new.json", new), write(tmp_path, "old.json", V0)
    assert cli.main(["validate", good_new, good_old]) == 0
    out = capsys.readouterr().out
    assert "schema version 1" in out and "schema version 0" in out

    upgraded = schema.load(good_old)
    assert upgraded["schema_version"] == schema.SCHEMA_VERSION
    assert schema.validate(upgraded) == []
    assert [r["status"] for r in upgraded["rows"]] == ["ok", "error"]
    comparisons = compare.compare(upgraded, schema.load(good_new))   # old against new
    assert [c.verdict for c in comparisons] == ["slower", "fixed", "only in new"]


@pytest.mark.parametrize("breakage, message", [
    (lambda d: d.pop("rows"), "missing 'rows'"),
    (lambda d: d.update(schema_version=99), "newer than this tool"),
    (lambda d: d.update(schema_version="1"), "unknown schema version"),
    (lambda d: d["rows"][0].update(unit="parsecs"), "unit"),
    (lambda d: d["rows"][0].update(status="ok", results={}), "no 'ember' result"),
    (lambda d: d["rows"][0].update(status="error", error=None), "needs a reason"),
    (lambda d: d["rows"].append(dict(d["rows"][0])), "duplicate row name"),
    (lambda d: d["rows"][0]["results"]["ember"].update(median=-1.0, q1=2.0), "min <= q1"),
    (lambda d: d["rows"][0]["results"]["ember"].update(samples=[]), "samples"),
    (lambda d: d["environment"].pop("cpu"), "missing 'cpu'"),
])
def test_validate_rejects_broken_files(tmp_path, capsys, breakage, message):
    doc = document([row("add", TIGHT)])
    breakage(doc)
    assert cli.main(["validate", write(tmp_path, "bad.json", doc)]) == 1
    assert message in capsys.readouterr().out


def test_validate_rejects_broken_old_files_and_non_json(tmp_path, capsys):
    old = json.loads(json.dumps(V0))
    old["rows"][0]["ember_s"] = "fast"
    assert cli.main(["validate", write(tmp_path, "old.json", old)]) == 1
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    assert cli.main(["validate", str(bad)]) == 1
    assert "cannot read JSON" in capsys.readouterr().out


# --- report and run ----------------------------------------------------------------------------
def test_report(tmp_path, capsys):
    doc = document([row("add", TIGHT, numpy=TIGHT), row("kept", [4e8], unit="B"),
                    row("gpu", status="unavailable", error="DeviceError: no CUDA")])
    path = write(tmp_path, "r.json", doc)
    assert cli.main(["report", path]) == 0
    out = capsys.readouterr().out
    assert "add" in out and "400 MB" in out and "unavailable" in out and "DeviceError" in out
    png = tmp_path / "r.png"
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        assert cli.main(["report", path, "--plot", str(png)]) == 1
        assert "matplotlib" in capsys.readouterr().err
    else:
        assert cli.main(["report", path, "--plot", str(png)]) == 0
        assert png.stat().st_size > 0


def test_run_writes_a_valid_file(tmp_path, capsys):
    path = str(tmp_path / "run.json")
    assert cli.main(["run", "--quick", "--suite", "elementwise,quantized", "-k", "1 element",
                     "--json", path]) == 0
    doc = json.loads(Path(path).read_text())
    assert schema.validate(doc) == []
    assert [r["name"] for r in doc["rows"]] == ["add 1 element"]
    assert doc["rows"][0]["status"] == "ok" and {"ember", "numpy"} <= set(doc["rows"][0]["results"])
    for key in ("cpu", "cpu_count", "numpy", "numba", "git_commit", "numba_threading_layer"):
        assert key in doc["environment"]

    assert cli.main(["run", "--quick", "--suite", "quantized,cuda", "--device", "cuda",
                     "--json", path]) == 0
    doc = json.loads(Path(path).read_text())
    assert schema.validate(doc) == []
    assert {r["status"] for r in doc["rows"]} == {"unavailable"}
    assert all(r["name"].endswith("[cuda]") and r["error"] for r in doc["rows"])
    capsys.readouterr()
    assert cli.main(["run", "--suite", "nonsense"]) == 2


def test_shards_share_the_cases(tmp_path, capsys):
    # make perf-smoke's two processes: every other case each, together every case once
    # (the cuda suite's cases end at once without a GPU)
    names = {}
    for k in (1, 2):
        path = str(tmp_path / f"shard{k}.json")
        assert cli.main(["run", "--quick", "--suite", "cuda", "--shard", f"{k}/2", "--json", path]) == 0
        doc = json.loads(Path(path).read_text())
        assert schema.validate(doc) == [] and doc["settings"]["shard"] == f"{k}/2"
        names[k] = [r["name"] for r in doc["rows"]]
    whole = str(tmp_path / "whole.json")
    assert cli.main(["run", "--quick", "--suite", "cuda", "--json", whole]) == 0
    every = [r["name"] for r in json.loads(Path(whole).read_text())["rows"]]
    assert len(every) > 2 and names[1] == every[0::2] and names[2] == every[1::2]
    capsys.readouterr()
    for bad in ("3/2", "0/2", "1-2", "x/2"):
        assert cli.main(["run", "--quick", "--suite", "cuda", "--shard", bad]) == 2
        assert "--shard" in capsys.readouterr().err


def test_run_without_torch(tmp_path, capsys):
    path = str(tmp_path / "run.json")
    assert cli.main(["run", "--quick", "--suite", "elementwise", "-k", "1 element", "--no-torch",
                     "--json", path]) == 0
    doc = json.loads(Path(path).read_text())
    assert schema.validate(doc) == [] and doc["settings"]["torch"] is False
    assert set(doc["rows"][0]["results"]) == {"ember", "numpy", "numpy_out"}
    capsys.readouterr()


def test_entry_point_exit_codes(tmp_path):
    base = write(tmp_path, "a.json", document([row("op", TIGHT)]))
    slower = write(tmp_path, "b.json", document([row("op", TIGHT, 2.0)]))
    perf = [sys.executable, "-m", "perf"]
    run = lambda *args: subprocess.run(perf + list(args), cwd=ROOT, capture_output=True, text=True)  # noqa: E731
    assert run("validate", base).returncode == 0
    assert run("compare", base, base).returncode == 0
    assert run("compare", base, slower).returncode == 1


# --- the goals table of issue 9 ----------------------------------------------------------------
def test_goals_table_ratios_absolute_goals_and_missing_rows():
    from perf import goals

    add16 = row("add 16M f32", [0.006], numpy=[0.008])
    add16["results"]["numpy_out"] = measured([0.005])              # information only
    with_torch = row("MLP 784-512-10 b256 f32: forward+backward step", [0.010], numpy=[0.002])
    with_torch["results"]["torch"] = measured([0.005])
    doc = document([
        add16,                                                       # 0.75x numpy: met
        row("exp 16M f32", [0.010], numpy=[0.008]),                  # 1.25x: missed
        row("add 1 element", [2e-6]),                                # absolute, <= 2.5 us: met
        with_torch,                                                  # vs torch only: 2x, missed
        row("matmul 256 f32", status="error", error="boom"),         # no data
    ])
    lines = {line.split("  ")[0]: line for line in goals.table(doc).splitlines()}
    assert "0.75x" in lines["a + b, 16M elements, allocating"]
    assert lines["a + b, 16M elements, allocating"].split()[-2:] == ["met", "1.20x"]
    assert "MISSED" in lines["exp(a), 16M"] and "1.25x" in lines["exp(a), 16M"]
    assert lines["x + y on 1-element tensors (time per op)"].split()[-2:] == ["met", "-"]
    mlp = lines["MLP 784-512-10, batch 256, fwd + bwd, vs torch"]
    assert "MISSED" in mlp and "2.00x" in mlp and "(torch)" in mlp
    assert "no data" in lines["a @ b, 256"]
    # every goal names a row that perf's suites produce
    from perf import suites
    produced = {n for c in suites.cases(suites.SUITES) for n in c.names}
    assert {g.row for g in goals.GOALS} <= produced
