#!/usr/bin/env bash
# The checks a maintainer expects (make lint; tests/test_lint.py runs this in make test): the generated type stubs
# of the lazily exporting packages are current, ruff finds nothing, mypy finds nothing (settings: pyproject.toml).
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${VENV:-.venv}
"$VENV/bin/python" scripts/write_stubs.py --check
"$VENV/bin/ruff" check --quiet
"$VENV/bin/mypy"
