"""Text from a Hugging Face dataset: `--text hf:DATASET[:CONFIG[:SPLIT[:COLUMN]]]`, or a named text such as
`wikitext-2` (the paper's choice: Salesforce/wikitext, wikitext-2-raw-v1, test, column text).

The split is streamed (datasets' streaming mode) and read until `max_chars`, so a large split costs only what is
used; the rows are joined as the dataset's raw file holds them (a row without a final newline gets one). The text
read at the dataset's commit is cached (cache_dir("hub_texts")): reruns, an unreachable hub and offline mode
(HF_HUB_OFFLINE=1) read it there; one that was never read fails at once with one line naming the offline texts
to use instead. The probes record the text's label and sha256 as for any other text.
"""

from __future__ import annotations

import contextlib
import hashlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from interp._util.errors import InputError, one_line
from interp._util.io import atomic_write
from interp._util.net import bounded, online_or_cached
from interp._util.offline import is_offline
from interp._util.paths import cache_dir

HF_PREFIX = "hf:"
# named texts: what a paper means by the name
NAMED_TEXTS = {
    "wikitext-2": "hf:Salesforce/wikitext:wikitext-2-raw-v1:test:text",
    "wikitext-103": "hf:Salesforce/wikitext:wikitext-103-raw-v1:test:text",
}
DEFAULT_MAX_CHARS = 20_000_000   # ~5M tokens: far beyond any probe's plan, short of a whole pretraining split
OFFLINE_TEXTS = "wiki (held-out Wikipedia leads, the offline stand-in for WikiText), shakespeare, english, or a file"


@dataclass(frozen=True)
class HubText:
    """A dataset split's text column."""

    dataset: str
    config: str | None = None
    split: str = "test"
    column: str = "text"

    @property
    def label(self) -> str:
        return ":".join([HF_PREFIX.rstrip(":"), self.dataset, self.config or "", self.split, self.column])


def is_hub_text(spec: object) -> bool:
    return isinstance(spec, str) and (spec.startswith(HF_PREFIX) or spec in NAMED_TEXTS)


def parse_hub_text(spec: str) -> HubText:
    """hf:DATASET[:CONFIG[:SPLIT[:COLUMN]]] (or a NAMED_TEXTS name) -> HubText; InputError naming --text."""
    full = NAMED_TEXTS.get(spec, spec)
    parts = full[len(HF_PREFIX):].split(":")
    if not parts[0] or len(parts) > 4:
        raise InputError(f"{spec!r} is not hf:DATASET[:CONFIG[:SPLIT[:COLUMN]]]", field="--text",
                         fix="e.g. hf:Salesforce/wikitext:wikitext-2-raw-v1:test:text, or wikitext-2")
    dataset, config, split, column = (parts + [None] * 4)[:4]
    return HubText(dataset, config or None, split or "test", column or "text")


def hub_text(spec: str, max_chars: int = DEFAULT_MAX_CHARS) -> tuple[str, str]:
    """(the split's text, its label) for a hub text spec; InputError (one line) when it cannot be read.

    The dataset's commit is asked once (one request, no retries); the text read at that commit is kept under
    cache_dir("hub_texts"), so a rerun, an unreachable hub (said on stderr) and offline mode read it from there and
    never reach datasets' retries."""
    from huggingface_hub import HfApi
    from huggingface_hub.errors import HfHubHTTPError

    source = parse_hub_text(spec)
    folder = cache_dir("hub_texts", hashlib.sha256(f"{source.label}\n{max_chars}".encode()).hexdigest()[:16])
    if is_offline():
        text = _newest_text(folder)
        if text is None:
            raise _not_cached(spec, source, "HF_HUB_OFFLINE / --offline is set")
        return text, source.label

    def ask() -> str:   # the commit within INTERP_HUB_TIMEOUT, then the text read at it (cached once read)
        commit = bounded(lambda: HfApi().dataset_info(source.dataset).sha, f"the dataset info of {source.dataset}")
        if not isinstance(commit, str) or not commit.isalnum() or len(commit) > 64:   # it names a cache file
            raise InputError(f"the hub answered commit {str(commit)[:80]!r} for dataset {source.dataset!r}",
                             field="--text", fix="check HF_ENDPOINT")
        cached = folder / f"{commit}.txt"
        if cached.is_file():
            return cached.read_text(encoding="utf-8")
        text = _stream(spec, source, commit, max_chars)
        atomic_write(folder, {cached.name: lambda p: p.write_text(text, encoding="utf-8")})
        return text

    try:
        text = online_or_cached(ask, lambda: _newest_text(folder), source.label,
                                lambda err: _not_cached(spec, source, f"the hub is unreachable ({type(err).__name__})"),
                                lambda err: isinstance(err, HfHubHTTPError))
    except HfHubHTTPError as err:
        status = getattr(getattr(err, "response", None), "status_code", None)
        raise InputError(f"{spec!r} ({source.label}): the hub answered {status or 'an error'} for dataset "
                         f"{source.dataset!r} ({one_line(err)[:160]})", field="--text",
                         fix=f"check the dataset id (a gated one needs `hf auth login`); or use an offline text: "
                             f"{OFFLINE_TEXTS}") from None
    return text, source.label


def _newest_text(folder: Path) -> str | None:
    """The text most recently cached in `folder` (any commit), or None."""
    found = sorted(folder.glob("*.txt"), key=lambda f: f.stat().st_mtime)
    return found[-1].read_text(encoding="utf-8") if found else None


def _not_cached(spec: str, source: HubText, why: str) -> InputError:
    return InputError(f"{spec!r} ({source.label}) is not cached and {why}", field="--text",
                      fix=f"run once online, or use an offline text: {OFFLINE_TEXTS}")


def _stream(spec: str, source: HubText, commit: str, max_chars: int) -> str:
    """The split's column at `commit`, streamed through datasets until max_chars.

    Why the column is checked against the split's declared features before a row is read, and the reader closed on
    every path: pyarrow's dataset scanner reads a parquet split with reads in flight on its own threads; a scan left
    unfinished just before the process exits (as after the one-line error of a missing column) still has them when
    the interpreter shuts down, and the process aborts (SIGABRT, status 134: apache/arrow#45214). Checked first, a
    wrong column starts no scan; closed at once, a scan stopped at max_chars settles while the command goes on."""
    import datasets

    try:
        dataset = datasets.load_dataset(source.dataset, source.config, split=source.split, streaming=True,
                                        revision=commit)
        if dataset.features is not None:   # declared (a parquet split's schema): checked before any row is read
            _check_column(source, dataset.features)
            dataset = dataset.select_columns([source.column])
        with contextlib.closing(iter(dataset)) as rows:
            return _read_rows(spec, source, rows, max_chars)
    except InputError:
        raise
    except Exception as err:  # noqa: BLE001 - datasets raises many kinds (DatasetNotFoundError, ValueError, connection errors)
        raise InputError(f"{spec!r} ({source.label}) could not be read: {one_line(err)[:240]}", field="--text",
                         fix=f"check the dataset, config, split and column; or use an offline text: "
                             f"{OFFLINE_TEXTS}") from None


def _check_column(source: HubText, features: Any) -> None:
    """The column in a split's declared features (datasets.Features), holding strings; InputError naming --text."""
    from datasets import Value

    if source.column not in features:
        raise _no_column(source, features)
    kind = features[source.column]
    if not (isinstance(kind, Value) and kind.dtype in ("string", "large_string")):
        raise _not_text(source, kind.dtype if isinstance(kind, Value) else type(kind).__name__)


def _no_column(source: HubText, columns: Iterable[str]) -> InputError:
    return InputError(f"dataset {source.dataset!r} has no column {source.column!r} (it has "
                      f"{', '.join(sorted(columns))})", field="--text",
                      fix=f"name the column: hf:{source.dataset}:{source.config or ''}:{source.split}:COLUMN")


def _not_text(source: HubText, holds: str) -> InputError:
    return InputError(f"column {source.column!r} of {source.dataset!r} holds {holds}, not text", field="--text",
                      fix="name a string column")


def _read_rows(spec: str, source: HubText, rows: Iterator[dict], max_chars: int) -> str:
    """The text of the column in `rows` (one line per row) up to max_chars; InputError naming --text for a missing
    column or a value that is not text (a split without declared features), or no text at all."""
    pieces, size = [], 0
    for row in rows:
        if source.column not in row:
            raise _no_column(source, row)
        value = row[source.column]
        if not isinstance(value, str):
            raise _not_text(source, type(value).__name__)
        pieces.append(value if value.endswith("\n") else value + "\n")
        size += len(pieces[-1])
        if size >= max_chars:
            break
    text = "".join(pieces)
    if not text.strip():
        raise InputError(f"{spec!r} ({source.label}) holds no text", field="--text", fix="name another split or column")
    return text
