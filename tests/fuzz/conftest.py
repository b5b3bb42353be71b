"""The fuzz tier's report (seed, scale, examples per area) is printed by tests/conftest.py,
which also gathers the counts of pytest-xdist workers."""
