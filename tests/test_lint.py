"""make lint inside make test: the stubs, ruff and mypy (scripts/lint.sh), as one test, so it runs beside the
others on the second worker instead of before them all."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from interp._util.paths import REPO_ROOT


@pytest.mark.slow
def test_lint_is_clean():
    venv = Path(sys.executable).parent.parent
    proc = subprocess.run(["bash", "scripts/lint.sh"], cwd=REPO_ROOT, capture_output=True, text=True, check=False,
                          env={"PATH": f"{venv / 'bin'}:/usr/bin:/bin", "VENV": str(venv), "HOME": str(Path.home())})
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-6000:]


def test_stale_stubs_are_found(tmp_path):
    """write_stubs --check fails on a stub that no longer matches its package's _EXPORTS."""
    sys.path.insert(0, str(REPO_ROOT / "scripts"))
    try:
        import write_stubs
    finally:
        sys.path.pop(0)
    pkg = tmp_path / "interp" / "p"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("from interp._util.lazy import lazy_exports\n_EXPORTS = {'f': 'a'}\n"
                                     "__getattr__, __dir__, __all__ = lazy_exports(__name__, _EXPORTS)\n")
    wanted = write_stubs.stubs(tmp_path)
    assert list(wanted) == [pkg / "__init__.pyi"]
    assert "from interp.p.a import f as f\n" in wanted[pkg / "__init__.pyi"]
    (pkg / "__init__.py").write_text("_EXPORTS = {'f': 'a'}\nVERSION = 1\n")
    with pytest.raises(SystemExit, match="VERSION"):
        write_stubs.stubs(tmp_path)
