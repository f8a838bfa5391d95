"""The lm-eval loglikelihood path of our checkpoints vs a bare batched forward over the same requests.

  (a) interp.evals.InterpLM._loglikelihood_tokens (lm-eval's Collator: length-sorted batches, the shared-context
      cache, left truncation, log-softmax of the continuation positions, greedy check) vs the bare minimum over
      the SAME batches: pad, one forward, log-softmax and gather of the continuation positions. Tokens/s over
      the tokens fed to the model; the issue wants ours / bare >= 0.9. The two must give the same log-likelihoods
      (checked, max |difference| reported).
  (b) the effect of length-sorted batching: the bare forward over batches in the tasks' own request order
      (each padded to its longest member) vs sorted longest first; padded positions and tokens/s.
Requests: the first documents of PIQA and HellaSwag (lm-eval's own request building from our task YAMLs), so
the length mix is a real multiple-choice one; a TaperedLM of the `tiny` preset shape with random weights over a
BPE trained on the wiki corpus (interp.data.get_tokenizer("bpe", vocab_size)), fp32. The variants are
interleaved (ABBA) repetition by repetition.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path

if __package__ in (None, ""):  # run as a file: make `benchmarks` and `interp` importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch
import torch.nn.functional as F

from benchmarks.common import Spread, begin, finish, interleave, paired_ratios, parse_args

NAME = "bench_evals"
TITLE = "lm-eval loglikelihood path vs a bare batched forward (bench_evals)"
SIZES = {
    "real": dict(preset="tiny", vocab_size=8192, docs={"piqa": 100, "hellaswag": 50}, batch=8, reps=6),
    "quick": dict(preset="micro", vocab_size=512, docs={"piqa": 6, "hellaswag": 3}, batch=4, reps=2),
}


def task_requests(docs: dict[str, int]) -> list[tuple[str, str]]:
    """(context, continuation) of every loglikelihood request of the first documents of each task, in
    lm-eval's own order (its request building from our task YAMLs)."""
    from interp.evals.data import DOCS_LIMIT
    from interp.evals.run import quiet_lm_eval
    from interp.evals.tasks import task_manager

    quiet_lm_eval()
    pairs: list[tuple[str, str]] = []
    for name, n in docs.items():
        task = task_manager({DOCS_LIMIT: n}).load([name])["tasks"][name]
        task.build_all_requests(limit=n, rank=0, world_size=1)
        pairs.extend(instance.args for instance in task.instances)
    return pairs


Row = tuple[int, list[int], list[int]]   # (request index, input ids, continuation ids)


def bare_batches(requests, max_length: int, batch: int, sort: bool) -> list[list[Row]]:
    """Each request's model input (HFLM's: context + continuation, left-truncated, last token dropped) and
    continuation, in batches: longest first, or in the tasks' request order."""
    rows = [(i, (ctx + cont)[-(max_length + 1):][:-1], cont) for i, (_, ctx, cont) in enumerate(requests)]
    if sort:
        rows.sort(key=lambda r: -len(r[1]))
    return [rows[i:i + batch] for i in range(0, len(rows), batch)]


@torch.no_grad()
def bare_loglikelihoods(model, batches: list[list[Row]], pad: int) -> list[float]:
    """The least work that scores the requests: pad, forward, log-softmax of the continuation positions, gather."""
    out = [0.0] * sum(len(b) for b in batches)
    for rows in batches:
        width = max(len(r) for _, r, _ in rows)
        x = torch.full((len(rows), width), pad, dtype=torch.long)
        for j, (_, r, _) in enumerate(rows):
            x[j, :len(r)] = torch.tensor(r)
        logits = model(x)
        for j, (i, r, cont) in enumerate(rows):
            scores = F.log_softmax(logits[j, len(r) - len(cont):len(r)], dim=-1)
            out[i] = float(scores.gather(1, torch.tensor(cont)[:, None]).sum())
    return out


def main(argv: Sequence[str] | None = None, command: str | None = None) -> str:
    from interp.data import get_tokenizer
    from interp.evals.lm import InterpLM
    from interp.model import TaperedLM
    from interp.training import TrainConfig

    args = parse_args(NAME, __doc__.splitlines()[0], argv)
    size, report = begin(args, SIZES, NAME, TITLE, argv, command)
    tokenizer = get_tokenizer("bpe", vocab_size=size["vocab_size"])
    cfg = TrainConfig.from_preset(size["preset"], threads=args.threads, progress=False, n_ctx=256)
    torch.manual_seed(0)
    model = TaperedLM(cfg.model_config(tokenizer.vocab_size)).eval()
    lm = InterpLM(model=model, tokenizer=tokenizer, batch_size=size["batch"])
    requests = [((c, x), *lm._encode_pair(c, x)) for c, x in task_requests(size["docs"])]
    by_length = bare_batches(requests, lm.max_length, size["batch"], sort=True)
    in_order = bare_batches(requests, lm.max_length, size["batch"], sort=False)
    ours = [s for s, _ in lm._loglikelihood_tokens(requests)]
    bare = bare_loglikelihoods(model, by_length, tokenizer.eos_id)
    diff = max(abs(a - b) for a, b in zip(ours, bare, strict=True))
    fed = sum(len(r) for b in by_length for _, r, _ in b)
    times = interleave({"InterpLM (lm-eval's Collator)": lambda: lm._loglikelihood_tokens(requests),
                        "bare forward, sorted batches": lambda: bare_loglikelihoods(model, by_length, tokenizer.eos_id),
                        "bare forward, request order": lambda: bare_loglikelihoods(model, in_order, tokenizer.eos_id)},
                       reps=size["reps"], warmup=1)
    ours_t, sorted_t, order_t = times.values()
    padded = {name: sum(len(b) * max(len(r) for _, r, _ in b) for b in batches) - fed
              for name, batches in (("sorted, longest first", by_length), ("request order", in_order))}
    ratio = Spread.of(paired_ratios(sorted_t, ours_t))          # (fed / ours) / (fed / bare)
    sort_gain = Spread.of(paired_ratios(order_t, sorted_t))
    report.note(f"{len(requests)} loglikelihood requests ({', '.join(f'{n} {t}' for t, n in size['docs'].items())} "
                f"documents), {fed:,} tokens fed; TaperedLM preset `{size['preset']}` shape, vocab "
                f"{tokenizer.vocab_size}, n_ctx {lm.max_length}, batch {size['batch']}, fp32; {size['reps']} "
                "interleaved repetitions after 1 warm-up; cells: median [IQR]. Largest |log-likelihood difference| "
                f"between InterpLM and the bare forward: {diff:.2e}.")
    report.section("(a) InterpLM loglikelihood vs a bare batched forward, same batches")
    report.table([{"variant": name, "tokens/s": Spread.of([fed / t for t in ts]).fmt(",.0f"),
                   "s per pass": Spread.of(ts).fmt(".2f")} for name, ts in times.items()])
    report.section("(b) Length-sorted batching")
    report.table([{"batches": name, "padded positions": f"{padded[name]:,}",
                   "padding / tokens fed": f"{padded[name] / fed:.1%}"} for name in padded])
    report.note(f"Sorted batches give {sort_gain.median:.2f}x [{sort_gain.q25:.2f}, {sort_gain.q75:.2f}] the tokens/s "
                "of batches in request order (bare forward both).")
    report.check("InterpLM / bare forward tokens/s", ratio.fmt(".3f"), ">= 0.9", ratio.median >= 0.9)
    report.check("InterpLM and bare forward agree", f"{diff:.1e}", "< 1e-3", diff < 1e-3)
    return finish(report, args.write)


if __name__ == "__main__":
    main()
