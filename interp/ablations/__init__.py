"""Causal ablations: remove MLP neurons (or whole MLPs) at run time and measure the held-out loss.

Why: the paper argues that late layers mostly reinforce what is already in the residual stream, so
their MLP capacity is worth less. If so, removing late MLP capacity from a trained model should cost
less loss than removing the same amount early or in the middle. This package measures that, on any
model interp.hf.resolve_model accepts (registry name, .gguf, HF directory, one of our checkpoints).

Definitions (SwiGLU/Llama names; every architecture's names come from interp.hf's adapter table):
  neuron i of layer l   one intermediate channel of the MLP: a_i = act(gate_i) * up_i, the i-th INPUT
                        channel of the down projection (SiteMap.mlp_down: down_proj, GPT-2's c_proj)
                        (TransformerLens: blocks.{l}.mlp.hook_post[..., i]).
  contribution score    s_i = mean over scoring tokens of |a_i|  *  ||W_down[:, i]||_2
                        (activation-weighted output norm: how large a vector neuron i writes, on average).
  removing neurons      a forward PRE-hook on the down projection multiplies its input by a 0/1 keep-mask
                        (= zeroing W_down's columns, without touching the weights), so one loaded model
                        serves every condition; `ablated()` removes its hooks on exit, even on error.
  skipping an MLP       a forward hook on the MLP module returns zeros: the layer adds nothing through its
                        MLP (on Gemma's sandwich norm, post_feedforward_layernorm(0) = 0 too).
  loss                  mean next-token cross-entropy (nats) per sequence; a condition's `delta` is the
                        mean over sequences of its paired per-sequence difference to the baseline (same
                        tokens), with a Student-t 95% CI over sequences (tokens within a sequence are
                        correlated, so sequences, not tokens, are the independent units).
Scores are streamed: the pre-hook reduces each batch to per-neuron sums at once; no activations are kept.

    config.py      AblationConfig (torch-free: the CLI builds its flags from it)
    sites.py       MlpSite per layer from the adapter table; layer groups (thirds)
    scores.py      contribution scores; lowest / random neuron selection
    conditions.py  Condition, build_conditions, removals, ablated (the hooks)
    loss.py        per-sequence losses, paired deltas with t-CIs
    run.py         run_pretrained_ablation: the experiment and its tidy table (COLUMNS)
    layers.py      per-layer causal effects: MLP skipped / mean-ablated, attention skipped (LayerEffects); each
                   pass resumed at the layer it ablates, from the clean stream kept per batch
    attribution.py the same rows estimated to first order from one forward and one backward (attribution patching)

Those effects as rows of the probe table (`interp probe --causal`), the join and the Spearman correlations
live in interp.causal, one layer above this package and interp.probes (this package imports probes, so probes
cannot import it back); nothing here imports interp.causal.

Names are exported lazily (interp._util.lazy): importing the package imports no submodule."""

from interp._util.lazy import lazy_exports

_EXPORTS = {
    'GROUPS': 'config',
    'SELECTIONS': 'config',
    'DTYPE_NAMES': 'config',
    'AblationConfig': 'config',
    'MlpSite': 'sites',
    'mlp_sites': 'sites',
    'layer_groups': 'sites',
    'down_column_norms': 'sites',
    'contribution_scores': 'scores',
    'n_to_remove': 'scores',
    'select_neurons': 'scores',
    'KINDS': 'conditions',
    'Condition': 'conditions',
    'build_conditions': 'conditions',
    'removals': 'conditions',
    'ablated': 'conditions',
    'sequence_losses': 'loss',
    'paired_delta': 'loss',
    'DTYPES': 'run',
    'COLUMNS': 'run',
    'split_sequences': 'run',
    'run_pretrained_ablation': 'run',
    'CAUSAL_KINDS': 'layers',
    'CAUSAL_METRICS': 'layers',
    'LayerEffects': 'layers',
    'layer_ablated': 'layers',
    'mlp_out_means': 'layers',
    'layer_effects': 'layers',
    'ATTRIBUTION_METRICS': 'layers',
    'causal_metric': 'layers',
    'causal_units': 'layers',
    'causal_pass_count': 'layers',
    'attribution_effects': 'attribution',
}

__getattr__, __dir__, __all__ = lazy_exports(__name__, _EXPORTS)
