"""Hub models through every entry point, against the loopback hub (tests/hub_server.py): the real huggingface_hub
client downloads from a server on 127.0.0.1, never a mock of it.

Served: "gpt2" (what TransformerLens's name gpt2-small resolves to; a random-weight 3-layer GPT-2 at main and
step1/step2),
"EleutherAI/pythia-70m" (GPT-NeoX with parallel residual, as Pythia, at step0/step1000/step2000/step3000 plus main =
step3000: a Pythia-style checkpoint series) and the dataset "wikitext" (config wikitext-2-raw-v1: real English sentences). Checked, through the real CLI
in child processes (each with its own HF_HOME):
  * `interp probe --model gpt2-small --text wikitext-2` downloads, and its rho_mlp equals plain HF forward hooks on
    the served weights (float64 reference, 1e-6); rows name the revision and the commit;
  * revisions give different numbers; a rerun with the server stopped uses the cache (saying so), and so does
    HF_HUB_OFFLINE=1; an uncached model offline fails at once;
  * 404 (repo, revision), 401, 500 and a connection dropped mid-download each give one line and exit status 2,
    in seconds; after a drop the next run completes the file;
  * `interp batch HUB --revisions step0..step3000:1000` gives one table with `step`, and the over-training heatmap
    draws it; a rerun skips every revision without asking for files;
  * --revision / MODEL@REV in ablate pretrained, eval and the Python API; a revision with a local path is refused;
  * the HEAVY analyses novelty_gpt2 (the paper's experiment) and pythia_over_training run through
    `interp figures --only NAME --recompute` with their models and data served here (random weights, so only the
    plumbing is checked: tables, the paper's r beside ours, the figures).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import torch

from tests.hub_server import LoopbackHub, tiny_dataset_folder, tiny_model_folder

REPO = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow
SERIES = ("step0", "step1000", "step2000", "step3000")
PROBE = ["--tokens", "128", "--seq-len", "32", "--batch-size", "2"]


@pytest.fixture(scope="module")
def hub(tmp_path_factory):
    root = tmp_path_factory.mktemp("loopback")
    folders = root / "folders"
    with LoopbackHub(root / "served") as server:
        gpt2 = {rev: tiny_model_folder("gpt2", folders / f"gpt2-{rev}", seed=seed, n_layer=3)
                for seed, rev in enumerate(("step1", "step2", "main"))}
        server.shas = {"gpt2": server.add_model("gpt2", gpt2)}
        server.add_model("gpt2-medium", {"main": tiny_model_folder("gpt2", folders / "gpt2-medium", seed=5, n_layer=4)})
        series = {rev: tiny_model_folder("gpt_neox", folders / f"series-{rev}", seed=10 + i) for i, rev in enumerate(SERIES)}
        series["main"] = series["step3000"]
        server.shas["EleutherAI/pythia-70m"] = server.add_model("EleutherAI/pythia-70m", series)
        server.add_dataset("Salesforce/wikitext", {"main": tiny_dataset_folder(folders / "wikitext")})
        server.folders = {"gpt2": gpt2, "EleutherAI/pythia-70m": series}
        yield server


def interp(hub: LoopbackHub, hf_home: Path, *args: str, offline: bool = False, cwd: Path | None = None,
           timeout: float = 600) -> subprocess.CompletedProcess:
    env = hub.child_env(hf_home=hf_home)
    env.update(PYTHONPATH=str(REPO), OMP_NUM_THREADS="1", INTERP_CACHE_DIR=str(hf_home / "interp"))
    if offline:
        env["HF_HUB_OFFLINE"] = "1"
    return subprocess.run([sys.executable, "-m", "interp.cli", *args], cwd=cwd or hf_home.parent, env=env,
                          capture_output=True, text=True, timeout=timeout)


def one_line_error(proc: subprocess.CompletedProcess) -> str:
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr, proc.stderr[-2000:]
    lines = [l for l in proc.stderr.splitlines() if l.startswith("interp ")]
    assert len(lines) == 1, proc.stderr[-2000:]
    return lines[0]


def reference_rho_mlp(folder: Path, text: str, seq_len: int, tokens: int) -> list[float]:
    """rho_mlp per layer from plain HF forward hooks on the served weights, in float64: the mean over every
    position but the first of cos(MLP output, the layer's input)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(folder)
    model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float64, attn_implementation="eager").eval()
    ids = torch.tensor(tok.encode(text, add_special_tokens=False)[: tokens // seq_len * seq_len]).view(-1, seq_len)
    seen: dict[tuple[int, str], torch.Tensor] = {}
    handles = []
    for l, block in enumerate(model.transformer.h):
        handles.append(block.register_forward_pre_hook(lambda m, a, kw, l=l: seen.__setitem__((l, "h"), (
            a[0] if a else kw["hidden_states"])), with_kwargs=True))
        handles.append(block.mlp.register_forward_hook(lambda m, a, o, l=l: seen.__setitem__((l, "m"), o)))
    with torch.no_grad():
        model(ids)
    for h in handles:
        h.remove()
    return [torch.nn.functional.cosine_similarity(seen[(l, "m")], seen[(l, "h")], dim=-1)[:, 1:].mean().item()
            for l in range(len(model.transformer.h))]


def wikitext_text(hub: LoopbackHub) -> str:
    import pyarrow.parquet as pq

    rows = pq.read_table(next((Path(hub.folders["gpt2"]["main"]).parent / "wikitext").rglob("test-*.parquet")))
    return "".join(t if t.endswith("\n") else t + "\n" for t in rows.column("text").to_pylist())


def rho(table: Path) -> list[float]:
    df = pd.read_parquet(table)
    return df[df.metric == "rho_mlp"].sort_values("layer")["mean"].tolist()


def test_the_whole_recipe_downloads_and_matches_plain_hooks(hub, tmp_path):
    proc = interp(hub, tmp_path / "hf", "probe", "--model", "gpt2-small", "--text", "wikitext-2", *PROBE,
                  "--dtype", "float64", "--out", str(tmp_path / "p.parquet"))
    assert proc.returncode == 0, proc.stderr[-3000:]
    df = pd.read_parquet(tmp_path / "p.parquet")
    assert set(df["model"]) == {"gpt2"} and set(df["revision"]) == {"main"}
    assert set(df["commit"]) == {hub.shas["gpt2"]["main"]}
    assert set(df["text_source"]) == {"hf:Salesforce/wikitext:wikitext-2-raw-v1:test:text"}
    assert df["weights_sha256"].str.len().eq(64).all()
    want = reference_rho_mlp(hub.folders["gpt2"]["main"], wikitext_text(hub), 32, 128)
    assert rho(tmp_path / "p.parquet") == pytest.approx(want, abs=1e-6)
    # the snapshot holds the defining files and one weight format, in huggingface_hub's own cache
    snap = tmp_path / "hf" / "hub" / "models--gpt2" / "snapshots" / hub.shas["gpt2"]["main"]
    assert (snap / "model.safetensors").is_file() and (snap / "config.json").is_file()
    assert (tmp_path / "hf" / "hub" / "models--gpt2" / "refs" / "main").read_text() == hub.shas["gpt2"]["main"]


def test_revisions_differ_and_the_cache_serves_a_stopped_hub_and_offline_mode(hub, tmp_path):
    home = tmp_path / "hf"
    for rev in ("step1", "step2"):
        proc = interp(hub, home, "probe", "--model", f"gpt2@{rev}", "--text", "wikitext-2", *PROBE,
                      "--out", str(tmp_path / f"{rev}.parquet"))
        assert proc.returncode == 0, proc.stderr[-3000:]
    assert rho(tmp_path / "step1.parquet") != pytest.approx(rho(tmp_path / "step2.parquet"), abs=1e-4)
    assert set(pd.read_parquet(tmp_path / "step2.parquet")["commit"]) == {hub.shas["gpt2"]["step2"]}
    hub.stop()
    try:
        proc = interp(hub, home, "probe", "--model", "gpt2", "--revision", "step1", "--text", "wikitext-2", *PROBE,
                      "--out", str(tmp_path / "again.parquet"))
        assert proc.returncode == 0, proc.stderr[-3000:]
        assert "the hub is unreachable" in proc.stderr and "using the cached commit" in proc.stderr
        assert rho(tmp_path / "again.parquet") == rho(tmp_path / "step1.parquet")
        proc = interp(hub, home, "probe", "--model", "gpt2@step1", "--text", "wikitext-2", *PROBE, "--offline",
                      "--out", str(tmp_path / "offline.parquet"))
        assert proc.returncode == 0, proc.stderr[-3000:]
        assert rho(tmp_path / "offline.parquet") == rho(tmp_path / "step1.parquet")
        line = one_line_error(interp(hub, home, "probe", "--model", "gpt2@main", *PROBE,
                                     "--out", str(tmp_path / "no.parquet"), offline=True))
        assert "is not available offline" in line and "HF_HUB_OFFLINE" in line
    finally:
        hub.start()


@pytest.mark.parametrize("model, failure, expect", [
    ("nosuch/model", None, "does not exist on the hub"),
    ("gpt2@step999", None, "has no such revision"),
    ("gpt2@step1", (401, "api/models/gpt2"), "is gated"),
    ("gpt2@step1", (500, "api/models/gpt2"), "the hub answered 500"),
])
def test_hub_failures_are_one_line(hub, tmp_path, model, failure, expect):
    if failure:
        hub.fail(failure[0], failure[1])
    try:
        proc = interp(hub, tmp_path / "hf", "probe", "--model", model, *PROBE, "--out", str(tmp_path / "x.parquet"))
    finally:
        hub.clear_failures()
    assert expect in one_line_error(proc)
    assert not (tmp_path / "x.parquet").exists()


def test_a_dropped_download_fails_clearly_and_the_next_run_completes_it(hub, tmp_path):
    """One drop is resumed by huggingface_hub itself (the run succeeds); a connection dropped every time fails with
    one line, leaves no partial file taken as complete, and the next run completes the file."""
    snap = tmp_path / "hf" / "hub" / "models--gpt2" / "snapshots" / hub.shas["gpt2"]["step2"]
    hub.fail("drop", "model.safetensors")
    try:
        proc = interp(hub, tmp_path / "hf", "probe", "--model", "gpt2@step2", *PROBE, "--out", str(tmp_path / "x.parquet"))
    finally:
        hub.clear_failures()
    assert "could not be fetched" in one_line_error(proc)
    assert not (snap / "model.safetensors").exists()
    proc = interp(hub, tmp_path / "hf", "probe", "--model", "gpt2@step2", *PROBE, "--out", str(tmp_path / "x.parquet"))
    assert proc.returncode == 0, proc.stderr[-3000:]
    served = Path(hub.folders["gpt2"]["step2"]) / "model.safetensors"
    assert (snap / "model.safetensors").read_bytes() == served.read_bytes()


def test_a_revision_series_batches_into_one_table_and_draws(hub, tmp_path):
    home = tmp_path / "hf"
    out = tmp_path / "series.parquet"
    proc = interp(hub, home, "batch", "EleutherAI/pythia-70m", "--revisions", "step0..step3000:1000", *PROBE,
                  "--out", str(out), "--no-progress")
    assert proc.returncode == 0, proc.stderr[-3000:]
    df = pd.read_parquet(out)
    assert set(df["kind"]) == {"hub"} and set(df["status"]) == {"ok"}
    assert sorted(set(df["step"])) == [0.0, 1000.0, 2000.0, 3000.0]
    assert {r: c for r, c in zip(df["revision"], df["commit"])} == {r: hub.shas["EleutherAI/pythia-70m"][r] for r in SERIES}
    assert df.groupby("revision")["weights_sha256"].nunique().eq(1).all() and df["weights_sha256"].nunique() == 4
    assert set(df["text_source"]) == {"wiki:val"}
    # a rerun skips every revision, and asks the hub for no file
    before = len(hub.requests)
    proc = interp(hub, home, "batch", "EleutherAI/pythia-70m", "--revisions", "step0..step3000:1000", *PROBE,
                  "--out", str(out), "--no-progress")
    assert proc.returncode == 0 and "0 analysed, 4 skipped" in proc.stdout, proc.stdout + proc.stderr[-2000:]
    assert not [p for _m, p in hub.requests[before:] if "/resolve/" in p]
    # `all`: the repo's refs, in step order (main last)
    proc = interp(hub, home, "batch", "EleutherAI/pythia-70m", "--revisions", "all", "--dry-run")
    assert proc.returncode == 0, proc.stderr[-2000:]
    listed = [line.split()[1] for line in proc.stdout.splitlines()]
    assert listed == [f"EleutherAI/pythia-70m@{r}" for r in (*SERIES, "main")]
    # the over-training heatmap draws the series as it draws our runs
    from interp.plots.training import plot_novelty_over_training

    fig = plot_novelty_over_training(df.assign(label=df["run"]), ("rho_mlp", "rho_block"))
    assert len(fig.axes) >= 2


def test_the_readme_online_lines_run_as_written(hub, tmp_path):
    """The README's online section: its probe and batch lines, as written plus small token counts, against the
    loopback hub serving those names; the rest (an 8B model, the four GPT-2 sizes) parsed with the real parser."""
    import shlex

    from interp.cli import build_parser

    text = (REPO / "README.md").read_text().split("## Online: any model on the hub", 1)[1].split("\n## ", 1)[0]
    lines = [l.split(" #", 1)[0].strip() for l in text.split("```bash\n", 1)[1].split("```", 1)[0].splitlines()]
    commands = [shlex.split(l) for l in lines if l]
    assert [c[:2] for c in commands] == [["interp", "probe"]] * 2 + [["interp", "batch"], ["interp", "probe"],
                                                                     ["interp", "figures"]]
    for argv in commands[:3]:
        proc = interp(hub, tmp_path / "hf", *argv[1:], *PROBE)
        assert proc.returncode == 0, (argv, proc.stderr[-3000:])
    assert sorted(set(pd.read_parquet(tmp_path / "results" / "pythia.parquet")["step"])) == [0, 1000, 2000, 3000]
    for argv in commands[3:]:
        build_parser().parse_args(argv[1:])


def test_revision_flags_through_ablate_eval_and_the_python_api(hub, tmp_path, monkeypatch):
    home = tmp_path / "hf"
    proc = interp(hub, home, "ablate", "pretrained", "--model", "gpt2", "--revision", "step1", "--seq-len", "16",
                  "--score-sequences", "4", "--eval-sequences", "4", "--figures-dir", str(tmp_path / "abl"))
    assert proc.returncode == 0, proc.stderr[-3000:]
    table = pd.read_csv(tmp_path / "abl" / "pretrained_capacity_ablation.csv")
    assert set(table["revision"]) == {"step1"} and set(table["commit"]) == {hub.shas["gpt2"]["step1"]}
    proc = interp(hub, home, "eval", "gpt2@step2", "--tasks", "wiki_heldout", "--text", "wikitext-2", "--limit", "4",
                  "--out", str(tmp_path / "eval.parquet"))
    assert proc.returncode == 0, proc.stderr[-3000:]
    ev = pd.read_parquet(tmp_path / "eval.parquet")
    assert set(ev["revision"]) == {"step2"} and set(ev["commit"]) == {hub.shas["gpt2"]["step2"]}
    # --text adds the text_ppl task: perplexity on WikiText-2 from the hub, its source and hash recorded
    ppl = ev[ev["task"] == "text_ppl"].set_index("metric")
    assert set(ppl.index) == {"word_perplexity", "byte_perplexity", "bits_per_byte"} and set(ppl["status"]) == {"ok"}
    assert set(ppl["data_source"]) == {"hf:Salesforce/wikitext:wikitext-2-raw-v1:test:text"}
    import hashlib

    assert set(ppl["data_sha256"]) == {hashlib.sha256(wikitext_text(hub).encode()).hexdigest()}
    assert ppl.loc["word_perplexity", "value"] > 1
    # a revision given with a local path, or with a registry model: refused before any work
    line = one_line_error(interp(hub, home, "probe", "--model", str(hub.folders["gpt2"]["main"]), "--revision",
                                 "step1", *PROBE, "--out", str(tmp_path / "n.parquet")))
    assert "applies to hub models only" in line
    line = one_line_error(interp(hub, home, "batch", str(hub.folders["gpt2"]["main"]), "--revisions", "all",
                                 "--out", str(tmp_path / "n.parquet")))
    assert "--revisions" in line and "hub models only" in line
    # the Python API, in process: probe(revision=) and load_pretrained(revision=) on the cache the CLI filled
    monkeypatch.setenv("HF_HOME", str(home))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    import huggingface_hub.constants as constants

    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(home / "hub"))
    from interp import hf
    from interp.probes import probe

    df = probe("gpt2", revision="step1", text=str(_text_file(tmp_path)), tokens=64, seq_len=32)
    assert set(df["commit"]) == {hub.shas["gpt2"]["step1"]}
    loaded = hf.load_pretrained("gpt2-small@step1")
    assert loaded.ref.commit == hub.shas["gpt2"]["step1"] and loaded.ref.hub_id == "gpt2"


def _text_file(tmp_path: Path) -> Path:
    path = tmp_path / "text.txt"
    path.write_text(" ".join(["the cat sat on the mat and looked at the dog"] * 80))
    return path


def test_the_papers_experiment_and_a_pythia_series_as_analyses(hub, tmp_path):
    figures = tmp_path / "figures"
    probe = json.dumps({"text": "wikitext-2", "tokens": 128, "seq_len": 32, "batch_size": 2})
    proc = interp(hub, tmp_path / "hf", "figures", "--only", "novelty_gpt2", "--recompute", "--figures-dir",
                  str(figures), "--set", 'models=["gpt2-small", "gpt2-medium"]', "--set", f"probe={probe}")
    assert proc.returncode == 0, proc.stderr[-3000:]
    table = pd.read_csv(figures / "novelty_gpt2.csv")
    assert list(dict.fromkeys(table["model"])) == ["gpt2", "gpt2-medium"]
    assert set(table.groupby("model")["n_layers"].first()) == {3, 4}
    summary = pd.read_csv(figures / "novelty_gpt2_r.csv")
    assert set(summary["metric"]) == {"rho_mlp", "rho_block"} and set(summary["paper_r_low"]) == {0.49, 0.27}
    assert (figures / "novelty_gpt2.png").stat().st_size > 10_000
    proc = interp(hub, tmp_path / "hf", "figures", "--only", "pythia_over_training", "--recompute", "--figures-dir",
                  str(figures), "--set", 'model="EleutherAI/pythia-70m"', "--set", 'revisions="step0..step2000:1000"',
                  "--set", f"probe={probe}", "--set", f"root={json.dumps(str(tmp_path / 'pythia'))}")
    assert proc.returncode == 0, proc.stderr[-3000:]
    series = pd.read_csv(figures / "pythia_over_training.csv")
    assert sorted(set(series["step"])) == [0, 1000, 2000] and set(series["run"]) == {"EleutherAI/pythia-70m"}
    assert (figures / "pythia_over_training.png").stat().st_size > 10_000
