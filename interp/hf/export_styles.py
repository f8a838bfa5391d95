"""The block styles `interp export` writes (ExportStyle, STYLES) and their model_types: plain data, in a module of its
own so that the loaders, the remote-code check and the TransformerLens tables read them without importing the
exporter (which registers the styles' site maps in the adapter table)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ExportStyle:
    """How one block style (ModelConfig.arch) exports: its self-contained modeling module in interp/hf, whose
    file is copied as modeling_<module>.py, its classes, and the stock HF architecture whose sites it has."""

    module: str        # "tapered_llama": interp/hf/tapered_llama.py
    config_class: str
    model_class: str
    sites_of: str      # the stock architecture whose SiteMap it shares (interp.hf.site_map_for)
    family: str        # for messages: "Llama"
    mixers: tuple[str, ...] = ("attention",)  # the mixers whose block the stock architecture computes

    @property
    def modeling_file(self) -> str:
        return f"modeling_{self.module}.py"

    @property
    def auto_map(self) -> dict[str, str]:
        return {"AutoConfig": f"{self.modeling_file[:-3]}.{self.config_class}",
                "AutoModelForCausalLM": f"{self.modeling_file[:-3]}.{self.model_class}"}

    def classes(self) -> tuple[type, type]:
        import importlib

        module = importlib.import_module(f"interp.hf.{self.module}")
        return getattr(module, self.config_class), getattr(module, self.model_class)


# model_type of each config class: EXPORT_MODEL_TYPES (its auto_map is not remote code; tested)
STYLES = {"llama": ExportStyle("tapered_llama", "TaperedLlamaConfig", "TaperedLlamaForCausalLM", "LlamaForCausalLM",
                               "Llama"),
          "gpt2": ExportStyle("tapered_gpt2", "TaperedGPT2Config", "TaperedGPT2LMHeadModel", "GPT2LMHeadModel",
                              "GPT-2")}
EXPORT_MODEL_TYPES = tuple(style.module for style in STYLES.values())   # every `interp export` model_type
