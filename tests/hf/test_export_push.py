"""`interp export RUN --push ORG/NAME`: a run as a checkpoint series on the hub, against the loopback hub
(tests/hub_server.py: the real huggingface_hub client uploads to a server on 127.0.0.1, never a mock).

One micro run (cosine 1.5->0.5, 4 steps, step checkpoints at 2 and 4, the final model = step 4) is trained once.
Pushed, it is three branches (step2-tokens512, step4-tokens1024, main), each with a model card;
`interp batch ORG/NAME --revisions all` in a child process (the hub's environment, a fresh HF_HOME) reads them back
and gives the local `interp batch RUN` numbers row for row. A rerun uploads nothing; a refused or unreachable hub is
one line naming the repo and the fix.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import torch

from interp.cli import main
from tests.factories import write_corpus
from tests.hub_server import LoopbackHub, patch_clients

REPO = Path(__file__).resolve().parents[2]
REPO_ID = "tapered-org/micro-cosine"
STEPS = {2: "step2-tokens512", 4: "step4-tokens1024"}   # micro: 8 x 32 = 256 tokens per step
PROBE = ["--tokens", "64", "--seq-len", "32", "--batch-size", "2", "--no-progress"]
IDENTITY = {"path", "model", "commit", "revision", "key", "weights_sha256", "kind", "run", "tokens", "label",
            "checkpoint", "settings_hash"}   # what names a model; every other numeric column is a value


@pytest.fixture(scope="module")
def run(tmp_path_factory, module_cache):
    from interp.training import TrainConfig, Trainer

    root = tmp_path_factory.mktemp("push")
    corpus = write_corpus(root / "corpus", n_docs=24, sentences=40)
    run_dir = root / "runs" / "micro-cosine"
    cfg = TrainConfig.from_preset("micro", source=str(corpus), val_fraction=0.25, out_dir=str(run_dir), threads=1,
                                  steps=4, warmup_steps=1, ckpt_interval=2, eval_interval=2, eval_batches=1,
                                  keep_step_checkpoints=True, progress=False, schedule="cosine", start=1.5, end=0.5)
    assert Trainer(cfg).run()["status"] == "done"
    text = root / "text.txt"
    text.write_text((corpus / "doc00.txt").read_text() * 3)
    return run_dir, text


@pytest.fixture
def hub(tmp_path, monkeypatch):
    with LoopbackHub(tmp_path / "served") as server:
        patch_clients(server, tmp_path / "hf", monkeypatch)
        yield server


def push(capsys, run_dir: Path, repo: str = REPO_ID) -> tuple[int, str, str]:
    code = main(["export", str(run_dir), "--push", repo])
    out = capsys.readouterr()
    return code, out.out, out.err


def child_batch(hub: LoopbackHub, home: Path, *args: str) -> subprocess.CompletedProcess:
    env = hub.child_env(hf_home=home)
    env.update(PYTHONPATH=str(REPO), OMP_NUM_THREADS="1", INTERP_CACHE_DIR=str(home / "interp"))
    return subprocess.run([sys.executable, "-m", "interp.cli", "batch", *args], cwd=home.parent, env=env,
                          capture_output=True, text=True, timeout=600)


def metric_columns(df: pd.DataFrame) -> list[str]:
    return [c for c in df.columns if c not in IDENTITY and pd.api.types.is_numeric_dtype(df[c]) and c != "step"]


def test_a_pushed_run_reads_back_as_the_local_run(run, hub, tmp_path, capsys):
    run_dir, text = run
    code, out, err = push(capsys, run_dir)
    assert code == 0, err
    branches = [*STEPS.values(), "main"]
    assert f"3 branches (3 uploaded, 0 already up to date): {', '.join(branches)}" in out
    repo = hub.repos[("model", REPO_ID)]
    assert set(repo.revisions) == set(branches)
    for branch in branches:   # a whole export in every branch, the hub's .gitattributes kept
        files = set(repo.revisions[branch].files)
        assert {"config.json", "model.safetensors", "tokenizer.json", "modeling_tapered_llama.py",
                "README.md", ".gitattributes"} <= files, (branch, files)
        # no absolute path of this machine is published: the run folder and the corpus are named, not located
        config_text = repo.revisions[branch].files["config.json"].read_text()
        assert str(run_dir.parent.parent) not in config_text and '"exported_from": "<local>/' in config_text, branch
        assert str(run_dir.parent.parent) not in repo.revisions[branch].files["README.md"].read_text(), branch

    # read back through the CLI, in a child process with the hub's environment, and compared with the run
    hub_out, local_out = tmp_path / "hub.parquet", tmp_path / "local.parquet"
    proc = child_batch(hub, tmp_path / "child", REPO_ID, "--revisions", "all", "--text", str(text), *PROBE,
                       "--out", str(hub_out))
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert main(["batch", str(run_dir), "--text", str(text), *PROBE, "--out", str(local_out)]) == 0
    remote, local = pd.read_parquet(hub_out), pd.read_parquet(local_out)
    assert set(remote["status"]) == set(local["status"]) == {"ok"}
    assert set(remote["revision"]) == set(branches)
    steps = remote[remote["revision"] != "main"]
    assert {r: s for r, s in zip(steps["revision"], steps["step"])} == {b: float(s) for s, b in STEPS.items()}
    assert {r: t for r, t in zip(steps["revision"], steps["tokens"])} == {b: 256.0 * s for s, b in STEPS.items()}
    assert sorted(set(local["step"])) == [2.0, 4.0]
    columns = [c for c in metric_columns(local) if c in remote.columns]
    assert {"mean"} <= set(columns), columns
    index = ["step", "layer", "metric"]
    got = steps.sort_values(index).reset_index(drop=True)
    want = local.sort_values(index).reset_index(drop=True)
    assert len(got) == len(want) > 0
    pd.testing.assert_frame_equal(got[index], want[index], check_dtype=False)
    pd.testing.assert_frame_equal(got[columns], want[columns], atol=1e-6, rtol=0, check_dtype=False)
    # main = the final model (the step-4 weights): its rows are the last step's
    main_rows = remote[remote["revision"] == "main"].sort_values(["layer", "metric"]).reset_index(drop=True)
    last = want[want["step"] == 4.0].reset_index(drop=True)
    assert main_rows["step"].isna().all() and len(main_rows) == len(last) > 0   # "main" names no step
    pd.testing.assert_frame_equal(main_rows[columns], last[columns], atol=1e-6, rtol=0, check_dtype=False)

    # TransformerLens boots a branch by hub id and revision (interp installed: its adapters), with our logits
    boot = """if True:
        import sys, torch
        import interp.hf.tl_export
        from transformer_lens.model_bridge import TransformerBridge
        bridge = TransformerBridge.boot_transformers(sys.argv[1], revision=sys.argv[2], device="cpu")
        with torch.no_grad():
            torch.save(bridge(torch.arange(16).reshape(2, 8)), sys.argv[3])
    """
    env = hub.child_env(hf_home=tmp_path / "tl")
    env.update(PYTHONPATH=str(REPO), OMP_NUM_THREADS="1")
    proc = subprocess.run([sys.executable, "-c", boot, REPO_ID, STEPS[2], str(tmp_path / "tl.pt")], cwd=tmp_path,
                          env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    from interp.training.checkpoints import load_checkpoint

    ours = load_checkpoint(run_dir / "checkpoints" / "step_000002")[0].eval()
    with torch.no_grad():
        want = ours(torch.arange(16).reshape(2, 8))
    torch.testing.assert_close(torch.load(tmp_path / "tl.pt"), want, atol=1e-5, rtol=1e-5)

    # the card: what the run records, nothing it does not
    import json

    from interp._util.provenance import git_commit, package_versions

    config = json.loads((run_dir / "config.json").read_text())
    result = json.loads((run_dir / "result.json").read_text())
    card = repo.revisions[STEPS[2]].files["README.md"].read_text()
    widths = ", ".join(str(w) for w in config["model"]["d_mlp"])
    assert config["model"]["d_mlp"][0] > config["model"]["d_mlp"][-1]   # cosine 1.5 -> 0.5 tapers
    for expected in (f"| MLP width per layer | {widths} |",
                     "| Width schedule | cosine, start/end ratio 1.5 -> 0.5 of the mean width "
                     "(label `cosine 1.5->0.5`) |",
                     f"| Parameters | {config['params']['total']:,} |", "| Tokens seen (final model) | 1,024 |",
                     f"| Validation loss (final model, result.json) | {result['val_loss']:.4f}",
                     "| Batch | 8 sequences x 32 tokens = 256 tokens per step |", "| Preset | micro |",
                     f"exported with interp {package_versions()['interp']} at commit `{git_commit()}`",
                     f"trained with interp {config['provenance']['packages']['interp']} at commit "
                     f"`{config['provenance']['git_commit']}`",
                     f"This branch, `{STEPS[2]}`, holds the checkpoint of step 2 (512 tokens seen).",
                     f'revision="{STEPS[2]}"'):
        assert expected in card, (expected, card)
    for branch in branches:
        assert f"| `{branch}` |" in card
    assert "Command" not in card   # the trainer records no command line: left out, not guessed
    main_card = repo.revisions["main"].files["README.md"].read_text()
    assert "This branch, `main`, holds the final model (step 4, 1,024 tokens seen)." in main_card
    assert main_card.startswith("---\nlibrary_name: transformers\n")


def test_a_rerun_uploads_nothing_and_a_changed_branch_gets_one_commit(run, hub, capsys):
    run_dir, _ = run
    assert push(capsys, run_dir)[0] == 0
    commits, shas = list(hub.commits), {n: r.sha for n, r in hub.repos[("model", REPO_ID)].revisions.items()}
    before = len(hub.requests)
    code, out, err = push(capsys, run_dir)
    assert code == 0 and "(0 uploaded, 3 already up to date)" in out, out + err
    assert err.count("up to date") == 3
    assert hub.commits == commits
    assert {n: r.sha for n, r in hub.repos[("model", REPO_ID)].revisions.items()} == shas
    assert not [p for m, p in hub.requests[before:] if m == "POST" and ("/commit/" in p or "/preupload/" in p)]
    # a stray file on one branch: a rerun deletes it there, in one commit, and leaves the others alone
    repo = hub.repos[("model", REPO_ID)]
    stray = repo.revisions["main"].folder / "stray.txt"
    stray.write_text("not ours")
    from tests.hub_server import _Revision

    repo.revisions["main"] = _Revision(repo.revisions["main"].sha, repo.revisions["main"].folder)
    code, out, err = push(capsys, run_dir)
    assert code == 0 and "(1 uploaded, 2 already up to date)" in out, out + err
    assert len(hub.commits) == len(commits) + 1 and hub.commits[-1][1] == "main" and hub.commits[-1][3] == []
    assert "stray.txt" not in repo.revisions["main"].files


def test_a_refused_or_unreachable_hub_is_one_line_naming_the_repo_and_the_fix(run, hub, capsys, tmp_path):
    run_dir, _ = run
    hub.fail(401, "/api/repos/create")
    code, _, err = push(capsys, run_dir)
    lines = [line for line in err.splitlines() if line.startswith("interp ")]
    assert code == 2 and len(lines) == 1 and "Traceback" not in err, err
    assert REPO_ID in lines[0] and "not authorised" in lines[0] and "HF_TOKEN" in lines[0], lines[0]
    hub.clear_failures()
    hub.stop()
    code, _, err = push(capsys, run_dir)
    lines = [line for line in err.splitlines() if line.startswith("interp ")]
    assert code == 2 and len(lines) == 1, err
    assert REPO_ID in lines[0] and "could not be reached" in lines[0] and "HF_ENDPOINT" in lines[0], lines[0]
    # bad input fails before any request
    hub.start()
    before = len(hub.requests)
    code, _, err = push(capsys, run_dir, "no-org")
    assert code == 2 and "is not ORG/NAME" in err, err
    code, _, err = push(capsys, run_dir / "checkpoints" / "step_000002")
    assert code == 2 and "is a step checkpoint" in err, err
    assert len(hub.requests) == before


def test_branch_names_carry_step_and_exact_tokens():
    from interp.hf.hub import step_of
    from interp.hf.push import branch_name

    for step, tokens in ((0, 0), (2, 512), (128, 262_144), (1000, 2_097_152_000), (7, 1_500_000_000_000),
                         (3, 3 * 2048 * 9), (99, 10**6)):
        name = branch_name(step, tokens)
        assert step_of(name) == (float(step), float(tokens)), name
    assert branch_name(2, 512) == "step2-tokens512" and branch_name(1000, 4 * 10**9) == "step1000-tokens4B"
    assert branch_name(128, 262_144) == "step128-tokens262144" and branch_name(9, 2_048_000) == "step9-tokens2048K"
    assert branch_name(5, None) == "step5" and step_of("step5")[0] == 5.0


def test_public_paths_name_local_folders_without_locating_them():
    from interp.hf.export import public_paths

    block = {"exported_from": "/home/ada/runs/cosine", "train": {"source": "/scratch/u1/corpus/", "out_dir": "runs/x",
             "preset": "micro", "files": ["~/data/a.txt", "C:\\data\\b.txt"], "lr": 0.001}}
    assert public_paths(block) == {"exported_from": "<local>/cosine", "train": {
        "source": "<local>/corpus", "out_dir": "runs/x", "preset": "micro", "files": ["<local>/a.txt", "<local>/b.txt"],
        "lr": 0.001}}
