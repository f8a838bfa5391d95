"""Bad inputs of hub models, revisions, placement and hub texts (issue #31), through the real CLI: each one line
naming the flag or the model and the fix, exit status 2, nothing written.

No server is needed for these: offline mode, an unreachable hub (HF_ENDPOINT at a closed port on 127.0.0.1:
every request is refused at once) and malformed specs. The server's own answers (404, 401, 500, a dropped
download) are tests/hf/test_hub_models.py's, against the loopback hub.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.badinput import Case, cases_of, check_case
from tests.bad_inputs.test_bad_inputs_models import PROBE, _checkpoint, _hf_dir, _text

CLOSED = {"HF_ENDPOINT": "http://127.0.0.1:9", "HF_HUB_OFFLINE": "", "TRANSFORMERS_OFFLINE": "",
          "HF_HUB_ETAG_TIMEOUT": "2", "HF_HUB_DOWNLOAD_TIMEOUT": "2"}   # online, but nothing listens
OUT = ["--out", "p.parquet"]


def _hf(tmp: Path) -> None:
    _hf_dir(tmp)


Case("hub-offline-uncached-model", item="31", setup=_text, argv=["probe", "--model", "someorg/tiny@step10", *PROBE,
     *OUT], message=r"hub model 'someorg/tiny' at revision 'step10' is not available offline.*HF_HUB_OFFLINE")
Case("hub-offline-flag", item="31", setup=_text, env={"HF_HUB_OFFLINE": "", "TRANSFORMERS_OFFLINE": ""},
     argv=["probe", "--model", "someorg/tiny", "--offline", *PROBE, *OUT], message=r"is not available offline")
Case("hub-unreachable-uncached", item="31", setup=_text, env=CLOSED, subprocess=True,
     argv=["probe", "--model", "someorg/tiny", *PROBE, *OUT],
     message=r"hub model 'someorg/tiny' at revision 'main' could not be fetched: ConnectError.*check the network")
Case("hub-tl-name-offline", item="31", setup=_text, argv=["probe", "--model", "pythia-70m", *PROBE, *OUT],
     message=r"hub model 'EleutherAI/pythia-70m' at revision 'main' is not available offline")
Case("hub-unknown-short-name", item="31", setup=_text, argv=["probe", "--model", "gpt7-tiny", *PROBE, *OUT],
     message=r"unknown model 'gpt7-tiny'.*not a TransformerLens model name")
Case("hub-empty-revision", item="31", setup=_text, argv=["probe", "--model", "someorg/tiny@", *PROBE, *OUT],
     message=r"'someorg/tiny@' is not MODEL@REVISION")
Case("hub-two-revisions", item="31", setup=_text,
     argv=["probe", "--model", "someorg/tiny@a", "--revision", "b", *PROBE, *OUT],
     message=r"names revision 'a' but revision='b' was given too")
Case("hub-revision-with-local-dir", item="31", setup=_hf, argv=["probe", "--model", "hf", "--revision", "step1",
     *PROBE, *OUT], message=r"applies to hub models only; this is a hf dir")
Case("hub-revision-with-registry-model", item="31", setup=_text,
     argv=["probe", "--model", "smollm2-135m", "--revision", "step1", *PROBE, *OUT],
     message=r"applies to hub models only; this is a registry")
Case("hub-batch-revisions-without-hub-id", item="31", setup=_hf,
     argv=["batch", "hf", "--revisions", "all", *PROBE, "--out", "w.parquet"],
     message=r"--revisions: applies to hub models only, and no PATH is a hub id")
Case("hub-batch-bad-range", item="31", setup=_text,
     argv=["batch", "someorg/tiny", "--revisions", "step5..step1", *PROBE, "--out", "w.parquet"],
     message=r"--revisions: 'step5..step1' is not a range.*step0..step143000:1000")
Case("hub-batch-offline-missing-revision", item="31", setup=_text,
     argv=["batch", "someorg/tiny", "--revisions", "step0,step1000", *PROBE, "--out", "w.parquet"],
     message=r"--revisions: hub model 'someorg/tiny' has no revision step0, step1000 in the local cache")
Case("hub-eval-revision-offline", item="31", setup=_text,
     argv=["eval", "someorg/tiny", "--revision", "step1", "--tasks", "wiki_heldout", "--out", "e.parquet"],
     message=r"has no revision step1 in the local cache")
Case("hub-text-offline", item="31", setup=_hf, argv=["probe", "--model", "hf", "--text", "wikitext-2", *PROBE[2:],
     *OUT], message=r"--text: 'wikitext-2' .*is not cached and HF_HUB_OFFLINE.*use an offline text: wiki")
Case("hub-text-malformed", item="31", setup=_hf, argv=["probe", "--model", "hf", "--text", "hf:", *PROBE[2:], *OUT],
     message=r"--text: 'hf:' is not hf:DATASET\[:CONFIG\[:SPLIT\[:COLUMN\]\]\]")
Case("hub-device-map-unknown", item="31", setup=_hf, argv=["probe", "--model", "hf", "--device-map", "everywhere",
     *PROBE, *OUT], message=r"device_map: 'everywhere' is not a device map.*auto, balanced")
Case("hub-device-map-on-our-checkpoint", item="31",
     setup=_checkpoint,
     argv=["probe", "--model", "good1", "--device-map", "auto", *PROBE, *OUT],
     message=r"device_map: a device map places Hugging Face models only", may_change=("cache", "cache/*"))


@pytest.mark.parametrize("case", cases_of("hub-"), ids=lambda c: c.id)
def test_case(case: Case, tmp_path: Path) -> None:
    check_case(case, tmp_path)
