"""interp._util.provenance.git_commit reads the repository and never writes it: a plain `git status` refreshes a
stale index under .git/index.lock, and a git killed mid-write left that lock behind, blocking the next commit."""

from __future__ import annotations

import os
import subprocess
import time

from interp._util import provenance


def _git(repo, *args: str) -> str:
    return subprocess.run(["git", "-c", "user.email=t@t", "-c", "user.name=t", *args], cwd=repo, check=True,
                          capture_output=True, text=True).stdout.strip()


def test_git_commit_leaves_a_stale_index_alone(tmp_path, monkeypatch):
    _git(tmp_path, "init", "-q")
    (tmp_path / "f.txt").write_text("a\n")
    _git(tmp_path, "add", "f.txt")
    _git(tmp_path, "commit", "-qm", "one")
    index = tmp_path / ".git" / "index"
    later = time.time() + 5
    os.utime(tmp_path / "f.txt", (later, later))        # same content, new mtime: the index's stat data is stale
    before = index.stat().st_mtime_ns
    monkeypatch.setattr(provenance, "REPO_ROOT", tmp_path)
    provenance.git_commit.cache_clear()
    try:
        assert provenance.git_commit() == _git(tmp_path, "rev-parse", "HEAD")   # clean: no "+dirty"
    finally:
        provenance.git_commit.cache_clear()
    assert index.stat().st_mtime_ns == before and not (tmp_path / ".git" / "index.lock").exists()
    subprocess.run(["git", "status", "--porcelain"], cwd=tmp_path, check=True, capture_output=True)
    assert index.stat().st_mtime_ns != before   # what a plain `git status` does (why the variable is needed)
