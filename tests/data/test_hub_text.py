"""`--text hf:...` never leaves a parquet scan unfinished at exit (issue #47 item 12): pyarrow's scanner has reads in
flight on its own threads, and a scan abandoned just before the process exits (after the one-line error of a missing
column) aborted it about 1 run in 8 (SIGABRT, status 134). A wrong column or type is refused from the split's
declared features before any row is read, and a scan stopped early is closed at once. Against the loopback hub
(tests/hub_server.py), in process: datasets' parquet reader is wrapped to record when a scan starts and when it is
finalised. The exit itself is tests/bad_inputs/test_bad_inputs_hostile_models.py's (the real CLI, many runs)."""

from __future__ import annotations

import pytest

from interp._util.errors import InputError
from tests.hub_server import LoopbackHub, patch_clients, tiny_dataset_folder

TEXTS = [f"line {i}: w1 w2 w3" for i in range(40)]
SPLIT = "wikitext-2-raw-v1:test"


@pytest.fixture
def scans(tmp_path, monkeypatch):
    """The loopback hub serving org/tiny (column text: TEXTS) and org/ints (column text: integers), the clients
    pointed at it, and the list of scan events: "start" when a parquet reader starts, "closed" when it is finalised."""
    pytest.importorskip("datasets")
    import pyarrow as pa
    import pyarrow.parquet as pq
    from datasets.packaged_modules.parquet.parquet import Parquet

    monkeypatch.setenv("INTERP_CACHE_DIR", str(tmp_path / "cache"))
    events: list[str] = []
    original = Parquet._generate_tables

    def tracked(self, *args, **kwargs):
        events.append("start")
        try:
            yield from original(self, *args, **kwargs)
        finally:
            events.append("closed")

    monkeypatch.setattr(Parquet, "_generate_tables", tracked)
    ints = tiny_dataset_folder(tmp_path / "ints", texts=TEXTS)
    for file in ints.rglob("*.parquet"):
        pq.write_table(pa.table({"text": pa.array(range(len(TEXTS)))}), file)
    with LoopbackHub(tmp_path / "hub") as hub:
        hub.add_dataset("org/tiny", {"main": tiny_dataset_folder(tmp_path / "tiny", texts=TEXTS)})
        hub.add_dataset("org/ints", {"main": ints})
        patch_clients(hub, tmp_path / "hf", monkeypatch)
        yield events


def test_a_missing_column_is_refused_before_any_row_is_read(scans):
    from interp.data.hub_text import hub_text

    with pytest.raises(InputError, match=r"--text: dataset 'org/tiny' has no column 'nosuch' \(it has text\) "
                                         rf"\(name the column: hf:org/tiny:{SPLIT}:COLUMN\)"):
        hub_text(f"hf:org/tiny:{SPLIT}:nosuch")
    assert scans == [], "a scan was started, and left to end at exit"


def test_a_column_that_is_not_text_is_refused_before_any_row_is_read(scans):
    from interp.data.hub_text import hub_text

    with pytest.raises(InputError, match=r"--text: column 'text' of 'org/ints' holds int64, not text"):
        hub_text(f"hf:org/ints:{SPLIT}:text")
    assert scans == []


def test_reading_up_to_max_chars_closes_the_scan_before_returning(scans):
    """The early stop of a good column: the split holds more than max_chars."""
    from interp.data.hub_text import hub_text

    text, label = hub_text(f"hf:org/tiny:{SPLIT}:text", max_chars=30)
    assert text == "".join(t + "\n" for t in TEXTS[:2]) and label == f"hf:org/tiny:{SPLIT}:text"
    assert scans == ["start", "closed"], "the stopped scan was not finalised before hub_text returned"
