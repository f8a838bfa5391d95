"""The probes' vocabulary, torch-free: sites, metric names, backends, positions, references, dtypes.

Why a module of its own: ProbeConfig and the CLI's --help need the allowed values, and `interp --help`
must not import torch; interp.probes.metrics (torch) builds METRICS in the order named here."""

from __future__ import annotations

from interp._util.dtypes import dtype_names

SITES = ("resid_pre", "attn_out", "resid_mid", "mlp_out", "resid_post")  # forward order within a layer
# Opt-in sites, hooked only when a tracked metric reads them. mlp_in = the MLP module's input, i.e. the
# output of its input norm (RMSNorm(resid_mid) incl. gain); in forward order it sits after resid_mid.
EXTRA_SITES = ("mlp_in",)
ALL_SITES = ("resid_pre", "attn_out", "resid_mid", "mlp_in", "mlp_out", "resid_post")
REFERENCES = ("raw", "normed")  # reference="normed" adds rho_mlp_normed to the metrics
BACKENDS = ("torch", "transformer_lens", "nnsight", "hookpoints")
POSITIONS = ("skip_first", "all")
DTYPE_NAMES = dtype_names("float32", "float64")  # precision of the metric math (interp.probes.metrics.COMPUTE_DTYPES)
DEFAULT_EPS = 1e-8

# Opt-in measures beyond the paper's (interp.probes.metrics, .lens, .population define them):
GEOMETRY_METRICS = ("norm_ratio_attn", "norm_ratio_mlp_mid", "resid_growth", "angular_distance")  # per token
LENS_METRICS = ("logit_lens_kl", "logit_lens_top1")  # per token; a reference forward + one unembedding per layer
POPULATION_METRICS = ("mlp_erank", "mlp_participation", "cka_resid")  # over all tokens at once (covariances)

# Every metric, in table order; METRIC_NAMES (the default set) is the paper's six, unchanged by the opt-in ones.
ALL_METRIC_NAMES = ("rho_mlp", "rho_mlp_mid", "rho_block", "rho_attn", "norm_ratio", "block_influence",
                    "rho_mlp_normed", *GEOMETRY_METRICS, *LENS_METRICS, *POPULATION_METRICS)
OPTIONAL_METRICS = ("rho_mlp_normed", *GEOMETRY_METRICS, *LENS_METRICS, *POPULATION_METRICS)
METRIC_NAMES = tuple(m for m in ALL_METRIC_NAMES if m not in OPTIONAL_METRICS)  # the default set
PER_TOKEN_METRICS = tuple(m for m in ALL_METRIC_NAMES if m not in POPULATION_METRICS)  # interp.probes.metrics.METRICS
JACKKNIFE_GROUPS = 8  # population metrics' CI: delete-a-group jackknife over this many groups of whole sequences
