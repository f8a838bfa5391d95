"""`interp export RUN_DIR --out OUT_DIR`: one of our checkpoints as a Hugging Face folder.

    interp export runs/cosine --out exports/cosine      # --hf: the older name of --out, kept for one release
    python -c "from transformers import AutoModelForCausalLM as M; M.from_pretrained('exports/cosine', trust_remote_code=True)"

The folder (interp.hf.export): config.json with the per-layer widths (`intermediate_sizes`), model.safetensors
in Llama's names (GPT-2's for arch gpt2), the tokenizer, and the self-contained modeling file
(modeling_tapered_llama.py or modeling_tapered_gpt2.py) named by `auto_map`. Attention models only (docs/blocks.md).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from interp.cli import add_out_argument, check_output_dir


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("export", help="export a checkpoint as a Hugging Face folder",
                              description=__doc__.split("\n")[0])
    p.add_argument("run_dir", type=Path, metavar="RUN_DIR", help="one of our checkpoints (runs/NAME or a step dir)")
    add_out_argument(p, "the Hugging Face folder to write (new or empty)", required=True, metavar="OUT_DIR",
                     aliases=("--hf",))
    p.add_argument("--overwrite", action="store_true", help="replace the files of an existing export in OUT_DIR")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from interp.hf.export import export_hf

    check_output_dir(args.out, args.out_flag)   # a file there or on its path: before the checkpoint is read
    out = export_hf(args.run_dir, args.out, overwrite=args.overwrite)
    print(f"[export] wrote {out} (load with AutoModelForCausalLM.from_pretrained({str(out)!r}, "
          "trust_remote_code=True), or `interp probe --model` it)")
    return 0
