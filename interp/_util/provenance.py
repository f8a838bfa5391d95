"""What produced a result: package versions and the git commit, recorded beside every output."""

from __future__ import annotations

import functools
import importlib.metadata
import subprocess

from interp._util.paths import REPO_ROOT

TRACKED_PACKAGES = ("interp", "torch", "transformer-lens", "nnsight", "transformers", "numpy", "pandas")


@functools.cache
def package_versions() -> dict[str, str]:
    """Installed versions of the packages whose behaviour can change our numbers."""
    versions = {}
    for name in TRACKED_PACKAGES:
        try:
            versions[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            versions[name] = "absent"
    return versions


@functools.cache
def git_commit() -> str:
    """HEAD of the repo this code runs from, with '+dirty' if the tree has changes; 'unknown' outside git."""
    try:
        head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPO_ROOT, capture_output=True,
                              text=True, timeout=5, check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=REPO_ROOT,
                               capture_output=True, text=True, timeout=5).stdout.strip()
        return head + ("+dirty" if dirty else "")
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def provenance() -> dict[str, object]:
    """One dict to store beside a checkpoint or a result table."""
    return {"packages": package_versions(), "git_commit": git_commit()}


def versions_string() -> str:
    """Compact form for a table column: 'torch=2.13.0;transformer-lens=4.3.0;...'."""
    return ";".join(f"{k}={v}" for k, v in package_versions().items())
