"""Shared test setup: offline mode everywhere, one torch thread, and the fixtures that write tiny models.

In-memory builders (tiny_lm, tiny_hf, random_tokens, word tokenizers) are plain functions in
tests/factories.py, imported where needed; the fixtures here are the ones that touch files, the
environment or a scope: factory fixtures rooted at the test's tmp_path, the SmolLM2 tokenizer (loaded once
per session) and private INTERP_CACHE_DIRs.
"""

import atexit
import os
import shutil
import tempfile

# torch.compile's kernels are cached under /tmp/torchinductor_<user> by default, shared by every process on the
# machine: a kernel compiled there by another checkout or an earlier run (once, under other CPU-kernel variables)
# aborted test_fsdp's compiled test. The tests compile into their own folder, removed at exit.
if "TORCHINDUCTOR_CACHE_DIR" not in os.environ:
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = tempfile.mkdtemp(prefix="interp-tests-inductor-")
    atexit.register(shutil.rmtree, os.environ["TORCHINDUCTOR_CACHE_DIR"], True)
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("MPLBACKEND", "Agg")

from pathlib import Path  # noqa: E402

import pytest  # noqa: E402
import torch  # noqa: E402

from interp._util import cpu_kernels  # noqa: E402
from tests import factories  # noqa: E402
from tests.slurm import slurm_cluster  # noqa: E402,F401  (session fixture: a real single-node Slurm cluster)

# Tiny test models run ~20x slower with 2 threads on a shared 2-core machine; one thread is also
# what makes float results reproducible across runs. Tests that need more set it themselves.
torch.set_num_threads(1)


KERNEL_VARIABLES = (cpu_kernels.MODE_VAR, *cpu_kernels.PORTABLE_ENV, "MKL_DEBUG_CPU_TYPE")


@pytest.fixture(autouse=True)
def no_stop_recorded():
    """Each test starts with no stop signal remembered (interp._util.children: one test's Ctrl-C or SIGTERM
    handled by a Trainer would otherwise make every later table write in this process raise Interrupted)."""
    from interp._util import children

    children.clear_stop()
    yield
    children.clear_stop()


@pytest.fixture(autouse=True)
def offline_state_restored():
    """Each test starts with the offline state it found (interp._util.offline): a test that runs a command with
    `--offline` in this process sets a process-wide flag and HF_HUB_OFFLINE=1, which would otherwise keep every
    later test in this worker offline (a loopback-hub test then finds nothing in its empty cache)."""
    from interp._util import offline

    flag, variable = offline._offline_flag, os.environ.get("HF_HUB_OFFLINE")
    yield
    offline._offline_flag = flag
    if variable is None:
        os.environ.pop("HF_HUB_OFFLINE", None)
    else:
        os.environ["HF_HUB_OFFLINE"] = variable


@pytest.fixture(autouse=True)
def kernel_variables_unchanged(request):
    """Fail a test that leaves a CPU-kernel variable (interp._util.cpu_kernels) other than it found it: the
    children that later tests spawn would pick other kernels than the pytest process and compute other bits
    (a leak of ATEN_CPU_CAPABILITY once broke tests/training/test_workers.py's jobs=1 vs jobs=2 equality, in order)."""
    before = {k: os.environ.get(k) for k in KERNEL_VARIABLES}
    yield
    after = {k: os.environ.get(k) for k in KERNEL_VARIABLES}
    changed = {k: (before[k], after[k]) for k in KERNEL_VARIABLES if before[k] != after[k]}
    for key, (value, _) in changed.items():  # restore, so one leak fails one test, not every later one
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value
    assert not changed, f"{request.node.nodeid} changed CPU-kernel variables (before, after): {changed}"


@pytest.fixture(scope="module")
def one_thread():
    """One intra-op thread for a module of tiny-input tests, even after a test raised it; restored after."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def _under(root: Path, path: str | Path) -> Path:
    return root / path  # an absolute path stays as it is


@pytest.fixture
def tiny_checkpoint(tmp_path):
    """make(path="run", model=None, config=None, tokenizer=None) -> one of our checkpoint dirs (relative
    paths under tmp_path); see factories.tiny_checkpoint."""
    def make(path: str | Path = "run", model=None, config: dict | None = None, tokenizer=None) -> Path:
        return factories.tiny_checkpoint(_under(tmp_path, path), model, config, tokenizer=tokenizer)
    return make


@pytest.fixture
def save_pretrained_dir(tmp_path):
    """make(path, model, tokenizer=None) -> a save_pretrained directory (relative paths under tmp_path)."""
    def make(path: str | Path, model, tokenizer=None) -> Path:
        return factories.save_pretrained_dir(_under(tmp_path, path), model, tokenizer)
    return make


@pytest.fixture(scope="session")
def smollm2_tokenizer():
    """SmolLM2's tokenizer (vocab factories.SMOLLM2_VOCAB), from the installed package; needs no weights."""
    from interp.hf import load_tokenizer

    return load_tokenizer("smollm2-135m")


@pytest.fixture
def private_cache(tmp_path, monkeypatch) -> Path:
    """INTERP_CACHE_DIR = tmp_path/cache for one test: tokenizers and token files never touch the shared cache."""
    path = tmp_path / "cache"
    monkeypatch.setenv("INTERP_CACHE_DIR", str(path))
    return path


@pytest.fixture(scope="module")
def module_cache(tmp_path_factory):
    """A private INTERP_CACHE_DIR for a whole module (its module fixtures train or tokenize once)."""
    with factories.private_cache(tmp_path_factory.mktemp("cache")) as path:
        yield path


@pytest.fixture(scope="module")
def env(tmp_path_factory, module_cache):
    """A 40-document synthetic corpus, tokenized with a micro BPE in the module's private cache, for training
    tests (test_train, test_cooldown, test_gain_vs_tokens); returns (corpus path, env dict, TokenData)."""
    from interp.data import prepare_tokens
    from interp.training.presets import PRESETS

    corpus = factories.write_corpus(tmp_path_factory.mktemp("train") / "corpus", n_docs=40, sentences=60)
    data = prepare_tokens(str(corpus), "bpe", PRESETS["micro"]["vocab_size"], val_fraction=0.25)
    return corpus, {**os.environ, "OMP_NUM_THREADS": "1"}, data


def pytest_collection_modifyitems(config, items):
    """Under pytest-xdist (`make test`: -n 2 --dist loadgroup) each test file runs whole on one worker, so its module
    fixtures (a trained run, a tokenized corpus) are built once; the files that need the real Slurm cluster share one
    worker, so one cluster runs at a time."""
    for item in items:
        path = item.nodeid.split("::")[0]
        item.add_marker(pytest.mark.xdist_group("slurm" if "slurm" in Path(path).name else path))
