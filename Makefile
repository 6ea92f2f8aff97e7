# Every target sets itself up on a fresh machine: it creates .venv and installs what it needs.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-test
STREAM_TESTS := tests/runtime/client/test_stream.py tests/runtime/client/test_watch_lines.py \
	tests/runtime/client/test_watcher_pieces.py tests/runtime/client/test_event_parity.py \
	tests/runtime/client/test_hostile_data.py tests/runtime/client/test_fuzz_client_regressions.py \
	tests/runtime/client/test_fuzz_client_regressions_2.py tests/runtime/client/test_speedups.py \
	tests/runtime/client/test_hand_over.py
BENCH_STAMP := $(VENV)/.installed-bench

.PHONY: test demo e2e bench lint typecheck unit wheels clean conformance-live conformance-record

$(STAMP): pyproject.toml sim/pyproject.toml hatch_build.py src/watchkeeper/_speedups.c
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[test]' -e ./sim
	touch $@

$(BENCH_STAMP): $(STAMP)
	$(BIN)/pip install -q -e '.[test,bench]' -e ./sim
	touch $@

lint: $(STAMP)
	$(BIN)/ruff check src sim tests benchmarks examples scripts
	$(BIN)/lint-imports

typecheck: $(STAMP)
	$(BIN)/mypy --strict src sim examples  # the examples are user code: it must type-check

# The stream's tests run twice: with its C part (when built) and with its Python alone.
unit: $(STAMP)
	$(BIN)/pytest -q -m "not e2e"
	WATCHKEEPER_PURE_PYTHON=1 $(BIN)/pytest -q -m "not e2e" $(STREAM_TESTS)

# The runtime wheel alone, in a throw-away venv: imports, runs --help, no test-only dependency.
wheels: $(STAMP)
	PY=$(BIN)/python bash .ci/runtime-wheel.sh

test: lint typecheck wheels unit

demo: $(STAMP)
	$(BIN)/watchkeeper demo --operator examples/widget_operator.py:setup

e2e: $(STAMP)
	$(BIN)/pytest -q -m e2e tests/e2e

# The differential conformance suite (tests/conformance, docs/simulator.md) against the real
# cluster WATCHKEEPER_E2E_KUBECONFIG names: live shows every difference from the simulator,
# record rewrites the fixtures make test compares the simulator with. ARGS="-k crd" for some.
conformance-live: $(STAMP)
	PYTHONPATH=tests $(BIN)/python -m conformance live $(ARGS)

conformance-record: $(STAMP)
	PYTHONPATH=tests $(BIN)/python -m conformance record $(ARGS)

bench: $(BENCH_STAMP)
	$(BIN)/python -m benchmarks.run_all

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache dist
