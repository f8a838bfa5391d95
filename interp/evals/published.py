"""Published numbers of the pretrained models we can run offline, to print beside ours (docs/evals.md, the
downstream figure, the full-set comparison): the one place that holds them, each with its source. A wide gap to a
number measured the same way means a bug until shown otherwise; the `setup` column says how far each published
number's setup is from ours.

Ours: lm-eval 0.4.13 0-shot, our task YAMLs (= lm-eval's prompts), fp32 weights dequantized from a GGUF file
(SmolLM2-135M-Instruct from Q4_1, Gemma-3-270m base from Q4_K_M: 4-bit quantization costs small models a point
or two), on the first --limit documents (or every document).

The SmolLM2 card's numbers are lighteval's `loglikelihood_acc_norm_nospace` for every multiple-choice task: the
task table the SmolLM2 team evaluates with (github.com/huggingface/smollm, text/evaluation/tasks.py, commit
c5525272e1183ba19ea3ab9d76f2498a3e00b729) gives arc:easy, arc:challenge, hellaswag, piqa, winogrande, openbook_qa,
commonsense_qa and the MMLU variants that one metric: the choice's log-likelihood divided by its length in
characters, the leading space not counted. Our nearest column is lm-eval's acc_norm (divided by the length in
bytes, the leading space counted), so those rows compare acc_norm with acc_norm_nospace: the same idea, not the
same number. Which accuracy the Gemma card reports is not stated: acc is assumed there.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Published:
    model: str           # our registry name
    task: str            # our task name (or a DERIVED one)
    metric: str          # our metric column ("acc" / "acc_norm"), in [0, 1]
    value: float         # in [0, 1]
    setup: str           # how it was measured
    reference: str       # where it was published
    shots: int = 0       # few-shot examples in the published setup (ours are 0-shot)


SMOLLM2_CARD = "https://huggingface.co/HuggingFaceTB/SmolLM2-135M-Instruct (model card, Evaluation)"
GEMMA3_CARD = "https://ai.google.dev/gemma/docs/core/model_card_3 (Gemma 3 270M, PT)"
SMOLLM2_LM_EVAL = "https://huggingface.co/lldois/SmolLM2-135M-Reasoning-SLERP-Champion (its 'Baseline' column)"
LIGHTEVAL = "model card: lighteval acc_norm_nospace, 0-shot"

PUBLISHED: tuple[Published, ...] = (
    # SmolLM2-135M-Instruct, model card: lighteval, its own prompt formats, 0-shot, bf16 weights
    Published("smollm2-135m", "hellaswag", "acc_norm", 0.409, LIGHTEVAL, SMOLLM2_CARD),
    Published("smollm2-135m", "piqa", "acc_norm", 0.663, LIGHTEVAL, SMOLLM2_CARD),
    # the card's "ARC (Average)" (37.3): lighteval's mean of its arc:easy and arc:challenge scores (DERIVED)
    Published("smollm2-135m", "arc_avg", "acc_norm", 0.373, LIGHTEVAL + "; ARC (Average): mean of ARC-Easy and "
              "ARC-Challenge", SMOLLM2_CARD),
    # a third party's lm-eval 0-shot run of the same Instruct model (unquantized): the closest setup to ours
    Published("smollm2-135m", "arc_challenge", "acc_norm", 0.2773, "third-party lm-eval, 0-shot", SMOLLM2_LM_EVAL),
    Published("smollm2-135m", "arc_easy", "acc", 0.5412, "third-party lm-eval, 0-shot", SMOLLM2_LM_EVAL),
    Published("smollm2-135m", "hellaswag", "acc_norm", 0.4299, "third-party lm-eval, 0-shot", SMOLLM2_LM_EVAL),
    Published("smollm2-135m", "piqa", "acc_norm", 0.6692, "third-party lm-eval, 0-shot", SMOLLM2_LM_EVAL),
    # Gemma 3 PT 270M, model card: Google's harness; only its 0-shot rows compare with ours directly
    Published("gemma3-270m", "boolq", "acc", 0.614, "model card: 0-shot", GEMMA3_CARD),
    Published("gemma3-270m", "piqa", "acc", 0.677, "model card: 0-shot", GEMMA3_CARD),
    Published("gemma3-270m", "arc_easy", "acc", 0.577, "model card: 0-shot", GEMMA3_CARD),
    Published("gemma3-270m", "hellaswag", "acc", 0.409, "model card: 10-shot (ours 0-shot)", GEMMA3_CARD, shots=10),
    Published("gemma3-270m", "arc_challenge", "acc", 0.290, "model card: 25-shot (ours 0-shot)", GEMMA3_CARD,
              shots=25),
    Published("gemma3-270m", "winogrande", "acc", 0.520, "model card: 5-shot (ours 0-shot)", GEMMA3_CARD, shots=5),
)

# A published task that is a mean of ours, and the tasks it averages. "arc_avg": the SmolLM2 card's "ARC (Average)",
# the plain mean of lighteval's arc:easy and arc:challenge scores (each set weighs the same, whatever its size).
DERIVED: dict[str, tuple[str, ...]] = {"arc_avg": ("arc_easy", "arc_challenge")}


def derived_number(parts: Sequence[tuple[float, float, int]]) -> tuple[float, float, int]:
    """(value, stderr, n) of a DERIVED task from its parts' (value, stderr, n), in the order DERIVED lists them:
    the plain mean, its stderr sqrt(sum s_i^2) / k (the parts are independent sets of documents), n the documents
    of all parts."""
    if not parts:
        raise ValueError("derived_number: no parts to average")
    k = len(parts)
    return (sum(v for v, _, _ in parts) / k, math.sqrt(sum(s * s for _, s, _ in parts)) / k,
            sum(int(n) for _, _, n in parts))


def published_rows() -> list[dict[str, object]]:
    """PUBLISHED as table rows (model, task, metric, value, setup, reference, shots)."""
    return [p.__dict__.copy() for p in PUBLISHED]
