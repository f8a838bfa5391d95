"""`interp probe --causal` as a user meets it: the causal rows' own token budget (--causal-tokens), its checks, the
fast mode (--causal-method attribution), progress over both phases, the terminal summary with the causal rows and a
header that says how the model was loaded, and what an interrupt keeps."""

from __future__ import annotations

import pandas as pd
import pytest

from interp import ablations as ab
from interp import causal as ct
from interp import probes
from interp.cli import main
from interp.probes.config import CAUSAL_TIME, DEFAULT_CAUSAL_TOKENS, ProbeConfig
from tests.test_causal import PROBE, checkpoint  # noqa: F401  (the fixture: a tiny checkpoint and a text)

pytestmark = pytest.mark.usefixtures("one_thread")

SMALL = dict(tokens=64, seq_len=16, batch_size=2)


def _causal(df: pd.DataFrame) -> pd.DataFrame:
    return df[df["metric"].str.startswith("delta_loss")].reset_index(drop=True)


def test_causal_rows_run_over_the_first_sequences_of_their_budget(checkpoint):
    run, text = checkpoint
    df = ct.probe(str(run), text=text, **SMALL, causal=True, causal_tokens=40)   # 2 sequences of 16 fit in 40
    rows, corr = _causal(df), df[~df["metric"].str.startswith("delta_loss")]
    assert set(rows["n_sequences"]) == {2} and set(rows["n_tokens"]) == {2 * 15} and set(corr["n_sequences"]) == {4}
    effects, profiles = ct.causal_data(df)
    assert effects.n_sequences == 2 and all(v.shape == (3, 2) for v in profiles.values())
    # the same rows as a probe of those two sequences alone (the first ones, in the same batches)
    alone = ct.probe(str(run), text=text, tokens=32, seq_len=16, batch_size=2, causal=True, causal_tokens=0)
    pd.testing.assert_frame_equal(rows[["layer", "metric", "mean", "ci_low", "ci_high"]],
                                  _causal(alone)[["layer", "metric", "mean", "ci_low", "ci_high"]], check_exact=True)
    everything = ct.probe(str(run), text=text, **SMALL, causal=True, causal_tokens=0)
    assert set(_causal(everything)["n_sequences"]) == {4}


def test_the_budget_and_the_method_are_checked_before_any_load(checkpoint, tmp_path, capsys):
    run, text = checkpoint
    with pytest.raises(ValueError, match=r"causal_tokens=8 is less than one sequence of seq_len=16: raise "):
        ProbeConfig(causal=True, seq_len=16, causal_tokens=8).validate()
    ProbeConfig(causal=False, seq_len=16, causal_tokens=8).validate()   # not asked for: nothing to refuse
    for bad in (-1, 1.5, True):
        with pytest.raises(ValueError, match=r"causal_tokens=.*a number of positions >= 0"):
            ProbeConfig(causal_tokens=bad).validate()
    with pytest.raises(ValueError, match=r"causal_method='fast': choose one of \('exact', 'attribution'\)"):
        ProbeConfig(causal_method="fast").validate()
    out = tmp_path / "p.parquet"
    assert main(["probe", "--model", str(tmp_path / "not-there"), "--text", str(text), *PROBE, "--causal",
                 "--causal-tokens", "8", "--out", str(out)]) == 2
    assert "causal_tokens=8" in capsys.readouterr().err and not out.exists()
    with pytest.raises(SystemExit):
        main(["probe", "--causal-method", "fast"])
    assert "invalid choice: 'fast'" in capsys.readouterr().err


def test_help_gives_the_expected_time(capsys):
    with pytest.raises(SystemExit):
        main(["probe", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert CAUSAL_TIME in text and "--causal-tokens" in text and "--causal-method" in text
    assert f"(default: {DEFAULT_CAUSAL_TOKENS})" in text


def test_cli_progress_over_both_phases_and_the_causal_summary(checkpoint, tmp_path, capsys):
    run, text = checkpoint
    out = tmp_path / "p.parquet"
    assert main(["probe", "--model", str(run), "--text", str(text), *PROBE, "--causal", "--out", str(out)]) == 0
    captured = capsys.readouterr()
    err = captured.err
    assert "(phase 1 of 2; the causal rows next)" in err
    assert "[causal] run: exact rows over 4 sequences x 16 positions (64)" in err   # the plan, with its estimate
    assert "forwards' worth of passes, about" in err
    lines = [l for l in err.splitlines() if l.startswith("[causal run]")]
    assert lines and lines[-1].split()[2].split("/")[0] == lines[-1].split()[2].split("/")[1]   # to the end
    assert all("ETA" in l for l in lines)
    stdout = captured.out
    assert "loaded as float32" in stdout and "weights_sha256=" in stdout and "+ causal rows" in stdout
    assert "causal rows, exact: delta loss (nats)" in stdout and "95% CI over 4 sequences" in stdout
    df = pd.read_parquet(out)
    skip = df[df.metric == "delta_loss_skip_mlp"].sort_values("layer")
    summary = stdout[stdout.index("causal rows, exact"):].splitlines()
    assert "skip_mlp (95% CI)" in summary[1] and "skip_block (95% CI)" in summary[1]
    for layer, mean in zip(skip["layer"], skip["mean"]):   # each layer's line shows its row
        assert f"{mean:+.4f}" in summary[2 + int(layer)]


def test_cli_attribution_summary(checkpoint, tmp_path, capsys):
    run, text = checkpoint
    out = tmp_path / "p.parquet"
    assert main(["probe", "--model", str(run), "--text", str(text), *PROBE, "--causal", "--causal-method",
                 "attribution", "--no-progress", "--out", str(out)]) == 0
    stdout = capsys.readouterr().out
    assert "causal rows, first-order estimates (attribution)" in stdout and "skip_mlp_attribution" in stdout
    assert set(_causal(pd.read_parquet(out))["metric"]) == set(ab.ATTRIBUTION_METRICS.values())


def test_an_interrupt_says_what_it_keeps(checkpoint, tmp_path, capsys, monkeypatch):
    """Nothing is written (a probe has no parts): the message says so, instead of "what finished is kept"."""
    run, text = checkpoint

    def stop(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(ct, "layer_effects", stop)
    out = tmp_path / "p.parquet"
    assert main(["probe", "--model", str(run), "--text", str(text), *PROBE, "--causal", "--no-progress",
                 "--out", str(out)]) == 130
    err = capsys.readouterr().err
    assert "interp probe: interrupted; nothing was written" in err and "what finished is kept" not in err
    assert not out.exists()


def test_batch_settings_keep_their_keys_at_the_default_budget(checkpoint):
    """The causal options enter a batch part's key only when set away from their defaults: parts written before
    them are still found."""
    run, text = checkpoint
    plain = probes.BatchConfig.build(paths=[str(run)], text=str(text)).settings("x")
    assert "causal_tokens" not in plain and "causal_method" not in plain
    other = probes.BatchConfig.build(paths=[str(run)], text=str(text), causal=True, causal_tokens=128,
                                     causal_method="attribution").settings("x")
    assert other["causal_tokens"] == 128 and other["causal_method"] == "attribution"


def test_the_ci_curve_of_a_causal_table(checkpoint, tmp_path):
    """benchmarks/bench_causal.py --curve: each half-width and rank agreement recomputed here with scipy."""
    import numpy as np
    from scipy import stats

    from benchmarks import bench_causal

    run, text = checkpoint
    path = tmp_path / "curve.parquet"
    df = ct.probe(str(run), text=text, **SMALL, causal=True, causal_tokens=0, metrics=("rho_mlp",))
    probes.save_table(df, path)
    rows = pd.DataFrame(bench_causal.curve(str(path)))
    assert sorted(set(rows["sequences"])) == [2, 3, 4] and set(rows["tokens"]) == {32, 48, 64}
    effects, _ = ct.causal_data(df)
    for _, row in rows.iterrows():
        d = effects.deltas(row["kind"]).numpy()[:, :row["sequences"]]
        s = row["sequences"]
        width = stats.t.ppf(0.975, s - 1) * d.std(1, ddof=1) / np.sqrt(s)
        assert row["median_ci_half_width"] == pytest.approx(float(np.median(width)), rel=1e-9)
        assert row["layers_resolved"] == int((np.abs(d.mean(1)) > width).sum())
        if s == 2:
            other = effects.deltas(row["kind"]).numpy()[:, -2:].mean(1)
            assert row["rho_with_other_half"] == pytest.approx(stats.spearmanr(d.mean(1), other).statistic)
        else:
            assert np.isnan(row["rho_with_other_half"])
    table = bench_causal.curve_markdown(rows)
    assert table.splitlines()[0].startswith("| sequences (tokens) | skip_mlp: median CI half-width, rho")
    assert len(table.splitlines()) == 2 + 3


def test_the_transformer_lens_backend_is_refused_for_an_hf_model_with_the_fix(tmp_path, save_pretrained_dir):
    """Its bridge wraps the HF modules in place, so the causal hooks would never fire (the mean pass failed with
    "no token to average over"): refused before the probe, naming the backends that work."""
    from interp._util.errors import InputError
    from tests.factories import tiny_hf, word_tokenizer

    path = save_pretrained_dir(tmp_path / "llama", tiny_hf("LlamaForCausalLM"),
                               word_tokenizer(64, bos_token="[UNK]", eos_token="[UNK]"))
    text = tmp_path / "t.txt"
    text.write_text(" ".join(f"w{(i * 7) % 63 + 1}" for i in range(200)))
    with pytest.raises(InputError, match=r"backend=transformer_lens: .*TransformerBridge.*--backend torch or nnsight"):
        ct.probe(str(path), text=text, tokens=48, seq_len=12, batch_size=2, causal=True, backend="transformer_lens",
                 metrics=("rho_mlp",))


def test_the_expected_time_is_the_benchmarks():
    """The time the README's task table and `--help` promise for `interp probe --model smollm2-135m --causal` is
    the quiet-machine estimate benchmarks/RESULTS.md's bench_causal section measured."""
    import re

    from interp._util.paths import REPO_ROOT

    results = (REPO_ROOT / "benchmarks" / "RESULTS.md").read_text()
    section = results[results.index("<!-- bench_causal:begin -->"):results.index("<!-- bench_causal:end -->")]
    row = next(line for line in section.splitlines() if line.startswith("| probe --causal, after |"))
    minutes = round(float(row.strip(" |").split("|")[-1]))
    assert CAUSAL_TIME == f"about {minutes} min on 2 quiet cores, probe included"
    readme = (REPO_ROOT / "README.md").read_text()
    line = next(l for l in readme.splitlines() if "`interp probe --model smollm2-135m --causal`" in l and l[0] == "|")
    assert re.search(rf"~{minutes} min on 2 quiet cores", line), line


def test_bench_causal_quick():
    """The benchmark's three measurements run (toy sizes: a tiny random Llama, a few tokens)."""
    from benchmarks import bench_causal

    text = bench_causal.main(["--quick", "--threads", "1"])
    for piece in ("(a) One pass", "full pass (before)", "resumed at layer 0 (after, sdpa)", "probe --causal, after",
                  "probe --causal, before", "quiet estimate (min)"):
        assert piece in text, piece


def test_the_docs_curve_and_what_it_says_are_the_committed_table():
    """docs/probes.md's CI-width table is rendered from benchmarks/causal_ci_curve.csv, and the prose under it
    quotes that table: every row resolved at 8 sequences but skip_attn's 28, widths 1.5-1.6x those of 16 and 2.5-2.9x
    at 3, two independent halves of 8 ranking the layers alike."""
    from benchmarks import bench_causal
    from interp._util.paths import REPO_ROOT

    df = pd.read_csv(bench_causal.CURVE_TABLE)
    text = (REPO_ROOT / "docs" / "probes.md").read_text()
    begin, end = bench_causal.DOCS_MARKERS
    assert f"{begin}\n{bench_causal.curve_markdown(df)}\n{end}" in text
    at = df.set_index(["kind", "sequences"])
    eight = at.xs(8, level="sequences")
    assert eight["layers_resolved"].to_dict() == {"skip_mlp": 30, "mean_mlp": 30, "skip_attn": 28, "skip_block": 30}
    assert eight["median_width_vs_all"].between(1.5, 1.6).all()
    assert eight["rho_with_other_half"].round(2).between(0.97, 0.98).all()
    three, two = at.xs(3, level="sequences"), at.xs(2, level="sequences")
    assert (three["median_ci_half_width"] / eight["median_ci_half_width"]).round(1).between(2.5, 2.9).all()
    assert (two["median_ci_half_width"] / eight["median_ci_half_width"]).round(0).between(7, 9).all()
    assert two["layers_resolved"].between(8, 15).all()
    for claim in ("28 of 30 for\n  skip_attn", "1.5-1.6 times", "rho 0.97-0.98", "2.5-2.9 times", "7-9 times at 2",
                  "only 8-15 of the 30"):
        assert claim in text, claim


def test_the_causal_passes_run_sdpa_and_give_the_model_back_as_it_was(checkpoint):
    """interp.hf.attention.attention_within: an eager HF model runs sdpa inside the block (the same losses to float32
    rounding) and is eager again after it, also after an error; Gemma-2 (no sdpa path) and our TaperedLM keep their
    own. The causal rows say which ran (attn_implementation)."""
    import torch

    from interp.ablations.loss import token_losses
    from interp.hf.attention import attention_of, attention_within
    from tests.factories import tiny_hf

    llama = tiny_hf("LlamaForCausalLM")
    tokens = torch.randint(0, 64, (2, 16), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        eager = token_losses(llama, tokens)
        with attention_within(llama) as used:
            assert used == "sdpa" == attention_of(llama)
            sdpa = token_losses(llama, tokens)
    assert attention_of(llama) == "eager"
    torch.testing.assert_close(sdpa, eager, atol=1e-5, rtol=0)
    with pytest.raises(RuntimeError), attention_within(llama):
        raise RuntimeError("a pass fails")
    assert attention_of(llama) == "eager"
    gemma2 = tiny_hf("Gemma2ForCausalLM")
    with attention_within(gemma2) as used:
        assert used == "eager"
    run, text = checkpoint   # our TaperedLM: its own attention
    rows = _causal(ct.probe(str(run), text=text, **SMALL, causal=True, causal_tokens=0))
    assert set(rows["attn_implementation"]) == {"native"}
