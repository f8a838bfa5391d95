"""`interp data train-tokenizer`: a byte-level BPE learned from a streamed sample of a large corpus.

The sample: training-split documents only (validation never shapes the tokenizer, as for interp.data's own
BPE), read with the same readers as `interp data tokenize` (interp.data.sources), taking from every input a
budget of characters in proportion to its size on disk (``sample_bytes * size / total``), the first documents
of each input until its budget is spent. Deterministic, spread over the whole corpus, and never held in memory:
the texts stream into the `tokenizers` BPE trainer (interp.data.tokenizers.train_bpe: the same settings as the
cached BPE), whose memory grows with the distinct words seen, not with the sample.

The folder written (tokenizer.json, tokenizer_config.json, meta.json) is an HF tokenizer folder:
`--tokenizer DIR` (interp.data.get_tokenizer) and transformers' AutoTokenizer.from_pretrained(DIR) load it.
"""

from __future__ import annotations

import contextlib
import json
import re
import sys
import time
from collections.abc import Iterator
from pathlib import Path

from interp._util.errors import InputError
from interp._util.io import TEMP_SUFFIX, atomic_write, check_output, exclusive_lock, read_json, remove_stale_temps
from interp.data.config import TrainTokenizerConfig
from interp.data.documents import is_validation
from interp.data.integrity import created_with
from interp.data.sources import CorruptInput, InputReport, discover, missing_fields, read_input
from interp.data.tokenizers import (
    BPE_TRAINER,
    EOS_TOKEN,
    TOKENIZER_CONFIG_FILE,
    TOKENIZER_FILE,
    TOKENIZER_META_FILE,
    get_tokenizer,
    train_bpe,
)


class _Sample:
    """The sampled texts as train_bpe's Sequence: it only iterates them (and asks len() for a progress bar,
    which is off); counts what it yielded."""

    def __init__(self, cfg: TrainTokenizerConfig):
        self.cfg = cfg
        self.inputs, self.notes = discover(cfg.sources, cfg.field, exclude=Path(cfg.out).expanduser())
        self.documents = self.characters = 0
        self.skipped: list[dict] = []
        self.left_out = {"empty": 0, "missing_field": 0, "missing_id": 0}   # records read but not taken, and why

    def __len__(self) -> int:
        return 0  # unknown before the sample is read

    def __iter__(self) -> Iterator[str]:
        cfg, total = self.cfg, sum(i.size for i in self.inputs) or 1
        for inp in self.inputs:
            budget = cfg.sample_bytes * inp.size // total
            taken = 0
            report = InputReport()
            reader = read_input(inp, cfg.field, cfg.id_field, report, lambda sha: None)
            try:
                for doc_id, text in reader:
                    if taken >= budget:
                        break
                    if is_validation(doc_id, cfg.val_fraction):
                        continue
                    text = text[:budget - taken]
                    taken += len(text)
                    self.documents += 1
                    yield text
            except CorruptInput as err:
                self.skipped.append({"input": inp.path, "error": str(err)})
                print(f"interp data train-tokenizer: skipped unreadable input {inp.path}: {err}", file=sys.stderr)
            finally:
                with contextlib.suppress(Exception):
                    reader.close()
            self.characters += taken
            for key in self.left_out:
                self.left_out[key] += getattr(report, key)


def train_tokenizer(cfg: TrainTokenizerConfig) -> Path:
    """Train the BPE and write its folder ``cfg.out`` atomically (tokenizer.json last); return the folder.

    A folder holding the result of the same request is kept as it is (a rerun is a no-op); any other existing,
    non-empty folder is refused."""
    cfg.validate()
    out = Path(cfg.out).expanduser()
    request = {"sources": [str(Path(s).expanduser().resolve()) for s in cfg.sources], "field": cfg.field,
               "id_field": cfg.id_field, "val_fraction": cfg.val_fraction, "vocab_size": cfg.vocab_size,
               "sample_bytes": cfg.sample_bytes, "trainer": BPE_TRAINER}
    check_output(out, "--out", folder=True)
    if _done(out, request):
        return out
    sample = _Sample(cfg)
    for note in sample.notes:
        print(f"[data] {note}", file=sys.stderr)
    with exclusive_lock(out / LOCK, f"tokenizer folder {out}"), _removed(out / LOCK):
        if _done(out, request):  # another run finished it while this one read the sources
            return out
        # what a run stopped while moving its files in left (tokenizer.json, moved last, is not there)
        left = [*remove_stale_temps(out, OUR_FILES), *(out / name for name in OUR_FILES if (out / name).is_file())]
        for path in left:
            path.unlink(missing_ok=True)
        if left:
            print(f"[data] {out}: removed what a stopped run left ({', '.join(p.name for p in left)}); "
                  "training again", file=sys.stderr)
        start = time.perf_counter()
        backend = train_bpe(sample, cfg.vocab_size)
        if not sample.documents:
            left_out = missing_fields(sample.left_out, cfg.field, cfg.id_field)
            raise InputError(f"no training-split document was read from the sources ({left_out}, "
                             f"{sample.left_out['empty']} empty, {len(sample.skipped)} input(s) unreadable)",
                             path=cfg.sources[0], field="--id-field" if sample.left_out["missing_id"] else "--field",
                             fix="check --field (and --id-field) against the inputs, or add text")
        meta = {"request": request, "sampled": {"documents": sample.documents, "characters": sample.characters,
                                                "inputs": len(sample.inputs), "skipped_inputs": sample.skipped},
                "vocab_size": backend.get_vocab_size(with_added_tokens=True), "created_with": created_with()}
        config = {"tokenizer_class": "PreTrainedTokenizerFast", "eos_token": EOS_TOKEN, "bos_token": EOS_TOKEN,
                  "unk_token": None, "model_max_length": 1 << 30}
        text = backend.to_str()
        atomic_write(out, {TOKENIZER_META_FILE: _writer(json.dumps(meta, indent=2)),
                           TOKENIZER_CONFIG_FILE: _writer(json.dumps(config, indent=2)),
                           TOKENIZER_FILE: _writer(text)})  # tokenizer.json last: its presence marks it done
    spec = str(out) if "/" in str(out) else f"./{out}"  # `--out bpe` is the folder, not the named tokenizer 'bpe'
    tok = get_tokenizer(spec)
    print(f"[data] wrote {out}: byte-level BPE of {tok.vocab_size:,} tokens from {sample.characters:,} characters "
          f"of {sample.documents:,} training documents in {time.perf_counter() - start:.1f} s "
          f"(use --tokenizer {spec})")
    return out


LOCK = ".lock"
OUR_FILES = (TOKENIZER_META_FILE, TOKENIZER_CONFIG_FILE, TOKENIZER_FILE)   # in the order they are moved in


def _ours(name: str) -> bool:
    """An entry this command writes in --out: its files, its lock, a stopped run's temporaries of them."""
    if name in OUR_FILES or name == LOCK:
        return True
    return any(re.fullmatch(rf"\.{re.escape(f)}\.[a-z0-9_]{{8}}{re.escape(TEMP_SUFFIX)}", name) for f in OUR_FILES)


def _done(out: Path, request: dict) -> bool:
    """True when --out already holds the tokenizer of this request (a rerun is a no-op); InputError when it holds
    anything else than this command's files: another tokenizer, or files of its own."""
    if not out.is_dir():
        return False
    if (out / TOKENIZER_FILE).is_file():
        meta = read_json(out / TOKENIZER_META_FILE, missing_ok=True, torn_ok=True)
        if isinstance(meta, dict) and meta.get("request") == request:
            print(f"[data] {out} already holds this tokenizer; nothing to do")
            return True
        raise InputError("is not empty: it holds another tokenizer", path=out, field="--out",
                         fix="choose a new --out, or delete the folder to train again")
    foreign = sorted(p.name for p in out.iterdir() if not _ours(p.name))
    if foreign:
        raise InputError(f"is not empty (it holds {foreign[0]!r})", path=out, field="--out",
                         fix="choose a new --out, or delete the folder to train again")
    return False


@contextlib.contextmanager
def _removed(path: Path) -> Iterator[None]:
    """The lock file goes with the lock: the folder holds only the tokenizer once done."""
    try:
        yield
    finally:
        path.unlink(missing_ok=True)


def _writer(text: str):
    return lambda p: p.write_text(text, encoding="utf-8")
