"""`interp export RUN_DIR --out OUT_DIR`: one of our checkpoints as a Hugging Face folder.

    interp export runs/cosine --out exports/cosine      # --hf: the older name of --out (a permanent alias)
    python -c "from transformers import AutoModelForCausalLM as M; M.from_pretrained('exports/cosine', trust_remote_code=True)"

The folder (interp.hf.export): config.json with the per-layer widths (`intermediate_sizes`), model.safetensors
in Llama's names (GPT-2's for arch gpt2), the tokenizer, and the self-contained modeling file
(modeling_tapered_llama.py or modeling_tapered_gpt2.py) named by `auto_map`. Attention models only (docs/blocks.md).

    interp export runs/cosine --push my-org/tapered-cosine   # every checkpoint of the run, one branch each

--push (interp.hf.push): each step checkpoint becomes a branch named step128-tokens262144 (OLMo's scheme: step, exact
tokens seen), `main` the final model, each with a model card (README.md) from the run's records; a rerun skips branches
that already hold the same files. HF_ENDPOINT and HF_TOKEN apply as for huggingface_hub (docs/hub.md).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from interp.cli import add_out_argument, check_output_dir


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("export", help="export a checkpoint as a Hugging Face folder",
                              description=__doc__.split("\n")[0])
    p.add_argument("run_dir", type=Path, metavar="RUN_DIR", help="one of our checkpoints (runs/NAME or a step dir)")
    where = p.add_mutually_exclusive_group(required=True)
    add_out_argument(where, "the Hugging Face folder to write (new or empty)", metavar="OUT_DIR", aliases=("--hf",))
    where.add_argument("--push", metavar="ORG/NAME", help="instead: upload every checkpoint of the run to this hub "
                       "repo, one branch each (step128-tokens262144 ...), main = the final model, with a model card")
    p.add_argument("--overwrite", action="store_true", help="replace the files of an existing export in OUT_DIR")
    p.add_argument("--private", action="store_true", default=None,
                   help="with --push: create the repo private (an existing repo keeps its visibility)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from interp.hf.export import export_hf

    if args.push is not None:
        from interp.hf.push import push_run

        pushed = push_run(args.run_dir, args.push, _step_checkpoints(args.run_dir, args.push), private=args.private)
        uploaded = sum(p.uploaded for p in pushed)
        print(f"[export] {args.push}: {len(pushed)} branches ({uploaded} uploaded, {len(pushed) - uploaded} already "
              f"up to date): {', '.join(p.branch for p in pushed)}")
        return 0
    check_output_dir(args.out, args.out_flag)   # a file there or on its path: before the checkpoint is read
    out = export_hf(args.run_dir, args.out, overwrite=args.overwrite)
    print(f"[export] wrote {out} (load with AutoModelForCausalLM.from_pretrained({str(out)!r}, "
          "trust_remote_code=True), or `interp probe --model` it)")
    return 0


def _step_checkpoints(run_dir: Path, repo_id: str) -> list[tuple[Path, int]]:
    """(folder, step) of the run's step checkpoints in step order, as `interp batch RUN` lists them (expand_paths);
    the repo id and the run are checked first, so a bad one is refused before the run's folders are walked."""
    from interp.hf.push import check_repo_target, check_run
    from interp.jobs.targets import expand_paths

    check_repo_target(repo_id)
    check_run(run_dir)
    return [(t.path, int(t.step)) for t in expand_paths([run_dir])
            if t.source.checkpoint and t.step == t.step and t.path.resolve() != run_dir.resolve()]
