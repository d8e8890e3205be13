# Two commands do all set-up on a fresh machine: `make demo` and `make test`.
PY := .venv/bin/python
PYTEST_ARGS ?=

.PHONY: install install-test demo lint test test-fast test-unit fuzz parity bench clean

install:
	@bash scripts/setup_env.sh

# What the tests and benchmarks need on top: pytest, moto, ruff, matplotlib; SLURM and Chromium as root.
install-test:
	@bash scripts/setup_env.sh test

demo: install
	$(PY) scripts/demo.py

# ruff's rules and formatter over the tree, pyright over the whole package (pyproject.toml
# configures all three); make test runs the same checks (tests/contracts/test_lint.py).
LINT_PATHS := lerobot_shards scripts benchmarks tests
lint: install-test
	.venv/bin/ruff check --no-cache $(LINT_PATHS)
	.venv/bin/ruff format --check --no-cache $(LINT_PATHS)
	.venv/bin/pyright

test: install-test
	$(PY) -m pytest -n 2 --durations=15 $(PYTEST_ARGS)

# The inner loop: every test but the system tier (real servers and processes; tests/conftest.py).
test-fast: install-test
	$(PY) -m pytest -n 2 -m "not system" --durations=10 $(PYTEST_ARGS)

# The unit tier: the pure layers (planning, options, errors) on values alone, in seconds.
test-unit: install-test
	$(PY) -m pytest -m unit -q $(PYTEST_ARGS)

# The long field fuzz (issue 48): every node of every file a dataset, pack, mixture or checkpoint
# says about itself x every mutation kind, and 2,000 hypothesis draws; what breaks the contract is
# kept in tests/fuzz_regressions.json, which `make test` replays. docs/SECURITY.md has its figures.
fuzz: install-test
	LEROBOT_SHARDS_FIELD_FUZZ_FULL=1 LEROBOT_SHARDS_FIELD_FUZZ_EXAMPLES=2000 \
		$(PY) -m pytest -n 2 -p no:cacheprovider --timeout=0 tests/contracts/test_field_fuzz.py $(PYTEST_ARGS)

# Opt-in correctness oracle: LeRobot 0.6.1 in its own Python 3.12 venv (~5 GB). Never in CI.
parity: install
	bash scripts/parity_setup.sh
	.venv-parity/bin/python scripts/parity_check.py
	.venv-parity/bin/python scripts/parity_matrix.py
	.venv-parity/bin/python scripts/parity_random_access.py
	.venv-parity/bin/python scripts/parity_v21.py
	.venv-parity/bin/python scripts/parity_train.py

bench: install-test
	$(PY) benchmarks/bench_read.py --out bench-out

clean:
	rm -rf demo-out bench-out .pytest_cache
