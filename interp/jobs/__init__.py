"""interp.jobs: many targets -> one resumable, content-keyed table, run locally, under torchrun or on Slurm.

The layer under `interp batch`, `interp eval`, `interp experiment eval` and `interp ablate`; each keeps only its own
science (what one target's rows are) and hands the rest to this package:

    targets    what PATHs and MODELs stand for (checkpoints, runs, HF dirs, .gguf files, hub ids at revisions)
    keys       what identifies a model and a setting (content hashes), so reruns skip and copies count once
    parts      OUT.parts/: one part per finished unit, failure rows, the plan and the tasks' journals; the merge
    runner     one task: its share of the targets under its lock, one progress line per target with an ETA
    executors  local --jobs N, torchrun, slurm (submitit array, requeued on preemption): ExecutorConfig, execute
    status     `interp jobs status OUT` (OUT a table, its parts folder, or a training experiment's folder)
    training   a training experiment's runs as a job: `interp experiment NAME`, locally or one Slurm task per run
    runs       one training run as every runner takes it (its state, trained or skipped, reported); the run pool
"""

from interp._util.lazy import lazy_exports

_EXPORTS = {
    'Target': 'targets',
    'expand_paths': 'targets',
    'select_checkpoints': 'targets',
    'parse_checkpoints': 'targets',
    'hub_targets': 'targets',
    'CHECKPOINTS_HELP': 'targets',
    'weights_sha256': 'keys',
    'definition_sha256': 'keys',
    'settings_hash': 'keys',
    'part_key': 'keys',
    'PARTS_SUFFIX': 'parts',
    'FAILED_PREFIX': 'parts',
    'parts_dir': 'parts',
    'merge_table': 'parts',
    'Job': 'runner',
    'Outcome': 'runner',
    'TaskResult': 'runner',
    'run_task': 'runner',
    'EXECUTORS': 'executors',
    'ExecutorConfig': 'executors',
    'JobsResult': 'executors',
    'execute': 'executors',
    'job_status': 'status',
    'TrainingJob': 'training',
    'train_experiment': 'training',
    'run_experiment': 'training',
    'Report': 'runs',
    'RunStatus': 'runs',
    'describe': 'runs',
    'train_run': 'runs',
    'train_in_processes': 'runs',
}

__getattr__, __dir__, __all__ = lazy_exports(__name__, _EXPORTS)
