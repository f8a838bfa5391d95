"""Published numbers of the pretrained models we can run offline, to print beside ours (docs/evals.md, the
downstream figure). A wide gap to a number measured the same way means a bug until shown otherwise; the
`setup` column says how far each published number's setup is from ours.

Ours: lm-eval 0.4.13 0-shot, our task YAMLs (= lm-eval's prompts), fp32 weights dequantized from a GGUF file
(SmolLM2-135M-Instruct from Q4_1, Gemma-3-270m base from Q4_K_M: 4-bit quantization costs small models a point
or two), on the first --limit documents.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Published:
    model: str           # our registry name
    task: str            # our task name
    metric: str          # our metric column ("acc" / "acc_norm"), in [0, 1]
    value: float         # in [0, 1]
    setup: str           # how it was measured
    reference: str       # where it was published


SMOLLM2_CARD = "https://huggingface.co/HuggingFaceTB/SmolLM2-135M-Instruct (model card, Evaluation)"
GEMMA3_CARD = "https://ai.google.dev/gemma/docs/core/model_card_3 (Gemma 3 270M, PT)"
SMOLLM2_LM_EVAL = "https://huggingface.co/lldois/SmolLM2-135M-Reasoning-SLERP-Champion (its 'Baseline' column)"

PUBLISHED: tuple[Published, ...] = (
    # SmolLM2-135M-Instruct, model card: lighteval, its own prompt formats, 0-shot, bf16 weights
    Published("smollm2-135m", "hellaswag", "acc_norm", 0.409, "model card: lighteval, 0-shot", SMOLLM2_CARD),
    Published("smollm2-135m", "piqa", "acc_norm", 0.663, "model card: lighteval, 0-shot", SMOLLM2_CARD),
    # a third party's lm-eval 0-shot run of the same Instruct model (unquantized): the closest setup to ours
    Published("smollm2-135m", "arc_challenge", "acc_norm", 0.2773, "third-party lm-eval, 0-shot", SMOLLM2_LM_EVAL),
    Published("smollm2-135m", "arc_easy", "acc", 0.5412, "third-party lm-eval, 0-shot", SMOLLM2_LM_EVAL),
    Published("smollm2-135m", "hellaswag", "acc_norm", 0.4299, "third-party lm-eval, 0-shot", SMOLLM2_LM_EVAL),
    Published("smollm2-135m", "piqa", "acc_norm", 0.6692, "third-party lm-eval, 0-shot", SMOLLM2_LM_EVAL),
    # Gemma 3 PT 270M, model card: Google's harness; only its 0-shot rows compare with ours directly
    Published("gemma3-270m", "boolq", "acc", 0.614, "model card: 0-shot", GEMMA3_CARD),
    Published("gemma3-270m", "piqa", "acc", 0.677, "model card: 0-shot", GEMMA3_CARD),
    Published("gemma3-270m", "arc_easy", "acc", 0.577, "model card: 0-shot", GEMMA3_CARD),
    Published("gemma3-270m", "hellaswag", "acc", 0.409, "model card: 10-shot (ours 0-shot)", GEMMA3_CARD),
    Published("gemma3-270m", "arc_challenge", "acc", 0.290, "model card: 25-shot (ours 0-shot)", GEMMA3_CARD),
    Published("gemma3-270m", "winogrande", "acc", 0.520, "model card: 5-shot (ours 0-shot)", GEMMA3_CARD),
)
# The SmolLM2 card's "ARC (Average)" (37.3 for the Instruct model) averages ARC-e and ARC-c in lighteval's
# format and has no single counterpart here; which accuracy the cards report is not stated (acc_norm assumed for
# SmolLM2's lighteval numbers, acc for Gemma's).


def published_rows() -> list[dict[str, object]]:
    """PUBLISHED as table rows (model, task, metric, value, setup, reference)."""
    return [p.__dict__.copy() for p in PUBLISHED]
