"""lm-evaluation-harness model classes: "interp" for our TaperedLM checkpoints, lm-eval's own HFLM (given the
loaded model object) for every pretrained model.

Why our own class: a TaperedLM is not a transformers model (no config lm-eval can read, our own tokenizers),
so HFLM cannot drive it. InterpLM follows HFLM's algorithm step for step, so a number is the one lm-eval
would print for the same model: requests are sorted longest first and batched (length-sorted batches pad
little), right-padded (causal: padding after a sequence never changes its logits), truncated from the left
to the model's context, and requests that share context + continuation[:-1] (the choices of a multiple-
choice question with one-token answers) are scored by one forward (lm-eval's Collator "contexts" cache).
loglikelihood_rolling uses lm-eval's rolling windows (get_rolling_token_windows + make_disjoint_window,
context_len 1); generate_until decodes greedily with the stop strings (and EOS), as HFLM does, recomputing
the whole prefix each step (our model keeps no KV cache) and batching prompts of equal length.

    lm = InterpLM(model=tapered_lm, tokenizer=text_tokenizer, batch_size=8)   # or InterpLM(pretrained="runs/x")
    lm_eval.simple_evaluate(model=lm, tasks=["piqa"], task_manager=interp.evals.task_manager(), limit=50)
Importing this module registers the class as lm-eval model "interp" (lm_eval.api.registry.get_model("interp")).
"""

from __future__ import annotations

import functools
from collections import defaultdict
from typing import Any

import torch
import torch.nn.functional as F
from lm_eval import utils as lm_utils
from lm_eval.api.model import TemplateLM
from lm_eval.api.registry import register_model
from lm_eval.models.utils import Collator, handle_stop_sequences, normalize_gen_kwargs, postprocess_generated_text

from interp._util.errors import InputError

MODEL_NAME = "interp"            # lm_eval --model interp
DEFAULT_MAX_GEN_TOKS = 256       # HFLM's default
DTYPES = {"float32": torch.float32, "float64": torch.float64, "bfloat16": torch.bfloat16}


def _dtype(value: str | torch.dtype) -> torch.dtype:
    if isinstance(value, torch.dtype):
        return value
    if value not in DTYPES:
        raise InputError(f"softmax_dtype={value!r}: choose one of {', '.join(DTYPES)}")
    return DTYPES[value]


def _unknown_id(tokenizer: Any) -> int | None:
    """The id a word-level / WordPiece tokenizer maps text it cannot encode to (None: it can encode anything)."""
    backend = getattr(tokenizer, "backend", None)
    unk = getattr(getattr(backend, "model", None), "unk_token", None)
    return backend.token_to_id(unk) if unk else None


def _unfit(task: str, context: list[int], continuation: list[int], max_length: int) -> InputError:
    """The error of a loglikelihood request the model's context cannot score (lm-eval truncates a long context
    from the left, so the continuation alone must fit)."""
    where = f"{task}: " if task else ""
    if not context or not continuation:
        return InputError(f"{where}a request with {len(context)} context and {len(continuation)} continuation tokens "
                          "has nothing to score", fix="check the task's doc_to_text / doc_to_target")
    return InputError(f"{where}a request with {len(context)} context and {len(continuation)} continuation tokens does "
                      f"not fit the model's context of {max_length} tokens: the continuation must fit whole (only "
                      "the context is cut from the left)",
                      fix=f"evaluate this task with a model of at least {len(continuation)} tokens of context, or "
                          "leave the task out for this model")


class FitsContext:
    """Mixin of our lm-eval classes (InterpLM, the HFLM hf_lm builds): every loglikelihood request is checked
    against the model's context before any is scored, and one that does not fit is an InputError naming its
    task, its lengths and the context (HFLM itself stops on a bare `assert len(continuation_enc) <=
    self.max_length`), so `interp eval` fails that model/task pair alone."""

    max_length: int
    _request_tasks: dict[tuple[Any, ...], str] = {}  # noqa: RUF012 - replaced per call, never mutated in place

    def loglikelihood(self, requests: list[Any], disable_tqdm: bool = False) -> list[tuple[float, bool]]:
        self._request_tasks = {tuple(req.args): req.task_name for req in requests if req.task_name}
        try:
            return super().loglikelihood(requests, disable_tqdm=disable_tqdm)  # type: ignore[misc]
        finally:
            self._request_tasks = {}

    def check_fit(self, requests: list[tuple[Any, list[int], list[int]]]) -> None:
        """InputError for the first (key, context tokens, continuation tokens) request the context cannot score."""
        for key, context, continuation in requests:
            if not context or not continuation or len(continuation) > self.max_length:
                task = self._request_tasks.get(tuple(key), "") if isinstance(key, tuple) else ""
                raise _unfit(task, context, continuation, self.max_length)

    def check_generation(self, max_gen: int) -> None:
        if max_gen >= self.max_length:
            raise InputError(f"max_gen_toks={max_gen} leaves no room for a prompt in a context of {self.max_length}",
                             fix="generate fewer tokens (interp eval: --niah-gen-tokens) or use a longer-context model")


@register_model(MODEL_NAME)
class InterpLM(FitsContext, TemplateLM):
    """One of our TaperedLMs with the TextTokenizer it was trained with, as an lm-eval LM.

    pretrained: a checkpoint directory (lm_eval's --model_args), or pass model= and tokenizer= objects.
    device: where a checkpoint loaded from `pretrained` runs (cpu, cuda, cuda:N; lm_eval's --device); a model
        passed in stays where it is.
    softmax_dtype: dtype of the log-softmax (float32; float64 for reference checks), like HFLM's option.
    """

    def __init__(self, pretrained: str | None = None, *, model: torch.nn.Module | None = None,
                 tokenizer: Any = None, batch_size: int | str = 8, max_length: int | None = None,
                 softmax_dtype: str | torch.dtype = "float32", max_gen_toks: int = DEFAULT_MAX_GEN_TOKS,
                 device: str | None = None, **_ignored: Any) -> None:
        super().__init__()
        if model is None:   # `lm_eval --model interp --model_args pretrained=DIR --device cuda`: lm-eval's device=
            from interp._util.devices import resolve_device, to_device

            model, tokenizer = _load_checkpoint(pretrained, tokenizer)
            model = to_device(model, resolve_device(device or "cpu"))
        if tokenizer is None:
            raise InputError("InterpLM(model=...) needs tokenizer= too (the TextTokenizer the model was trained with)")
        if isinstance(tokenizer, str):
            from interp.data import get_tokenizer

            tokenizer = get_tokenizer(tokenizer)
        try:
            self._batch_size = int(batch_size)
        except (TypeError, ValueError):
            raise InputError(f"batch_size={batch_size!r}: InterpLM takes a whole number (no 'auto')") from None
        self.model = model.eval()
        self.tokenizer = tokenizer
        self.vocab_size = int(model.cfg.vocab_size)
        self._max_length = int(max_length or model.cfg.n_ctx)
        self.softmax_dtype = _dtype(softmax_dtype)
        self._max_gen_toks = int(max_gen_toks)
        self._device = next(model.parameters()).device
        self._unk = _unknown_id(tokenizer)

    # ------------------------------------------------------------------ what lm-eval asks of an LM
    @property
    def eot_token_id(self) -> int:
        return int(self.tokenizer.eos_id)

    @property
    def max_length(self) -> int:
        return self._max_length

    @property
    def max_gen_toks(self) -> int:
        return self._max_gen_toks

    @property
    def batch_size(self) -> int:
        return self._batch_size

    @property
    def device(self) -> torch.device:
        return self._device

    @property
    def tokenizer_name(self) -> str:
        return str(getattr(self.tokenizer, "name", type(self.tokenizer).__name__))

    def tok_encode(self, string: str, add_special_tokens: bool | None = None, **_kwargs: Any) -> list[int]:
        """The tokenizer's ids (our tokenizers add no special tokens); text it cannot encode (unknown tokens,
        ids outside the model's vocabulary, nothing at all) is an InputError, so that pair fails alone."""
        ids = self.tokenizer.encode(string)
        bad = [i for i in ids if i == self._unk or not 0 <= i < self.vocab_size]
        if bad or (string.strip() and not ids):
            what = (f"{len(bad)} of {len(ids)} tokens are unknown or outside the model's vocabulary "
                    f"({self.vocab_size})" if bad else "it encodes to no tokens")
            raise InputError(f"tokenizer {self.tokenizer_name!r} cannot encode the task text {string[:60]!r}: {what}",
                             fix="evaluate with the tokenizer the checkpoint was trained with, or one that encodes "
                                 "any text (a byte-level BPE)")
        return ids

    def tok_decode(self, tokens: list[int]) -> str:
        return self.tokenizer.decode(tokens)

    # ------------------------------------------------------------------ scoring
    @torch.no_grad()
    def _forward(self, rows: list[list[int]]) -> torch.Tensor:
        """Logits [batch, width, vocab] of right-padded rows (pad = EOS; causal, so padding changes nothing)."""
        width = max(len(r) for r in rows)
        batch = torch.full((len(rows), width), self.eot_token_id, dtype=torch.long)
        for i, row in enumerate(rows):
            batch[i, :len(row)] = torch.tensor(row, dtype=torch.long)
        return self.model(batch.to(self.device))

    def _loglikelihood_tokens(self, requests: list[tuple[Any, list[int], list[int]]], disable_tqdm: bool = False,
                              override_bs: int | None = None) -> list[tuple[float, bool]]:
        """(sum of log p(continuation | context), whether greedy decoding gives the continuation) per request,
        in HFLM's order and grouping (see the module docstring)."""
        self.check_fit(requests)   # all of them before any forward
        collator = Collator(requests, sort_fn=lambda r: (-len(r[1] + r[2]), tuple(r[1] + r[2])),
                            group_by="contexts", group_fn=lambda r: r[-2] + r[-1][:-1])
        results: list[tuple[float, bool]] = []
        for chunk in collator.get_batched(n=override_bs or self.batch_size):
            inputs = [(context + continuation)[-(self.max_length + 1):][:-1] for _, context, continuation in chunk]
            logits = self._forward(inputs)
            # every continuation position of the batch at once: one log-softmax, one argmax, one gather
            rows, cols, spans, targets = [], [], [], []
            for j, ((_, _, continuation), row) in enumerate(zip(chunk, inputs, strict=True)):
                n = len(continuation)
                spans.append((len(cols), n))
                rows.extend([j] * n)
                cols.extend(range(len(row) - n, len(row)))
                targets.extend(continuation)
            scores = F.log_softmax(logits[rows, cols].to(self.softmax_dtype), dim=-1)      # [positions, vocab]
            greedy = scores.argmax(dim=-1).tolist()
            picked = scores.gather(1, torch.tensor(targets, device=scores.device)[:, None])[:, 0]
            sums = torch.zeros(len(chunk), dtype=scores.dtype, device=scores.device).index_add_(
                0, torch.tensor(rows, device=scores.device), picked).tolist()
            for j, ((request, context, continuation), (start, n)) in enumerate(zip(chunk, spans, strict=True)):
                span = scores[start:start + n][None]
                for request_str, tokens, hit in collator.get_cache(req_str=request, cxt_toks=context,
                                                                  cont_toks=continuation, logits=span):
                    m = len(tokens)
                    if tokens is continuation:       # the request this row was built for
                        logprob = sums[j]
                    else:                            # another choice sharing context + continuation[:-1]
                        index = torch.tensor(tokens, dtype=torch.long, device=hit.device)
                        logprob = float(hit[0, -m:].gather(1, index[:, None]).sum())
                    answer = (logprob, greedy[start + n - m:start + n] == list(tokens))
                    results.append(answer)
                    if request_str is not None:
                        self.cache_hook.add_partial("loglikelihood", request_str, answer)
        return collator.get_original(results)

    def loglikelihood_rolling(self, requests: list[Any], disable_tqdm: bool = False) -> list[float]:
        """Total log-likelihood of each text over lm-eval's disjoint rolling windows of max_length tokens."""
        windows, counts = [], []
        for (text,) in [req.args for req in requests]:
            pairs = lm_utils.get_rolling_token_windows(token_list=self.tok_encode(text),
                                                       prefix_token=self.prefix_token_id,
                                                       max_seq_len=self.max_length, context_len=1)
            found = [(None, *lm_utils.make_disjoint_window(pair)) for pair in pairs]
            windows.extend(found)
            counts.append(len(found))
        scores = self._loglikelihood_tokens(windows, disable_tqdm=True)
        totals, start = [], 0
        for request, count in zip(requests, counts, strict=True):
            total = sum(s for s, _ in scores[start:start + count])
            start += count
            totals.append(total)
            self.cache_hook.add_partial("loglikelihood_rolling", request.args, total)
        return totals

    # ------------------------------------------------------------------ generation
    def generate_until(self, requests: list[Any], disable_tqdm: bool = False) -> list[str]:
        """Greedy continuations, cut at the first stop string (EOS is always one), as HFLM does."""
        eos = self.tok_decode([self.eot_token_id])
        collator = Collator([req.args for req in requests], sort_fn=lambda a: (-len(self.tok_encode(a[0])), a[0]),
                            group_by="gen_kwargs", group_fn=lambda a: a[1])
        out: list[str] = []
        for chunk in collator.get_batched(n=self.batch_size):
            contexts, all_kwargs = zip(*chunk, strict=True)
            kwargs = normalize_gen_kwargs(dict(all_kwargs[0]), self.max_gen_toks)
            if kwargs.get("do_sample"):
                raise InputError("generation_kwargs do_sample=true: the interp model class decodes greedily only")
            until = handle_stop_sequences(kwargs.pop("until", None), eos=eos)
            max_gen = int(kwargs.pop("max_gen_toks"))
            self.check_generation(max_gen)
            prompts = [self.tok_encode(c)[-(self.max_length - max_gen):] for c in contexts]
            texts = self._greedy(prompts, until, max_gen)
            for context, kw, text in zip(contexts, all_kwargs, texts, strict=True):
                self.cache_hook.add_partial("generate_until", (context, kw), text)
            out.extend(texts)
        return collator.get_original(out)

    def _greedy(self, prompts: list[list[int]], until: list[str], max_gen: int) -> list[str]:
        """Greedy decoding of each prompt; prompts of equal length run as one batch (no padding needed)."""
        texts = [""] * len(prompts)
        by_length: dict[int, list[int]] = defaultdict(list)
        for i, prompt in enumerate(prompts):
            by_length[len(prompt)].append(i)
        for members in by_length.values():
            rows = [list(prompts[i]) for i in members]
            start = len(rows[0])
            live = list(range(len(rows)))
            for _ in range(max_gen):
                logits = self._forward([rows[j] for j in live])
                for j, token in zip(live, logits[:, -1].argmax(dim=-1).tolist(), strict=True):
                    rows[j].append(int(token))
                live = [j for j in live if not self._stopped(rows[j][start:], until)]
                if not live:
                    break
            for j, i in enumerate(members):
                texts[i] = postprocess_generated_text(self.tok_decode(rows[j][start:]), stop=until,
                                                      think_end_token=None)
        return texts

    def _stopped(self, generated: list[int], until: list[str]) -> bool:
        if generated and generated[-1] == self.eot_token_id:
            return True
        text = self.tok_decode(generated)
        return any(stop and stop in text for stop in until)


def _load_checkpoint(pretrained: str | None, tokenizer: Any) -> tuple[torch.nn.Module, Any]:
    from interp.hf.resolve import resolve_model

    if not pretrained:
        raise InputError("the interp model class needs pretrained=<one of our checkpoint directories> "
                         "(or model= and tokenizer= objects)")
    ref = resolve_model(pretrained)
    if not ref.checkpoint:
        raise InputError(f"{pretrained}: a {ref.kind} model, not one of our checkpoints; evaluate it with lm-eval's "
                         "hf model class (interp eval does this for you)")
    return ref.load(), tokenizer if tokenizer is not None else ref.load_tokenizer()


@functools.cache
def checked_hflm() -> type:
    """lm-eval's HFLM with FitsContext's checks in front (its numbers unchanged): a request that does not fit
    the model's context is an InputError naming the task, before HFLM sees it."""
    from lm_eval.models.huggingface import HFLM

    class CheckedHFLM(FitsContext, HFLM):
        def _loglikelihood_tokens(self, requests: list[Any], disable_tqdm: bool = False,
                                  override_bs: int | None = None) -> list[tuple[float, bool]]:
            self.check_fit(requests)
            return super()._loglikelihood_tokens(requests, disable_tqdm=disable_tqdm, override_bs=override_bs)

        def generate_until(self, requests: list[Any], disable_tqdm: bool = False) -> list[str]:
            for req in requests if self.backend == "causal" else ():   # seq2seq: the prompt has the whole context
                self.check_generation(int(normalize_gen_kwargs(dict(req.args[1]), self.max_gen_toks)["max_gen_toks"]))
            return super().generate_until(requests, disable_tqdm=disable_tqdm)

    return CheckedHFLM


def hf_lm(loaded: Any, batch_size: int = 8, max_length: int | None = None) -> Any:
    """lm-eval's own HFLM around an already loaded pretrained model (interp.hf.LoadedModel): the class
    `lm_eval --model hf` uses (checked_hflm: with the context checks in front), given the model object so GGUF
    and registry models need no hub."""
    import copy

    from interp._util.devices import model_device

    tokenizer = loaded.tokenizer
    if getattr(tokenizer, "bos_token_id", None) is None and getattr(tokenizer, "eos_token_id", None) is None:
        name = getattr(getattr(loaded, "ref", None), "label", "this model")
        raise InputError(f"the tokenizer of {name} has neither a BOS nor an EOS token; lm-eval starts every "
                         "scored text from one (HFLM's prefix_token_id)",
                         field="tokenizer", fix="set eos_token (or bos_token) in its tokenizer_config.json")

    # a copy: HFLM sets the pad token on the tokenizer it gets, and interp.hf shares one between loads
    return checked_hflm()(pretrained=loaded.model, tokenizer=copy.deepcopy(tokenizer), batch_size=batch_size,
                          max_length=max_length, device=str(model_device(loaded.model)))
