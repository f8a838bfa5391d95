"""Targets: what the PATHs and MODELs of `interp batch`, `interp eval` and `interp ablate` stand for.

Why a module of its own: which folders are visited (symlinks, cycles, what counts as a model) is a question
apart from what identifies a model (interp.jobs.keys) and from running anything on it.

PATH expansion (expand_paths), applied to each PATH in order:
  * a registry name (smollm2-135m, ...)    -> its .gguf file (label = the name)
  * a `.gguf` file                         -> itself
  * an HF model directory                  -> itself (config.json with `model_type` or `architectures`,
                                              as interp.hf.resolve.classify_dir decides; save_pretrained);
                                              a folder with HF weight files and a config.json that cannot
                                              be read is one too, so it is reported as failed, not skipped
  * a run directory (has checkpoints/step_*/) -> its step checkpoints sorted by step number, then the
                                              final model (runs/NAME/model.safetensors) unless it is
                                              byte-identical to the last step checkpoint (a finished run
                                              writes both at its last step; the step one keeps its step)
  * one of our checkpoint directories      -> itself (model.safetensors + a config.json that says it is
                                              ours: interp.training.checkpoints.is_checkpoint_dir; a step
                                              checkpoint given directly keeps its run name and step)
  * any other folder                       -> every run / checkpoint / HF dir / .gguf below it, in sorted
                                              path order; a match is not searched further, hidden folders
                                              and `*.parts` folders are skipped
  * a hub id or TransformerLens name      -> that model at one revision (MODEL@REV, `--revision`, else main), or at
    (not an existing path)                  every revision of `--revisions` (a list, a range step0..step3000:1000,
                                              or all: interp.hf.hub.revisions), each a target of kind "hub" whose
                                              path is MODEL@REV, with the step (and tokens) its name carries
                                              (interp.hf.hub.step_of; `--revision-pattern REGEX` reads the names of
                                              any other series); its files are downloaded when it is probed
  A path reached twice is analysed once. A PATH that does not exist, or holds nothing to analyse, is an
  error before anything runs.
  Which checkpoints of a run (select_checkpoints, `--checkpoints`): all (the default), final (each run's last
  model: the final one, or its latest step checkpoint while it trains), step numbers (100,200), or both
  (final,100); pretrained models and HF dirs are always kept.
  Symlinks: each directory is visited once, by its real path (so `ln -s . t/a` cannot loop), and a symlink
  whose target lies outside the PATH given is not followed (a note on stderr says so) unless
  follow_symlinks=True (`--follow-symlinks`). A PATH given as a symlink is its target's tree.

A target holds the model's source (interp.hf.sources: one class per kind), which says what defines it besides its
weights (definition_files, hashed by interp.jobs.keys): a checkpoint's config.json and tokenizer, an HF
directory's other top-level files, nothing for a GGUF file (self-contained).
"""

from __future__ import annotations

import math
import os
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

from interp._util.dist import env_rank
from interp._util.errors import InputError
from interp._util.io import file_sha256
from interp._util.paths import CONFIG_FILE, WEIGHTS_FILE, cache_dir
from interp.hf.registry import REGISTRY
from interp.hf.resolve import GGUF_SUFFIX, resolve_model
from interp.hf.sources.base import HF_WEIGHT_PATTERNS, ModelSource, hf_weight_files, read_config
from interp.hf.sources.checkpoint import CheckpointSource
from interp.hf.sources.gguf import GgufSource
from interp.hf.sources.hf_dir import HfDirSource
from interp.hf.sources.hub import HubSource
from interp.jobs.parts import PARTS_SUFFIX

__all__ = [
    "CHECKPOINTS_HELP",
    "GGUF_SUFFIX",
    "HF_WEIGHT_PATTERNS",
    "STEP_DIR",
    "Target",
    "expand_paths",
    "hub_targets",
    "parse_checkpoints",
    "select_checkpoints",
]

STEP_DIR = re.compile(r"step_(\d+)")
CHECKPOINTS_HELP = ("which checkpoints of each run: all, final (each run's last model), step numbers (100,200) "
                    "or both (final,100); pretrained models and HF dirs are always kept")


@dataclass(frozen=True)
class Target:
    """One model to analyse: where it is (its name in the plan), its source, and the run/step it belongs to."""

    path: Path           # the file or folder; a hub target's MODEL@REV
    source: ModelSource  # what it is (interp.hf.sources): its kind, files, key, columns and loading
    run: str = ""        # run directory name (ours), a hub target's repo id, "" for other pretrained models
    step: float = math.nan   # config.json `step` of a step checkpoint (a hub revision: its name's), NaN otherwise
    label: str = ""      # config.json `label` of our checkpoints ("uniform", "cosine 1.5->0.5"), else the source's
    tokens: float = math.nan   # a hub revision's training tokens its name carries, NaN otherwise
    name: str = ""       # how a table's `model` column names it where not by run, label or file (eval: as given)

    @property
    def kind(self) -> str:
        return self.source.kind

    @property
    def hub_id(self) -> str:
        return self.source.hub_id

    @property
    def revision(self) -> str:
        return self.source.revision or ""

    @property
    def commit(self) -> str:
        return self.source.commit

    def weights_files(self) -> list[Path]:
        return self.source.weights_files()

    def definition_files(self) -> list[tuple[str, Path]]:
        """(name in the hash, file) of everything besides the weights that defines the model (module doc)."""
        return self.source.definition_files()


# --------------------------------------------------------------------------------------------------
# Walking the PATHs
# --------------------------------------------------------------------------------------------------

@dataclass
class _Walk:
    """One PATH's tree: the directories visited (real paths) and the symlinks not followed."""

    root: Path                       # real path of the PATH given
    follow_symlinks: bool = False
    visited: set[Path] = field(default_factory=set)
    notes: list[str] = field(default_factory=list)

    def admit(self, path: Path) -> bool:
        """Whether to look at `path`: once per real path, and not out of the tree unless asked."""
        real = Path(os.path.realpath(path))
        if path.is_symlink() and not self.follow_symlinks and real != self.root and self.root not in real.parents:
            self.notes.append(f"{path} -> {real}: a symlink out of {self.root}, not followed "
                              "(--follow-symlinks follows it)")
            return False
        if real in self.visited:
            return False
        self.visited.add(real)
        return True


def _step_dirs(run_dir: Path) -> list[Path]:
    folder = run_dir / "checkpoints"
    if not folder.is_dir():
        return []
    found = [p for p in folder.iterdir() if p.is_dir() and STEP_DIR.fullmatch(p.name)]
    return sorted(found, key=lambda p: int(STEP_DIR.fullmatch(p.name).group(1)))


def _pretrained_at(path: Path) -> ModelSource | None:
    """A .gguf file or an HF directory at `path`, or None (a plain folder, an unrelated file; runs and our
    checkpoints are found before this is asked).

    What a directory holds is decided by the one model resolver (interp.hf.resolve: by what config.json
    says, never by file names alone), except that a folder without config.json is searched, not taken
    for a model: a .gguf inside it is found as a file. A config.json that is unreadable, or neither ours nor
    Hugging Face's, beside HF weight files marks a broken model (reported as failed when probed)."""
    from interp.hf.resolve import ModelResolutionError, classify_dir

    if path.is_file():
        return GgufSource(str(path), path) if path.suffix == GGUF_SUFFIX else None
    if not path.is_dir() or not (path / CONFIG_FILE).is_file():
        return None
    try:
        found = classify_dir(path)
    except ModelResolutionError:
        found = HfDirSource if hf_weight_files(path) else None  # no weights: a config.json of something else
    return HfDirSource(str(path), path) if found is HfDirSource else None


def _checkpoint_target(path: Path, run: str | None = None, step: float | None = None) -> Target:
    """Run name, step and label of one of our checkpoint dirs (a corrupt config.json is reported later)."""
    config = read_config(path, CONFIG_FILE)
    config = config if isinstance(config, dict) else {}
    match = STEP_DIR.fullmatch(path.name)
    is_step = match is not None and path.parent.name == "checkpoints"
    if run is None:
        run = path.parent.parent.name if is_step else path.name
    if step is None:
        value = config.get("step")
        step = float(value) if isinstance(value, int | float) else (float(match.group(1)) if is_step else math.nan)
    label = config.get("label") if isinstance(config.get("label"), str) else ""
    return Target(path, CheckpointSource(str(path), path), run, step, label)


def _run_targets(run_dir: Path, walk: _Walk) -> list[Target]:
    """Step checkpoints by step, then the final model unless it equals the last step checkpoint."""
    steps = [_checkpoint_target(p, run=run_dir.name) for p in _step_dirs(run_dir) if walk.admit(p)]
    if (run_dir / WEIGHTS_FILE).is_file():
        final = _checkpoint_target(run_dir, run=run_dir.name, step=math.nan)
        try:
            same = bool(steps) and (file_sha256(run_dir / WEIGHTS_FILE, cache_dir("hashes"))
                                    == file_sha256(steps[-1].path / WEIGHTS_FILE, cache_dir("hashes")))
        except OSError:
            same = False  # the last step checkpoint is broken: keep both, it is reported when probed
        if not same:
            steps.append(final)
    return steps


def _targets_at(path: Path, walk: _Walk) -> list[Target]:
    from interp.training.checkpoints import is_checkpoint_dir

    if path.is_dir() and _step_dirs(path):
        return _run_targets(path, walk)
    if path.is_dir() and is_checkpoint_dir(path):
        return [_checkpoint_target(path)]  # ours, or ours with a corrupt config.json (reported as failed later)
    source = _pretrained_at(path)
    if source is not None:
        return [Target(path, source, label=source.label)]
    if not path.is_dir():
        return []
    found = []
    for child in sorted(path.iterdir()):
        if child.name.startswith(".") or child.name.endswith(PARTS_SUFFIX) or not walk.admit(child):
            continue
        found.extend(_targets_at(child, walk))
    return found


def _nothing_found(raw: str | Path, path: Path) -> ValueError:
    """The error for a PATH with nothing to analyse, with the reason its config.json was not taken."""
    from interp.hf.resolve import ModelResolutionError, classify_dir

    reason = ""
    if path.is_dir() and (path / CONFIG_FILE).is_file():
        try:
            classify_dir(path)
        except ModelResolutionError as err:
            reason = f" ({err})"
    return ValueError(f"{raw}: found no checkpoint dir (model.safetensors + config.json), run dir "
                      f"(checkpoints/step_*), HF model dir or {GGUF_SUFFIX} file there{reason}")


def parse_checkpoints(text: str) -> tuple[str | int, ...]:
    """`--checkpoints` as a tuple: () for all, else "final" and/or step numbers (ValueError naming the flag)."""
    tokens = [t.strip() for t in str(text).split(",") if t.strip()]
    if tokens in ([], ["all"]):
        return ()
    picked: list[str | int] = []
    for token in tokens:
        if token == "final" or (token.isdigit() and int(token) >= 0):
            picked.append(token if token == "final" else int(token))
        else:
            raise ValueError(f"checkpoints={text!r}: {token!r} is neither 'final' nor a step number; write all, "
                             "final, 100,200 or final,100")
    return tuple(picked)


def _run_dir(target: Target) -> Path:
    """The run a checkpoint belongs to: runs/NAME for runs/NAME/checkpoints/step_N, else the checkpoint itself."""
    path = target.path
    return path.parent.parent if STEP_DIR.fullmatch(path.name) and path.parent.name == "checkpoints" else path


def select_checkpoints(targets: list[Target], checkpoints: str | tuple[str | int, ...] = "all") -> list[Target]:
    """The targets `checkpoints` keeps (parse_checkpoints), in order. Our checkpoints are grouped by run
    directory; "final" keeps the last of each run (expand_paths lists a run's steps, then its final model).
    A step no run has is an error that lists the steps there are; a run without it gets a note on stderr."""
    picked = parse_checkpoints(checkpoints) if isinstance(checkpoints, str) else tuple(checkpoints)
    if not picked:
        return targets
    steps = {p for p in picked if p != "final"}
    runs: dict[Path, list[Target]] = {}
    for t in targets:
        if t.source.checkpoint:   # one of ours: grouped by its run
            runs.setdefault(_run_dir(t), []).append(t)
    keep: set[Path] = set()
    for run, members in runs.items():
        have = {int(t.step) for t in members if t.step == t.step}
        keep.update(t.path for t in members if t.step == t.step and int(t.step) in steps)
        if "final" in picked:
            keep.add(members[-1].path)
        missing = sorted(steps - have)
        if missing and have and env_rank() == 0:
            print(f"[batch] {run}: no checkpoint at step {', '.join(map(str, missing))} (it has "
                  f"{', '.join(map(str, sorted(have)))})", file=sys.stderr)
    found = {int(t.step) for t in targets if t.source.checkpoint and t.step == t.step}
    if runs and steps - found:   # (pretrained models alone: nothing to pick from, nothing wrong)
        raise ValueError(f"checkpoints={','.join(map(str, picked))}: no checkpoint at step "
                         f"{', '.join(map(str, sorted(steps - found)))} under the PATHs; steps found: "
                         f"{', '.join(map(str, sorted(found))) or 'none'}")
    return [t for t in targets if not t.source.checkpoint or t.path in keep]


def hub_targets(spec: str, revision: str | None = None, revisions: str | None = None,
                revision_pattern: str | None = None) -> list[Target]:
    """The targets of a hub id or TransformerLens name: one revision, or every one of a `--revisions` spec, each
    with its commit (one request for the repo's refs; offline, the cache's) and the step and tokens its name
    carries (hub.step_of: `revision_pattern`, a --revision-pattern regex, first where given; it also orders `all`)."""
    from interp.hf import hub

    pattern = hub.compile_revision_pattern(revision_pattern) if revision_pattern is not None else None
    ref = resolve_model(spec, revision=revision)
    if not isinstance(ref, HubSource):
        raise ValueError(f"{spec}: not a hub model")
    if revisions and ref.revision:
        raise InputError(f"{spec} names one revision and --revisions {revisions!r} many; give one of the two",
                         field="--revisions")
    field = "--revisions" if revisions else "--revision"   # the flag the user gave (MODEL@REV: --revision's twin)
    commits = hub.revisions(ref.hub_id, revisions or ref.revision or "main", field=field, pattern=pattern)
    found = []
    for name, commit in commits.items():
        step, tokens = hub.step_of(name, pattern)
        source = HubSource(ref.hub_id, None, hub_id=ref.hub_id, revision=name, commit=commit)
        found.append(Target(Path(f"{ref.hub_id}@{name}"), source, run=ref.hub_id, step=step, label=ref.hub_id,
                            tokens=tokens))
    return found


def expand_paths(paths: list[str | Path], follow_symlinks: bool = False, revision: str | None = None,
                 revisions: str | None = None, revision_pattern: str | None = None) -> list[Target]:
    """The models that PATHs stand for (rules in the module docstring), each once, in order. Symlinks
    not followed are listed on stderr (rank 0). Filter them with select_checkpoints. `revision` / `revisions` /
    `revision_pattern` apply to the hub ids among the PATHs; given without one, they are an InputError (a bad
    `revision_pattern` is one before any PATH is looked at)."""
    if not paths:
        raise ValueError("no PATH given: pass checkpoint dirs, run dirs, HF model dirs, .gguf files or folders")
    if revision_pattern is not None:
        from interp.hf.hub import compile_revision_pattern

        compile_revision_pattern(revision_pattern)
    targets: list[Target] = []
    seen: set[Path] = set()
    hub_given = False
    for raw in paths:
        path = Path(raw).expanduser()
        if not path.exists() and str(raw) in REGISTRY:  # a registry name: its GGUF file (same numbers; tested)
            resolve_model(raw)  # ModuleNotFoundError with the pip command when its package is missing
            path = REGISTRY[str(raw)].locate()
            found = [Target(path, GgufSource(str(path), path), label=str(raw))]
        elif not path.exists():
            try:
                found = hub_targets(str(raw), revision, revisions, revision_pattern)
            except FileNotFoundError:
                raise FileNotFoundError(f"{raw}: no such file or directory (nor a registry model: "
                                        f"{', '.join(REGISTRY)}, nor a hub id)") from None
            hub_given = True
        else:
            walk = _Walk(Path(os.path.realpath(path)), follow_symlinks)
            walk.visited.add(walk.root)
            found = _targets_at(path, walk)
            if env_rank() == 0:
                for note in walk.notes:
                    print(f"[batch] {note}", file=sys.stderr)
        if not found:
            raise _nothing_found(raw, path)
        for target in found:
            resolved = target.path.resolve()
            if resolved not in seen:
                seen.add(resolved)
                targets.append(target)
    if (revision or revisions or revision_pattern is not None) and not hub_given:
        flag = "--revisions" if revisions else "--revision" if revision else "--revision-pattern"
        raise InputError("applies to hub models only, and no PATH is a hub id", field=flag,
                         fix=f"drop {flag}, or name a hub id (e.g. EleutherAI/pythia-70m)")
    return targets
