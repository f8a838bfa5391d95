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
tags), and step_of() reads the step (and tokens) a revision's name carries, by one table of naming schemes
(Pythia, OLMo, SmolLM2, FineWeb ablations, ours) or a --revision-pattern regex (compile_revision_pattern).

Nothing from a server is trusted: a revision or branch name (asked or listed), a commit id and a repo id are checked
against the hub's grammar (git's ref-name rules; 40 hex digits; org/name) before any path or cache key is built
from them, and a download is pinned to the commit that was resolved (snapshot(commit=...)): a branch that moves
between a plan and its download cannot put one commit's weights under another's name. Every request has a deadline
and every network failure falls back to the cache through one helper (interp._util.net).
"""

from __future__ import annotations

import fnmatch
import re
import sys
from dataclasses import dataclass
from pathlib import Path

from interp._util.errors import InputError, one_line
from interp._util.io import write_text_atomic
from interp._util.net import bounded, hub_host, online_or_cached
from interp._util.offline import is_offline, set_offline  # noqa: F401 (set_offline re-exported)

# files that define a model beside its weights (top level only: a repo's subfolders hold other variants)
DEFINING_PATTERNS = ("*.json", "*.txt", "*.model", "*.tiktoken", "*.py", "*.jinja", "*.tokenizer")
WEIGHT_FORMATS = (("*.safetensors",), ("*.bin",))   # in order of preference: the first one the revision has
_COMMIT = re.compile(r"^[0-9a-f]{40}$")
_REPO_ID = re.compile(r"^(?:[A-Za-z0-9][A-Za-z0-9_.-]{0,95}/)?[A-Za-z0-9][A-Za-z0-9_.-]{0,95}$")
_REF_FORBIDDEN = re.compile(r"[\x00-\x20\x7f~^:?*\[\\]")   # git check-ref-format: controls, space, ~ ^ : ? * [ \\
MAX_REVISION_CHARS = 255
MAX_REVISIONS = 100_000   # names one --revisions spec may expand to (Pythia's whole series is 154)


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


def is_revision_name(name: object) -> bool:
    """Whether `name` is a name the hub can give a branch, tag or commit (git's check-ref-format rules): never
    empty, absolute, "..", a component starting with "." or ending ".lock", a control character, space or one of
    ~ ^ : ? * [ \\, "@{" or "//"; at most MAX_REVISION_CHARS. Such a name is safe as a path below refs/."""
    if not isinstance(name, str) or not name or len(name) > MAX_REVISION_CHARS or name == "@":
        return False
    if _REF_FORBIDDEN.search(name) or ".." in name or "@{" in name or "//" in name or name.endswith((".", "/")):
        return False
    return all(part and not part.startswith(".") and not part.endswith(".lock") for part in name.split("/"))


def is_commit(value: object) -> bool:
    """A full commit id: 40 lowercase hex digits."""
    return isinstance(value, str) and _COMMIT.match(value) is not None


def check_revision(name: str, field: str = "--revision") -> str:
    """`name` when it is a revision name (is_revision_name), else an InputError naming `field`."""
    if not is_revision_name(name):
        raise InputError(f"{name[:80]!r} is not a revision name (a branch, tag or commit: no '..', no leading '/' "
                         "or '.', no spaces or ~^:?*[\\)", field=field, fix="e.g. main, step1000 or a commit sha")
    return name


def check_repo_id(repo_id: str) -> str:
    """`repo_id` when it is a hub repo id (org/name, or a legacy one-part name), else an InputError."""
    if not _REPO_ID.match(repo_id) or ".." in repo_id or repo_id.endswith((".git", ".")):
        raise InputError(f"{repo_id[:80]!r} is not a hub repo id", field="model", fix="write ORG/NAME, e.g. "
                         "EleutherAI/pythia-70m")
    return repo_id


def _repo_cache(repo_id: str) -> Path:
    return cache_root() / f"models--{check_repo_id(repo_id).replace('/', '--')}"


def _commit_of(repo_id: str, revision: str) -> str | None:
    """The commit a revision resolved to when last downloaded (the cache's refs/ file), or None."""
    if _COMMIT.match(revision):
        return revision
    if not is_revision_name(revision):
        return None
    ref = _repo_cache(repo_id) / "refs" / revision
    try:
        return ref.read_text().strip() or None
    except OSError:
        return None


def cached_revisions(repo_id: str) -> list[str]:
    """The revision names the local cache has refs for (what `all` means offline)."""
    refs = _repo_cache(repo_id) / "refs"
    found = (p.relative_to(refs).as_posix() for p in refs.rglob("*") if p.is_file()) if refs.is_dir() else ()
    return sorted(name for name in found if is_revision_name(name))


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
                       ("check the id or path (a TransformerLens name also works, e.g. gpt2-small); for a private "
                       "repo, `hf auth login`"))
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
    """The cached snapshot of a revision (a name or a commit), or None (nothing is asked of the network)."""
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import LocalEntryNotFoundError

    if not is_revision_name(revision):
        return None
    try:
        path = Path(snapshot_download(check_repo_id(repo_id), revision=revision, local_files_only=True))
    except (LocalEntryNotFoundError, OSError, ValueError):
        return None
    return Snapshot(repo_id, revision, path.name, path)


def _write_ref(repo_id: str, revision: str, commit: str) -> None:
    """Record in the cache that `revision` resolved to `commit` (refs/<revision>, as huggingface_hub does for a
    download by name), so an offline or unreachable rerun finds the revision by its name. Both were checked."""
    if revision == commit:
        return
    ref = _repo_cache(repo_id) / "refs" / check_revision(revision)
    try:
        if ref.is_file() and ref.read_text().strip() == commit:
            return
        ref.parent.mkdir(parents=True, exist_ok=True)
        write_text_atomic(ref, commit)
    except OSError as err:  # the snapshot is there; only the offline lookup by name is lost
        print(f"[hub] {repo_id}@{revision}: could not record its commit in the cache ({one_line(err)})",
              file=sys.stderr)


def is_hub_answer(err: BaseException) -> bool:
    """An HTTP error status (404, 401, 500 ...): the hub answered; never a reason to use the cache."""
    from huggingface_hub.errors import HfHubHTTPError

    return isinstance(err, HfHubHTTPError)


def snapshot(repo_id: str, revision: str | None = None, commit: str | None = None) -> Snapshot:
    """The revision's files on the local disk, downloaded where missing (module doc); InputError otherwise.

    The download is pinned to one commit: `commit` when the caller resolved the revision earlier (a batch plan),
    else the one the hub names for `revision` now; a hub that then answers another commit is refused."""
    from huggingface_hub import HfApi, snapshot_download
    from huggingface_hub.errors import LocalEntryNotFoundError

    check_repo_id(repo_id)
    revision = check_revision(revision or "main")
    if commit is not None and not is_commit(commit):
        raise InputError(f"{commit[:80]!r} is not a commit id (40 hex digits)", field="commit",
                         fix="pass the sha a revision resolved to, or none")
    asked = f"{repo_id}@{revision}"

    def cached() -> Snapshot | None:
        found = _cached(repo_id, commit or revision)
        if found is None or not _complete(found.path):
            return None
        return Snapshot(repo_id, revision, found.commit, found.path)

    if is_offline():
        found = cached()
        if found is None:
            raise hub_error(repo_id, revision, LocalEntryNotFoundError("not cached"))
        return found

    def ask() -> Snapshot:
        info = bounded(lambda: HfApi().model_info(repo_id, revision=commit or revision), f"the model info of {asked}")
        sha = info.sha
        if not is_commit(sha) or (commit is not None and sha != commit):
            raise InputError(f"the hub answered commit {str(sha)[:80]!r} for {asked}"
                             + (f", not the {commit[:12]} it resolved to" if commit else ", not a commit id"),
                             fix="check HF_ENDPOINT: a hub must answer 40-hex commit ids that stay put")
        files = [s.rfilename for s in info.siblings or [] if isinstance(s.rfilename, str)]
        path = Path(snapshot_download(repo_id, revision=sha, allow_patterns=_patterns(files)))
        _write_ref(repo_id, revision, sha)
        return Snapshot(repo_id, revision, sha, path)

    try:
        return online_or_cached(ask, cached, asked, lambda err: hub_error(repo_id, revision, err), is_hub_answer,
                                describe=lambda snap: f"commit {snap.commit[:12]}")
    except InputError:
        raise
    except Exception as err:
        if is_hub_answer(err) or isinstance(err, LocalEntryNotFoundError):
            raise hub_error(repo_id, revision, err) from None
        raise


def _complete(path: Path) -> bool:
    """A snapshot with a config.json and at least one weight file (what an interrupted first download lacks)."""
    return (path / "config.json").is_file() and any(path.glob(p) for formats in WEIGHT_FORMATS for p in formats)


# --------------------------------------------------------------------------------------------------
# Checkpoint series
# --------------------------------------------------------------------------------------------------

# Naming schemes of checkpoint revisions, one regex each (matched whole): group `step`, and `tokens` where the name
# says (a number with its unit, read by tokens_of: 294B, 2B, 1.5T). Sources of the public names are cited per row.
#   Pythia               step143000
#   OLMo / OLMo-2        step1000-tokens4B, stage1-step140000-tokens294B (tokens in billions); `interp export
#                        --push` names our branches so, the count exact: step128-tokens262144, step1000-tokens2M
#   SmolLM2              step-240000: HuggingFaceTB/SmolLM2-{135M,360M,1.7B}-intermediate-checkpoints, whose model
#                        cards load `revision = "step-240000"` (135M), "step-160000" (360M), "step-125000" (1.7B);
#                        step-1200000 and step-1440000 (135M) appear in public code. The name carries no tokens: the
#                        cards give tokens = step x global batch (1,048,576 tokens for 135M, 2,097,152 for 1.7B), so
#                        `tokens` stays NaN. Only those example names were seen, never a full branch listing: whether
#                        every branch is written this way (no zero padding, no stage prefix) is not confirmed here.
#                        (https://huggingface.co/HuggingFaceTB/SmolLM2-135M-intermediate-checkpoints, README)
#   FineWeb ablations    step-001000-2BT: HuggingFaceFW/ablation-model-* (e.g. ablation-model-fineweb-edu), whose model
#                        card says "The naming convention is `step-001000-2BT`": a zero-padded step, then the tokens
#                        seen with a unit (M/B/T) and a final "T" for tokens (2BT = 2 billion tokens, 1,000 steps of a
#                        ~2M-token batch; the model saw 350B in 167k steps)
#                        (https://huggingface.co/HuggingFaceFW/ablation-model-fineweb-edu, README)
#   ours                 step_000128 (interp's checkpoints/ folders)
# Any other series: --revision-pattern REGEX (compile_revision_pattern), tried before this table.
NAMING_SCHEMES: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("olmo", re.compile(r"^(?:stage(?P<stage>\d+)-)?step(?P<step>\d+)-tokens(?P<tokens>\d+[KMBT]?)$")),
    ("pythia", re.compile(r"^step(?P<step>\d+)$")),
    ("fineweb", re.compile(r"^step-(?P<step>\d+)-(?P<tokens>\d+(?:\.\d+)?[MBT])T$")),
    ("smollm2", re.compile(r"^step-(?P<step>\d+)$")),
    ("interp", re.compile(r"^step_(?P<step>\d+)$")),
)
_UNITS = {"": 1.0, "K": 1e3, "M": 1e6, "B": 1e9, "T": 1e12}
_TOKENS = re.compile(r"^(?P<number>[0-9]+(?:\.[0-9]+)?)(?P<unit>[KMBT]?)$", re.IGNORECASE)
_RANGE = re.compile(r"^(?P<prefix>[^.]*?)(?P<start>\d{1,15})\.\.(?P=prefix)?(?P<stop>\d{1,15})(?::(?P<every>\d{0,15}))?$")
PATTERN_GROUPS = ("step", "tokens")   # the named groups a --revision-pattern may have
PATTERN_FLAG = "--revision-pattern"
_PATTERN_EXAMPLE = r"e.g. --revision-pattern 'ckpt-(?P<step>\d+)-(?P<tokens>\d+[KMBT])' for ckpt-1000-2B"


def tokens_of(text: str) -> float:
    """A token count as a revision name writes it: a number with an optional unit K, M, B or T (either case):
    "294B" -> 2.94e11, "1.5T" -> 1.5e12, "4096" -> 4096.0. ValueError for anything else."""
    found = _TOKENS.match(text)
    if not found:
        raise ValueError(f"{text!r} is not a token count (a number with an optional K/M/B/T unit)")
    return float(found["number"]) * _UNITS[found["unit"].upper()]


def _quoted(pattern: str) -> str:
    """A regex as the user typed it, in quotes (repr() would double each backslash), on one line."""
    text = pattern[:120] + ("..." if len(pattern) > 120 else "")
    return f"'{text}'" if text.isprintable() else repr(text)


def compile_revision_pattern(pattern: str | re.Pattern[str], field: str = PATTERN_FLAG) -> re.Pattern[str]:
    """A --revision-pattern as a compiled regex, checked: it compiles, it names a group `step` and/or `tokens`, and
    no other named group. The whole revision name must match it (re.fullmatch); `tokens` may carry a unit
    (tokens_of). One InputError line naming `field`, what is wrong and an example otherwise."""
    if isinstance(pattern, re.Pattern):
        compiled = pattern
    else:
        if not isinstance(pattern, str) or not pattern.strip():
            raise InputError(f"{pattern!r} is empty: a regex with a group (?P<step>...) and/or (?P<tokens>...) is "
                             "needed", field=field, fix=_PATTERN_EXAMPLE)
        try:
            compiled = re.compile(pattern)
        except re.error as err:
            raise InputError(f"{_quoted(pattern)} is not a regular expression ({err})", field=field,
                             fix=_PATTERN_EXAMPLE) from None
    shown = _quoted(compiled.pattern)
    unknown = sorted(set(compiled.groupindex) - set(PATTERN_GROUPS))
    if unknown:
        raise InputError(f"{shown} has the unknown group name(s) {', '.join(unknown)}: only step and tokens are read",
                         field=field, fix="rename them, or make them unnamed (...) or (?:...); " + _PATTERN_EXAMPLE)
    if not set(compiled.groupindex) & set(PATTERN_GROUPS):
        raise InputError(f"{shown} has no group (?P<step>...) or (?P<tokens>...), so it reads nothing from a name",
                         field=field, fix=_PATTERN_EXAMPLE)
    return compiled


def _read_pattern(match: re.Match[str], revision: str, field: str) -> tuple[float, float]:
    found = match.groupdict()
    step = tokens = float("nan")
    if found.get("step") is not None:
        if not re.fullmatch(r"[0-9]+", found["step"]):
            raise InputError(f"its group step matched {found['step'][:40]!r} in the revision {revision[:80]!r}, not "
                             "a whole number", field=field, fix=r"match digits only, e.g. (?P<step>\d+)")
        step = float(int(found["step"]))
    if found.get("tokens") is not None:
        try:
            tokens = tokens_of(found["tokens"])
        except ValueError:
            raise InputError(f"its group tokens matched {found['tokens'][:40]!r} in the revision {revision[:80]!r}, "
                             "not a number with an optional K/M/B/T unit", field=field,
                             fix=r"match the number and its unit only, e.g. (?P<tokens>\d+[KMBT])") from None
    return step, tokens


def step_of(revision: str, pattern: str | re.Pattern[str] | None = None,
            field: str = PATTERN_FLAG) -> tuple[float, float]:
    """(step, tokens) a revision's name carries (NaN where it says nothing): by `pattern` (a --revision-pattern,
    compile_revision_pattern) when the whole name matches it, else by NAMING_SCHEMES."""
    if pattern is not None:
        match = compile_revision_pattern(pattern, field).fullmatch(revision)
        if match:
            return _read_pattern(match, revision, field)
    for _scheme, scheme in NAMING_SCHEMES:
        match = scheme.match(revision)
        if match:
            found = match.groupdict()
            tokens = tokens_of(found["tokens"]) if found.get("tokens") else float("nan")
            return float(found["step"]), tokens
    return float("nan"), float("nan")


def parse_revisions(spec: str, field: str = "--revisions") -> list[str] | None:
    """`--revisions` as names: "a,b,c" -> the list; "step0..step3000:1000" -> step0, step1000, step2000, step3000
    (a start written with leading zeros keeps its width: step_000000..step_000128:64 -> step_000000, step_000064,
    step_000128); "all" -> None (every ref of the repo). InputError naming the flag for a malformed range, a name
    that is not a revision name (is_revision_name), or a spec of more than MAX_REVISIONS names (counted before
    any is built)."""
    parts = [p.strip() for p in spec.split(",") if p.strip()]
    if "all" in parts:
        return None
    ranges: list[tuple[str, int, int, int, int]] = []   # (prefix, start, stop, every, width) or a plain name
    total = 0
    for part in parts:
        if ".." not in part:
            total += 1
            continue
        match = _RANGE.match(part)
        if not match or int(match["stop"]) < int(match["start"]) or int(match["every"] or 1) == 0 \
                or match["every"] == "":
            raise InputError(f"{part[:80]!r} is not a range", field=field,
                             fix="write PREFIX<start>..PREFIX<stop>[:every], e.g. step0..step143000:1000")
        start, stop, every = int(match["start"]), int(match["stop"]), int(match["every"] or 1)
        width = len(match["start"]) if match["start"].startswith("0") and len(match["start"]) > 1 else 0
        ranges.append((match["prefix"], start, stop, every, width))
        total += (stop - start) // every + 1
    if total > MAX_REVISIONS:
        raise InputError(f"{spec[:80]!r} names {total:,} revisions, more than the {MAX_REVISIONS:,} one spec may",
                         field=field, fix="use a coarser step (PREFIX0..PREFIXN:EVERY) or several runs")
    names: list[str] = []
    expand = iter(ranges)
    for part in parts:
        if ".." in part:
            prefix, start, stop, every, width = next(expand)
            names += [f"{prefix}{str(n).zfill(width)}" for n in range(start, stop + 1, every)]
        else:
            names.append(check_revision(part, field))
    if not names:
        raise InputError(f"{spec!r} names no revision", field=field, fix="e.g. step0,step1000 or all")
    for name in names[:1] + names[-1:]:   # a range's names share its prefix: its ends tell
        check_revision(name, field)
    return list(dict.fromkeys(names))


def _order(name: str, pattern: re.Pattern[str] | None = None) -> tuple[int, float, str]:
    """Step order; names with no step by tokens (a pattern may read only those), then the rest by name."""
    step, tokens = step_of(name, pattern)
    return (0, step, name) if step == step else (1, tokens, name) if tokens == tokens else (2, 0.0, name)


def _listed_refs(repo_id: str) -> dict[str, str]:
    """{name: commit} of the repo's branches and tags, one request within the deadline. Listed names and commits
    are input: one that is not a revision name / a commit id is left out, said on stderr; a listing that is not
    one at all is an InputError naming the host."""
    from huggingface_hub import HfApi

    listed = bounded(lambda: HfApi().list_repo_refs(repo_id), f"the refs of {repo_id}")
    try:
        pairs = [(r.name, r.target_commit) for r in [*listed.branches, *listed.tags]]
    except (TypeError, AttributeError) as err:
        raise InputError(f"the hub at {hub_host()} answered a malformed refs listing for {repo_id} "
                         f"({one_line(err)[:120]})", fix="check HF_ENDPOINT") from None
    refs = {name: commit for name, commit in pairs if is_revision_name(name) and is_commit(commit)}
    ignored = [name for name, commit in pairs if name not in refs]
    if ignored:
        print(f"[hub] {repo_id}: ignored {len(ignored)} ref(s) the hub listed that are not revision names with "
              f"commit ids: {', '.join(repr(str(n)[:60]) for n in ignored[:3])}", file=sys.stderr)
    return refs


def revisions(repo_id: str, spec: str, field: str = "--revisions",
              pattern: str | re.Pattern[str] | None = None) -> dict[str, str]:
    """{revision name: commit sha} for a revisions spec (parse_revisions), in step order for "all" (the step each
    name carries: step_of, by `pattern` (a --revision-pattern) first where given).

    One request lists every branch and tag (list_repo_refs); a name that is not a ref (a commit sha) maps to
    itself. Offline, or with the hub unreachable or stalled (said on stderr), the refs the cache holds stand in;
    a name it lacks is an InputError naming it and `field` (the flag the user gave)."""
    names = parse_revisions(spec, field)
    compiled = compile_revision_pattern(pattern) if pattern is not None else None   # before any request
    check_repo_id(repo_id)

    def from_cache() -> dict[str, str]:
        return {name: commit for name in cached_revisions(repo_id)
                if is_commit(commit := _commit_of(repo_id, name) or "")}

    def cached() -> dict[str, str] | None:   # only when the cache answers all that was asked
        refs = from_cache()
        wanted = names if names is not None else []
        return refs if refs and all(n in refs or is_commit(n) for n in wanted) else None

    if is_offline():
        refs = from_cache()
    else:
        try:
            refs = online_or_cached(lambda: _listed_refs(repo_id), cached, f"the refs of {repo_id}",
                                    lambda err: hub_error(repo_id, None, err), is_hub_answer)
        except InputError:
            raise
        except Exception as err:
            if is_hub_answer(err):
                raise hub_error(repo_id, None, err) from None
            raise
    if names is None:
        return {name: refs[name] for name in sorted(refs, key=lambda name: _order(name, compiled))}
    missing = [n for n in names if n not in refs and not is_commit(n)]
    if missing:
        where = f"the local cache ({cache_root()}), offline" if is_offline() else "the hub"
        known = sorted(refs, key=lambda name: _order(name, compiled))
        raise InputError(f"hub model {repo_id!r} has no revision {', '.join(missing[:5])}"
                         f"{' ...' if len(missing) > 5 else ''} in {where}", field=field,
                         fix=f"it has {len(refs)}: {', '.join(known[:8])}{' ...' if len(refs) > 8 else ''}")
    return {n: refs.get(n, n) for n in names}
