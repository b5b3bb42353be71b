"""Ember's benchmarks and regression tooling: ``python -m perf run | compare | report | validate``.

Modules: cli (the commands), suites (what is measured), run (running them, the JSON document),
schema (the JSON format, validation, upgrade of old files), stats (the verdict of compare),
compare, report (tables and the chart).  Timing itself is ``ember.benchmark``
(engine/benchmark.py).
"""
