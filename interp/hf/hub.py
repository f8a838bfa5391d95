"""The Hugging Face hub: model names, revisions and snapshots. The one module of interp that asks the network.

    repo, rev = split_revision("EleutherAI/pythia-70m@step1000")
    snap = snapshot("EleutherAI/pythia-70m", "step1000")   # downloads what is not cached -> Snapshot(path, commit)
    revisions("EleutherAI/pythia-70m", "step0..step3000:1000")   # -> {"step0": sha, "step1000": sha, ...}

As in transformers, a model that is not cached is downloaded (huggingface_hub's cache under $HF_HOME, its
resume of interrupted files and its progress bars); HF_HUB_OFFLINE=1 (or `--offline`, set_offline()) never asks
the network: what is cached loads, anything else fails at once naming the cache and the fix. Every failure is one
InputError line (no traceback, no retry storm): a network failure, a missing repo, revision or file, a gated or
private repo (401/403), a server error. An unreachable hub falls back to the cache when the revision is there,
and says so.

A snapshot holds the files that define the model (config, tokenizer, generation config, code) and one weight
format: the safetensors files when the revision has any, else the PyTorch .bin files; never both, never the
Flax / TF / ONNX copies. The loaders then read the snapshot folder as a local Hugging Face directory, so a hub
model is loaded, hashed and probed exactly like a save_pretrained folder, and its commit sha is recorded.

Names: TransformerLens's official names and aliases ("gpt2-small", "pythia-70m") resolve to their hub ids through
TransformerLens's own table (official_name); a revision is "MODEL@REV" or revision= / --revision.
Checkpoint series: revisions() expands "a,b,c", a range "step0..step143000:1000" or "all" (the repo's branches and
tags), and step_of() reads the step (and tokens) a revision's name carries, by one table of naming schemes.
"""

from __future__ import annotations

import fnmatch
import re
import sys
from dataclasses import dataclass
from pathlib import Path

from interp._util.errors import InputError, one_line
from interp._util.offline import is_offline, set_offline  # noqa: F401 (set_offline re-exported)

# files that define a model beside its weights (top level only: a repo's subfolders hold other variants)
DEFINING_PATTERNS = ("*.json", "*.txt", "*.model", "*.tiktoken", "*.py", "*.jinja", "*.tokenizer")
WEIGHT_FORMATS = (("*.safetensors",), ("*.bin",))   # in order of preference: the first one the revision has
_COMMIT = re.compile(r"^[0-9a-f]{40}$")


@dataclass(frozen=True)
class Snapshot:
    """A hub revision on the local disk: the folder the loaders read and the commit it holds."""

    repo_id: str
    revision: str      # as asked ("main" when none was)
    commit: str        # the 40-hex commit sha it resolved to
    path: Path         # $HF_HOME/hub/models--ORG--NAME/snapshots/<commit>


def cache_root() -> Path:
    from huggingface_hub import constants

    return Path(constants.HF_HUB_CACHE)


# --------------------------------------------------------------------------------------------------
# Names and revisions
# --------------------------------------------------------------------------------------------------

def split_revision(spec: str) -> tuple[str, str | None]:
    """"org/name@rev" -> ("org/name", "rev"); a spec without "@" -> (spec, None). ValueError for an empty part."""
    if "@" not in spec:
        return spec, None
    name, _, revision = spec.rpartition("@")
    if not name or not revision:
        raise InputError(f"{spec!r} is not MODEL@REVISION: both parts are needed", field="model",
                         fix="write e.g. EleutherAI/pythia-70m@step1000, or pass --revision")
    return name, revision


def official_name(name: str) -> str | None:
    """The hub id TransformerLens knows `name` by (its official names and aliases, case-insensitive), or None.
    Read from TransformerLens's own table (transformer_lens.supported_models), never a copy of it."""
    from transformer_lens import supported_models

    try:
        return supported_models.get_official_model_name(name)
    except ValueError:
        return None


def _commit_of(repo_id: str, revision: str) -> str | None:
    """The commit a revision resolved to when last downloaded (the cache's refs/ file), or None."""
    if _COMMIT.match(revision):
        return revision
    ref = cache_root() / f"models--{repo_id.replace('/', '--')}" / "refs" / revision
    try:
        return ref.read_text().strip() or None
    except OSError:
        return None


def cached_revisions(repo_id: str) -> list[str]:
    """The revision names the local cache has refs for (what `all` means offline)."""
    refs = cache_root() / f"models--{repo_id.replace('/', '--')}" / "refs"
    return sorted(p.relative_to(refs).as_posix() for p in refs.rglob("*") if p.is_file()) if refs.is_dir() else []


# --------------------------------------------------------------------------------------------------
# Errors: one line each
# --------------------------------------------------------------------------------------------------

def hub_error(repo_id: str, revision: str | None, err: BaseException) -> InputError:
    """The one-line InputError for a failed hub request, by what failed."""
    from huggingface_hub import errors

    what = f"hub model {repo_id!r}" + (f" at revision {revision!r}" if revision else "")
    if isinstance(err, errors.GatedRepoError):
        reason, fix = "is gated: its terms must be accepted", "accept them on the model's page, then `hf auth login`"
    elif isinstance(err, errors.RepositoryNotFoundError):
        reason, fix = ("does not exist on the hub (nor as a local path), or is private",
                       "check the id or path (a TransformerLens name also works, e.g. gpt2-small); for a private "
                       "repo, `hf auth login`")
    elif isinstance(err, errors.RevisionNotFoundError):
        reason, fix = "has no such revision", f"list its revisions with `interp batch {repo_id} --revisions all --dry-run`"
    elif isinstance(err, errors.LocalEntryNotFoundError | errors.OfflineModeIsEnabled) and is_offline():
        reason = (f"is not available offline: it is not in the local Hugging Face cache ({cache_root()}) and "
                  "HF_HUB_OFFLINE / --offline is set")
        fix = ("unset HF_HUB_OFFLINE / drop --offline to download it, or pass a local HF directory / .gguf path or "
               "a registered model (`interp models`)")
    elif isinstance(err, errors.EntryNotFoundError | errors.RemoteEntryNotFoundError):
        reason, fix = f"lacks a file ({one_line(err)[:160]})", "the repo is incomplete at this revision"
    elif isinstance(err, errors.HfHubHTTPError):
        status = getattr(getattr(err, "response", None), "status_code", None)
        reason = f"could not be fetched: the hub answered {status or 'an error'} ({one_line(err)[:160]})"
        fix = "retry later; what was downloaded stays in the cache and resumes"
    else:
        reason = f"could not be fetched: {type(err).__name__}: {one_line(err)[:200]}"
        fix = "check the network (HF_ENDPOINT, proxies), or set HF_HUB_OFFLINE=1 to use the cache only"
    return InputError(f"{what} {reason}", fix=fix)


# --------------------------------------------------------------------------------------------------
# Snapshots
# --------------------------------------------------------------------------------------------------

def _patterns(files: list[str]) -> list[str]:
    """allow_patterns for a revision's files: the defining files and one weight format (module doc)."""
    top = [f for f in files if "/" not in f]
    for formats in WEIGHT_FORMATS:
        if any(fnmatch.fnmatch(f, p) for f in top for p in formats):
            return [*DEFINING_PATTERNS, *formats]
    return list(DEFINING_PATTERNS)


def _cached(repo_id: str, revision: str) -> Snapshot | None:
    """The cached snapshot of a revision, or None (nothing is asked of the network)."""
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import LocalEntryNotFoundError

    try:
        path = Path(snapshot_download(repo_id, revision=revision, local_files_only=True))
    except (LocalEntryNotFoundError, OSError, ValueError):
        return None
    return Snapshot(repo_id, revision, path.name, path)


def snapshot(repo_id: str, revision: str | None = None) -> Snapshot:
    """The revision's files on the local disk, downloaded where missing (module doc); InputError otherwise."""
    from huggingface_hub import HfApi, snapshot_download
    from huggingface_hub.errors import HfHubHTTPError, LocalEntryNotFoundError, OfflineModeIsEnabled

    revision = revision or "main"
    if is_offline():
        found = _cached(repo_id, revision)
        if found is None:
            raise hub_error(repo_id, revision, LocalEntryNotFoundError("not cached"))
        return found
    try:
        info = HfApi().model_info(repo_id, revision=revision)
        files = [s.rfilename for s in info.siblings or []]
        path = Path(snapshot_download(repo_id, revision=revision, allow_patterns=_patterns(files)))
    except (HfHubHTTPError, OfflineModeIsEnabled) as err:
        raise hub_error(repo_id, revision, err) from None
    except Exception as err:  # the network (httpx's transport errors, OSErrors), or a download cut short
        if not (isinstance(err, OSError | LocalEntryNotFoundError) or _network_error(err)):
            raise
        found = _cached(repo_id, revision)
        if found is None or not _complete(found.path):
            raise hub_error(repo_id, revision, err) from None
        print(f"[hub] {repo_id}@{revision}: the hub is unreachable ({type(err).__name__}); using the cached commit "
              f"{found.commit[:12]}", file=sys.stderr)
        return found
    return Snapshot(repo_id, revision, info.sha or path.name, path)


def _network_error(err: BaseException) -> bool:
    """An exception of the HTTP stack (httpx / httpcore and their forks, requests, urllib3): the network failed."""
    return any(c.__module__.split(".")[0].rstrip("0123456789") in ("httpx", "httpcore", "requests", "urllib3")
               for c in type(err).__mro__)


def _complete(path: Path) -> bool:
    """A snapshot with a config.json and at least one weight file (what an interrupted first download lacks)."""
    return (path / "config.json").is_file() and any(path.glob(p) for formats in WEIGHT_FORMATS for p in formats)


# --------------------------------------------------------------------------------------------------
# Checkpoint series
# --------------------------------------------------------------------------------------------------

# Naming schemes of checkpoint revisions, one regex each: what it matches and the tokens per unit it names.
#   Pythia               step143000
#   OLMo / OLMo-2        step1000-tokens4B, stage1-step140000-tokens294B (tokens in billions)
#   ours                 step_000128 (interp's checkpoints/ folders)
NAMING_SCHEMES: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("olmo", re.compile(r"^(?:stage(?P<stage>\d+)-)?step(?P<step>\d+)-tokens(?P<tokens>\d+)(?P<unit>[MBT])$")),
    ("pythia", re.compile(r"^step(?P<step>\d+)$")),
    ("interp", re.compile(r"^step_(?P<step>\d+)$")),
)
_UNITS = {"M": 1e6, "B": 1e9, "T": 1e12}
_RANGE = re.compile(r"^(?P<prefix>[^.]*?)(?P<start>\d+)\.\.(?P=prefix)?(?P<stop>\d+)(?::(?P<every>\d+))?$")


def step_of(revision: str) -> tuple[float, float]:
    """(step, tokens) a revision's name carries (NaN where it says nothing), by NAMING_SCHEMES."""
    for _scheme, pattern in NAMING_SCHEMES:
        match = pattern.match(revision)
        if match:
            found = match.groupdict()
            tokens = float(found["tokens"]) * _UNITS[found["unit"]] if found.get("tokens") else float("nan")
            return float(found["step"]), tokens
    return float("nan"), float("nan")


def parse_revisions(spec: str) -> list[str] | None:
    """`--revisions` as names: "a,b,c" -> the list; "step0..step3000:1000" -> step0, step1000, step2000, step3000;
    "all" -> None (every ref of the repo). InputError naming the flag for a malformed range."""
    names: list[str] = []
    for part in (p.strip() for p in spec.split(",")):
        if not part:
            continue
        if part == "all":
            return None
        if ".." in part:
            match = _RANGE.match(part)
            if not match or int(match["stop"]) < int(match["start"]) or match["every"] == "0":
                raise InputError(f"{part!r} is not a range", field="--revisions",
                                 fix="write PREFIX<start>..PREFIX<stop>[:every], e.g. step0..step143000:1000")
            names += [f"{match['prefix']}{n}" for n in range(int(match["start"]), int(match["stop"]) + 1,
                                                                   int(match["every"] or 1))]
        else:
            names.append(part)
    if not names:
        raise InputError(f"{spec!r} names no revision", field="--revisions", fix="e.g. step0,step1000 or all")
    return list(dict.fromkeys(names))


def _order(name: str) -> tuple[int, float, str]:
    step = step_of(name)[0]
    return (0, step, name) if step == step else (1, 0.0, name)


def revisions(repo_id: str, spec: str) -> dict[str, str]:
    """{revision name: commit sha} for a `--revisions` spec (parse_revisions), in step order for "all".

    One request lists every branch and tag (list_repo_refs); a name that is not a ref (a commit sha) maps to
    itself. Offline, the refs the cache holds stand in, and a name it lacks is an InputError naming it."""
    from huggingface_hub import HfApi
    from huggingface_hub.errors import HfHubHTTPError

    names = parse_revisions(spec)
    refs: dict[str, str] = {}
    if is_offline():
        refs = {name: commit for name in cached_revisions(repo_id) if (commit := _commit_of(repo_id, name))}
    else:
        try:
            listed = HfApi().list_repo_refs(repo_id)
        except (HfHubHTTPError, OSError) as err:
            raise hub_error(repo_id, None, err) from None
        refs = {r.name: r.target_commit for r in [*listed.branches, *listed.tags]}
    if names is None:
        return {name: refs[name] for name in sorted(refs, key=_order)}
    missing = [n for n in names if n not in refs and not _COMMIT.match(n)]
    if missing:
        where = f"the local cache ({cache_root()}), offline" if is_offline() else "the hub"
        raise InputError(f"hub model {repo_id!r} has no revision {', '.join(missing[:5])}"
                         f"{' ...' if len(missing) > 5 else ''} in {where}", field="--revisions",
                         fix=f"it has {len(refs)}: {', '.join(sorted(refs, key=_order)[:8])}{' ...' if len(refs) > 8 else ''}")
    return {n: refs.get(n, n) for n in names}
