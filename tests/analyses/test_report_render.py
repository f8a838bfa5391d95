"""REPORT.html carries everything REPORT.md does (analyses.report_render): both parsed back, block by block (the
summary, every claim row, every note, every family of tasks, every caveat, the tables), and compared; each claim's
links (relative files in the Markdown, in-page anchors in the HTML) resolve; `interp report` writes ./report/ by
default and reads the repository's figures/."""

from __future__ import annotations

import html
import re
import shutil
from html.parser import HTMLParser
from pathlib import Path

import pytest

from analyses import report, report_render
from interp._util.paths import REPO_ROOT

FIGURES = REPO_ROOT / "figures"
BLOCKS = ("notes", "families", "caveats", "tables", "coverage")


def _plain(text: str) -> str:
    """Markdown inline markup removed: anchors, links (their text kept), code ticks, bold, escaped bars."""
    text = re.sub(r'<a id="[^"]+"></a>', "", text)
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)
    return " ".join(text.replace("`", "").replace("**", "").replace("\\|", "|").split())


def parse_markdown(text: str) -> dict:
    """{"summary": str, "rule": str, "intros": {section id: str}, "rows": {id: [cells]}, "links": {id: [hrefs]},
    block: [items]}."""
    headings = {v: k for k, v in report_render.HEADINGS.items()}
    sections = {s.title: s.id for s in report.SECTIONS}
    out: dict = {"rows": {}, "links": {}, "intros": {}, **{b: [] for b in BLOCKS}}
    block = section = None
    for line in text.splitlines():
        if line.startswith("## "):
            block, section = headings.get(line[3:]), sections.get(line[3:])
        elif section and line and not line.startswith("|"):
            out["intros"][section] = _plain(line)      # the paragraph between a section's heading and its table
        elif line.startswith("**Verdict rule.**"):
            out["rule"] = _plain(line.removeprefix("**Verdict rule.**"))
        elif line.startswith("**What each interval covers.**"):
            block = "coverage"
        elif line.startswith("**Summary:**"):
            out["summary"] = _plain(line.removeprefix("**Summary:**"))
        elif m := re.match(r'\| <a id="([^"]+)"></a>', line):
            cells = line.strip().removeprefix("| ").removesuffix(" |").split(" | ")
            out["rows"][m.group(1)] = [_plain(c) for c in cells[:-1]]
            out["links"][m.group(1)] = re.findall(r"\]\(([^)]+)\)", cells[-1])
        elif line.startswith("- ") and block in BLOCKS:
            out[block].append(_plain(line[2:]))
        elif line.startswith("**Multiple"):
            block = None
    return out


class _Page(HTMLParser):
    """The same structure read from the HTML: rows by id, list items by their list's id, anchors, hrefs."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.rows: dict[str, list[str]] = {}
        self.links: dict[str, list[str]] = {}
        self.blocks: dict[str, list[str]] = {b: [] for b in BLOCKS}
        self.ids: set[str] = set()
        self.summary = ""
        self.paragraphs: dict[str, str] = {}        # <p id=...>: the rule, the summary, each section's intro
        self._row = self._list = self._cell = self._summary = None
        self._paragraph = ""
        self._images = 0

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if "id" in a:
            self.ids.add(a["id"])
        if tag == "tr" and "id" in a:
            self._row = a["id"]
            self.rows[self._row], self.links[self._row] = [], []
        elif tag == "td" and self._row:
            self._cell = []
        elif tag == "a" and self._row and "href" in a:
            self.links[self._row].append(a["href"])
        elif tag == "ul" and a.get("id") in BLOCKS:
            self._list = a["id"]
        elif tag == "li" and self._list:
            self._cell = []
        elif tag == "p" and "id" in a:
            self._summary, self._paragraph = [], a["id"]
        elif tag == "img":
            self._images += 1
            assert a["src"].startswith("data:image/png;base64,")

    def handle_data(self, data):
        for part in (self._cell, self._summary):
            if part is not None:
                part.append(data)

    def handle_endtag(self, tag):
        text = lambda parts: " ".join("".join(parts).split())  # noqa: E731
        if tag == "td" and self._cell is not None and self._row:
            self.rows[self._row].append(text(self._cell))
            self._cell = None
        elif tag == "tr":
            self._row = None
        elif tag == "li" and self._cell is not None and self._list:
            self.blocks[self._list].append(text(self._cell))
            self._cell = None
        elif tag == "ul":
            self._list = None
        elif tag == "p" and self._summary is not None:
            self.paragraphs[self._paragraph] = text(self._summary)
            self.summary = self.paragraphs.get("summary", "").removeprefix("Summary: ")
            self._summary = None


def parse_html(text: str) -> _Page:
    page = _Page()
    page.feed(text)
    return page


def same_content(md: dict, page: _Page) -> None:
    """The Markdown and the HTML say the same: every row (but its links), the summary, the verdict rule, each
    section's intro and every list."""
    assert {k: v[:-1] for k, v in page.rows.items()} == md["rows"]          # every cell but the links
    assert page.summary == md["summary"]
    assert page.paragraphs["rule"] == f"Verdict rule. {md['rule']}"
    assert {k.removeprefix("intro-"): v for k, v in page.paragraphs.items() if k.startswith("intro-")} == \
        md["intros"]
    for block in BLOCKS:
        assert page.blocks[block] == md[block], block


@pytest.fixture(scope="module")
def html_text(tmp_path_factory) -> str:
    """REPORT.html is not committed (the figures embedded make it 5 MB): rendered here from the committed tables."""
    out = tmp_path_factory.mktemp("report")
    report.render(FIGURES, out)
    return (out / report.HTML).read_text()


def test_the_html_holds_every_claim_note_family_and_caveat_of_the_markdown(html_text):
    md = parse_markdown((FIGURES / report.MARKDOWN).read_text())
    page = parse_html(html_text)
    assert len(md["rows"]) == len(report.claims(FIGURES)) > 50
    same_content(md, page)
    reproduced = sum(r[6] == "reproduces" for r in md["rows"].values())
    assert md["summary"].startswith(f"{reproduced} reproduces")
    assert all(md[block] for block in BLOCKS)
    assert set(md["intros"]) == {s.id for s in report.SECTIONS if s.intro} and md["intros"]
    assert any("issue 35" in c for c in md["caveats"]) and any("Q4_1" in c for c in md["caveats"])
    assert any("Instruct" in n and n.startswith("anti-layer-14") for n in md["notes"])
    assert page._images == len(re.findall(r"^- \[[^\]]+\.png\]", (FIGURES / report.MARKDOWN).read_text(), re.M))


def test_each_claim_links_its_figure_and_table(tmp_path, html_text):
    """In the HTML, to the embedded figure and the table entry (anchors that exist); in the Markdown, to the
    files, relative to where the report is: beside the tables, or in another folder (../figures/...)."""
    md = parse_markdown((FIGURES / report.MARKDOWN).read_text())
    page = parse_html(html_text)
    for c in report.claims(FIGURES):
        if c.missing:
            assert md["links"][c.id] == [] and page.links[c.id] == []
            continue
        files = [f for f in (c.figure, c.table) if f]     # a row whose figure is not drawn yet links its table
        assert md["links"][c.id] == files and all((FIGURES / f).is_file() for f in files)
        assert page.links[c.id] == [f"#{kind}-{Path(f).stem}" for f in files
                                    for kind in ["figure" if f.endswith(".png") else "table"]]
        assert {h[1:] for h in page.links[c.id]} <= page.ids
    for note in re.findall(r"href='#([^']+)'", html_text):
        assert note in page.ids, note                                           # [[id]] references resolve
    out = tmp_path / "elsewhere" / "report"
    report.render(FIGURES, out)
    moved = parse_markdown((out / report.MARKDOWN).read_text())
    link = moved["links"]["allocation-early"][0]      # relative below a shared folder, else absolute
    assert (out / link).resolve() == (FIGURES / "group_ablation.png").resolve()
    assert moved["rows"] == md["rows"] and moved["notes"] == md["notes"]


def test_interp_report_writes_report_by_default_from_the_repository_figures(tmp_path, monkeypatch, capsys):
    from interp.cli import main

    monkeypatch.chdir(tmp_path)
    committed = (FIGURES / report.MARKDOWN).read_bytes()
    assert main(["report"]) == 0
    assert (tmp_path / "report" / report.MARKDOWN).read_text().startswith("# Report")
    assert (tmp_path / "report" / report.HTML).is_file()
    assert (FIGURES / report.MARKDOWN).read_bytes() == committed          # the repository's report untouched
    tables = tmp_path / "tables"
    tables.mkdir()
    for path in FIGURES.glob("group_ablation*"):
        shutil.copy(path, tables)
    assert main(["report", "--tables", str(tables), "--out", str(tmp_path / "one")]) == 0
    text = (tmp_path / "one" / report.MARKDOWN).read_text()
    assert "reproduces" in text and "[group_ablation.png](../tables/group_ablation.png)" in text
    capsys.readouterr()
    assert main(["report", "--tables", str(tmp_path / "none")]) == 2
    err = capsys.readouterr().err
    assert "--tables" in err and "no such folder of tables" in err


@pytest.mark.parametrize("text, want", [("see [[a-b]]", "see <a href='#a-b'>a-b</a>"),
                                        ("run `x <y>`", "run <code>x &lt;y&gt;</code>")])
def test_inline_markup_becomes_links_and_code_in_html(text, want):
    assert report_render._html(text) == want
    assert html.unescape(re.sub(r"<[^>]+>", "", want)) == _plain(report_render._md(text))
