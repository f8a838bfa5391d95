"""Every decoder family TransformerLens 4.3 has an adapter for, as a tiny random save_pretrained directory: the
SiteMap derived from TL's adapter (interp.hf.tl_adapters), the probe through a path (torch and nnsight backends)
against plain float64 HF hooks, the causal rows, the neuron ablation and `interp batch`.

The reference is independent of the SiteMap's norms: what layer l's MLP adds to the stream is the layer's output
minus its output with that MLP zeroed (the same input h_l), which holds for every block style (pre-norm, sandwich,
post-norm, parallel); attention's is the rest, resid_post - h_l - mlp.

CHECKED, NOT_BUILDABLE and NOT_PROBEABLE (interp.hf.families, the one list the docs are rendered from) partition
TransformerLens's table; the slow walk asserts the two left-out lists are exactly the families that fail, so neither
can go stale, and a fast test that README.md and docs/probes.md say what the lists do.

Bloom, OPT and Mixtral (issue #48) go through every command here: Bloom's MLP and attention add the residual
themselves, OPT's layer holds fc1 / fc2 and runs them on [batch * pos, d], Mixtral's MLP is a mixture of experts.
"""

from __future__ import annotations

import dataclasses
import random
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from interp.hf import get_submodule, layer_modules, site_map_for
from interp.hf.families import CHECKED, NOT_BUILDABLE, NOT_PROBEABLE
from interp.hf.tl_adapters import tl_architectures
from interp.probes.reference import ATTN_TERM, MLP_TERM, layer_dropped, reference_measures
from interp.probes.reference import float64_default as _float64_default
from interp.probes.reference import zeroed as _zeroed
from tests import factories

SEQ_LEN, TOKENS = 12, 48  # 4 sequences
METRICS = ("rho_mlp", "rho_attn", "rho_block")
TOL = 1e-6
THREE_LAYERS = {"num_hidden_layers": 3}  # the ablation's layer thirds need one layer each

PROBEABLE = list(CHECKED)  # the one list (interp.hf.families): tests/cli/test_families_walk.py and the docs read it
# the issue's families, one per block style (GPT-NeoX both ways), in the fast tier
ISSUE = {"GPTNeoXForCausalLM": ({}, "parallel"),
         "GPTNeoXForCausalLM-sequential": ({"use_parallel_residual": False}, "pre_norm"),
         "Olmo2ForCausalLM": ({}, "post_norm"), "PhiForCausalLM": ({}, "parallel"),
         "Phi3ForCausalLM": ({}, "pre_norm"), "GPTJForCausalLM": ({}, "parallel"),
         "Gemma2ForCausalLM": ({}, "sandwich")}

pytestmark = pytest.mark.usefixtures("one_thread")


# MLP_TERM / ATTN_TERM: what the MLP (attention) adds to the stream, read off each family's HF forward() (not off the
# SiteMap under test) where the module's own output is not it (Bloom, MPT, OPT, XGLM): interp.probes.reference, whose
# float64 reference_measures is also analyses/engine_validation.py's.


def _arch(family: str) -> str:
    return family.split("-")[0]


def _saved(root: Path, family: str, extra: dict | None = None) -> Path:
    """A save_pretrained directory of a tiny `family` model with a word tokenizer over its vocabulary."""
    model = factories.tiny_any_hf(_arch(family), **(extra or {}))
    tokenizer = factories.word_tokenizer(64, bos_token="w1", eos_token="w2", pad_token="[UNK]")
    return factories.save_pretrained_dir(root / family, model, tokenizer)


def _text(path: Path) -> Path:
    """Words of the tiny vocabulary, 8 per probed token: room for a tokenizer class that splits them (Qwen2's)."""
    rng = random.Random(0)
    path.write_text(" ".join(f"w{rng.randrange(3, 64)}" for _ in range(TOKENS * 8)))
    return path


def _first(x):
    return x[0] if isinstance(x, tuple) else x


def _float64(path: Path):
    """The save_pretrained model at `path` in float64, plain transformers (eager attention and experts)."""
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(path, dtype=torch.float64, attn_implementation="eager",
                                                experts_implementation="eager").eval()  # grouped_mm has no float64


def _sequences(path: Path, text: Path) -> torch.Tensor:
    """The probe's sequences: the text's first TOKENS ids (no special tokens), SEQ_LEN per row."""
    from transformers import AutoTokenizer

    ids = AutoTokenizer.from_pretrained(path).encode(text.read_text(), add_special_tokens=False)
    return torch.tensor(ids[:TOKENS]).reshape(TOKENS // SEQ_LEN, SEQ_LEN)


def _term(model, layer, terms: dict[str, str], default: str):
    return get_submodule(layer, terms.get(type(model).__name__, default))


def reference(path: Path, text: Path) -> dict[str, list[float]]:
    """Per layer, each metric's mean over the probe's tokens (position 0 left out) in float64, from plain hooks on
    the decoder layers (interp.probes.reference): mlp = out - out(this layer's MLP zeroed); attn = out - h - mlp."""
    return reference_measures(_float64(path), _sequences(path, text), METRICS)


def check_probe(path: Path, text: Path) -> None:
    """The probe through the path, torch and nnsight backends, equals the float64 reference to TOL."""
    from interp.probes import probe

    want = reference(path, text)
    for backend in ("torch", "nnsight"):
        df = probe(str(path), text=str(text), tokens=TOKENS, seq_len=SEQ_LEN, batch_size=4, backend=backend,
                   metrics=METRICS, dtype="float64")
        got = df.pivot(index="layer", columns="metric", values="mean")
        for metric in METRICS:
            assert got[metric].tolist() == pytest.approx(want[metric], abs=TOL), (backend, metric)


# ------------------------------------------------------------------------------------------ the issue's families

@pytest.mark.parametrize("family", list(ISSUE))
def test_issue_family_probes_like_plain_hooks(family, tmp_path):
    extra, style = ISSUE[family]
    path = _saved(tmp_path, family, extra)
    assert site_map_for(factories.tiny_any_hf(_arch(family), **extra)).style == style
    check_probe(path, _text(tmp_path / "text.txt"))


@pytest.mark.parametrize("family", ["GPTNeoXForCausalLM", "Olmo2ForCausalLM", "PhiForCausalLM", "Phi3ForCausalLM"])
def test_issue_family_causal_rows_and_neuron_ablation(family, tmp_path):
    from interp import ablations as ab
    from interp.causal import probe

    path, text = _saved(tmp_path, family, THREE_LAYERS), _text(tmp_path / "text.txt")
    df = probe(str(path), text=str(text), tokens=TOKENS, seq_len=SEQ_LEN, batch_size=4, metrics=("rho_mlp",),
               causal=True)
    causal = df[df.metric.str.startswith("delta_loss_")]
    assert set(causal.metric) == {"delta_loss_skip_mlp", "delta_loss_mean_mlp", "delta_loss_skip_attn",
                                  "delta_loss_skip_block"}
    assert causal["mean"].notna().all() and len(causal) == 4 * 3
    cfg = ab.AblationConfig(model=str(path), text=str(text), seq_len=SEQ_LEN, score_sequences=2, eval_sequences=2,
                            batch_size=2, fractions=(0.5,), seeds=(0,), skip_layers=(1,))
    rows = ab.run_pretrained_ablation(cfg, log=None)
    neurons = rows[rows.kind == "neurons"]
    assert len(neurons) and (neurons.n_neurons_removed > 0).all() and rows["loss"].notna().all()


def test_gemma2_asks_for_eager_attention_when_sdpa_is_requested(capsys):
    from interp.hf.attention import attention_for

    config = factories.tiny_any_config("Gemma2ForCausalLM")
    assert attention_for(config, "sdpa") == "eager" and "Gemma2ForCausalLM has no sdpa" in capsys.readouterr().err
    assert attention_for(factories.tiny_any_config("LlamaForCausalLM"), "sdpa") == "sdpa"
    assert attention_for(config, "eager") == "eager"


def test_gemma2_ablation_runs_under_the_default_sdpa(tmp_path):
    from interp import ablations as ab

    path, text = _saved(tmp_path, "Gemma2ForCausalLM", THREE_LAYERS), _text(tmp_path / "text.txt")
    cfg = ab.AblationConfig(model=str(path), text=str(text), seq_len=SEQ_LEN, score_sequences=2, eval_sequences=2,
                            batch_size=2, fractions=(0.5,), seeds=(0,), skip_layers=())
    assert ab.run_pretrained_ablation(cfg, log=None)["loss"].notna().all()


def test_fused_gate_up_and_experts_say_so():
    phi3 = site_map_for(factories.tiny_any_hf("Phi3ForCausalLM"))
    assert phi3.mlp_in == ("gate_up_proj",) and phi3.mlp_in_fused and phi3.mlp_down == "down_proj"
    mixtral = factories.tiny_any_hf("MixtralForCausalLM")
    assert site_map_for(mixtral).mlp_down is None
    from interp.hf import mlp_down_modules

    with pytest.raises(ValueError, match="no single down projection"):
        mlp_down_modules(mixtral)


def test_batch_cli_over_six_families(tmp_path, inline_dirs):
    """One `interp batch` over three block styles and Bloom, OPT, Mixtral; the last three equal plain float64 hooks."""
    import pandas as pd

    from interp.cli import main

    inline, text = inline_dirs
    dirs = [_saved(tmp_path, f) for f in ("GPTNeoXForCausalLM", "Olmo2ForCausalLM", "PhiForCausalLM")]
    out = tmp_path / "batch.parquet"
    assert main(["batch", *map(str, dirs), *map(str, inline.values()), "--out", str(out), "--text", str(text),
                 "--tokens", str(TOKENS), "--seq-len", str(SEQ_LEN), "--dtype", "float64", "--no-progress"]) == 0
    df = pd.read_parquet(out)
    df["family"] = df.model.map(lambda model: Path(model).name)  # the model column is the path given
    assert df.groupby("family").layer.nunique().to_dict() == {**dict.fromkeys((p.name for p in dirs), 2),
                                                                **dict.fromkeys(inline, 3)}
    for family, path in inline.items():
        got = df[(df.family == family) & (df.metric == "rho_mlp")].sort_values("layer")["mean"].tolist()
        assert got == pytest.approx(reference(path, text)["rho_mlp"], abs=TOL), family


# ------------------------------------------------------------------------------------------ Bloom, OPT, Mixtral (#48)

INLINE = ("BloomForCausalLM", "OPTForCausalLM", "MixtralForCausalLM")


@pytest.fixture(scope="module")
def inline_dirs(tmp_path_factory) -> tuple[dict[str, Path], Path]:
    """Bloom, OPT and Mixtral as save_pretrained directories, three layers each (the ablation's thirds), and a text."""
    root = tmp_path_factory.mktemp("inline")
    return {f: _saved(root, f, THREE_LAYERS) for f in INLINE}, _text(root / "text.txt")


def _loaded64(path: Path):
    """`path` through interp.hf.load_pretrained in float64 (eager experts: grouped_mm has no float64)."""
    from interp.hf import load_pretrained

    loaded = load_pretrained(str(path), dtype=torch.float64)
    if loaded.model._can_set_experts_implementation():
        loaded.model.set_experts_implementation("eager")
    return loaded


def _constant(value: torch.Tensor):
    """A forward hook: the module returns `value` at every token (OPT's fc2: [batch * pos, d] as well)."""
    def hook(_module, _args, out):
        first = _first(out)
        const = value.expand_as(first).clone()
        return (const, *out[1:]) if isinstance(out, tuple) else const
    return hook


def _losses(model, seqs: torch.Tensor) -> torch.Tensor:
    """Per sequence, the mean next-token cross-entropy over its SEQ_LEN - 1 predictions."""
    logits = model(seqs).logits
    return F.cross_entropy(logits[:, :-1].transpose(1, 2), seqs[:, 1:], reduction="none").mean(1)


@torch.no_grad()
def causal_reference(path: Path, seqs: torch.Tensor) -> dict[str, list[float]]:
    """Per kind and layer, the mean over sequences of (ablated - clean) loss in float64 from plain hooks on the
    modules each family's forward() adds (MLP_TERM, ATTN_TERM): skip_mlp / skip_attn zero that term, mean_mlp puts
    the term's mean over the probe's tokens (positions 1..) in its place, skip_block drops the layer."""
    model = _float64(path)
    layers = layer_modules(model)
    mlps = [_term(model, layer, MLP_TERM, site_map_for(model).mlp) for layer in layers]
    attns = [_term(model, layer, ATTN_TERM, site_map_for(model).attn) for layer in layers]
    out: dict[str, list[float]] = {"skip_mlp": [], "mean_mlp": [], "skip_attn": [], "skip_block": []}
    with _float64_default():
        clean = _losses(model, seqs)
        terms = {}
        handles = [m.register_forward_hook(lambda _m, _a, o, l=l: terms.__setitem__(l, _first(o)))
                   for l, m in enumerate(mlps)]
        try:
            model(seqs)
        finally:
            for h in handles:
                h.remove()
        for l in range(len(layers)):
            term = terms[l].reshape(*seqs.shape, -1)  # OPT's fc2 output is [batch * pos, d]
            mean = term[:, 1:].reshape(-1, term.shape[-1]).mean(0)
            for kind, module, hook in (("skip_mlp", mlps[l], _zeroed), ("mean_mlp", mlps[l], _constant(mean)),
                                       ("skip_attn", attns[l], _zeroed)):
                handle = module.register_forward_hook(hook)
                try:
                    out[kind].append((_losses(model, seqs) - clean).mean().item())
                finally:
                    handle.remove()
            with layer_dropped(model, l):
                out["skip_block"].append((_losses(model, seqs) - clean).mean().item())
    return out


def test_inline_residual_sites_are_the_modules_that_produce_the_terms():
    """Bloom's MLP and attention add the residual themselves: their terms are the output projections; OPT's layer
    holds fc1 / fc2 (no MLP module); configurations whose blocks no path describes are refused with the reason."""
    bloom = site_map_for(factories.tiny_any_hf("BloomForCausalLM"))
    assert (bloom.mlp_out_module, bloom.attn_out_module, bloom.resid_mid_module, bloom.mlp_read_module) == (
        "mlp.dense_4h_to_h", "self_attention.dense", "post_attention_layernorm", "mlp")
    opt = site_map_for(factories.tiny_any_hf("OPTForCausalLM"))
    assert (opt.mlp, opt.mlp_out_module, opt.mlp_read_module, opt.within_mlp(opt.mlp_down), opt.style) == (
        "", "fc2", "fc1", "fc2", "pre_norm")
    for arch, extra, why in (("OPTForCausalLM", {"do_layer_norm_before": False}, "OPT-350m"),
                             ("BloomForCausalLM", {"apply_residual_connection_post_layernorm": True},
                              "the residual it adds back is the normalised stream")):
        with pytest.raises(ValueError, match=why):
            site_map_for(factories.tiny_any_hf(arch, **extra))


def test_a_refusal_suggests_the_models_own_module_paths():
    """The register_site_map call in the error names the paths of the model at hand (of the class, built on the meta
    device, when only its name is given), not Llama's."""
    for model in (factories.tiny_any_hf("RwkvForCausalLM"), "RwkvForCausalLM"):
        with pytest.raises(ValueError, match="register_site_map") as err:
            site_map_for(model)
        assert "layers='rwkv.blocks'" in str(err.value) and "model.layers" not in str(err.value)
        assert "attn='attention'" in str(err.value) and "rwkv.ln_out" in str(err.value)


@pytest.mark.parametrize("family", INLINE)
def test_inline_families_probe_like_plain_hooks(family, inline_dirs):
    from interp.probes import probe

    dirs, text = inline_dirs
    check_probe(dirs[family], text)
    normed = probe(str(dirs[family]), text=str(text), tokens=TOKENS, seq_len=SEQ_LEN, metrics=("rho_mlp_normed",),
                   reference="normed")  # the MLP's input: OPT's fc1 reads [batch * pos, d]
    assert len(normed) == 3 and normed["mean"].notna().all()


@pytest.mark.parametrize("family", INLINE)
def test_inline_families_causal_rows_equal_plain_hooks(family, inline_dirs):
    """Every causal row (skip_mlp, mean_mlp, skip_attn, skip_block), a mixture of experts' included, equals plain
    float64 hooks on the modules each family's forward() adds."""
    from interp.causal import probe

    dirs, text = inline_dirs
    df = probe(_loaded64(dirs[family]), text=str(text), tokens=TOKENS, seq_len=SEQ_LEN, batch_size=4,
               metrics=("rho_mlp",), causal=True)
    got = df[df.metric.str.startswith("delta_loss_")].pivot(index="layer", columns="metric", values="mean")
    want = causal_reference(dirs[family], _sequences(dirs[family], text))
    for kind, values in want.items():
        assert got[f"delta_loss_{kind}"].tolist() == pytest.approx(values, abs=1e-9, rel=1e-7), kind
        assert max(map(abs, values)) > 1e-6, kind  # each intervention changes the loss: the check can fail


@pytest.mark.parametrize("family", INLINE)
def test_inline_families_ablate_like_plain_hooks(family, inline_dirs):
    """`interp ablate`'s whole-MLP skip equals plain float64 hooks; a neuron removed is the down projection's column
    zeroed in the weights (OPT's fc2 reads [batch * pos, d_mlp]); a mixture of experts runs the whole-MLP skips and
    leaves the neuron conditions out, said in one line, and refuses an ablation of neurons alone."""
    from interp import ablations as ab
    from interp._util.errors import InputError
    from interp.ablations.conditions import ablated
    from interp.ablations.loss import sequence_losses
    from interp.ablations.run import split_sequences
    from interp.probes import encode_text

    dirs, text = inline_dirs
    loaded, log = _loaded64(dirs[family]), []
    cfg = ab.AblationConfig(model=str(dirs[family]), text=str(text), seq_len=SEQ_LEN, score_sequences=2,
                            eval_sequences=2, batch_size=2, fractions=(0.5,), seeds=(0,), skip_layers=(1,))
    rows = ab.run_pretrained_ablation(cfg, loaded=loaded, log=log.append)
    evals = split_sequences(encode_text(loaded.tokenizer, text.read_text()), SEQ_LEN, 2, 2)[1]
    plain = _float64(dirs[family])
    zero = _term(plain, layer_modules(plain)[1], MLP_TERM, site_map_for(plain).mlp).register_forward_hook(_zeroed)
    with torch.no_grad():
        want = _losses(plain, evals).mean().item()
    zero.remove()
    assert rows.set_index("kind").loc["skip_mlp", "loss"] == pytest.approx(want, abs=1e-9)
    if family == "MixtralForCausalLM":
        assert set(rows.kind) == {"baseline", "skip_mlp"}
        assert any("mixture of experts" in line and "neuron conditions are left out" in line for line in log)
        with pytest.raises(InputError, match="no single down projection"):
            ab.run_pretrained_ablation(dataclasses.replace(cfg, skip_layers=()), loaded=loaded, log=None)
        return
    neurons = rows[rows.kind == "neurons"]
    assert len(neurons) and (neurons.n_neurons_removed > 0).all()
    idx = torch.tensor([0, 5, 17])
    with torch.no_grad(), ablated(loaded, remove={0: idx}):
        masked = sequence_losses(loaded, [evals])
    down = _term(plain, layer_modules(plain)[0], MLP_TERM, "")  # Bloom's dense_4h_to_h, OPT's fc2: the neurons' reader
    with torch.no_grad():
        down.weight[:, idx] = 0.0
        edited = _losses(plain, evals)
    torch.testing.assert_close(masked, edited, atol=1e-10, rtol=0)
    assert (masked - sequence_losses(loaded, [evals])).abs().max() > 1e-6  # the removal changes the loss


def test_eval_needs_no_residual_map(inline_dirs, tmp_path):
    """`interp eval` over Bloom, OPT, Mixtral and Granite (whose scaled residuals no SiteMap describes): one call,
    every perplexity computed."""
    import pandas as pd

    from interp.cli import main

    dirs, text = inline_dirs
    granite = _saved(tmp_path, "GraniteForCausalLM")
    with pytest.raises(ValueError, match="scaled inline"):
        site_map_for(factories.tiny_any_hf("GraniteForCausalLM"))
    out = tmp_path / "eval.parquet"
    assert main(["eval", *map(str, dirs.values()), str(granite), "--text", str(text), "--tasks", "text_ppl",
                 "--out", str(out)]) == 0
    df = pd.read_parquet(out)
    ppl = df[df.metric == "word_perplexity"]
    assert set(df.status) == {"ok"} and ppl.model.nunique() == 4 and (ppl.value > 1).all()


@pytest.mark.slow
def test_inline_families_through_the_loopback_hub(inline_dirs, tmp_path, monkeypatch):
    """Bloom, OPT and Mixtral served by a hub on 127.0.0.1 (tests/hub_server.py), through the CLI in process: batch
    (their rho_mlp equal to plain float64 hooks on the served weights), probe --causal, ablate and eval, each row
    naming the commit it read."""
    import pandas as pd

    from interp.cli import main
    from tests.hub_server import LoopbackHub, patch_clients

    dirs, text = inline_dirs
    repos = {family: f"tiny-org/{family.removesuffix('ForCausalLM').lower()}" for family in INLINE}
    with LoopbackHub(tmp_path / "served") as hub:
        shas = {family: hub.add_model(repo, {"main": dirs[family]})["main"] for family, repo in repos.items()}
        patch_clients(hub, tmp_path / "hf", monkeypatch)
        common = ["--text", str(text), "--seq-len", str(SEQ_LEN)]
        assert main(["batch", *repos.values(), "--out", str(tmp_path / "b.parquet"), "--tokens", str(TOKENS),
                     "--dtype", "float64", "--no-progress", *common]) == 0
        assert main(["probe", "--model", repos["OPTForCausalLM"], "--causal", "--tokens", str(TOKENS),
                     "--metrics", "rho_mlp", "--out", str(tmp_path / "p.parquet"), *common]) == 0
        assert main(["ablate", repos["MixtralForCausalLM"], "--score-sequences", "2", "--eval-sequences", "2",
                     "--skip-layers", "1", "--out", str(tmp_path / "abl"), *common]) == 0
        assert main(["eval", repos["BloomForCausalLM"], "--text", str(text), "--tasks", "text_ppl",
                     "--out", str(tmp_path / "e.parquet")]) == 0
    batch = pd.read_parquet(tmp_path / "b.parquet")
    for family, repo in repos.items():
        rows = batch[batch.model == repo]
        assert set(rows.commit) == {shas[family]}, family
        got = rows[rows.metric == "rho_mlp"].sort_values("layer")["mean"].tolist()
        assert got == pytest.approx(reference(dirs[family], text)["rho_mlp"], abs=TOL), family
    probe = pd.read_parquet(tmp_path / "p.parquet")
    causal = probe[probe.metric.str.startswith("delta_loss_")]
    assert len(causal) == 4 * 3 and causal["mean"].notna().all() and set(probe.commit) == {shas["OPTForCausalLM"]}
    ablation = pd.read_csv(tmp_path / "abl" / "pretrained_capacity_ablation.csv")
    assert set(ablation.kind) == {"baseline", "skip_mlp"} and set(ablation.commit) == {shas["MixtralForCausalLM"]}
    evals = pd.read_parquet(tmp_path / "e.parquet")
    assert set(evals.status) == {"ok"} and set(evals.commit) == {shas["BloomForCausalLM"]}


def test_readme_and_docs_say_what_the_family_lists_do():
    """README.md's sentence and docs/probes.md's lists are rendered from interp.hf.families (the lists this module
    checks); `python scripts/family_list.py` writes them. The lists partition TransformerLens's table."""
    from interp.hf import families

    repo = Path(__file__).resolve().parents[2]
    for page, block in ((families.README, families.readme_sentence()), (families.DOCS_PAGE, families.docs_block())):
        assert f"<!-- begin:families -->\n{block}\n<!-- end:families -->" in (repo / page).read_text(), (
            f"{page} is not what interp.hf.families renders: run python scripts/family_list.py")
    table = set(tl_architectures())
    parts = (set(CHECKED), set(NOT_PROBEABLE), set(NOT_BUILDABLE))
    assert set.union(*parts) == table and sum(map(len, parts)) == len(table) == 162


# ------------------------------------------------------------------------------------------ every TL family

@pytest.mark.slow
def test_the_lists_of_left_out_families_are_exactly_what_fails():
    not_built, refused = {}, {}
    for arch in tl_architectures():
        try:
            model = factories.tiny_any_hf(arch)
            with torch.no_grad():
                model(torch.randint(3, 64, (1, 6)))
        except Exception as err:  # noqa: BLE001 - any failure to build counts; the dict says why
            not_built[arch] = f"{type(err).__name__}: {err}"
            continue
        try:
            site_map_for(model)
        except ValueError as err:
            refused[arch] = str(err)
    assert sorted(not_built) == sorted(NOT_BUILDABLE)
    assert sorted(refused) == sorted(NOT_PROBEABLE)
    for arch, reason in NOT_PROBEABLE.items():
        assert reason in refused[arch] and "register_site_map" in refused[arch], (arch, refused[arch])


@pytest.mark.slow
@pytest.mark.parametrize("family", [a for a in PROBEABLE if a not in ISSUE])
def test_every_tl_family_probes_like_plain_hooks(family, tmp_path):
    check_probe(_saved(tmp_path, family), _text(tmp_path / "text.txt"))


@pytest.mark.slow
@pytest.mark.parametrize("family", PROBEABLE)
def test_every_tl_family_skip_block_equals_the_layer_dropped(family):
    """delta_loss_skip_block (the block's hook returns its input) = the loss of the model rebuilt without that
    layer, in float64, for every family the adapter table knows (issue #34)."""
    from interp.ablations import layer_effects
    from interp.ablations.loss import sequence_losses

    model = factories.tiny_any_hf(_arch(family), **THREE_LAYERS)
    if model._can_set_experts_implementation():
        model.set_experts_implementation("eager")  # grouped_mm has no float64
    model = model.double().eval()
    seqs = list(torch.randint(3, 64, (4, SEQ_LEN), generator=torch.Generator().manual_seed(0)).split(2))
    with _float64_default():
        effects = layer_effects(model, seqs, kinds=("skip_block",))
        for layer in range(3):
            with layer_dropped(model, layer):   # the model rebuilt without it (interp.probes.reference)
                dropped = sequence_losses(model, seqs)
            torch.testing.assert_close(effects.ablated["skip_block"][layer], dropped, atol=1e-6, rtol=0)
    assert (effects.deltas("skip_block").abs().max(1).values > 1e-6).all()  # every removal changes the loss
