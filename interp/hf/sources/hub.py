"""A hub model: "org/name" (or a TransformerLens name) at a revision, fetched by interp.hf.hub into the Hugging Face
cache (downloaded where missing; HF_HUB_OFFLINE=1 reads the cache only), then read as a local Hugging Face
directory. Its commit names it before anything is downloaded."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from interp.hf.sources.base import ModelSource
from interp.hf.sources.hf_dir import HfDirSource, refuse_remote_code


@dataclass(frozen=True)
class HubSource(HfDirSource):
    """A hub id at a revision; `path` is its snapshot once fetched (None before)."""

    kind = "hub"

    @property
    def label(self) -> str:
        return self.hub_id

    @property
    def model_column(self) -> str:
        return self.label

    def table_columns(self) -> dict[str, Any]:
        return {"revision": self.revision, "commit": self.commit}

    def content_key(self) -> str:
        """Its repo id and the commit its revision resolved to: known before anything is downloaded."""
        return f"hub:{self.hub_id}@{self.commit}"

    def pinned_key(self) -> str:
        return self.commit

    def weights_files(self) -> list[Path]:
        return super().weights_files() if self.path is not None else []

    def definition_files(self) -> list[tuple[str, Path]]:
        return super().definition_files() if self.path is not None else []

    def pinned(self) -> HubSource:
        if self.commit:
            return self
        from interp.hf import hub

        [(name, commit)] = hub.revisions(self.hub_id, self.revision or "main", field="--revision").items()
        return dataclasses.replace(self, revision=name, commit=commit)

    def checked(self) -> HubSource:
        return self   # its remote code is checked once fetched

    def fetched(self) -> ModelSource:
        """The snapshot (downloaded where missing; path and commit set, its remote code refused unless trusted). A
        commit set beforehand (a batch or eval plan resolved the revision) pins the download to it: the branch may
        have moved since."""
        if self.path is not None:
            return self
        from interp.hf import hub

        snap = hub.snapshot(self.hub_id, self.revision, commit=self.commit or None)
        if not self.trust_remote_code:
            refuse_remote_code(snap.path)
        return dataclasses.replace(self, path=snap.path, commit=snap.commit, revision=snap.revision)

    def load_pretrained(self, **kwargs: Any) -> Any:
        fetched = self.fetched()
        return HfDirSource.load_pretrained(fetched, **kwargs)

    def pretrained_tokenizer(self) -> Any:
        return HfDirSource.pretrained_tokenizer(self.fetched())
