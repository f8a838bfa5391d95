"""The loopback hub (tests/hub_server.py) against the REAL huggingface_hub, transformers and datasets clients:
downloads by revision, refs, the offline cache after the hub stops, the hub's error codes, a connection dropped
mid-file, a parquet dataset, and a child process configured by hub.child_env(). No network: 127.0.0.1 only."""

from __future__ import annotations

import hashlib
import random
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

import httpx2
import pytest
import torch

from tests.hub_server import LoopbackHub, patch_clients, tiny_dataset_folder, tiny_model_folder

REPO = "EleutherAI/pythia-tiny"
BIG = "org/big"


@pytest.fixture(scope="module")
def model_folders(tmp_path_factory) -> dict[str, Path]:
    """Two Pythia-like tiny checkpoints (seeds 0 and 1), built once for the module."""
    root = tmp_path_factory.mktemp("models")
    return {"step0": tiny_model_folder("gpt_neox", root / "step0", seed=0),
            "step1000": tiny_model_folder("gpt_neox", root / "step1000", seed=1)}


@pytest.fixture
def hub(tmp_path, model_folders):
    with LoopbackHub(tmp_path / "hub") as hub:
        hub.shas = hub.add_model(REPO, model_folders)
        yield hub


@pytest.fixture
def online(hub, tmp_path, monkeypatch) -> Path:
    """The in-process clients pointed at `hub`, with a fresh HF_HOME; returns that HF_HOME."""
    patch_clients(hub, tmp_path / "hf", monkeypatch)
    return tmp_path / "hf"


def _sha256(path: str | Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def _go_offline(monkeypatch) -> None:
    import huggingface_hub.constants

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)


def test_from_pretrained_downloads_each_revision(hub, online, model_folders):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    models = {rev: AutoModelForCausalLM.from_pretrained(REPO, revision=rev) for rev in ("step0", "step1000")}
    for rev, model in models.items():  # the weights served are the folder's, bit for bit
        local = AutoModelForCausalLM.from_pretrained(model_folders[rev]).state_dict()
        assert all(torch.equal(t, local[k]) for k, t in model.state_dict().items())
    assert not torch.equal(models["step0"].get_input_embeddings().weight,
                           models["step1000"].get_input_embeddings().weight)
    assert AutoTokenizer.from_pretrained(REPO, revision="step1000")("Hello world").input_ids == [15496, 995]
    refs = online / "hub" / "models--EleutherAI--pythia-tiny" / "refs"
    assert (refs / "step1000").read_text() == hub.shas["step1000"]
    assert (refs / "step0").read_text() == hub.shas["step0"]
    assert ("GET", f"/api/models/{REPO}/revision/step1000") in hub.requests
    assert ("GET", f"/{REPO}/resolve/{hub.shas['step1000']}/model.safetensors") in hub.requests


def test_commit_sha_resolves_like_a_branch(hub, online):
    from huggingface_hub import hf_hub_download

    by_name = hf_hub_download(REPO, "model.safetensors", revision="step0")
    by_sha = hf_hub_download(REPO, "model.safetensors", revision=hub.shas["step0"])
    assert _sha256(by_name) == _sha256(by_sha)
    assert hub.shas["main"] == hub.shas["step1000"]  # "main" defaults to the last revision


def test_list_repo_refs_and_listings(hub, online, model_folders):
    from huggingface_hub import HfApi, list_repo_refs

    refs = list_repo_refs(REPO)
    assert {b.name: b.target_commit for b in refs.branches} == hub.shas
    assert refs.tags == [] and refs.converts == []
    api = HfApi()
    expected = sorted(p.name for p in model_folders["step0"].iterdir())
    assert sorted(api.list_repo_files(REPO, revision="step0")) == expected
    assert api.model_info(REPO, revision="step0").sha == hub.shas["step0"]
    [info] = api.get_paths_info(REPO, ["model.safetensors", "missing.txt"], revision="step0")
    assert info.lfs.sha256 == _sha256(model_folders["step0"] / "model.safetensors")


def test_cache_serves_offline_after_stop(hub, online, monkeypatch):
    from transformers import AutoModelForCausalLM

    first = AutoModelForCausalLM.from_pretrained(REPO, revision="step1000")
    hub.stop()
    with pytest.raises(urllib.error.URLError):  # stopped means stopped, keep-alive connections included
        urllib.request.urlopen(f"{hub.url}/api/models/{REPO}", timeout=2)
    _go_offline(monkeypatch)
    again = AutoModelForCausalLM.from_pretrained(REPO, revision="step1000")
    assert torch.equal(first.get_output_embeddings().weight, again.get_output_embeddings().weight)
    url = hub.url
    hub.start()  # and it serves again, on the same port while that is free
    assert hub.url == url
    assert urllib.request.urlopen(f"{hub.url}/api/models/{REPO}", timeout=2).status == 200


def test_errors_raise_the_hub_error_classes(hub, online):
    from huggingface_hub import HfApi, hf_hub_download
    from huggingface_hub.errors import (
        EntryNotFoundError,
        GatedRepoError,
        HfHubHTTPError,
        RepositoryNotFoundError,
        RevisionNotFoundError,
    )

    with pytest.raises(RepositoryNotFoundError) as missing_repo:
        hf_hub_download("nobody/nothing", "config.json")
    assert missing_repo.type is RepositoryNotFoundError
    with pytest.raises(RevisionNotFoundError):
        hf_hub_download(REPO, "config.json", revision="step999")
    with pytest.raises(EntryNotFoundError):
        hf_hub_download(REPO, "no-such-file.json", revision="step0")
    hub.fail(401, REPO)
    with pytest.raises(GatedRepoError):
        hf_hub_download(REPO, "config.json")
    hub.clear_failures()
    hub.fail(403, "/api/")
    with pytest.raises(HfHubHTTPError) as forbidden:
        HfApi().model_info(REPO)
    assert forbidden.value.response.status_code == 403
    hub.clear_failures()
    hub.fail(500, "/api/")  # the API is not retried: one request, one error
    before = len(hub.requests)
    with pytest.raises(HfHubHTTPError) as broken:
        HfApi().list_repo_refs(REPO)
    assert broken.value.response.status_code == 500 and len(hub.requests) == before + 1
    hub.clear_failures()
    hub.fail(500, "config.json", times=1)  # with no cached copy, hf_hub_download asks again, and gets it
    assert Path(hf_hub_download(REPO, "config.json", revision="step0")).is_file()


@pytest.fixture
def big_repo(hub, tmp_path) -> Path:
    """A repo with one 24 MiB file: huggingface_hub writes what it downloads in 10 MiB chunks, so only a drop
    past 10 MiB leaves bytes to resume from (a smaller file is simply downloaded again, without Range)."""
    folder = tmp_path / "big"
    folder.mkdir()
    (folder / "big.bin").write_bytes(random.Random(0).randbytes(24 << 20))
    hub.add_model(BIG, {"main": folder})
    return folder / "big.bin"


def test_dropped_download_resumes_with_range(hub, online, big_repo):
    from huggingface_hub import hf_hub_download

    hub.fail("drop", "big.bin", times=1)  # the connection closes after 12 MiB
    path = hf_hub_download(BIG, "big.bin")
    assert _sha256(path) == _sha256(big_repo)
    assert hub.ranges == [(f"/{BIG}/resolve/main/big.bin", f"bytes={10 << 20}-")]  # resumed after the 1st chunk


def test_dropped_download_raises_then_retry_completes(hub, online, big_repo):
    from huggingface_hub import hf_hub_download

    hub.fail("drop", "big.bin")
    with pytest.raises(httpx2.RemoteProtocolError):  # huggingface_hub resumes 5 times (1 s apart), then gives up
        hf_hub_download(BIG, "big.bin")
    storage = online / "hub" / "models--org--big"
    assert not list(storage.glob("snapshots/*/big.bin"))  # no partial file passed off as complete
    assert not [p for p in storage.glob("blobs/*") if p.is_file()]  # nor kept (huggingface_hub 2.x deletes it)
    hub.clear_failures()
    path = hf_hub_download(BIG, "big.bin")
    assert _sha256(path) == _sha256(big_repo)
    assert hub.requests[-1] == ("GET", f"/{BIG}/resolve/main/big.bin")


def test_load_dataset_with_a_named_config(hub, online, tmp_path):
    texts = [f"Sentence number {i} of the loopback corpus." for i in range(40)]
    shas = hub.add_dataset("Salesforce/wikitext", {"main": tiny_dataset_folder(tmp_path / "ds", texts)})
    import datasets

    test = datasets.load_dataset("Salesforce/wikitext", "wikitext-2-raw-v1", split="test")
    assert test["text"] == texts
    assert ("GET", f"/api/datasets/Salesforce/wikitext/revision/{shas['main']}") in hub.requests


def test_default_dataset_texts_are_real_english(tmp_path):
    import pyarrow.parquet as pq

    folder = tiny_dataset_folder(tmp_path / "ds")
    texts = pq.read_table(folder / "wikitext-2-raw-v1" / "test-00000-of-00001.parquet")["text"].to_pylist()
    assert len(texts) == 300 and all(isinstance(t, str) and t for t in texts)
    assert sum(" the " in t for t in texts) > 100


def test_child_process_downloads_then_reads_the_cache_offline(hub, tmp_path):
    """The subprocess case: hub.child_env() drops HF_HUB_OFFLINE / TRANSFORMERS_OFFLINE (set for this suite)."""
    online_code = f"""if True:
        from transformers import AutoModelForCausalLM
        model = AutoModelForCausalLM.from_pretrained({REPO!r}, revision="step0")
        print(type(model).__name__)"""
    offline_code = f"""if True:
        from huggingface_hub import hf_hub_download
        print(hf_hub_download({REPO!r}, "model.safetensors", revision="step0"))"""
    env = hub.child_env(hf_home=tmp_path / "hf")
    online = subprocess.run([sys.executable, "-c", online_code], env=env, capture_output=True, text=True, timeout=1800)
    assert online.returncode == 0, online.stderr[-2000:]
    assert online.stdout.strip() == "GPTNeoXForCausalLM"
    assert ("GET", f"/{REPO}/resolve/{hub.shas['step0']}/model.safetensors") in hub.requests
    hub.stop()
    offline = subprocess.run([sys.executable, "-c", offline_code], env={**env, "HF_HUB_OFFLINE": "1"},
                             capture_output=True, text=True, timeout=1800)
    assert offline.returncode == 0, offline.stderr[-2000:]
    cached = Path(offline.stdout.strip())
    assert cached.is_relative_to(tmp_path / "hf") and cached.parent.name == hub.shas["step0"]
