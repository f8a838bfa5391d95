"""Publish a run as a checkpoint series on the hub (`interp export RUN --push ORG/NAME`).

Every checkpoint of the run (its step checkpoints RUN/checkpoints/step_*/, and the final model RUN/) is exported as
a Hugging Face folder (interp.hf.export.export_hf) with a model card (README.md) and uploaded as its own branch of
ORG/NAME; `main` is the final model. The step checkpoints come in step order as interp.jobs.targets.expand_paths
lists them: the caller passes that list (interp.cli.export does), since interp.jobs imports interp.hf, not the
other way round.

Branch names follow ONE scheme, OLMo's, which interp.hf.hub.step_of reads back (NAMING_SCHEMES, the OLMo row):

    step128-tokens262144       step 128, 262,144 tokens seen
    step1000-tokens2M          a count that is a whole number of K, M, B or T is written with the largest such unit

The token count is written exactly, never rounded (OLMo's own names round to whole billions, which would make a
small run's tokens 0). A checkpoint whose config records no tokens (nor batch_size and n_ctx, whose product is the
tokens per step) is named step128 (the Pythia row: a step, no tokens).

Tokens of a checkpoint: its config.json `tokens` (what the trainer counted), else step x train.batch_size x
train.n_ctx (the trainer's tokens per step). The final model's step and tokens: result.json's, when the run
finished ("done") and its weights_sha256 is the final model's; else the step checkpoint it is byte-identical to.

The model card is generated from what the run records (config.json, result.json, log.jsonl) and nothing else: a
field the run does not record is left out, never guessed (model_card).

A rerun uploads nothing that is there: a branch whose commit already holds the same files (compared by git blob
id, or LFS sha256) is skipped, and a changed branch gets one new commit with the files that changed (the hub's
preupload says which it already holds). Requests use huggingface_hub's HfApi, so HF_ENDPOINT, HF_TOKEN (or the
token of `hf auth login`) and HF_HUB_* apply as they do to the client; every failure is one InputError line naming
the repo and the fix (push_error).
"""

from __future__ import annotations

import json
import math
import shutil
import sys
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from interp._util.errors import InputError, one_line
from interp._util.io import PathLike, file_sha256, read_json, write_text_atomic
from interp._util.net import bounded, hub_host, is_network_error, limit_session
from interp._util.paths import LOG_FILE, RESULT_FILE, WEIGHTS_FILE

MAIN = "main"
CARD_FILE = "README.md"
TOKEN_UNITS = (("T", 10**12), ("B", 10**9), ("M", 10**6), ("K", 10**3))   # largest first (tokens_text)
IGNORED_REMOTE = (".gitattributes",)   # the hub's own file in every new repo: never compared, never deleted


@dataclass(frozen=True)
class Branch:
    """One branch of the series: its name, the checkpoint exported into it, and what the run records of it."""

    name: str
    source: Path                 # the checkpoint folder (a step checkpoint, or the run itself)
    step: int | None
    tokens: int | None
    val_loss: float | None       # the run's validation loss at this step (log.jsonl / result.json), if recorded


# ------------------------------------------------------------------------------------------ names

def tokens_text(tokens: int) -> str:
    """A token count as the branch names write it, exactly: 262144 -> "262144", 2000000 -> "2M", 1.5e12 -> "1500B"
    (the largest of K, M, B, T that divides it; module doc)."""
    if isinstance(tokens, bool) or not isinstance(tokens, int) or tokens < 0:
        raise ValueError(f"tokens_text: {tokens!r} is not a token count")
    for unit, scale in TOKEN_UNITS:
        if tokens and tokens % scale == 0:
            return f"{tokens // scale}{unit}"
    return str(tokens)


def branch_name(step: int, tokens: int | None) -> str:
    """"step128-tokens262144" (OLMo's scheme, exact tokens), or "step128" when the tokens are not recorded."""
    return f"step{step}" if tokens is None else f"step{step}-tokens{tokens_text(tokens)}"


# ------------------------------------------------------------------------------------------ the run

def _int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def _number(value: object) -> float | None:
    ok = isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
    return float(value) if ok else None


def _tokens(config: dict, step: int | None) -> int | None:
    recorded = _int(config.get("tokens"))
    if recorded is not None:
        return recorded
    train = config.get("train") if isinstance(config.get("train"), dict) else {}
    batch, n_ctx = _int(train.get("batch_size")), _int(train.get("n_ctx"))
    return step * batch * n_ctx if None not in (step, batch, n_ctx) else None


def _eval_losses(run_dir: Path) -> dict[int, float]:
    """{step: val_loss} of the run's log.jsonl eval lines (the last line of a step wins: a resumed run)."""
    losses: dict[int, float] = {}
    try:
        lines = (run_dir / LOG_FILE).read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return losses
    for line in lines:
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if isinstance(record, dict) and record.get("kind") == "eval":
            step, loss = _int(record.get("step")), _number(record.get("val_loss"))
            if step is not None and loss is not None:
                losses[step] = loss
    return losses


@dataclass(frozen=True)
class Run:
    path: Path
    config: dict
    result: dict           # {} when the run has no result.json
    branches: list[Branch]  # step branches in step order, then main

    @property
    def main(self) -> Branch:
        return self.branches[-1]


def check_run(run_dir: PathLike) -> dict:
    """The run's config.json, checked: a run directory of ours, not one of its step checkpoints (InputError)."""
    from interp.training import checkpoints

    run_dir = Path(run_dir)
    if not checkpoints.is_checkpoint_dir(run_dir):
        raise InputError("not one of our runs (no config.json + model.safetensors written by interp train)",
                         path=run_dir, fix="give the run directory, e.g. runs/NAME")
    config = checkpoints.read_config(run_dir)
    if "step" in config:
        raise InputError("is a step checkpoint: --push publishes a whole run, one branch per checkpoint",
                         path=run_dir, fix="give its run directory (the folder holding checkpoints/)")
    return config


def read_run(run_dir: PathLike, step_checkpoints: Sequence[tuple[PathLike, int]]) -> Run:
    """The run and the branches it publishes as (module doc); InputError for anything that is not a run.
    step_checkpoints: (folder, step) of its step checkpoints in step order (interp.jobs.targets.expand_paths)."""
    from interp.training import checkpoints

    run_dir = Path(run_dir)
    config = check_run(run_dir)
    result = read_json(run_dir / RESULT_FILE, missing_ok=True, torn_ok=True)
    result = result if isinstance(result, dict) else {}
    losses = _eval_losses(run_dir)
    branches = []
    for folder, step in step_checkpoints:
        tokens = _tokens(checkpoints.read_config(folder), step)
        branches.append(Branch(branch_name(step, tokens), Path(folder), step, tokens, losses.get(step)))
    # the final model: its step and tokens from result.json when it names these weights, else the step checkpoint
    # it is byte-identical to (a finished run writes both at its last step), else unknown
    final_sha = file_sha256(run_dir / WEIGHTS_FILE)
    step = tokens = val_loss = None
    if result.get("status") == "done" and result.get("weights_sha256") in (None, final_sha):
        step, tokens, val_loss = _int(result.get("step")), _int(result.get("tokens")), _number(result.get("val_loss"))
        if tokens is None and step is not None:
            tokens = _tokens(config, step)
    last = branches[-1] if branches else None   # the one a finished run's final model equals (expand_paths' rule)
    twin = last if last is not None and file_sha256(last.source / WEIGHTS_FILE) == final_sha else None
    if step is None and twin is not None:
        step, tokens, val_loss = twin.step, twin.tokens, twin.val_loss
    if step is not None and val_loss is None:
        val_loss = losses.get(step)
    if step is not None and twin is None and all(b.step != step for b in branches):
        branches.append(Branch(branch_name(step, tokens), run_dir, step, tokens, val_loss))   # its own step branch
    names = [b.name for b in branches]
    if len(set(names)) != len(names):
        raise InputError(f"two checkpoints would share a branch name ({', '.join(sorted(names))})", path=run_dir,
                         fix="remove the duplicate step checkpoint")
    branches.append(Branch(MAIN, run_dir, step, tokens, val_loss))
    return Run(run_dir, config, result, branches)


# ------------------------------------------------------------------------------------------ model card

def _fmt_tokens(tokens: int | None) -> str:
    return "" if tokens is None else f"{tokens:,}"


def _fmt_loss(loss: float | None) -> str:
    return "" if loss is None else f"{loss:.4f}"


def _provenance(block: object) -> tuple[str | None, str | None]:
    if not isinstance(block, dict):
        return None, None
    packages = block.get("packages") if isinstance(block.get("packages"), dict) else {}
    version, commit = packages.get("interp"), block.get("git_commit")
    return (version if isinstance(version, str) else None), (commit if isinstance(commit, str) else None)


def _command(config: dict, result: dict) -> str | None:
    """The command that trained the run, where config.json or result.json records one (`command` / `argv`)."""
    for block in (config, result):
        for key in ("command", "argv"):
            value = block.get(key)
            if isinstance(value, str) and value.strip():
                return value.strip()
            if isinstance(value, list) and value and all(isinstance(v, str) for v in value):
                import shlex

                return shlex.join(value)
    return None


def model_card(run: Run, repo_id: str, branch: Branch) -> str:
    """README.md of one branch: the model, its training and the branch list, from what the run records only."""
    from interp._util.provenance import git_commit, package_versions

    config, result = run.config, run.result
    model = config.get("model") if isinstance(config.get("model"), dict) else {}
    train = config.get("train") if isinstance(config.get("train"), dict) else {}
    width = train.get("width") if isinstance(train.get("width"), dict) else {}
    arch, mixer = model.get("arch", "llama"), model.get("mixer", "attention")
    rows: list[tuple[str, str]] = [("Block style", f"{arch} ({mixer})")]
    for key, name in (("n_layers", "Layers"), ("d_model", "d_model"), ("n_heads", "Attention heads"),
                      ("n_ctx", "Context (tokens)"), ("vocab_size", "Vocabulary")):
        if _int(model.get(key)) is not None:
            rows.append((name, f"{model[key]:,}"))
    widths = model.get("d_mlp")
    if isinstance(widths, list) and widths:
        rows.append(("MLP width per layer", ", ".join(str(w) for w in widths)))
    schedule = width.get("schedule")
    if isinstance(schedule, str):
        text = schedule
        if schedule == "profile" and isinstance(width.get("profile"), str):
            text = f"profile {width['profile']}"
        elif schedule not in ("profile", "measured") and None not in (_number(width.get("start")),
                                                                      _number(width.get("end"))):
            text += f", start/end ratio {width['start']:g} -> {width['end']:g} of the mean width"
        if isinstance(config.get("label"), str) and config["label"] != text:
            text += f" (label `{config['label']}`)"
        rows.append(("Width schedule", text))
    params = config.get("params")
    total = _int(params.get("total")) if isinstance(params, dict) else _int(result.get("params"))
    if total is None:
        total = _int(result.get("params"))
    if total is not None:
        rows.append(("Parameters", f"{total:,}"))

    training: list[tuple[str, str]] = []
    if isinstance(train.get("preset"), str):
        training.append(("Preset", train["preset"]))
    if isinstance(train.get("source"), str) and "/" not in train["source"]:   # a corpus name, not a local path
        training.append(("Corpus", train["source"]))
    if isinstance(train.get("tokenizer"), str) and "/" not in train["tokenizer"]:
        training.append(("Tokenizer", train["tokenizer"]))
    if _int(train.get("steps")) is not None:
        training.append(("Steps (planned)", f"{train['steps']:,}"))
    if _int(train.get("batch_size")) is not None and _int(train.get("n_ctx")) is not None:
        training.append(("Batch", (f"{train['batch_size']} sequences x {train['n_ctx']} tokens = "
                                  f"{train['batch_size'] * train['n_ctx']:,} tokens per step")))
    if _number(train.get("lr")) is not None:
        lr = f"peak {train['lr']:g}"
        if isinstance(train.get("lr_schedule"), str):
            lr += f", {train['lr_schedule']}"
        if _number(train.get("min_lr")) is not None:
            lr += f" to {train['min_lr']:g}"
        if _int(train.get("warmup_steps")) is not None:
            lr += f", warm-up {train['warmup_steps']} step(s)"
        training.append(("Learning rate", lr))
    if _int(train.get("seed")) is not None:
        training.append(("Seed", str(train["seed"])))
    final = run.main
    if final.step is not None:
        training.append(("Steps trained (final model)", f"{final.step:,}"))
    if final.tokens is not None:
        training.append(("Tokens seen (final model)", f"{final.tokens:,}"))
    if result.get("status") == "done" and _number(result.get("val_loss")) is not None:
        loss = f"{result['val_loss']:.4f}"
        if _number(result.get("val_ppl")) is not None:
            loss += f" (perplexity {result['val_ppl']:.2f})"
        training.append(("Validation loss (final model, result.json)", loss))
    command = _command(config, result)
    if command:
        training.append(("Command", f"`{command}`"))
    trained_version, trained_commit = _provenance(config.get("provenance"))

    here = f"This branch, `{branch.name}`, holds " + (
        "the final model" if branch.name == MAIN else f"the checkpoint of step {branch.step:,}"
        if branch.step is not None else "a checkpoint")
    facts = [f"step {branch.step:,}" if branch.step is not None and branch.name == MAIN else "",
             f"{branch.tokens:,} tokens seen" if branch.tokens is not None else ""]
    facts = [f for f in facts if f]
    lines = ["---", "library_name: transformers", "tags:", "- interp", f"- tapered-{arch}", "- checkpoint-series",
             "---", "", f"# {repo_id}", "",
             (f"A tapered language model (one MLP width per layer) trained with interp, published as a checkpoint "
             f"series: one branch per checkpoint, `{MAIN}` = the final model. Every field below is read from the "
             "run's own records (config.json, result.json, log.jsonl); what the run does not record is left out."),
             "", here + (f" ({', '.join(facts)})" if facts else "") + ".", "", "## Model", "", "| | |", "|---|---|"]
    lines += [f"| {k} | {v} |" for k, v in rows]
    if training:
        lines += ["", "## Training", "", "| | |", "|---|---|", *[f"| {k} | {v} |" for k, v in training]]
    lines += ["", "## Branches", "", ("Names: `step-<step, 6 digits>-<tokens seen, exact, in M/B/T>T` (the FineWeb "
              "ablations' scheme; `interp batch` and `interp.hf.hub.step_of` read step and tokens from it)."), "",
              "| Branch | Step | Tokens seen | Validation loss |", "|---|---|---|---|"]
    for b in run.branches:
        lines.append(f"| `{b.name}` | {'' if b.step is None else b.step} | {_fmt_tokens(b.tokens)} | "
                     f"{_fmt_loss(b.val_loss)} |")
    lines += ["", "## Provenance", ""]
    if trained_version or trained_commit:
        lines.append("- trained with interp" + (f" {trained_version}" if trained_version else "")
                     + (f" at commit `{trained_commit}`" if trained_commit else ""))
    lines.append(f"- exported with interp {package_versions().get('interp', 'unknown')} at commit `{git_commit()}`")
    lines += ["", "## Use", "", "```python", "from transformers import AutoModelForCausalLM",
              (f'model = AutoModelForCausalLM.from_pretrained("{repo_id}", revision="{branch.name}", '
              "trust_remote_code=True)"), "```", "", "```bash",
              f"interp batch {repo_id} --revisions all --out series.parquet   # every checkpoint, in step order",
              "```", ""]
    return "\n".join(lines)


# ------------------------------------------------------------------------------------------ errors

def push_error(repo_id: str, branch: str | None, err: BaseException) -> InputError:
    """The one-line InputError for a failed upload request, by what failed (the download side: hub.hub_error)."""
    from huggingface_hub import errors

    from interp.hf.hub import hub_error

    what = f"pushing to hub model {repo_id!r}" + (f" (branch {branch!r})" if branch else "")
    status = getattr(getattr(err, "response", None), "status_code", None)
    token_fix = (f"set HF_TOKEN to a token with write access to {repo_id.split('/')[0]!r} (or run `hf auth "
                 "login`), then rerun: branches already uploaded are skipped")
    if isinstance(err, InputError):   # a stall (HubStalled) already names the host and the variable
        return err
    if status in (401, 403) or isinstance(err, errors.GatedRepoError):
        return InputError(f"{what} failed: the hub at {hub_host()} refused it ({status or 401}: not authorised)",
                          fix=token_fix)
    if isinstance(err, errors.RepositoryNotFoundError):
        return InputError(f"{what} failed: the repo does not exist or this token cannot write to it", fix=token_fix)
    if isinstance(err, errors.HfHubHTTPError):
        return InputError(f"{what} failed: the hub at {hub_host()} answered {status or 'an error'} "
                          f"({one_line(err)[:160]})", fix="retry later: a rerun skips the branches already uploaded")
    if is_network_error(err):
        return InputError(f"{what} failed: the hub at {hub_host()} could not be reached ({type(err).__name__}: "
                          f"{one_line(err)[:160]})", fix="check HF_ENDPOINT and the network, then rerun: branches "
                          "already uploaded are skipped")
    return hub_error(repo_id, branch, err)


def _ask(repo_id: str, branch: str | None, what: str, call: Callable):
    """One metadata request within the hub deadline (bounded); failures as push_error."""
    try:
        return bounded(call, what)
    except Exception as err:  # noqa: BLE001 - the hub client raises many kinds; each becomes one clear error
        raise push_error(repo_id, branch, err) from None


# ------------------------------------------------------------------------------------------ upload

def _local_ids(folder: Path) -> dict[str, tuple[str, str]]:
    """{file name: (git blob sha1, sha256)} of an export folder (top level: an export has no subfolders)."""
    import hashlib

    from huggingface_hub.utils import sha

    out = {}
    for f in sorted(folder.iterdir()):
        if f.is_file():
            data = f.read_bytes()
            out[f.name] = (sha.git_hash(data), hashlib.sha256(data).hexdigest())
    return out


def _remote_ids(api, repo_id: str, branch: str) -> dict[str, tuple[str, str | None]]:
    """{path: (git blob id, LFS sha256 or None)} of the branch's files."""
    from huggingface_hub.hf_api import RepoFile

    listing = _ask(repo_id, branch, f"the files of {repo_id}@{branch}",
                   lambda: list(api.list_repo_tree(repo_id, revision=branch, recursive=True)))
    return {e.path: (e.blob_id, e.lfs.sha256 if e.lfs else None) for e in listing if isinstance(e, RepoFile)}


def _differences(local: dict[str, tuple[str, str]], remote: dict[str, tuple[str, str | None]]
                 ) -> tuple[list[str], list[str]]:
    """(files to upload, remote files to delete) for the branch to hold exactly the local files."""
    def same(name: str) -> bool:
        blob, lfs_sha256 = remote[name]
        return local[name][1] == lfs_sha256 if lfs_sha256 else local[name][0] == blob

    changed = [name for name in local if name not in remote or not same(name)]
    extra = [name for name in remote if name not in local and name not in IGNORED_REMOTE]
    return changed, extra


def check_repo_target(repo_id: str) -> str:
    from interp.hf.hub import check_repo_id

    if "/" not in repo_id:
        raise InputError(f"{repo_id!r} is not ORG/NAME", field="--push", fix="write e.g. my-org/tapered-cosine")
    try:
        return check_repo_id(repo_id)
    except InputError:
        raise InputError(f"{repo_id[:80]!r} is not a hub repo id", field="--push",
                         fix="write ORG/NAME: letters, digits, '-', '_' and '.'") from None


@dataclass(frozen=True)
class Pushed:
    branch: str
    commit: str
    uploaded: bool   # False: the branch already held these files (skipped)


def push_run(run_dir: PathLike, repo_id: str, step_checkpoints: Sequence[tuple[PathLike, int]], *,
             private: bool | None = None,
             log: Callable[[str], None] = lambda line: print(line, file=sys.stderr)) -> list[Pushed]:
    """Export every checkpoint of `run_dir` and upload each as a branch of `repo_id` (module doc). Returns one
    Pushed per branch, main last. Nothing is asked of the hub before the run has been read and checked."""
    from huggingface_hub import HfApi

    from interp.hf.export import export_hf
    from interp.hf.hub import is_offline

    check_repo_target(repo_id)
    run = read_run(run_dir, step_checkpoints)   # before any request: a bad run never creates a repo
    if is_offline():
        raise InputError(f"pushing to hub model {repo_id!r} needs the network, and HF_HUB_OFFLINE / --offline is set",
                         fix="unset HF_HUB_OFFLINE")
    api = HfApi()
    _ask(repo_id, None, f"creating {repo_id}",
         lambda: api.create_repo(repo_id, repo_type="model", exist_ok=True, private=private))
    refs = _ask(repo_id, None, f"the refs of {repo_id}", lambda: api.list_repo_refs(repo_id))
    existing = {b.name: b.target_commit for b in refs.branches}
    pushed: list[Pushed] = []
    with tempfile.TemporaryDirectory(prefix="interp-push-") as tmp:
        for branch in run.branches:
            folder = Path(tmp) / branch.name
            export_hf(branch.source, folder, public=True)
            write_text_atomic(folder / CARD_FILE, model_card(run, repo_id, branch))
            if branch.name not in existing:
                _ask(repo_id, branch.name, f"creating branch {branch.name} of {repo_id}",
                     lambda: api.create_branch(repo_id, branch=branch.name, exist_ok=True))  # noqa: B023 - called at once
                existing[branch.name] = ""
            changed, extra = _differences(_local_ids(folder), _remote_ids(api, repo_id, branch.name))
            if not changed and not extra:
                commit = existing[branch.name] or _ask(repo_id, branch.name, f"{repo_id}@{branch.name}",
                                                       lambda: api.repo_info(repo_id, revision=branch.name).sha)  # noqa: B023
                log(f"[export] {repo_id}@{branch.name}: up to date (commit {commit[:12]}), skipped")
                pushed.append(Pushed(branch.name, commit, False))
            else:
                limit_session()   # a deadline per socket operation; the upload itself may take long
                try:
                    info = api.upload_folder(repo_id=repo_id, folder_path=folder, revision=branch.name,
                                             commit_message=f"interp export: {branch.name} of {run.path.name}",
                                             delete_patterns=extra or None)
                except Exception as err:  # noqa: BLE001 - as in _ask: one clear error per failed upload
                    raise push_error(repo_id, branch.name, err) from None
                log(f"[export] {repo_id}@{branch.name}: uploaded {len(changed)} file(s)"
                    + (f", deleted {len(extra)}" if extra else "") + f" (commit {info.oid[:12]})")
                pushed.append(Pushed(branch.name, info.oid, True))
            shutil.rmtree(folder, ignore_errors=True)
    return pushed
