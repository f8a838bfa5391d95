"""Pretrained Hugging Face models: registry, resolution, loading and caches, architecture adapters, TL/nnsight wrappers.

Names are exported lazily (interp._util.lazy): importing the package imports no submodule."""

from interp._util.lazy import lazy_exports

_EXPORTS = {
    'DEFAULT_MODEL': 'pretrained',
    'CACHE_SUBDIR': 'pretrained',
    'GGUF_SUFFIX': 'pretrained',
    'ORIGIN_FILE': 'pretrained',
    'SiteMap': 'pretrained',
    '_LLAMA_LIKE': 'pretrained',
    '_GEMMA_LIKE': 'pretrained',
    '_GPT2': 'pretrained',
    'SITE_MAPS': 'pretrained',
    'register_site_map': 'pretrained',
    'site_map_for': 'pretrained',
    'get_submodule': 'pretrained',
    'LoadedModel': 'pretrained',
    'layer_modules': 'pretrained',
    'RegistryEntry': 'pretrained',
    '_modules_of': 'pretrained',
    '_package_dir': 'pretrained',
    '_SMOLLM2_FILE': 'pretrained',
    '_smollm2_path': 'pretrained',
    '_gemma3_path': 'pretrained',
    '_gemma3_key': 'pretrained',
    'REGISTRY': 'pretrained',
    '_file_key': 'pretrained',
    'ModelInfo': 'pretrained',
    '_package_size_mb': 'pretrained',
    'available_models': 'pretrained',
    '_cache_path': 'pretrained',
    '_valid_cache': 'pretrained',
    '_complete_safetensors': 'pretrained',
    '_drop_quantization_state': 'pretrained',
    '_save_cache': 'pretrained',
    '_HUB_ID': 'pretrained',
    '_Resolved': 'pretrained',
    '_unknown_name_error': 'pretrained',
    '_resolve': 'pretrained',
    '_gguf_file': 'pretrained',
    '_resolve_dir': 'pretrained',
    '_from_pretrained': 'pretrained',
    '_hub_error': 'pretrained',
    'load_tokenizer': 'pretrained',
    'load_pretrained': 'pretrained',
    'to_transformer_bridge': 'pretrained',
    'to_nnsight': 'pretrained',
}

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
__all__ = [n for n in _EXPORTS if not n.startswith("_")]
