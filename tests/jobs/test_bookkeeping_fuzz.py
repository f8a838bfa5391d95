"""Issue #47 item 9: property-based fuzzing of the readers of the jobs layer's own bookkeeping, in the house style of
tests/bad_inputs/test_formats_fuzz.py (whose mutations it reuses): OUT.parts/.plan.json (read_plan, and the whole of
`interp jobs status` through job_status), the tasks' journals (read_journal) and a part's marker (part_marker,
scan_parts). A valid file is mutated (keys deleted, odd values, huge numbers, truncation, byte flips) and each reader
must return a valid value or raise one InputError: never another exception, never a hang (a task count is
bounded, and status looks only at the locks of tasks that take a target)."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
from hypothesis import given
from hypothesis import strategies as st

from interp._util.errors import InputError
from interp.jobs.parts import (JOURNAL_DIR, JOURNAL_STATES, MAX_TASKS, PART_MARKER, PLAN_FILE, parts_dir, part_marker,
                               read_journal, read_plan, scan_parts)
from interp.jobs.status import format_status, job_status
from tests.bad_inputs.test_formats_fuzz import SETTINGS, Blob, _mutate_bytes, _mutate_json

PLAN = {"kind": "probe batch", "targets": ["runs/a/step_1", "runs/a/step_2", "runs/b"], "tasks": 2,
        "executor": "slurm", "written": 1_700_000_000.5, "slurm_jobs": ["12_0", "12_1"]}
RECORDS = [{"target": "runs/a/step_1", "state": "running", "error": "", "time": 1.0, "pid": 7},
           {"target": "runs/a/step_1", "state": "failed", "error": "CheckpointError: x\ny", "time": 2.0, "pid": 7},
           {"target": "runs/b", "state": "done", "error": "", "time": 3, "pid": 8}]
MARKER = {"kind": "probe batch", "key": "0123456789abcdef-0123456789abcdef"}


def _bytes(doc, data: st.DataObject) -> bytes:
    """doc mutated as JSON, or its text mutated as bytes."""
    if data.draw(st.booleans(), label="as bytes"):
        return _mutate_bytes(json.dumps(doc).encode(), data)
    return json.dumps(_mutate_json(doc, data)).encode()


def _out(folder: str) -> Path:
    out = Path(folder) / "t.parquet"
    (parts_dir(out) / JOURNAL_DIR).mkdir(parents=True)
    return out


@SETTINGS
@given(data=st.data())
def test_plan_reader(data):
    raw = Blob(_bytes(PLAN, data))
    with tempfile.TemporaryDirectory() as folder:
        out = _out(folder)
        (parts_dir(out) / PLAN_FILE).write_bytes(raw)
        try:
            plan = read_plan(out)
            _, states = job_status(out)
        except InputError:
            return
        assert 1 <= plan["tasks"] <= MAX_TASKS and all(isinstance(t, str) for t in plan["targets"])
        assert len(states) == len(plan["targets"])
        format_status(out, plan, states)


@SETTINGS
@given(data=st.data())
def test_journal_reader(data):
    lines = [Blob(_bytes(r, data)) for r in RECORDS]
    with tempfile.TemporaryDirectory() as folder:
        out = _out(folder)
        (parts_dir(out) / JOURNAL_DIR / "0.jsonl").write_bytes(b"\n".join(lines) + b"\n")
        try:
            latest = read_journal(out)
        except InputError:
            return
        assert all(r["state"] in JOURNAL_STATES and r["target"] == t for t, r in latest.items())


@SETTINGS
@given(data=st.data())
def test_part_marker_reader(data):
    raw = Blob(_bytes(MARKER, data))
    with tempfile.TemporaryDirectory() as folder:
        out = _out(folder)
        part = parts_dir(out) / f"{MARKER['key']}.parquet"
        table = pa.Table.from_pandas(pd.DataFrame({"status": ["ok"]}), preserve_index=False)
        pq.write_table(table.replace_schema_metadata({**table.schema.metadata, PART_MARKER.encode(): raw}), part)
        try:
            marker = part_marker(part)
            found, strays = scan_parts(out)
        except InputError:
            return
        assert isinstance(marker["kind"], str) and isinstance(marker["key"], str)
        assert (found == [part]) == (marker["key"] == part.stem) and len(found) + len(strays) == 1
