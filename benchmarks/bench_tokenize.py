"""`interp data tokenize` vs the `tokenizers` library's own batch encode, 1 vs 2 workers, and peak memory.

  (a) Tokens/s per core: our whole path (datatrove task, JSONL read + parse, sha256 of input and output, encode,
      uint16 token files, fsync, manifest) with 1 worker, and its per-shard writer alone (interp.data.shards
      .write_shard), vs `tokenizers`' encode_batch / encode_batch_fast on the same texts already in memory, one
      thread (TOKENIZERS_PARALLELISM=false), batches of 1,024 documents. The issue wants ours >= 0.8x.
  (b) 1 vs 2 worker processes, end to end, on 16 MiB of the same text as 4 files (4 shards).
  (c) Peak RSS of `interp data tokenize` (a fresh, niced process; 2 workers; the process tree sampled every
      0.1 s with psutil) on generated corpora of two sizes: flat in corpus size is the requirement. The corpora
      are written under /tmp and deleted afterwards. (c) uses a word-level tokenizer over the corpus's words
      (fast, so gigabytes finish in minutes on 2 shared cores): memory does not depend on the tokenizer's speed.
Texts: the offline Wikipedia lead sections (interp.data "wiki"), repeated in shuffled order; tokenizer of (a)
and (b): SmolLM2's (byte-level BPE, 49,152 ids, GPT-2/Llama style).

    python benchmarks/bench_tokenize.py              # (c) at 32 MB and 128 MB
    python benchmarks/bench_tokenize.py --full       # (c) at 0.25 GB and 1.5 GB (about 10 min on 2 free cores)
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from pathlib import Path

if __package__ in (None, ""):  # run as a file: make `benchmarks` and `interp` importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.common import MIB, REPO_ROOT, Spread, begin, finish, interleave, paired_ratios, parse_args
from interp._util.io import atomic_write, safe_open

NAME = "bench_tokenize"
TITLE = "Corpus tokenizing: ours vs tokenizers' encode_batch, 1 vs 2 workers, peak RSS (bench_tokenize)"
SIZES = {
    "real": dict(ratio_bytes=8 * MIB, reps=3, scale_bytes=16 * MIB, scale_reps=2, rss_bytes=(32 * MIB, 128 * MIB)),
    "quick": dict(ratio_bytes=MIB // 4, reps=2, scale_bytes=MIB // 4, scale_reps=1, rss_bytes=(MIB, 4 * MIB)),
}
FULL_RSS = (256 * MIB, 1536 * MIB)
FILE_BYTES = 64 * MIB   # (c): corpus files of at most this size
BATCH = 1_024


def write_corpus(folder: Path, n_bytes: int, n_files: int, seed: int = 0) -> list[str]:
    """JSONL files of about n_bytes in total, wiki documents in shuffled order repeated; returns the texts of the
    first file set only when small (for the baseline), else []."""
    from interp.data import load_documents

    docs = [d.text for d in load_documents("wiki")]
    rng = random.Random(seed)
    folder.mkdir(parents=True, exist_ok=True)
    per_file, texts, k = n_bytes // n_files, [], 0
    for i in range(n_files):
        with safe_open(folder / f"part-{i:05d}.jsonl", "w") as f:
            written = 0
            while written < per_file:
                if k % len(docs) == 0:
                    rng.shuffle(docs)
                line = json.dumps({"text": docs[k % len(docs)]}) + "\n"
                f.write(line)
                written += len(line.encode())
                if n_bytes <= 64 * MIB:
                    texts.append(docs[k % len(docs)])
                k += 1
    return texts


def word_tokenizer(folder: Path, size: int = 32_000) -> Path:
    """A word-level tokenizer.json over the corpus's most frequent words (for the memory runs)."""
    import collections

    from tokenizers import Tokenizer, models, pre_tokenizers

    from interp.data import load_documents

    counts = collections.Counter(w for d in load_documents("wiki") for w in d.text.split())
    vocab = {"<|endoftext|>": 0, "[UNK]": 1, **{w: i + 2 for i, (w, _) in enumerate(counts.most_common(size))}}
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    folder.mkdir(parents=True, exist_ok=True)
    atomic_write(folder, {"tokenizer.json": lambda p: tok.save(str(p))})
    return folder


@contextlib.contextmanager
def silent():
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        yield


def ours(corpus: Path, work: Path, workers: int) -> int:
    """One `interp data tokenize` run in this process into a fresh folder; returns the tokens written."""
    from interp.data import TokenizeConfig, tokenize_corpus

    out = work / f"out-{time.perf_counter_ns()}"
    try:
        with silent():
            manifest = tokenize_corpus(TokenizeConfig(sources=(str(corpus),), tokenizer="smollm2", out=str(out),
                                                      workers=workers, shard_size=1))
        return sum(manifest["n_tokens"].values())
    finally:
        shutil.rmtree(out, ignore_errors=True)


def shard_setup(corpus: Path, tok):
    """The one shard of `corpus` and its settings, as interp data tokenize plans them."""
    from interp.data import TokenizeConfig, discover, plan_shards
    from interp.data.pretokenize import shard_settings

    cfg = TokenizeConfig(sources=(str(corpus),), tokenizer="smollm2", shard_size=1 << 40)
    (spec,) = plan_shards(discover(cfg.sources, cfg.field)[0], cfg.shard_size)
    return spec, shard_settings(tok, cfg)


def shard_writer(work: Path, spec, settings: dict, tok) -> None:
    """interp.data.shards.write_shard alone: the per-shard loop, without the executor and the setup."""
    from interp.data.shards import write_shard

    folder = work / f"shard-{time.perf_counter_ns()}"
    try:
        write_shard(folder, spec, settings, tok)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def encode_all(backend, texts: Sequence[str], fast: bool) -> int:
    encode = backend.encode_batch_fast if fast else backend.encode_batch
    return sum(len(e.ids) for i in range(0, len(texts), BATCH)
               for e in encode(list(texts[i:i + BATCH]), add_special_tokens=False))


def peak_rss(argv: list[str]) -> dict:
    """Run argv (niced) and sample its process tree's RSS every 0.1 s: peak of the sum and of any one process."""
    import psutil

    proc = subprocess.Popen(["nice", "-n", "10", *argv], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, cwd=REPO_ROOT, env={**os.environ, "PYTHONPATH": str(REPO_ROOT)})
    peak = {"tree": 0, "process": 0}
    start = time.perf_counter()

    def sample() -> None:
        root = psutil.Process(proc.pid)
        while proc.poll() is None:
            with contextlib.suppress(psutil.Error):
                sizes = [p.memory_info().rss for p in [root, *root.children(recursive=True)]]
                peak["tree"], peak["process"] = max(peak["tree"], sum(sizes)), max(peak["process"], max(sizes))
            time.sleep(0.1)

    watcher = threading.Thread(target=sample, daemon=True)
    watcher.start()
    output, _ = proc.communicate()
    watcher.join()
    if proc.returncode:
        raise RuntimeError(f"{' '.join(argv)} failed ({proc.returncode}): {output[-2000:]}")
    return {**peak, "seconds": time.perf_counter() - start, "output": output}


def main(argv: Sequence[str] | None = None, command: str | None = None) -> str:
    from interp.data import get_tokenizer

    args = parse_args(NAME, __doc__.splitlines()[0], argv, lambda p: p.add_argument(
        "--full", action="store_true", help="(c) at 0.25 GB and 1.5 GB instead of 32 and 128 MB"))
    size, report = begin(args, SIZES, NAME, TITLE, argv, command)
    if args.full and not args.quick:
        size["rss_bytes"] = FULL_RSS
    os.environ["TOKENIZERS_PARALLELISM"] = "false"  # one core per encoder, ours and theirs
    tok = get_tokenizer("smollm2")
    work = Path(tempfile.mkdtemp(prefix="interp-bench-tokenize-", dir="/tmp"))
    try:
        one, four = work / "one", work / "four"
        texts = write_corpus(one, size["ratio_bytes"], 1)
        write_corpus(four, size["scale_bytes"], 4)
        n_tokens = encode_all(tok.backend, texts, fast=True)
        spec, settings = shard_setup(one, tok)
        chars = sum(map(len, texts))
        times = interleave({"ours": lambda: ours(one, work, 1),
                            "write_shard": lambda: shard_writer(work, spec, settings, tok),
                            "encode_batch": lambda: encode_all(tok.backend, texts, fast=False),
                            "encode_batch_fast": lambda: encode_all(tok.backend, texts, fast=True)},
                           reps=size["reps"], warmup=1)
        report.note(f"Corpus: {len(texts):,} wiki documents, {chars / 1e6:.1f} M characters, {n_tokens:,} SmolLM2 "
                    f"tokens (plus one separator per document in ours), as one JSONL file of "
                    f"{size['ratio_bytes'] / MIB:.0f} MiB; {size['reps']} interleaved repetitions after a warm-up; "
                    "cells: median [IQR]. The machine is shared with other jobs: absolute rates are low, the "
                    "ratios come from interleaved runs.")
        report.section("(a) Tokens/s on one core: our path vs tokenizers' batch encode on the same text")
        labels = {"ours": "interp data tokenize, 1 worker (end to end)",
                  "write_shard": "its shard writer alone (read, encode, write, hash)",
                  "encode_batch": "tokenizers encode_batch (texts in memory)",
                  "encode_batch_fast": "tokenizers encode_batch_fast (texts in memory)"}
        report.table([{"variant": labels[k], "tokens/s": Spread.of([n_tokens / t for t in ts]).fmt(",.0f"),
                       "s per pass": Spread.of(ts).fmt(".2f")} for k, ts in times.items()])
        ratio = Spread.of(paired_ratios(times["encode_batch"], times["ours"]))
        ratio_fast = Spread.of(paired_ratios(times["encode_batch_fast"], times["ours"]))
        ratio_shard = Spread.of(paired_ratios(times["encode_batch_fast"], times["write_shard"]))
        report.note(f"ours / encode_batch: {ratio.fmt('.3f')}; ours / encode_batch_fast: {ratio_fast.fmt('.3f')}; "
                    f"shard writer / encode_batch_fast: {ratio_shard.fmt('.3f')}.")

        scale_tokens: list[int] = []
        scale = interleave({"1 worker": lambda: scale_tokens.append(ours(four, work, 1)),
                            "2 workers": lambda: scale_tokens.append(ours(four, work, 2))},
                           reps=size["scale_reps"], warmup=0)
        speedup = Spread.of(paired_ratios(scale["1 worker"], scale["2 workers"]))
        report.section(f"(b) 1 vs 2 worker processes ({size['scale_bytes'] / MIB:.0f} MiB of the same text as 4 "
                       "files = 4 shards; end to end, pool start included)")
        report.table([{"workers": k, "tokens/s": Spread.of([scale_tokens[0] / t for t in ts]).fmt(",.0f"),
                       "s per pass": Spread.of(ts).fmt(".2f")} for k, ts in scale.items()])
        load = os.getloadavg()[0]
        report.note(f"2 workers / 1 worker: {speedup.fmt('.2f')}x (1-minute load {load:.1f} on {os.cpu_count()} "
                    "cores when it finished; other jobs share this machine).")

        rows, peaks = [], []
        words = word_tokenizer(work / "wordtok")
        for n_bytes in size["rss_bytes"]:
            corpus, out = work / f"rss-{n_bytes}", work / f"rss-out-{n_bytes}"
            write_corpus(corpus, n_bytes, max(2, -(-n_bytes // FILE_BYTES)))
            run = peak_rss([sys.executable, "-m", "interp.cli", "data", "tokenize", str(corpus), "--tokenizer",
                            str(words), "--out", str(out), "--workers", "2", "--shard-size", "1"])
            manifest = json.loads((out / "manifest.json").read_text())
            tokens = sum(manifest["n_tokens"].values())
            shutil.rmtree(corpus, ignore_errors=True)
            shutil.rmtree(out, ignore_errors=True)
            peaks.append(run["tree"])
            rows.append({"corpus": f"{n_bytes / MIB:,.0f} MiB JSONL, {manifest['n_shards']} files",
                         "tokens": f"{tokens:,}", "wall s": f"{run['seconds']:.0f}",
                         "tokens/s": f"{tokens / run['seconds']:,.0f}",
                         "peak RSS, process tree": f"{run['tree'] / MIB:.0f} MiB",
                         "peak RSS, largest process": f"{run['process'] / MIB:.0f} MiB"})
        report.section("(c) Peak memory against corpus size (`interp data tokenize --workers 2`, niced)")
        report.table(rows)
        report.note("One shard per file of at most 64 MiB. Word-level tokenizer of 32,002 ids over the wiki words; "
                    "the process tree is the main process, datatrove's manager and forkserver and the 2 workers. "
                    "Corpora written under /tmp and deleted.")
        growth = peaks[1] / peaks[0]
        report.check("ours / encode_batch tokens/s per core", ratio.fmt(".3f"), ">= 0.8", ratio.median >= 0.8)
        report.check("ours / encode_batch_fast tokens/s per core", ratio_fast.fmt(".3f"), "reported", None)
        report.check("2 workers / 1 worker", speedup.fmt(".2f"), "> 1 (2 shared cores)", speedup.median > 1)
        report.check(f"peak RSS at {size['rss_bytes'][1] / size['rss_bytes'][0]:.0f}x the corpus",
                     f"{growth:.2f}x", "<= 1.2x (flat)", growth <= 1.2)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return finish(report, args.write)


if __name__ == "__main__":
    main()
