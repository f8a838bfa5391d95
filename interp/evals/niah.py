"""Needle in a haystack, RULER-style (S-NIAH-1/2/3), generated offline and deterministically, as lm-eval tasks.

lm-eval ships RULER's tasks (lm_eval/tasks/ruler), but its generator downloads Paul Graham's essays, NLTK's
punkt model and needs the `wonderwords` package; none of these is available offline. This module follows
the same recipe (RULER's template, needle, answer prefix and string_match_all) with offline stand-ins:

  niah_single_1  S-NIAH-1 (passkey): word key -> 7-digit number, in the repeated-noise haystack
                 ("The grass is green. The sky is blue. ..."), lines joined by newlines as RULER does
  niah_single_2  S-NIAH-2: word key -> 7-digit number, in an essay haystack
  niah_single_3  S-NIAH-3: word key -> UUID, in an essay haystack
The essay haystack is our offline Wikipedia text (interp.data, every article in id order) in place of the
Paul Graham essays; sentences are split by punctuation (a regex) in place of NLTK's punkt; keys are
"adjective-noun" pairs drawn from the small word lists below in place of wonderwords' lists.

Each sample is seeded by (seed, task, length, index), so the same tokenizer always gets the same prompts.
Needle depths are spread evenly over the context (sample i sits at DEPTHS[i % len(DEPTHS)]), not drawn at
random as in RULER, so every depth is measured at every length. The haystack is grown (binary search over
its units) until the prompt, the answer prefix and the tokens to generate fit the target length in the
model's own tokens; a length beyond the model's context is the runner's to skip (never truncated here).
Generation is greedy; metric string_match_all (the needle's value found in the output, case-insensitive).

lm-eval passes the task metadata to load_niah: max_seq_lengths (list), num_samples (per length), seed,
tokens_to_generate and the model (`pretrained`: any spec interp.hf.resolve_model takes; or `tokenizer`).
"""

from __future__ import annotations

import random
import re
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING, Any

from interp._util.errors import InputError

if TYPE_CHECKING:
    import datasets

NOISE = "The grass is green. The sky is blue. The sun is yellow. Here we go. There and back again."
NEEDLE = "One of the special magic {type_needle_v} for {key} is: {value}."
# RULER's template after its own single-needle rewrite ("Some ... are" -> "A ... is", "numbers" -> "number")
TEMPLATE = ("A special magic {type_needle_v} is hidden within the following text. Make sure to memorize it. "
            "I will quiz you about the {type_needle_v} afterwards.\n{context}\n"
            "What is the special magic {type_needle_v} for {query} mentioned in the provided text?")
GEN_PREFIX = "The special magic {type_needle_v} for {query} mentioned in the provided text is"
DEPTHS = tuple(round(i / 10, 1) for i in range(11))     # 0.0, 0.1, ..., 1.0 of the haystack
DEFAULT_LENGTHS = (1024, 2048, 4096)
DEFAULT_SAMPLES = 25
DEFAULT_SEED = 42
TOKENS_TO_GENERATE = 128                                # RULER's, and the YAML's max_gen_toks

ADJECTIVES = ["ablaze", "abrupt", "agile", "amber", "ancient", "arctic", "bitter", "bold", "brave", "breezy", "bright", "brisk", "calm", "candid", "cheerful", "clever", "cosmic", "crimson", "curious", "dapper", "daring", "dusty", "eager", "early", "elegant", "fancy", "fierce", "fluffy", "frozen", "gentle", "giant", "glossy", "golden", "grumpy", "hollow", "humble", "icy", "jolly", "keen", "lively", "lucky", "mellow", "misty", "modern", "noble", "odd", "pale", "plucky", "quiet", "rapid", "rusty", "shiny", "silent", "sleepy", "smooth", "spicy", "sturdy", "sunny", "swift", "tidy", "vivid", "wandering", "witty", "young", "zealous"]
NOUNS = ["anchor", "apple", "arrow", "badge", "basket", "beacon", "bicycle", "blanket", "bottle", "bridge", "bucket", "button", "cactus", "camera", "candle", "canyon", "carpet", "castle", "cherry", "cliff", "clock", "cloud", "compass", "cookie", "crayon", "crystal", "desert", "diamond", "dolphin", "dragon", "drum", "eagle", "engine", "falcon", "feather", "forest", "fountain", "galaxy", "garden", "glacier", "guitar", "hammer", "harbor", "helmet", "island", "jacket", "jungle", "kettle", "kite", "lantern", "lemon", "magnet", "meadow", "mirror", "mountain", "needle", "ocean", "orchard", "otter", "pebble", "pencil", "piano", "pillow", "planet", "pumpkin", "rabbit", "rocket", "saddle", "shovel", "spider", "statue", "thunder", "tiger", "tower", "trumpet", "tulip", "umbrella", "valley", "violin", "walrus", "window", "wizard"]
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9\"'(])")


@dataclass(frozen=True)
class Variant:
    haystack: str        # "repeat" | "essay"
    key_type: str        # "words"
    value_type: str      # "numbers" | "uuids"

    @property
    def singular(self) -> str:
        return self.value_type[:-1]


VARIANTS: dict[str, Variant] = {
    "niah_single_1": Variant("repeat", "words", "numbers"),
    "niah_single_2": Variant("essay", "words", "numbers"),
    "niah_single_3": Variant("essay", "words", "uuids"),
}


def random_value(kind: str, rng: random.Random) -> str:
    if kind == "numbers":
        return str(rng.randint(10 ** 6, 10 ** 7 - 1))
    if kind == "uuids":
        return str(uuid.UUID(int=rng.getrandbits(128), version=4))
    if kind == "words":
        return f"{rng.choice(ADJECTIVES)}-{rng.choice(NOUNS)}"
    raise InputError(f"unknown needle type {kind!r}; known: numbers, uuids, words")


@cache
def essay_words() -> tuple[str, ...]:
    """The essay haystack: every offline Wikipedia article (interp.data "wiki"), in id order, as words."""
    from interp.data import load_documents

    text = " ".join(d.text for d in sorted(load_documents("wiki"), key=lambda d: d.id))
    return tuple(re.sub(r"\s+", " ", text).strip().split(" "))


def _context(variant: Variant, units: int, needle: str, depth: float) -> str:
    """The haystack of `units` units (noise lines, or essay words) with the needle at `depth` of it."""
    if variant.haystack == "repeat":
        lines = [NOISE] * units
        lines.insert(round(units * depth), needle)
        return "\n".join(lines)
    sentences = _SENTENCE_END.split(" ".join(essay_words()[:units]))
    at = round(len(sentences) * depth)
    return " ".join([*sentences[:at], needle, *sentences[at:]])


def make_sample(task: str, length: int, index: int, count: Callable[[str], int], *, seed: int = DEFAULT_SEED,
                tokens_to_generate: int = TOKENS_TO_GENERATE) -> dict[str, Any]:
    """One document of `task` at `length` tokens (count: text -> number of the model's tokens)."""
    variant = VARIANTS[task]
    rng = random.Random(f"{seed}|{task}|{length}|{index}")
    key, value = random_value(variant.key_type, rng), random_value(variant.value_type, rng)
    depth = DEPTHS[index % len(DEPTHS)]
    needle = NEEDLE.format(type_needle_v=variant.value_type, key=key, value=value)
    prefix = GEN_PREFIX.format(type_needle_v=variant.singular, query=key)

    def prompt(units: int) -> str:
        return TEMPLATE.format(type_needle_v=variant.singular, context=_context(variant, units, needle, depth),
                               query=key)

    def fits(units: int) -> bool:
        return count(f"{prompt(units)} {prefix}") + tokens_to_generate <= length

    most = length if variant.haystack == "repeat" else min(len(essay_words()), 2 * length)
    if not fits(1):
        raise InputError(f"{task}: a context of {length} tokens cannot hold the template, one haystack unit and "
                         f"{tokens_to_generate} generated tokens", field="max_seq_lengths")
    lo, hi = 1, most                      # largest haystack that fits: fits(lo) holds throughout
    while lo < hi:
        mid = (lo + hi + 1) // 2
        lo, hi = (mid, hi) if fits(mid) else (lo, mid - 1)
    text = prompt(lo)
    return {"index": index, "input": text, "outputs": [value], "gen_prefix": prefix, "max_length": length,
            "length": count(f"{text} {prefix}") + tokens_to_generate, "depth": depth, "key": key,
            "haystack_units": lo}


def shortest_prompt(task: str, count: Callable[[str], int], tokens_to_generate: int = TOKENS_TO_GENERATE) -> int:
    """Tokens the smallest prompt of `task` needs (template, one haystack unit, answer prefix, generation):
    a length below it cannot be measured at all."""
    variant = VARIANTS[task]
    key, value = "calm-anchor", random_value(variant.value_type, random.Random(0))
    needle = NEEDLE.format(type_needle_v=variant.value_type, key=key, value=value)
    text = TEMPLATE.format(type_needle_v=variant.singular, context=_context(variant, 1, needle, 0.5), query=key)
    return count(f"{text} {GEN_PREFIX.format(type_needle_v=variant.singular, query=key)}") + tokens_to_generate


def token_counter(tokenizer: Any) -> Callable[[str], int]:
    """text -> number of tokens the model sees: our TextTokenizer's ids, or an HF tokenizer's input_ids
    (with its special tokens, e.g. Gemma's BOS, as lm-eval's HFLM encodes a prompt)."""
    if hasattr(tokenizer, "eos_id") and hasattr(tokenizer, "backend"):
        return lambda text: len(tokenizer.encode(text))
    return lambda text: len(tokenizer(text)["input_ids"])


def generate(task: str, lengths: tuple[int, ...] | list[int], num_samples: int, count: Callable[[str], int], *,
             seed: int = DEFAULT_SEED, tokens_to_generate: int = TOKENS_TO_GENERATE) -> list[dict[str, Any]]:
    """num_samples documents per length, lengths in the order given."""
    if task not in VARIANTS:
        raise InputError(f"unknown needle-in-a-haystack task {task!r}; known: {', '.join(VARIANTS)}")
    return [make_sample(task, int(length), i, count, seed=seed, tokens_to_generate=tokens_to_generate)
            for length in lengths for i in range(int(num_samples))]


def _tokenizer_from(metadata: dict[str, Any]) -> Any:
    tokenizer = metadata.get("tokenizer") or metadata.get("pretrained")
    if tokenizer is None:
        raise InputError("the needle-in-a-haystack tasks size their prompts in the model's tokens: pass "
                         "metadata pretrained=<model spec> (interp eval does)", field="metadata")
    if isinstance(tokenizer, str):
        from interp.hf.resolve import resolve_model

        return resolve_model(tokenizer).load_tokenizer()
    return tokenizer


def load_niah(variant: str, **metadata: Any) -> dict[str, datasets.Dataset]:
    """lm-eval `custom_dataset` entry point of the niah_single_* YAMLs (dataset_kwargs: {variant: <task>})."""
    import datasets

    lengths = metadata.get("max_seq_lengths") or DEFAULT_LENGTHS
    rows = generate(variant, tuple(lengths), int(metadata.get("num_samples") or DEFAULT_SAMPLES),
                    token_counter(_tokenizer_from(metadata)), seed=int(metadata.get("seed", DEFAULT_SEED)),
                    tokens_to_generate=int(metadata.get("tokens_to_generate") or TOKENS_TO_GENERATE))
    return {"test": datasets.Dataset.from_list(rows)}


def process_results(doc: dict[str, Any], results: list[str]) -> dict[str, float]:
    """RULER's string_match_all (lm-eval's own implementation) of one generation."""
    from lm_eval.tasks.ruler.common_utils import postprocess_pred, string_match_all

    return {"string_match_all": string_match_all(postprocess_pred(results), [doc["outputs"]])}
