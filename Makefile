# The README's two commands: `make figures` (main job, embedded defaults) and `make test`.
VENV ?= .venv
PY := $(VENV)/bin/python
export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1
export TOKENIZERS_PARALLELISM := false

.PHONY: setup test test-fast figures bench clean

setup:
	@bash scripts/setup.sh

test: setup
	$(PY) -m pytest -q -p no:cacheprovider $(PYTEST_ARGS)

test-fast: setup
	$(PY) -m pytest -q -p no:cacheprovider -m "not integration and not slow" $(PYTEST_ARGS)

figures: setup
	$(VENV)/bin/interp figures --recompute

bench: setup
	$(PY) benchmarks/run_all.py --write

clean:
	rm -rf $(VENV) .cache build *.egg-info
