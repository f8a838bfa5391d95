"""Per-layer novelty probes (paper, section 4), streamed: per-layer cosines between what a layer writes
and the residual stream it reads, reduced per token INSIDE the forward hooks.

One module per job:
  names        the vocabulary (sites, metric names, backends, positions, references, dtypes); torch-free
  config       ProbeConfig: every probe option, declared once; torch-free (the CLI's flags come from it)
  metrics      the metric math (cosine, LayerOperands, METRICS)
  lens         the logit lens (LogitLens: a reference forward, then one unembedding per layer)
  population   covariance-based measures over all tokens (erank, participation, CKA; jackknife CIs)
  accumulator  NoveltyAccumulator: streaming per-layer statistics
  text         the text, its tokens and the token batches
  backends/    one module per way of reading activations (torch, transformer_lens, nnsight, hookpoints)
  massive      the massive-activation scan (residual_abs_mean, massive_dims)
  reference    an independent float64 computation of the measures from plain HF hooks (engine validation)
  run          accumulate, probe_model, probe
  table        the tidy table (TABLE_COLUMNS, to_frame, save_table)
  outputs      output paths checked before any work (check_output); torch-free
  batch        many checkpoints -> one resumable table (a job of interp.jobs)

Names are exported lazily (interp._util.lazy): importing the package imports no submodule."""

from interp._util.lazy import lazy_exports

_EXPORTS = {
    # names (torch-free)
    'SITES': 'names',
    'EXTRA_SITES': 'names',
    'ALL_SITES': 'names',
    'REFERENCES': 'names',
    'BACKENDS': 'names',
    'POSITIONS': 'names',
    'DTYPE_NAMES': 'names',
    'DEFAULT_EPS': 'names',
    'ALL_METRIC_NAMES': 'names',
    'OPTIONAL_METRICS': 'names',
    'METRIC_NAMES': 'names',
    'GEOMETRY_METRICS': 'names',
    'LENS_METRICS': 'names',
    'POPULATION_METRICS': 'names',
    'PER_TOKEN_METRICS': 'names',
    'JACKKNIFE_GROUPS': 'names',
    # config (torch-free)
    'ProbeConfig': 'config',
    'parse_exclude_dims': 'config',
    'sequence_plan': 'config',
    'check_metrics': 'config',
    'check_dims': 'config',
    'with_reference': 'config',
    'exclusion_request': 'config',
    # metrics
    'COMPUTE_DTYPES': 'metrics',
    'cosine': 'metrics',
    'LayerOperands': 'metrics',
    'Metric': 'metrics',
    'METRICS': 'metrics',
    # the opt-in measures: logit lens, population statistics
    'LogitLens': 'lens',
    'PopulationStats': 'population',
    # accumulator
    'QUANTILE_COLUMNS': 'accumulator',
    'NoveltyAccumulator': 'accumulator',
    # text
    'position_mask': 'text',
    'token_batches': 'text',
    'load_text': 'text',
    'encode_text': 'text',
    'text_sha256': 'text',
    # backends
    'Backend': 'backends.base',
    'Plan': 'backends.base',
    'get_backend': 'backends.choice',
    'make_plan': 'backends.choice',
    # massive activations
    'residual_abs_mean': 'massive',
    'massive_dims': 'massive',
    # the independent float64 reference (analyses/engine_validation.py)
    'REFERENCE_MEASURES': 'reference',
    'reference_measures': 'reference',
    'layer_dropped': 'reference',
    # the run and the table
    'accumulate': 'run',
    'probe_model': 'run',
    'probe': 'run',
    'TABLE_COLUMNS': 'table',
    'to_frame': 'table',
    'save_table': 'table',
    # batch (the bookkeeping it shares with eval and ablate: interp.jobs)
    'BATCH_COLUMNS': 'batch',
    'SORT_COLUMNS': 'batch',
    'BatchConfig': 'batch',
    'merge_parts': 'batch',
    'BatchResult': 'batch',
    'BatchRunner': 'batch',
    'run_batch': 'batch',
    'check_outputs': 'batch',
    'merge_only': 'batch',
    'TABLE_SUFFIXES': 'outputs',
    'check_output': 'outputs',
}

__getattr__, __dir__, __all__ = lazy_exports(__name__, _EXPORTS)
