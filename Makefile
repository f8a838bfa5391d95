# The README's two commands: `make figures` (main job, embedded defaults) and `make test`.
VENV ?= .venv
PY := $(VENV)/bin/python
export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1
export TOKENIZERS_PARALLELISM := false

.PHONY: setup test test-fast lint figures bench notebooks clean

setup:
	@bash scripts/setup.sh

# two workers (pytest-xdist), each test file whole on one of them (tests/conftest.py groups them)
TEST_WORKERS ?= 2

test: setup
	$(PY) -m pytest -q -p no:cacheprovider -n $(TEST_WORKERS) --dist loadgroup --durations=15 $(PYTEST_ARGS)

test-fast: setup
	$(PY) -m pytest -q -p no:cacheprovider -n $(TEST_WORKERS) --dist loadgroup -m "not integration and not slow" $(PYTEST_ARGS)

# ruff, mypy and the generated stubs (scripts/lint.sh; settings in pyproject.toml); make test runs it as a test
lint: setup
	@bash scripts/lint.sh

figures: setup
	$(VENV)/bin/interp figures --recompute
	$(VENV)/bin/interp report --out figures   # the repository's figures/REPORT.md (interp report alone writes ./report/)

bench: setup
	$(PY) benchmarks/run_all.py --write

# re-execute every notebook in full mode and store its outputs (explore.ipynb: ~25 min on 2 cores)
notebooks: setup
	$(PY) scripts/run_notebooks.py --all

clean:
	rm -rf $(VENV) .cache build *.egg-info
