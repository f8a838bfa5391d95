"""Every model kind through every entry point (tests/test_hf_dirs.py covers save_pretrained directories and
our checkpoints): a registry name and the same model as a .gguf file give identical numbers through
`interp probe`, `interp batch` (which takes the registry name as well) and `interp ablate pretrained`; a hub id fails offline with one clear line.

Loads SmolLM2-135M (integration): ~1 min with the dequantized cache built."""

from __future__ import annotations

import pandas as pd
import pytest

from interp import hf
from interp.cli import main

pytestmark = [pytest.mark.integration,
              pytest.mark.skipif(not hf.REGISTRY["smollm2-135m"].installed(),
                                 reason="needs " + hf.REGISTRY["smollm2-135m"].pip_command)]

NAME = "smollm2-135m"
PROBE = ["--tokens", "256", "--seq-len", "64", "--batch-size", "2"]
NUMBERS = ["layer", "metric", "mean", "std", "n_tokens"]


@pytest.fixture(scope="module")
def gguf() -> str:
    path = hf.REGISTRY[NAME].locate()
    assert hf.resolve_model(path).kind == "gguf" and hf.resolve_model(NAME).kind == "registry"
    return str(path)


def _numbers(df: pd.DataFrame) -> pd.DataFrame:
    return df.sort_values(["metric", "layer"])[NUMBERS].reset_index(drop=True)


def test_probe_registry_name_and_gguf_file_agree(gguf, tmp_path):
    tables = {}
    for spec in (NAME, gguf):
        out = tmp_path / f"{len(tables)}.parquet"
        assert main(["probe", "--model", spec, *PROBE, "--out", str(out)]) == 0
        tables[spec] = pd.read_parquet(out)
    assert tables[NAME]["model"].iloc[0] == NAME
    pd.testing.assert_frame_equal(_numbers(tables[NAME]), _numbers(tables[gguf]), check_exact=True)


@pytest.mark.parametrize("kind", ["gguf", "registry"])
def test_batch_takes_a_gguf_file_or_registry_name_and_matches_probe(kind, gguf, tmp_path):
    out = tmp_path / "batch.parquet"
    assert main(["batch", gguf if kind == "gguf" else NAME, *PROBE, "--out", str(out), "--no-progress"]) == 0
    rows = pd.read_parquet(out)
    assert set(rows["kind"]) == {"gguf"} and set(rows["status"]) == {"ok"}
    if kind == "registry":
        assert set(rows["label"]) == {NAME}
    assert main(["probe", "--model", gguf, *PROBE, "--out", str(tmp_path / "p.parquet")]) == 0
    pd.testing.assert_frame_equal(_numbers(rows), _numbers(pd.read_parquet(tmp_path / "p.parquet")),
                                  check_exact=True)


def test_ablate_registry_name_and_gguf_file_agree(gguf, tmp_path):
    tables = []
    for i, spec in enumerate((NAME, gguf)):
        figures = tmp_path / str(i)
        argv = ["ablate", "pretrained", "--model", spec, "--seq-len", "32", "--score-sequences", "2",
                "--eval-sequences", "4", "--batch-size", "2", "--fractions", "0.5", "--seeds", "0",
                "--groups", "late", "--skip-layers", "0", "--dtype", "float32", "--figures-dir", str(figures)]
        assert main(argv) == 0
        tables.append(pd.read_csv(figures / "pretrained_capacity_ablation.csv"))
    cols = ["label", "loss", "delta", "n_neurons_removed"]
    pd.testing.assert_frame_equal(tables[0][cols], tables[1][cols], check_exact=True)


@pytest.mark.parametrize("argv", [["probe", "--model", "no-such-org/no-such-model", *PROBE],
                                  ["ablate", "pretrained", "--model", "no-such-org/no-such-model"]])
def test_hub_id_offline_is_one_clear_error(argv, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    try:
        code = main([*argv, *(["--figures-dir", str(tmp_path)] if argv[0] == "ablate" else [])])
    except SystemExit as err:
        code = err.code if isinstance(err.code, int) else 2
        message = str(err)
    else:
        message = capsys.readouterr().err
    message = message or capsys.readouterr().err
    assert code == 2
    assert "no-such-org/no-such-model" in message and "offline" in message
