"""tests/launch.py: a torchrun launch that hangs fails with each process's Python stack, and leaves no process."""

from __future__ import annotations

import os

import pytest

from tests.launch import descendants, torchrun

HANGS = """
import time
import torch.distributed as dist
dist.init_process_group("gloo")
if dist.get_rank() == 1:
    time.sleep(600)  # rank 1 never reaches the barrier
dist.barrier()
"""


@pytest.mark.integration  # one torchrun launch (~5 s) and a 10 s timeout
def test_hung_launch_reports_where_each_rank_waits(tmp_path):
    script = tmp_path / "hangs.py"
    script.write_text(HANGS)
    with pytest.raises(AssertionError) as failed:
        torchrun([str(script)], timeout=10)
    report = str(failed.value)
    assert "torchrun outlived 10 s" in report
    assert f'File "{script}", line 6' in report   # rank 1 in its sleep
    assert f'File "{script}", line 7' in report   # rank 0 in the barrier
    assert not [p for p in descendants(os.getpid()) if "hangs.py" in _cmdline(p)]


def _cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().decode(errors="replace")
    except OSError:
        return ""
