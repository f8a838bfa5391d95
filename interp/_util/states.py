"""The states of a unit of work (a target of a job, a run of a training experiment), one vocabulary for everyone.

    done         finished (now, or already: a rerun skips it)
    skipped      finished before this invocation, so not touched (a report's word; `interp jobs status` says done)
    failed       its last attempt raised; the first line of the error is kept (a run's error.txt, a failure row)
    running      a live process holds its lock and is at it (a run's <run>/.lock, a task's .rank<i>.lock)
    interrupted  started, then stopped (a signal, a preemption, a killed task): its state is saved, a rerun resumes
    pending      not started yet (or never started: the command stopped first)

Why here, on the ground floor: interp.training writes and reads run directories in these words (the Trainer's
result.json "status", the tables of interp.training.results) and interp.jobs plans and reports units in them, and
interp.training sits below interp.jobs (docs/ARCHITECTURE.md), so the one copy lives below both. Words only: no
command, no file, no lock is named here (the lock file names are interp._util.paths', the locks interp._util.io's).
"""

from __future__ import annotations

__all__ = ["DONE", "FAILED", "INTERRUPTED", "PENDING", "RUNNING", "SKIPPED", "STATES"]

DONE, SKIPPED, FAILED, RUNNING, INTERRUPTED, PENDING = "done", "skipped", "failed", "running", "interrupted", "pending"
STATES = (DONE, FAILED, RUNNING, INTERRUPTED, PENDING)   # what `interp jobs status` shows (skipped shows as done)
