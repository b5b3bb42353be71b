# The two commands of the README.  Both build .venv from scratch when needed.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp
comma := ,

.PHONY: demo test test-fuzz test-cuda-sim test-array-api test-array-api-ci bench perf-smoke clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -e ".[test,distributed]"
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/python examples/quickstart.py

# pytest-xdist workers of the test tiers (one per core by default; 0 runs in this process)
WORKERS ?= auto

# the CPU tiers (device-free and CPU), then the CUDA tier on Numba's simulator: the
# declarative tables again with CUDA as their device (-m devices), and tests/cuda (-m cuda)
test: $(STAMP)
	$(BIN)/python -m pytest -q -n $(WORKERS) tests --ignore=tests/cuda
	$(MAKE) --no-print-directory test-cuda-sim
	@if test -d $(ARRAY_API_TESTS)/array_api_tests; then \
		$(MAKE) --no-print-directory test-array-api-ci; \
	else echo "array-api-tests not found at $(ARRAY_API_TESTS): its CI subset is left out"; fi

# the fuzz tier (tests/fuzz, hypothesis) with 20x the examples of `make test` and a random
# seed, printed first; EMBER_FUZZ_SEED=<seed> reruns one, EMBER_FUZZ_SCALE=<n> sets the scale
test-fuzz: $(STAMP)
	@seed=$${EMBER_FUZZ_SEED:-$$(od -An -N4 -tu4 /dev/urandom | tr -d ' ')}; \
	scale=$${EMBER_FUZZ_SCALE:-20}; \
	echo "fuzz seed $$seed, scale $$scale (rerun: EMBER_FUZZ_SEED=$$seed EMBER_FUZZ_SCALE=$$scale make test-fuzz)"; \
	EMBER_FUZZ_SEED=$$seed EMBER_FUZZ_SCALE=$$scale $(BIN)/python -m pytest -q -n $(WORKERS) -p no:cacheprovider tests/fuzz

# The array API standard's conformance suite (data-apis/array-api-tests, pinned, read-only)
# against ember.array_api: revision 2024.12 with the linalg and fft extensions, in two pytest
# runs: every module with the complex dtypes, then the modules where a complex gap remains
# ($(ARRAY_API_REAL_ONLY): the sort under unique_* has no complex order; docs/decisions.md)
# with the real dtypes only.
# Every skip is in $(ARRAY_API_SKIPS), with its reason.
ARRAY_API_TESTS ?= ../shared/array-api-tests
ARRAY_API_SKIPS := $(CURDIR)/tests/array_api/skips.txt
ARRAY_API_REAL_ONLY := array_api_tests/test_set_functions.py
# $(call ARRAY_API_PYTEST,<dtypes to skip>)
ARRAY_API_PYTEST = cd $(ARRAY_API_TESTS) && \
	ARRAY_API_TESTS_MODULE=ember.array_api ARRAY_API_TESTS_VERSION=2024.12 \
	ARRAY_API_TESTS_SKIP_DTYPES=$(1) HYPOTHESIS_STORAGE_DIRECTORY=$(CURDIR)/.hypothesis \
	$(CURDIR)/$(BIN)/python -m pytest -q -p no:cacheprovider --rootdir=. -c pytest.ini --disable-deadline \
	--skips-file $(ARRAY_API_SKIPS)
# the CI subset `make test` runs: few examples per test, a fixed seed (see tests/array_api/ci.txt)
ARRAY_API_CI := $(shell grep -v '^\#' tests/array_api/ci.txt 2>/dev/null)
ARRAY_API_CHECK = @test -d $(ARRAY_API_TESTS)/array_api_tests || { echo "array-api-tests not found at \
	$(ARRAY_API_TESTS) (make ARRAY_API_TESTS=/path/to/array-api-tests)"; exit 2; }

test-array-api: $(STAMP)
	$(ARRAY_API_CHECK)
	$(call ARRAY_API_PYTEST,) --max-examples 50 -ra array_api_tests $(addprefix --ignore=,$(ARRAY_API_REAL_ONLY))
	$(call ARRAY_API_PYTEST,complex64$(comma)complex128) --max-examples 50 -ra $(ARRAY_API_REAL_ONLY)

test-array-api-ci: $(STAMP)
	$(ARRAY_API_CHECK)
	$(call ARRAY_API_PYTEST,) --max-examples 4 --hypothesis-seed=0 $(filter-out $(ARRAY_API_REAL_ONLY),$(ARRAY_API_CI))
	$(call ARRAY_API_PYTEST,complex64$(comma)complex128) --max-examples 4 --hypothesis-seed=0 \
		$(filter $(ARRAY_API_REAL_ONLY),$(ARRAY_API_CI))

# the CUDA backend alone on Numba's CUDA simulator (no GPU needed); `make test` runs it too
test-cuda-sim: $(STAMP)
	NUMBA_ENABLE_CUDASIM=1 $(BIN)/python -m pytest -q -n $(WORKERS) -m "devices or cuda" tests

bench: $(STAMP)
	$(BIN)/python -m perf

# CI's smoke test of the benchmark tooling: every suite once, quickly, and a schema check
# in two processes, each every other case (a cold run is mostly compiling, one kernel at a time
# per process): the second's output follows the first's
perf-smoke: $(STAMP)
	$(BIN)/python -m perf run --quick --shard 2/2 --json $(VENV)/perf-smoke-2.json \
		> $(VENV)/perf-smoke-2.log 2>&1 & second=$$!; \
	$(BIN)/python -m perf run --quick --shard 1/2 --json $(VENV)/perf-smoke-1.json; first=$$?; \
	wait $$second; status=$$?; cat $(VENV)/perf-smoke-2.log; test $$first = 0 && test $$status = 0
	$(BIN)/python -m perf validate $(VENV)/perf-smoke-1.json $(VENV)/perf-smoke-2.json

clean:
	rm -rf $(VENV) build *.egg-info
