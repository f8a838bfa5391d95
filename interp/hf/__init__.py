"""Pretrained Hugging Face models: resolution, the offline registry, loading and the dequantized cache,
the per-architecture adapter table, TL/nnsight wrappers.

    resolve.py    what a model spec is (the one resolver, for every entry point): a source; load_pretrained
    sources/      one class per kind of model (registry, gguf, checkpoint, hf_dir, hub): label, files, columns, loading
    tl_adapters.py  SiteMaps derived from TransformerLens's own architecture adapters
    families.py   the TL families checked against plain hooks, refused, or not built (the docs' list)
    tiny.py       tiny random models of any family by class name, a word tokenizer (tests and validation)
    attention.py  the attention implementation an architecture can run (sdpa, else eager, said once)
    hub.py        the hub: TransformerLens names, revisions, snapshots (the one module that downloads)
    adapters.py   SiteMap per architecture (residual sites, MLP and its projections), unwrap(model),
                  context_length(model) / check_fits(model, n_tokens, field)
    registry.py   offline models shipped in pip packages (REGISTRY: interp.data.registry), available_models
    cache.py      the dequantized fp32 cache of GGUF models
    load.py       LoadedModel; the two loaders (a GGUF file through its cache, a local HF folder)
    sitemap.py, export_styles.py   SiteMap; the block styles `interp export` writes (data both sides read)
    wrappers.py   to_transformer_bridge, to_nnsight

Names are exported lazily (interp._util.lazy): importing the package imports no submodule."""

from interp._util.lazy import lazy_exports

_EXPORTS = {
    'KINDS': 'resolve',
    'GGUF_SUFFIX': 'resolve',
    'ModelRef': 'resolve',
    'ModelSource': 'resolve',
    'SOURCES': 'resolve',
    'ModelResolutionError': 'resolve',
    'resolve_model': 'resolve',
    'classify_dir': 'resolve',
    'checkpoint_tokenizer': 'resolve',
    'TRUST_REMOTE_CODE_FLAG': 'resolve',
    'remote_code': 'resolve',
    'refuse_remote_code': 'resolve',
    'snapshot': 'hub',
    'split_revision': 'hub',
    'official_name': 'hub',
    'step_of': 'hub',
    'set_offline': 'hub',
    'attention_for': 'attention',
    'tl_architectures': 'tl_adapters',
    'SiteMap': 'adapters',
    'SITE_MAPS': 'adapters',
    'register_site_map': 'adapters',
    'site_map_for': 'adapters',
    'get_submodule': 'adapters',
    'unwrap': 'adapters',
    'root_and_sites': 'adapters',
    'layer_modules': 'adapters',
    'mlp_modules': 'adapters',
    'mlp_down_modules': 'adapters',
    'unflatten_tokens': 'adapters',
    'suggested_site_map': 'adapters',
    'lens_modules': 'adapters',
    'CONTEXT_FIELDS': 'sitemap',
    'context_length': 'adapters',
    'check_fits': 'adapters',
    'DEFAULT_MODEL': 'registry',
    'RegistryEntry': 'registry',
    'REGISTRY': 'registry',
    'ModelInfo': 'registry',
    'available_models': 'registry',
    'CACHE_SUBDIR': 'cache',
    'ORIGIN_FILE': 'cache',
    'LoadedModel': 'load',
    'load_model': 'resolve',
    'tokenizer_of': 'resolve',
    'load_tokenizer': 'resolve',
    'load_pretrained': 'resolve',
    'to_transformer_bridge': 'wrappers',
    'to_nnsight': 'wrappers',
    'tiny_any_hf': 'tiny',
    'save_tiny': 'tiny',
}

__getattr__, __dir__, __all__ = lazy_exports(__name__, _EXPORTS)
