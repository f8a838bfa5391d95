"""Every option that reads a text through interp.data.load_text says the same thing about what it accepts: the
ablation's --text once described only corpus names and files, although it took hub datasets too (#48)."""

from __future__ import annotations

import dataclasses

import pytest

from interp.ablations.config import AblationConfig
from interp.data.documents import CORPORA
from interp.data.text import TEXT_HELP
from interp.probes.config import ProbeConfig


@pytest.mark.parametrize("config", [ProbeConfig, AblationConfig], ids=lambda c: c.__name__)
def test_text_options_share_the_help_of_load_text(config):
    field = {f.name: f for f in dataclasses.fields(config)}["text"]
    assert field.metadata["help"] == TEXT_HELP


def test_the_help_names_every_corpus_and_the_hub_forms():
    assert all(name in TEXT_HELP for name in CORPORA)
    assert "hf:DATASET" in TEXT_HELP and "wikitext-2" in TEXT_HELP
