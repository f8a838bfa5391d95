"""`interp jobs status OUT`: what each target of the last plan is doing, from the parts folder alone.

    done         its part is written (this or an earlier invocation)
    failed       its last attempt failed (the first line of the error)
    running      a task holding its lock is at it now
    interrupted  a task started it and is gone (killed, preempted, cancelled): a rerun, or Slurm's requeue, resumes
    pending      no task has reached it yet

Read from OUT.parts/.plan.json (the targets in order, how they are split, the Slurm job ids), the tasks' journals
and their locks; nothing is written, so it is safe beside running tasks. The plan and the journals are checked
(interp.jobs.parts.PLAN_SCHEMA, JOURNAL_SCHEMA): a malformed one is one line naming the file, the field and the fix,
and a plan's task count is bounded (MAX_TASKS); only the locks of tasks that take a target are looked at.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from interp._util.io import lock_holder
from interp.jobs.parts import parts_dir, read_journal, read_plan, task_lock

__all__ = ["TargetState", "job_status", "format_status", "STATES"]

STATES = ("done", "failed", "running", "interrupted", "pending")


@dataclass(frozen=True)
class TargetState:
    target: str
    state: str       # one of STATES
    task: int        # the task that takes it (i of the plan's split)
    error: str = ""  # first line, for failed targets


def job_status(out: str | Path) -> tuple[dict, list[TargetState]]:
    """(the plan, one TargetState per planned target, in plan order). FileNotFoundError with the fix when OUT has
    no plan (never run through interp.jobs, or not a table of interp)."""
    plan = read_plan(out)
    if plan is None:
        raise FileNotFoundError(f"{parts_dir(out)}: no plan of a job (.plan.json); run `interp batch`, `interp "
                                f"eval` or `interp ablate` with --out {out} first")
    journal = read_journal(out)
    tasks = plan["tasks"]
    holders = {i: lock_holder(task_lock(out, i)) for i in sorted({i % tasks for i in range(len(plan["targets"]))})}
    states = []
    for i, name in enumerate(plan["targets"]):
        record = journal.get(name, {})
        task = i % tasks
        state = record.get("state", "pending")
        if state in ("done", "skipped"):
            state = "done"
        elif state in ("running", "interrupted"):
            state = "running" if state == "running" and holders.get(task) else "interrupted"
        elif state != "failed":
            state = "pending"
        error = str(record.get("error", "")).splitlines()[0] if state == "failed" and record.get("error") else ""
        states.append(TargetState(name, state, task, error))
    return plan, states


def format_status(out: str | Path, plan: dict, states: list[TargetState]) -> str:
    counts = {s: sum(t.state == s for t in states) for s in STATES}
    head = (f"{out}: {plan['kind']} over {len(states)} target(s) in {plan['tasks']} task(s) "
            f"({plan['executor']}" + (f", Slurm jobs {plan['slurm_jobs'][0].split('_')[0]}"
                                       if plan.get("slurm_jobs") else "") + "): "
            + ", ".join(f"{n} {s}" for s, n in counts.items() if n))
    lines = [head]
    for t in states:
        lines.append(f"  {t.state:<11} task {t.task}  {t.target}" + (f"  {t.error}" if t.error else ""))
    return "\n".join(lines)
