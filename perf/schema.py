"""The JSON files of ``python -m perf run --json``: their schema, validation and upgrade.

Schema 1 (current)::

    {"schema": "ember-perf", "schema_version": 1,
     "created": "2025-01-01T00:00:00+00:00",
     "settings": {"quick": bool, "suites": [str], "device": "cpu"|"cuda", "repeat": int,
                  "min_time": float, "max_time": float|null, "warmup": int, "filter": str},
     "environment": {"cpu", "python", "numpy", "numba", "torch", "git_commit",
                     "numba_threading_layer": str|null, "cpu_count": int|null, ... (required keys;
                     perf run adds cores, BLAS, threads, env variables, load average, date)},
     "rows": [{"suite": str, "name": str (unique in the file),
               "unit": "s" (seconds per call) | "B" (bytes) | "x" (a ratio),
               "status": "ok" | "error" | "unavailable", "error": str|null (why not ok),
               "informational": bool (derived rows: shown by compare, never fail it),
               "first_call_s": float|null (Ember's first call: compile or cache load),
               "max_rel_error": float|null (Ember vs the numpy reference),
               "results": {"ember"|"numpy"|"numpy_out"|"torch"|"scipy"|"torch_compile"|"jax"|"numba": {
                   "median": float, "min", "max", "q1", "q3", "iqr", "mean", "stdev": float|null,
                   "n": int|null (samples), "number": int|null (calls per sample),
                   "samples": [float]|null}}}]}

Schema 0 is the first ``perf/run.py`` (no ``schema_version``): ``{"environment": {...},
"rows": [{"name", "ember_s", "numpy_s", "numpy_out_s", "torch_s", "ember_first_call_s",
"ember_error", "error", ...}]}`` with medians only.  ``load`` validates a file of either schema
and returns it upgraded to the current one.  This module needs neither Ember nor numpy.
"""
import json
import math

SCHEMA = "ember-perf"
SCHEMA_VERSION = 1
UNITS = ("s", "B", "x")
STATUSES = ("ok", "error", "unavailable")
# scipy: the linalg suite; torch_compile and jax: the small suite
LIBRARIES = ("ember", "numpy", "numpy_out", "torch", "scipy", "torch_compile", "jax", "numba")
STAT_FIELDS = ("min", "max", "q1", "q3", "iqr", "mean", "stdev")
ENV_KEYS = ("cpu", "cpu_count", "python", "numpy", "numba", "git_commit", "numba_threading_layer",
            "torch")
V0_TIMES = ("ember_s", "numpy_s", "numpy_out_s", "torch_s", "ember_first_call_s")


class SchemaError(ValueError):
    """A results file that does not follow its schema; ``problems`` lists every finding."""

    def __init__(self, path, problems):
        self.problems = problems
        super().__init__(f"{path}: not a valid perf results file:\n  " + "\n  ".join(problems))


def _is_num(x):
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def _is_int(x):
    return isinstance(x, int) and not isinstance(x, bool)


class _Checker:
    def __init__(self):
        self.problems = []

    def need(self, cond, where, what):
        if not cond:
            self.problems.append(f"{where}: {what}")
        return cond

    def field(self, obj, key, check, what, where, optional=False):
        """``obj[key]`` passes ``check`` (None passes when ``optional``)."""
        if key not in obj:
            return self.need(False, where, f"missing {key!r}")
        value = obj[key]
        if value is None and optional:
            return True
        return self.need(check(value), f"{where}.{key}", f"expected {what}, got {value!r:.60}")


def schema_version(doc):
    """The file's schema version: 0 for the first perf/run.py format."""
    if isinstance(doc, dict) and "schema_version" not in doc and "rows" in doc:
        return 0
    return doc.get("schema_version") if isinstance(doc, dict) else None


def validate(doc):
    """Problems found in ``doc`` (a parsed file of any known schema); empty when valid."""
    c = _Checker()
    if not c.need(isinstance(doc, dict), "file", "expected a JSON object"):
        return c.problems
    version = schema_version(doc)
    if version == 0:
        _validate_v0(doc, c)
    elif version == 1:
        _validate_v1(doc, c)
    elif _is_int(version) and version > SCHEMA_VERSION:
        c.need(False, "schema_version", f"{version} is newer than this tool ({SCHEMA_VERSION}); "
               "update perf/")
    else:
        c.need(False, "schema_version", f"unknown schema version {version!r}")
    return c.problems


def _validate_v0(doc, c):
    c.field(doc, "environment", lambda v: isinstance(v, dict), "an object", "file")
    if not c.field(doc, "rows", lambda v: isinstance(v, list), "a list", "file"):
        return
    for i, row in enumerate(doc["rows"]):
        where = f"rows[{i}]"
        if not c.need(isinstance(row, dict), where, "expected an object"):
            continue
        c.field(row, "name", lambda v: isinstance(v, str) and v, "a name", where)
        for key in V0_TIMES:
            if key in row:
                c.field(row, key, _is_num, "a number or null", where, optional=True)
        c.field(row, "ember_s", _is_num, "a number or null", where, optional=True)
        if "error" in row:
            c.field(row, "error", lambda v: isinstance(v, str), "a string or null", where, optional=True)
    _unique_names(doc["rows"], c)


def _validate_v1(doc, c):
    c.field(doc, "schema", lambda v: v == SCHEMA, repr(SCHEMA), "file")
    c.field(doc, "created", lambda v: isinstance(v, str), "a date string", "file")
    if c.field(doc, "settings", lambda v: isinstance(v, dict), "an object", "file"):
        s = doc["settings"]
        c.field(s, "quick", lambda v: isinstance(v, bool), "a bool", "settings")
        c.field(s, "suites", lambda v: isinstance(v, list) and all(isinstance(x, str) for x in v),
                "a list of suite names", "settings")
        c.field(s, "device", lambda v: isinstance(v, str), "a device name", "settings")
        c.field(s, "repeat", _is_int, "an int", "settings")
        c.field(s, "min_time", _is_num, "a number", "settings")
    if c.field(doc, "environment", lambda v: isinstance(v, dict), "an object", "file"):
        env = doc["environment"]
        for key in ENV_KEYS:
            if key == "cpu_count":
                c.field(env, key, _is_int, "an int or null", "environment", optional=True)
            else:
                c.field(env, key, lambda v: isinstance(v, str), "a string or null", "environment",
                        optional=True)
    if not c.field(doc, "rows", lambda v: isinstance(v, list), "a list", "file"):
        return
    for i, row in enumerate(doc["rows"]):
        _validate_row(row, f"rows[{i}]", c)
    _unique_names(doc["rows"], c)


def _validate_row(row, where, c):
    if not c.need(isinstance(row, dict), where, "expected an object"):
        return
    c.field(row, "suite", lambda v: isinstance(v, str) and v, "a suite name", where)
    c.field(row, "name", lambda v: isinstance(v, str) and v, "a name", where)
    c.field(row, "unit", lambda v: v in UNITS, f"one of {UNITS}", where)
    c.field(row, "status", lambda v: v in STATUSES, f"one of {STATUSES}", where)
    c.field(row, "error", lambda v: isinstance(v, str), "a string or null", where, optional=True)
    c.field(row, "informational", lambda v: isinstance(v, bool), "a bool", where)
    c.field(row, "first_call_s", _is_num, "a number or null", where, optional=True)
    c.field(row, "max_rel_error", _is_num, "a number or null", where, optional=True)
    if not c.field(row, "results", lambda v: isinstance(v, dict), "an object", where):
        return
    results = row["results"]
    if row.get("status") == "ok":
        c.need("ember" in results, where, "status 'ok' but no 'ember' result")
    elif row.get("status") in ("error", "unavailable"):
        c.need(isinstance(row.get("error"), str), where, f"status {row['status']!r} needs a reason in 'error'")
    for lib, s in results.items():
        _validate_stats(s, f"{where}.results.{lib}", c)


def _validate_stats(s, where, c):
    if not c.need(isinstance(s, dict), where, "expected an object"):
        return
    if not c.field(s, "median", _is_num, "a number", where):
        return
    for key in STAT_FIELDS:
        if key in s:
            c.field(s, key, _is_num, "a number or null", where, optional=True)
    for key in ("n", "number"):
        if key in s:
            c.field(s, key, lambda v: _is_int(v) and v > 0, "a positive int or null", where,
                    optional=True)
    samples = s.get("samples")
    if samples is not None and c.need(isinstance(samples, list) and samples and
                                      all(_is_num(x) for x in samples), where,
                                      "'samples' must be a non-empty list of numbers"):
        c.need(s.get("n") in (None, len(samples)), where, "'n' differs from len(samples)")
    order = [s.get(k) for k in ("min", "q1", "median", "q3", "max")]
    known = [x for x in order if _is_num(x)]
    c.need(all(a <= b * (1 + 1e-9) + 1e-300 for a, b in zip(known, known[1:])), where,
           "expected min <= q1 <= median <= q3 <= max")


def _unique_names(rows, c):
    seen = set()
    for row in rows:
        name = row.get("name") if isinstance(row, dict) else None
        if isinstance(name, str):
            c.need(name not in seen, "rows", f"duplicate row name {name!r}")
            seen.add(name)


def upgrade(doc):
    """``doc`` (valid, any schema) in the current schema."""
    if schema_version(doc) == SCHEMA_VERSION:
        return doc
    rows = []
    for r in doc["rows"]:  # schema 0: medians only
        results = {lib: {"median": r[f"{lib}_s"]} for lib in LIBRARIES
                   if r.get(f"{lib}_s") is not None}
        ok = not r.get("error") and "ember" in results
        rows.append({"suite": "v0", "name": r["name"], "unit": "s",
                     "status": "ok" if ok else "error",
                     "error": None if ok else (r.get("error") or "no ember time"),
                     "informational": False, "first_call_s": r.get("ember_first_call_s"),
                     "max_rel_error": r.get("ember_error"), "results": results})
    env = {key: None for key in ENV_KEYS}
    env.update(doc["environment"])
    return {"schema": SCHEMA, "schema_version": SCHEMA_VERSION, "upgraded_from": 0,
            "created": env.get("date", ""),
            "settings": {"quick": False, "suites": [], "device": "cpu",
                         "repeat": env.get("repeats", 0), "min_time": env.get("min_sample_s", 0.0),
                         "max_time": None, "warmup": 0, "filter": ""},
            "environment": env, "rows": rows}


def load(path):
    """The results file at ``path``, validated and upgraded; raises ``SchemaError``."""
    try:
        with open(path) as f:
            doc = json.load(f)
    except (OSError, ValueError) as e:
        raise SchemaError(path, [f"cannot read JSON: {e}"]) from None
    problems = validate(doc)
    if problems:
        raise SchemaError(path, problems)
    return upgrade(doc)
