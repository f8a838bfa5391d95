"""Issue #33, outputs group: tables read without checking and outputs checked too late. `taper derive` on a probe
table whose layers are strings, have a gap or a negative, or whose means are not numbers (item 17); a checkpoint
whose weights are all NaN (18); --out / --csv pointing at a folder, a link, a read-only file or under a file, and
an OUT.parts that is a file or a link (24, 27); RANK / WORLD_SIZE / LOCAL_RANK set wrong by hand (28); export
--overwrite over planted links, two exports into one new folder and a full disk during an export (2, 5, 19);
eval and batch sharing one OUT.parts (4); the GGUF cache's temporary at a predictable name.
Each through the real CLI (tests/badinput.py): one line naming the file or flag, before any work."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pandas as pd
import pytest

from tests.badinput import Case, cases_of, check_case
from tests.bad_inputs.test_bad_inputs_models import BATCH, CACHE, PROBE, TABLE, _checkpoint

DERIVE = ["taper", "derive", "--from", "t.parquet", "--measure", "rho_mlp", "--layers", "6", "--d-ff", "1024",
          "--monotone", "--out", "w.json"]
PROFILE = [0.9, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.85, 0.05, 0.15]   # 12 layers, not monotone as stored


def _table(layers) -> callable:
    def setup(tmp: Path) -> None:
        pd.DataFrame({"model": "m", "metric": "rho_mlp", "layer": layers,
                      "mean": PROFILE[:len(layers)]}).to_parquet(tmp / "t.parquet")
    return setup


def test_string_layers_sort_numerically(tmp_path):
    """A parquet table whose layers are strings gives the widths of the same table with integer layers (numeric
    order, not 0, 1, 10, 2): the old code sorted the strings."""
    from interp.cli import main
    from interp.widths import DeriveConfig, derive

    _table([str(i) for i in range(12)])(tmp_path)
    (tmp_path / "numeric").mkdir()
    _table(list(range(12)))(tmp_path / "numeric")
    assert main([a.replace("t.parquet", str(tmp_path / "t.parquet")).replace("w.json", str(tmp_path / "w.json"))
                 for a in DERIVE]) == 0
    want = derive(DeriveConfig(table=str(tmp_path / "numeric" / "t.parquet"), measure="rho_mlp", layers=6,
                               d_ff=1024, monotone=True))
    assert json.loads((tmp_path / "w.json").read_text())["widths"] == want["widths"]


Case("outputs-taper-layer-gap", item="33.17", setup=_table([0, 1, 2, 4, 5, 6]), argv=DERIVE,
     message=r"layer: the 'rho_mlp' rows have layers \[0, 1, 2, 4, 5, 6\], not 0 \.\. 5")
Case("outputs-taper-negative-layer", item="33.17", setup=_table([-1, 0, 1, 2, 3, 4]), argv=DERIVE,
     message=r"layer: the 'rho_mlp' rows have layers \[-1, 0, 1, 2, 3, 4\]")
Case("outputs-taper-fractional-layer", item="33.17", setup=_table([0, 1, 2.5, 3, 4, 5]), argv=DERIVE,
     message=r"layer '2.5' is not an integer layer index")


def _text_means(tmp: Path) -> None:
    pd.DataFrame({"model": "m", "metric": "rho_mlp", "layer": range(6),
                  "mean": ["0.9", "0.1", "n/a", "0.3", "0.4", "0.5"]}).to_parquet(tmp / "t.parquet")


Case("outputs-taper-mean-not-a-number", item="33.17", setup=_text_means, argv=DERIVE,
     message=r"taper: t.parquet: mean: mean 'n/a' is not a number")


def _nan_weights(tmp: Path) -> None:
    """good1 with every weight NaN (a diverged run saved as it was)."""
    import torch
    from safetensors.torch import load_file, save_file

    path = _checkpoint(tmp) / "model.safetensors"
    tensors = {k: torch.full_like(v, float("nan")) for k, v in load_file(path).items()}
    save_file(tensors, path, metadata={"format": "pt"})


def _nan_row_failed(tmp: Path) -> None:
    df = pd.read_parquet(tmp / "w.parquet")
    good = df[df["model"] == "good2"]
    assert len(good) and good["mean"].notna().all()
    failed = list((tmp / "w.parts").glob("failed-*.parquet"))
    assert failed and "not finite" in pd.read_parquet(failed[0])["error"].iloc[0]


NAN = r"model good1: every value of rho_mlp at layer 0 is NaN or inf .* not finite"
Case("outputs-nan-weights-probe", item="33.18", setup=_nan_weights,
     argv=["probe", "--model", "good1", *PROBE, "--out", "p.parquet"], message=NAN, may_change=CACHE)
Case("outputs-nan-weights-batch-goes-on", item="33.18", rc=1, check=_nan_row_failed,
     setup=lambda tmp: (_nan_weights(tmp), _checkpoint(tmp, "good2")),
     argv=["batch", "good1", "good2", "--out", "w.parquet", *BATCH], message=NAN, may_change=(*TABLE, *CACHE))


def _outputs(tmp: Path) -> None:
    """good1 and its text, a folder named like a table (d.parquet, d.json) and a file where a folder would go."""
    _checkpoint(tmp)
    (tmp / "d.parquet").mkdir()
    (tmp / "d.json").mkdir()
    (tmp / "afile").write_text("not a folder\n")
    _table(list(range(6)))(tmp)


EVAL = ["eval", "good1", "--tasks", "text_ppl", "--text", "text.txt"]
for case_id, argv, message in (
        ("eval-out-is-a-folder", [*EVAL, "--out", "d.parquet"], r"eval: --out d.parquet: .*is a folder, not a file"),
        ("eval-out-under-a-file", [*EVAL, "--out", "afile/e.parquet"], r"eval: --out afile/e.parquet: .*afile is a"),
        ("taper-out-is-a-folder", [*DERIVE[:-1], "d.json"], r"taper: --out d.json: .*is a folder, not a file"),
        ("export-out-under-a-file", ["export", "good1", "--out", "afile/x"], r"export: --out afile/x: .*afile is a")):
    Case(f"outputs-{case_id}", item="33.24" if case_id.startswith("eval-out-is") else "33.27", setup=_outputs,
         argv=argv, message=message)


def _parts_in_the_way(tmp: Path) -> None:
    """good1, a file where e.parquet's parts folder goes, links where v.parts and link.parquet go (their targets
    outside: a folder and a file that must stay as they are) and a folder where c.csv goes."""
    _outputs(tmp)
    (tmp / "e.parts").write_text("a file where the parts folder goes\n")
    (tmp / "elsewhere").mkdir()
    os.symlink(tmp / "elsewhere", tmp / "v.parts")
    (tmp / "outside.parquet").write_text("a file outside\n")
    os.symlink(tmp / "outside.parquet", tmp / "link.parquet")
    (tmp / "c.csv").mkdir()


PROBE_ONE = ["probe", "--model", "good1", *PROBE]
for case_id, argv, message in (  # each found before any model loads: the old code wrote, or failed at the merge
        ("eval-parts-is-a-file", [*EVAL, "--out", "e.parquet"], r"eval: --out e.parts: e.parts is a file, not a"),
        ("eval-parts-is-a-link", [*EVAL, "--out", "v.parquet"], r"eval: --out v.parts: v.parts is a symbolic link"),
        ("eval-csv-is-a-folder", [*EVAL, "--out", "c.parquet", "--csv"], r"eval: --csv c.csv: c.csv is a folder"),
        ("batch-parts-is-a-link", ["batch", "good1", *BATCH, "--out", "v.parquet"],
         r"batch: --out v.parts: v.parts is a symbolic link"),
        ("batch-out-is-a-link", ["batch", "good1", *BATCH, "--out", "link.parquet"],
         r"batch: --out link.parquet: link.parquet is a symbolic link"),
        ("batch-out-is-a-folder", ["batch", "good1", *BATCH, "--out", "d.parquet"],
         r"batch: d.parquet: --out: is a directory"),
        ("probe-out-is-a-link", [*PROBE_ONE, "--out", "link.parquet"],
         r"probe: --out link.parquet: link.parquet is a symbolic link"),
        ("probe-out-under-a-file", [*PROBE_ONE, "--out", "afile/p.parquet"],
         r"probe: afile/p.parquet: --out: cannot create its folder: afile is a file")):
    Case(f"outputs-{case_id}", item="33.24" if case_id.endswith("is-a-folder") else "33.27",
         setup=_parts_in_the_way, argv=argv, message=message)


# ------------------------------------------------------------------------------------------ export (items 2, 5, 19)

def _exported(tmp: Path) -> None:
    """good1 exported once to exported/, then its tokenizer.json and modeling file replaced by symlinks to files
    outside the folder (as a hostile earlier export, or a user, might leave them)."""
    from interp.cli import main

    _checkpoint(tmp)
    assert main(["export", "good1", "--out", "exported"]) == 0
    for name in ("tokenizer.json", "modeling_tapered_llama.py"):
        outside = tmp / f"outside-{name}"
        outside.write_text("a file outside the export\n")
        (tmp / "exported" / name).unlink()
        os.symlink(outside, tmp / "exported" / name)


def _outside_untouched(tmp: Path) -> None:
    for name in ("tokenizer.json", "modeling_tapered_llama.py"):
        assert (tmp / f"outside-{name}").read_text() == "a file outside the export\n"
        assert not (tmp / "exported" / name).is_symlink()   # the link itself was replaced by the new file


def test_export_overwrite_never_writes_through_links(tmp_path):
    """Item 2: --overwrite over a folder holding planted symlinks replaces the links, never their targets."""
    from interp.cli import main
    from tests.badinput import _in

    with _in(tmp_path, {"INTERP_CACHE_DIR": str(tmp_path / "cache")}):
        _exported(tmp_path)
        assert main(["export", "good1", "--out", "exported", "--overwrite"]) == 0
    _outside_untouched(tmp_path)


def test_a_second_export_into_the_same_new_folder_is_refused(tmp_path):
    """Item 5: while one export holds the folder, a second one into the same new folder fails at once, naming
    the holder, and writes nothing (before, both succeeded and the second replaced the first)."""
    import subprocess
    import sys

    from tests.badinput import REPO

    _checkpoint(tmp_path)
    env = {**os.environ, "PYTHONPATH": str(REPO), "INTERP_CACHE_DIR": str(tmp_path / "cache"), "HF_HUB_OFFLINE": "1"}
    holder = subprocess.Popen(
        [sys.executable, "-c", "import time\nfrom interp._util.io import exclusive_lock\n"
         f"with exclusive_lock(r'{tmp_path / '.new.export.lock'}', 'x'):\n"
         "    print('held', flush=True)\n    time.sleep(600)\n"], env=env, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        second = subprocess.run([sys.executable, "-m", "interp.cli", "export", "good1", "--out", "new"],
                                cwd=tmp_path, env=env, capture_output=True, text=True, timeout=1800)
    finally:
        holder.kill()
    assert second.returncode == 2, second.stderr
    assert second.stderr.strip().splitlines()[-1].startswith("interp export: export folder new is in use by another")
    assert not (tmp_path / "new").exists()
    assert (tmp_path / ".new.export.lock").is_file()   # the holder's lock is left to it (a third export is refused)


def _old_export_whole(tmp: Path) -> None:
    """Nothing moved in: the planted links are still there (a half export would have replaced some)."""
    assert all((tmp / "exported" / n).is_symlink() for n in ("tokenizer.json", "modeling_tapered_llama.py"))
    assert not [p for p in (tmp / "exported").iterdir() if p.name.startswith(".export.")]


Case("outputs-export-disk-full-leaves-the-old-export-whole", item="33.19", setup=_exported, subprocess=True,
     fsize=64 << 10, argv=["export", "good1", "--out", "exported", "--overwrite"],
     message=r"interp export: .*exported/the export: no room left to write it", check=_old_export_whole,
     may_change=(*CACHE,))


def _no_new_folder(tmp: Path) -> None:
    assert not (tmp / "new").exists() and not list(tmp.glob(".new.export.lock"))


Case("outputs-export-disk-full-into-a-new-folder-leaves-none", item="33.19", setup=_checkpoint, subprocess=True,
     fsize=64 << 10, argv=["export", "good1", "--out", "new"], message=r"interp export: .*new/the export: no room left",
     check=_no_new_folder, may_change=(*CACHE,))


BATCH_ONE = ["batch", "good1", "--out", "w.parquet", *BATCH]
for case_id, env, message in (
        ("rank-not-an-integer", {"RANK": "abc", "WORLD_SIZE": "2"}, r"environment variable RANK: RANK='abc' is not an"),
        ("rank-past-the-world", {"RANK": "3", "WORLD_SIZE": "2"}, r"RANK=3 is not below WORLD_SIZE=2"),
        ("world-size-zero", {"RANK": "0", "WORLD_SIZE": "0"}, r"WORLD_SIZE='0' is not an integer >= 1"),
        ("local-rank-not-an-integer", {"LOCAL_RANK": "gpu0"}, r"environment variable LOCAL_RANK: LOCAL_RANK='gpu0'")):
    Case(f"outputs-batch-{case_id}", item="33.28", setup=_checkpoint, env=env, argv=BATCH_ONE, message=message)


def _evaluated(tmp: Path) -> None:
    """good1 evaluated into w.parquet (its parts in w.parts/)."""
    from interp.cli import main

    _checkpoint(tmp)
    assert main(["eval", "good1", "--tasks", "text_ppl", "--text", "text.txt", "--out", "w.parquet"]) == 0


def _batched(tmp: Path) -> None:
    from interp.cli import main

    _checkpoint(tmp)
    assert main(BATCH_ONE) == 0


Case("outputs-batch-into-an-eval-table", item="33.4", setup=_evaluated, argv=BATCH_ONE, may_change=CACHE,
     message=r"interp batch: .*w.parts holds the parts of an `interp eval` table, not of `interp probe batch`")
Case("outputs-eval-into-a-batch-table", item="33.4", setup=_batched, may_change=CACHE,
     argv=["eval", "good1", "--tasks", "text_ppl", "--text", "text.txt", "--out", "w.parquet"],
     message=r"interp eval: .*w.parts holds the parts of an `interp probe batch` table, not of `interp eval`")


def _old_eval_parts(tmp: Path) -> None:
    """An eval parts folder from before the kind marker: recognised by its parts' columns."""
    _evaluated(tmp)
    (tmp / "w.parts" / ".kind").unlink()


Case("outputs-batch-into-an-old-eval-table", item="33.4", setup=_old_eval_parts, argv=BATCH_ONE, may_change=CACHE,
     message=r"w.parts holds the parts of an `interp eval` table")


@pytest.mark.parametrize("case", cases_of("outputs-"), ids=lambda c: c.id)
def test_case(case, tmp_path):
    check_case(case, tmp_path)


def test_the_gguf_cache_never_saves_through_a_planted_link(tmp_path):
    """The dequantized cache was saved into '.tmp-NAME-PID' beside it, a name anyone can predict: a link planted
    there had save_pretrained write the model into the link's target. Now the temporary is a fresh mkdtemp."""
    from interp.hf import cache as hf_cache
    from tests.factories import tiny_hf, word_tokenizer

    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    path = tmp_path / "cache" / "tiny-abc"
    path.parent.mkdir()
    os.symlink(elsewhere, path.parent / f".tmp-{path.name}-{os.getpid()}")
    hf_cache._save_cache(tiny_hf("LlamaForCausalLM", d_mlp=48), word_tokenizer(), path,
                         origin={"gguf": "x.gguf", "key": "tiny-abc"})
    assert hf_cache._valid_cache(path) and not path.is_symlink()
    assert not list(elsewhere.iterdir())
    assert (path.stat().st_mode & 0o777) == 0o777 & ~_umask()


def _umask() -> int:
    mask = os.umask(0o22)
    os.umask(mask)
    return mask
