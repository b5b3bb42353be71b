"""Ember's benchmarks: ``python -m perf`` times Ember against numpy (and PyTorch when installed)."""
