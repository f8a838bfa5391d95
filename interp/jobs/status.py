"""`interp jobs status OUT`: what each target of the last plan is doing, from the parts folder alone, in the words of
interp._util.states (one set for every job, training runs included):

    done         its part is written (this or an earlier invocation)
    failed       its last attempt failed (the first line of the error)
    running      a task holding its lock is at it now
    interrupted  a task started it and is gone (killed, preempted, cancelled): a rerun, or Slurm's requeue, resumes
    pending      no task has reached it yet

OUT may also be its parts folder (OUT.parts/), or a training experiment's folder (<root>/<name>, whose plan is in
<root>/<name>/.jobs.parts/; interp.jobs.training): there each run's state is told by its run directory, with its step
out of its total and its last train loss from log.jsonl; a folder of runs trained without a plan is read from its
run directories alone.

Read from OUT.parts/.plan.json (the targets in order, how they are split, the Slurm job ids), the tasks' journals
and their locks; nothing is written, so it is safe beside running tasks. The plan and the journals are checked
(interp.jobs.parts.PLAN_SCHEMA, JOURNAL_SCHEMA): a malformed one is one line naming the file, the field and the fix,
and a plan's task count is bounded (MAX_TASKS); only the locks of tasks that take a target are looked at.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from interp._util.io import lock_holder
from interp._util.states import DONE, FAILED, INTERRUPTED, PENDING, RUNNING, SKIPPED, STATES
from interp.jobs.parts import EXPERIMENT_OUT, PARTS_SUFFIX, parts_dir, read_journal, read_plan, task_lock

__all__ = ["STATES", "TargetState", "experiment_states", "format_status", "job_status", "runs_status", "table_of"]


@dataclass(frozen=True)
class TargetState:
    target: str
    state: str       # one of STATES
    task: int        # the task that takes it (i of the plan's split)
    error: str = ""  # first line, for failed targets
    detail: str = ""  # a training run's "step 40/250  loss 5.123"


def table_of(path: str | Path) -> Path:
    """The OUT that `path` names: OUT itself, the folder of its parts (OUT.parts/ -> OUT: parts_dir only reads the
    name's stem), or a training experiment's folder (-> <folder>/.jobs)."""
    path = Path(path)
    if path.is_dir() and path.name.endswith(PARTS_SUFFIX) and len(path.name) > len(PARTS_SUFFIX):
        return path.with_name(path.name[:-len(PARTS_SUFFIX)])
    if path.is_dir() and parts_dir(path / EXPERIMENT_OUT).is_dir():
        return path / EXPERIMENT_OUT
    return path


def job_status(out: str | Path) -> tuple[dict, list[TargetState]]:
    """(the plan, one TargetState per planned target, in plan order). FileNotFoundError with the fix when OUT has
    no plan (never run through interp.jobs, or not a table of interp)."""
    given, out = Path(out), table_of(out)
    plan = read_plan(out)
    if plan is None:
        found = runs_status(out.parent if out.name == EXPERIMENT_OUT else given)   # runs trained without a plan
        if found is not None:
            return found
        raise FileNotFoundError(f"{parts_dir(out)}: no plan of a job (.plan.json); run `interp batch`, `interp "
                                f"eval` or `interp ablate` with --out {out} (or `interp experiment NAME --executor "
                                "slurm`) first")
    journal = read_journal(out)
    tasks = plan["tasks"]
    holders = {i: lock_holder(task_lock(out, i)) for i in sorted({i % tasks for i in range(len(plan["targets"]))})}
    states = []
    for i, name in enumerate(plan["targets"]):
        record = journal.get(name, {})
        task = i % tasks
        state = record.get("state", PENDING)
        if state in (DONE, SKIPPED):
            state = DONE
        elif state in (RUNNING, INTERRUPTED):
            state = RUNNING if state == RUNNING and holders.get(task) else INTERRUPTED
        elif state != FAILED:
            state = PENDING
        error = str(record.get("error", "")).splitlines()[0] if state == FAILED and record.get("error") else ""
        states.append(TargetState(name, state, task, error))
    if plan["kind"] == "training":   # interp.jobs.training.KIND: the run directories tell
        states = experiment_states(out.parent, states)
    return plan, states


def experiment_states(folder: Path, states: list) -> list:
    """An experiment's states for `interp jobs status`: its planned runs (with_run_progress), then the runs of its
    folder that the plan left out because they had finished before it."""
    from interp.jobs.training import with_run_progress

    planned = {s.target for s in states}
    found = runs_status(folder)
    return with_run_progress(folder, states) + [s for s in (found[1] if found else []) if s.target not in planned]


def runs_status(folder: Path) -> tuple[dict, list] | None:
    """A folder of run directories that no plan describes (trained locally): (a plan-like dict, their states), or
    None when it holds no run directory (interp.training.results.find_run_dirs)."""
    from interp.jobs.training import KIND, with_run_progress
    from interp.training.results import find_run_dirs

    folder = Path(folder)
    runs = find_run_dirs(folder) if folder.is_dir() else []
    if not runs:
        return None
    base = folder.parent if folder in runs else folder   # the folder may be one run directory itself
    names = [str(r.relative_to(base)) for r in runs]
    plan = {"kind": KIND, "targets": names, "tasks": 1, "executor": "no plan: read from the run directories"}
    return plan, with_run_progress(base, [TargetState(n, PENDING, 0) for n in names])


def format_status(out: str | Path, plan: dict, states: list[TargetState]) -> str:
    counts = {s: sum(t.state == s for t in states) for s in STATES}
    head = (f"{out}: {plan['kind']} over {len(states)} target(s) in {plan['tasks']} task(s) "
            f"({plan['executor']}" + (f", Slurm jobs {plan['slurm_jobs'][0].split('_')[0]}"
                                       if plan.get("slurm_jobs") else "") + "): "
            + ", ".join(f"{n} {s}" for s, n in counts.items() if n))
    lines = [head]
    for t in states:
        lines.append(f"  {t.state:<11} task {t.task}  {t.target}" + (f"  {t.detail}" if t.detail else "")
                     + (f"  {t.error}" if t.error else ""))
    return "\n".join(lines)
