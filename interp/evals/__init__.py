"""The paper's evaluations, offline, through lm-evaluation-harness: the eight commonsense tasks, LAMBADA and
held-out perplexity, and RULER-style needle-in-a-haystack.

    tasks/        lm-eval task YAMLs: lm-eval's own prompt and metric fields, the dataset source swapped for
                  the local copy (an include path: lm_eval --include_path interp/evals/tasks works too)
    data.py       load_local: lm-eval's custom_dataset entry point to the sets of interp.data.evalsets (where each
                  set's documents come from, sizes and hashes) and to the text_ppl documents (interp.data.text)
    tasks.py      task names, groups (paper, commonsense, niah), the paper's metrics, the TaskManager
    lm.py         the lm-eval model class "interp" (our checkpoints) and HFLM for pretrained models
    niah.py       the deterministic S-NIAH-1/2/3 generator (lm-eval custom_dataset)
    config.py     EvalConfig (torch-free: the flags of `interp eval`)
    run.py        EvalRunner / run_eval: models x tasks -> a resumable table
    table.py      results -> tidy rows, the paper's 8-task average, parts and merging

Names are exported lazily (interp._util.lazy): importing the package imports no submodule (nor lm-eval)."""

from interp._util.lazy import lazy_exports

_EXPORTS = {
    'load_local': 'data',
    'GROUPS': 'tasks',
    'PAPER_METRICS': 'tasks',
    'TASKS_DIR': 'tasks',
    'available_tasks': 'tasks',
    'parse_tasks': 'tasks',
    'task_manager': 'tasks',
    'InterpLM': 'lm',
    'hf_lm': 'lm',
    'EvalConfig': 'config',
    'EvalRunner': 'run',
    'EvalResult': 'run',
    'expand_targets': 'run',
    'run_eval': 'run',
    'TABLE_COLUMNS': 'table',
    'paper_average': 'table',
    'merge': 'table',
}

__getattr__, __dir__, __all__ = lazy_exports(__name__, _EXPORTS)
