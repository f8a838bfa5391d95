"""Model sources: one class per kind of model, behind interp.hf.sources.base.ModelSource. A kind knows its label,
the files that define it, its table columns, how it and its tokenizer load, and its context; nothing outside this
package compares a kind string (interp.hf.resolve_model classifies a spec into one of them).

  registry    gguf.py        RegistrySource: an offline GGUF model shipped in a pip package (interp.hf.REGISTRY)
  gguf        gguf.py        GgufSource: a .gguf file, or a folder holding exactly one and no config.json
  checkpoint  checkpoint.py  CheckpointSource: one of our checkpoint directories (a TaperedLM)
  hf_dir      hf_dir.py      HfDirSource: a Hugging Face directory (save_pretrained); the remote-code check
  hub         hub.py         HubSource: org/name at a revision, fetched into the HF cache, then read as hf_dir
"""

from interp._util.lazy import lazy_exports

_EXPORTS = {
    "ModelSource": "base",
    "ModelResolutionError": "base",
    "RegistrySource": "gguf",
    "GgufSource": "gguf",
    "GGUF_SUFFIX": "gguf",
    "CheckpointSource": "checkpoint",
    "checkpoint_tokenizer": "checkpoint",
    "HfDirSource": "hf_dir",
    "remote_code": "hf_dir",
    "refuse_remote_code": "hf_dir",
    "TRUST_REMOTE_CODE_FLAG": "hf_dir",
    "HubSource": "hub",
}

__getattr__, __dir__, __all__ = lazy_exports(__name__, _EXPORTS)
