# The two commands of the README.  Both build .venv from scratch when needed.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp

.PHONY: demo test test-fuzz test-cuda-sim test-array-api test-array-api-ci bench perf-smoke clean

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
	$(MAKE) --no-print-directory test-array-api-ci

# the fuzz tier (tests/fuzz, hypothesis) with 20x the examples of `make test` and a random
# seed, printed first; EMBER_FUZZ_SEED=<seed> reruns one, EMBER_FUZZ_SCALE=<n> sets the scale
test-fuzz: $(STAMP)
	@seed=$${EMBER_FUZZ_SEED:-$$(od -An -N4 -tu4 /dev/urandom | tr -d ' ')}; \
	scale=$${EMBER_FUZZ_SCALE:-20}; \
	echo "fuzz seed $$seed, scale $$scale (rerun: EMBER_FUZZ_SEED=$$seed EMBER_FUZZ_SCALE=$$scale make test-fuzz)"; \
	EMBER_FUZZ_SEED=$$seed EMBER_FUZZ_SCALE=$$scale $(BIN)/python -m pytest -q -p no:cacheprovider tests/fuzz

# The array API standard's conformance suite (data-apis/array-api-tests, pinned, read-only)
# against ember.array_api: revision 2024.12, the linalg and fft extensions and the complex
# dtypes off until Ember has them; every skip is in $(ARRAY_API_SKIPS), with its reason.
ARRAY_API_TESTS ?= ../shared/array-api-tests
ARRAY_API_SKIPS := $(CURDIR)/tests/array_api/skips.txt
ARRAY_API_PYTEST = cd $(ARRAY_API_TESTS) && \
	ARRAY_API_TESTS_MODULE=ember.array_api ARRAY_API_TESTS_VERSION=2024.12 \
	ARRAY_API_TESTS_SKIP_DTYPES=complex64,complex128 HYPOTHESIS_STORAGE_DIRECTORY=$(CURDIR)/.hypothesis \
	$(CURDIR)/$(BIN)/python -m pytest -q -p no:cacheprovider --rootdir=. -c pytest.ini --disable-deadline \
	--disable-extension linalg fft --skips-file $(ARRAY_API_SKIPS)
# the CI subset `make test` runs: few examples per test, a fixed seed (see tests/array_api/ci.txt)
ARRAY_API_CI := $(shell grep -v '^\#' tests/array_api/ci.txt 2>/dev/null)

test-array-api: $(STAMP)
	@test -d $(ARRAY_API_TESTS)/array_api_tests || { echo "array-api-tests not found at $(ARRAY_API_TESTS) (make ARRAY_API_TESTS=/path/to/array-api-tests)"; exit 2; }
	$(ARRAY_API_PYTEST) --max-examples 50 -ra array_api_tests

test-array-api-ci: $(STAMP)
	@test -d $(ARRAY_API_TESTS)/array_api_tests || { echo "array-api-tests not found at $(ARRAY_API_TESTS) (make ARRAY_API_TESTS=/path/to/array-api-tests)"; exit 2; }
	$(ARRAY_API_PYTEST) --max-examples 4 --hypothesis-seed=0 $(ARRAY_API_CI)

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
