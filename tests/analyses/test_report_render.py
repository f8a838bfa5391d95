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
    """{"summary": str, "rows": {id: [cells]}, "links": {id: [hrefs]}, "anchors": {id}, block: [items]}."""
    headings = {v: k for k, v in report_render.HEADINGS.items()}
    out: dict = {"rows": {}, "links": {}, **{b: [] for b in BLOCKS}}
    block = None
    for line in text.splitlines():
        if line.startswith("## "):
            block = headings.get(line[3:])
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
        self._row = self._list = self._cell = self._summary = None
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
        elif tag == "p" and a.get("id") == "summary":
            self._summary = []
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
            self.summary = text(self._summary).removeprefix("Summary: ")
            self._summary = None


def parse_html(text: str) -> _Page:
    page = _Page()
    page.feed(text)
    return page


def test_the_html_holds_every_claim_note_family_and_caveat_of_the_markdown():
    md = parse_markdown((FIGURES / report.MARKDOWN).read_text())
    page = parse_html((FIGURES / report.HTML).read_text())
    assert len(md["rows"]) == len(report.claims(FIGURES)) > 50
    assert {k: v[:-1] for k, v in page.rows.items()} == md["rows"]          # every cell but the links
    reproduced = sum(r[6] == "reproduces" for r in md["rows"].values())
    assert page.summary == md["summary"] and md["summary"].startswith(f"{reproduced} reproduces")
    for block in BLOCKS:
        assert page.blocks[block] == md[block] and md[block], block
    assert any("issue 35" in c for c in md["caveats"]) and any("Q4_1" in c for c in md["caveats"])
    assert any("Instruct" in n and n.startswith("anti-layer-14") for n in md["notes"])
    assert page._images == len(re.findall(r"^- \[[^\]]+\.png\]", (FIGURES / report.MARKDOWN).read_text(), re.M))


def test_each_claim_links_its_figure_and_table(tmp_path):
    """In the HTML, to the embedded figure and the table entry (anchors that exist); in the Markdown, to the
    files, relative to where the report is: beside the tables, or in another folder (../figures/...)."""
    md = parse_markdown((FIGURES / report.MARKDOWN).read_text())
    page = parse_html((FIGURES / report.HTML).read_text())
    for c in report.claims(FIGURES):
        if c.missing:
            assert md["links"][c.id] == [] and page.links[c.id] == []
            continue
        assert md["links"][c.id] == [c.figure, c.table] and all((FIGURES / f).is_file() for f in md["links"][c.id])
        assert page.links[c.id] == [f"#figure-{Path(c.figure).stem}", f"#table-{Path(c.table).stem}"]
        assert {h[1:] for h in page.links[c.id]} <= page.ids
    for note in re.findall(r"href='#([^']+)'", (FIGURES / report.HTML).read_text()):
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
