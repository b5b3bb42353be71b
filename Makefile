# The two commands of the README.  Both build .venv from scratch when needed.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp

.PHONY: demo test test-fuzz test-cuda-sim bench perf-smoke clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -e ".[test,distributed]"
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/python examples/quickstart.py

# the CPU tiers (device-free and CPU), then the CUDA tier on Numba's simulator: the
# declarative tables again with CUDA as their device (-m devices), and tests/cuda (-m cuda)
test: $(STAMP)
	$(BIN)/python -m pytest -q tests --ignore=tests/cuda
	$(MAKE) --no-print-directory test-cuda-sim

# the fuzz tier (tests/fuzz, hypothesis) with 20x the examples of `make test` and a random
# seed, printed first; EMBER_FUZZ_SEED=<seed> reruns one, EMBER_FUZZ_SCALE=<n> sets the scale
test-fuzz: $(STAMP)
	@seed=$${EMBER_FUZZ_SEED:-$$(od -An -N4 -tu4 /dev/urandom | tr -d ' ')}; \
	scale=$${EMBER_FUZZ_SCALE:-20}; \
	echo "fuzz seed $$seed, scale $$scale (rerun: EMBER_FUZZ_SEED=$$seed EMBER_FUZZ_SCALE=$$scale make test-fuzz)"; \
	EMBER_FUZZ_SEED=$$seed EMBER_FUZZ_SCALE=$$scale $(BIN)/python -m pytest -q -p no:cacheprovider tests/fuzz

# the CUDA backend alone on Numba's CUDA simulator (no GPU needed); `make test` runs it too
test-cuda-sim: $(STAMP)
	NUMBA_ENABLE_CUDASIM=1 $(BIN)/python -m pytest -q -m "devices or cuda" tests

bench: $(STAMP)
	$(BIN)/python -m perf

# CI's smoke test of the benchmark tooling: every suite once, quickly, and a schema check
perf-smoke: $(STAMP)
	$(BIN)/python -m perf run --quick --json $(VENV)/perf-smoke.json
	$(BIN)/python -m perf validate $(VENV)/perf-smoke.json

clean:
	rm -rf $(VENV) build *.egg-info
