"""The report's one document (analyses.report's claims, their notes, the claims tested on several tasks, what the
regime cannot tell, the tables and figures they cite) and its two renderings, Markdown and self-contained HTML.

Both renderers walk the same Document, block by block, so REPORT.html carries everything REPORT.md does
(tests/analyses/test_report_render.py parses both and compares them). Links: each claim links to its figure and
its table: relative paths from the report's folder in the Markdown, in-page anchors in the HTML (whose figures are
embedded and whose table list links the files). In a note, "[[id]]" names another row and becomes a link to it.
A section whose rows carry another Rule (report_claims.Rule) states it in its intro, under its heading; the summary
counts every verdict word in use, and COLORS gives each its row colour in the HTML.
"""

from __future__ import annotations

import base64
import html
import math
import os
import re
from dataclasses import dataclass
from pathlib import Path

from analyses import recompute_command
from analyses.report_claims import COVERAGE, MULTIPLE, RULE, Claim, Section, fmt, table_meta, verdict_words
from interp._util.io import write_text_atomic

MARKDOWN = "REPORT.md"
HTML = "REPORT.html"
TITLE = "Report: every claim, our measurement, and its verdict"
COLUMNS = ("id", "claim", "source", "our measurement", "value [95% CI]", "regime", "verdict", "figure, table")
COLORS = {"reproduces": "#d4edda", "contradicts": "#f8d7da", "unresolved": "#fff3cd", "not measured": "#e2e3e5",
          # analyses.report_evals.FULL_SET's words (our evaluations beside the published numbers)
          "consistent": "#d4edda", "differs": "#f8d7da", "not comparable": "#dbe7f3"}
HEADINGS = {"notes": "Notes", "families": "Claims tested on several tasks", "caveats": "What the regime cannot tell",
            "tables": "Tables", "figures": "Figures"}
_REF = re.compile(r"\[\[([^\]]+)\]\]")
_CODE = re.compile(r"`([^`]+)`")


@dataclass
class Document:
    """Everything the report says, once; `base` is the tables' folder relative to the report's ("" if the same)."""
    intro: str
    other_rules: str                     # which sections state a rule of their own ("" when none does)
    summary: dict[str, int]
    sections: list[tuple[Section, list[Claim]]]
    notes: list[str]
    families: list[str]
    caveats: list[str]
    tables: list[tuple[str, str]]        # (file name, what wrote it)
    figures: list[str]
    figures_dir: Path
    base: str

    @property
    def claims(self) -> list[Claim]:
        return [c for _, items in self.sections for c in items]


def cell(c: Claim) -> str:
    """The value cell: value [95% CI], and the family-wise interval the verdict reads when corrected."""
    if c.missing:
        return f"not measured: `{c.command or recompute_command(c.missing)}`"
    text = f"{fmt(c.value, c.digits)}{c.unit} [{fmt(c.ci[0], c.digits)}, {fmt(c.ci[1], c.digits)}]"
    if c.verdict_ci is not None:
        text += (f"; {c.verdict_level:.1%} over {c.family_size} tests: [{fmt(c.verdict_ci[0], c.digits)}, "
                 f"{fmt(c.verdict_ci[1], c.digits)}]")
    return text


def cells(c: Claim) -> list[str]:
    """The row of a claim, every column but the links (each renderer draws those its own way)."""
    return [c.id, c.claim or c.id, c.source, f"{c.measure or '-'} ({c.table})", cell(c), c.regime or "-", c.verdict]


def _family_notes(items: list[Claim]) -> list[str]:
    """One line per family of claims: how many tests, the correction (or why none), the chance hits expected."""
    lines = []
    for family in dict.fromkeys(c.family for c in items if c.family):
        members = [c for c in items if c.family == family and not c.missing]
        refs = ", ".join(f"[[{c.id}]]" for c in members)
        m = max(c.family_size for c in members)
        chance = f"at 95% each, {0.05 * m:.2f} of them would exclude zero by chance if nothing were there"
        corrected = [c for c in members if c.verdict_ci is not None]
        if corrected:
            lines.append(f"{family}: {m} tests ({refs}); each verdict reads its {corrected[0].verdict_level:.1%} "
                         f"interval (Bonferroni: the {m} intervals hold together with 95% probability); {chance}")
        else:
            lines.append(f"{family}: {m} rows ({refs}); no correction (the table stores 95% bootstrap intervals "
                         f"only): {chance}, so read a lone hit among them with that in mind")
    return lines


def _caveats(items: list[Claim]) -> list[str]:
    """What the regime cannot tell, from the claims themselves."""
    from interp.data.registry import REGISTRY

    lines = []
    tpp = [c.tokens_per_param for c in items if math.isfinite(c.tokens_per_param)]
    if tpp:
        lines.append(f"every training comparison here was trained at {min(tpp):.3f}-{max(tpp):.3f} tokens per "
                     "parameter (the parameters and hardware of each are in its row); the paper trains "
                     "440M-parameter models far longer. A verdict is about this regime, and the paper's may differ at "
                     "its scale (issue 35 waits for a GPU to repeat the first two claims at ten times the tokens)")
    models = [name for name in REGISTRY if any(name in c.id for c in items if not c.missing)]
    if models:
        copies = "; ".join(f"{name}: {REGISTRY[name].notes.split(';')[0]}" for name in models)
        lines.append(f"the pretrained models are our offline copies ({copies}), not the weights the literature "
                     "measured; a claim about those is read on these")
    accuracy = [c for c in items if c.family.endswith(": accuracy") and not c.missing]
    if accuracy:
        called = sum(c.verdict != "unresolved" for c in accuracy)
        lines.append(f"{called} of {len(accuracy)} accuracy comparisons of the evaluations are resolved: at this "
                     "scale the models answer the paper's tasks at about chance (figures/README.md, "
                     "downstream_groups), so its accuracy claims cannot be tested here, only its perplexities")
    missing = [c for c in items if c.missing]
    if missing:
        lines.append("not measured here: " + ", ".join(f"[[{c.id}]]" for c in missing)
                     + " (the command that measures each is in its row)")
    return lines


def _written_by(figures_dir: Path, table: str) -> str:
    """What wrote a table, from its .meta.json: the analysis, the rows, the commit and the machine."""
    from interp._util.provenance import hardware_label

    meta = table_meta(figures_dir, table)
    if not meta:
        return "no .meta.json beside it"
    provenance = meta.get("provenance", {})
    hardware = hardware_label(hw=provenance["hardware"]) if provenance.get("hardware") else "hardware not recorded"
    return (f"{meta.get('rows', '?')} rows, written by the analysis {meta.get('analysis', '?')} at commit "
            f"{str(provenance.get('git_commit') or 'not recorded')[:12]}, {hardware}")


def document(figures_dir: Path, out_dir: Path, parts: list[tuple[Section, list[Claim]]]) -> Document:
    """The report of the claims `parts` (analyses.report.sections) read from `figures_dir`, to go in `out_dir`."""
    figures_dir, out_dir = Path(figures_dir), Path(out_dir)
    items = [c for _, section_claims in parts for c in section_claims]
    tables, out = figures_dir.resolve(), out_dir.resolve()
    # relative where the two share a folder below the root (the repository), so the links move with it
    shared = os.path.commonpath([tables, out]) != os.path.commonpath([tables, Path(tables.anchor)])
    base = os.path.relpath(tables, out).replace(os.sep, "/") if shared else tables.as_posix()
    base = "" if base == "." else base
    where = f"the tables in {base}/" if base else "the tables in this folder"
    intro = (f"Generated by `interp report` (and `make figures`) from {where}; do not edit by hand. "
             "figures/README.md has the detail of each figure.")
    present = [c for c in items if not c.missing]
    ruled = [f'"{section.title}"' for section, claims in parts if any(c.rule is not None for c in claims)]
    other_rules = (f"The rows of {' and '.join(ruled)} are read by the rule stated in their section." if ruled
                   else "")
    cited = [name for c in present for name in (c.table, c.figure, *c.cites) if name]
    return Document(
        intro=intro, other_rules=other_rules, summary={v: sum(c.verdict == v for c in items)
                                                       for v in verdict_words(items)}, sections=parts,
        notes=[f"[[{c.id}]]: {c.claim or c.id}: {c.note}" for c in items if c.note],
        families=_family_notes(items), caveats=_caveats(items),
        tables=[(t, _written_by(figures_dir, t)) for t in dict.fromkeys(cited) if t.endswith(".csv")],
        figures=[f for f in dict.fromkeys(cited) if f.endswith(".png") and (figures_dir / f).is_file()],
        figures_dir=figures_dir, base=base)


def summary_text(doc: Document) -> str:
    return ", ".join(f"{n} {v}" for v, n in doc.summary.items()) + "."


# ---------------------------------------------------------------------------------------------- Markdown

def _md(text: str) -> str:
    return _REF.sub(lambda m: f"[{m.group(1)}](#{m.group(1)})", text).replace("|", "\\|")


def _rel(doc: Document, name: str) -> str:
    return f"{doc.base}/{name}" if doc.base else name


def markdown(doc: Document) -> str:
    lines = [f"# {TITLE}", "", _md(doc.intro), "", f"**Verdict rule.** {RULE}. {doc.other_rules}".rstrip(), "",
             "**What each interval covers.**", "", *[f"- {_md(t)}" for t in COVERAGE], "",
             f"**Multiple comparisons.** {MULTIPLE}", "", f"**Summary:** {summary_text(doc)}", ""]
    for section, items in doc.sections:
        lines += [f"## {section.title}", "", *([_md(section.intro), ""] if section.intro else []),
                  "| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
        for c in items:
            row = [_md(x) for x in cells(c)]
            row[0] = f'<a id="{c.id}"></a>{c.id}'
            row[-1] = f"**{row[-1]}**"
            links = " · ".join(f"[{name}]({_rel(doc, name)})" for name in (c.figure, c.table)
                               if name and not c.missing)
            lines.append("| " + " | ".join([*row, links or "-"]) + " |")
        lines.append("")
    for key, entries in (("notes", doc.notes), ("families", doc.families), ("caveats", doc.caveats)):
        lines += [f"## {HEADINGS[key]}", "", *[f"- {_md(e)}" for e in entries], ""]
    lines += [f"## {HEADINGS['tables']}", "",
              *[f"- [{name}]({_rel(doc, name)}): {_md(text)}" for name, text in doc.tables], ""]
    lines += [f"## {HEADINGS['figures']}", "", *[f"- [{name}]({_rel(doc, name)})" for name in doc.figures], ""]
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------------- HTML

def _html(text: str) -> str:
    text = html.escape(text)
    text = _CODE.sub(lambda m: f"<code>{m.group(1)}</code>", text)
    return _REF.sub(lambda m: f"<a href='#{m.group(1)}'>{m.group(1)}</a>", text)


def anchor(kind: str, name: str) -> str:
    """The in-page id of a figure or a table of the HTML: figure-<stem>, table-<stem>."""
    return f"{kind}-{Path(name).stem}"


def _list(key: str, entries: list[str]) -> str:
    return (f"<h2>{HEADINGS[key]}</h2><ul id='{key}'>" + "".join(f"<li>{_html(e)}</li>" for e in entries)
            + "</ul>")


def html_page(doc: Document) -> str:
    """The same document as one self-contained HTML file: the figures embedded as base64 PNGs."""
    body = [f"<h1>{TITLE}</h1>", f"<p id='intro'>{_html(doc.intro)}</p>",
            f"<p id='rule'><b>Verdict rule.</b> {_html(f'{RULE}. {doc.other_rules}'.rstrip())}</p>",
            "<p><b>What each interval covers.</b></p>",
            "<ul id='coverage'>" + "".join(f"<li>{_html(t)}</li>" for t in COVERAGE) + "</ul>",
            f"<p id='multiple'><b>Multiple comparisons.</b> {_html(MULTIPLE)}</p>",
            f"<p id='summary'><b>Summary:</b> {_html(summary_text(doc))}</p>"]
    head = "".join(f"<th>{html.escape(h)}</th>" for h in COLUMNS)
    for section, items in doc.sections:
        rows = []
        for c in items:
            row = [_html(x) for x in cells(c)]
            row[-1] = f"<b>{row[-1]}</b>"
            links = " · ".join(f"<a href='#{anchor(kind, name)}'>{html.escape(name)}</a>"
                               for kind, name in (("figure", c.figure), ("table", c.table))
                               if name and not c.missing and (kind == "table" or name in doc.figures))
            rows.append(f"<tr id='{html.escape(c.id)}' style='background:{COLORS[c.verdict]}'>"
                        + "".join(f"<td>{x}</td>" for x in [*row, links or "-"]) + "</tr>")
        intro = f"<p id='intro-{section.id}'>{_html(section.intro)}</p>" if section.intro else ""
        body.append(f"<h2 id='section-{section.id}'>{html.escape(section.title)}</h2>{intro}<table><tr>{head}</tr>"
                    + "".join(rows) + "</table>")
    body += [_list("notes", doc.notes), _list("families", doc.families), _list("caveats", doc.caveats)]
    body.append(f"<h2>{HEADINGS['tables']}</h2><ul id='tables'>" + "".join(
        f"<li id='{anchor('table', name)}'><a href='{html.escape(_rel(doc, name))}'>{html.escape(name)}</a>: "
        f"{_html(text)}</li>" for name, text in doc.tables) + "</ul>")
    body.append(f"<h2>{HEADINGS['figures']}</h2>")
    for name in doc.figures:
        data = base64.b64encode((doc.figures_dir / name).read_bytes()).decode()
        body.append(f"<section id='{anchor('figure', name)}'><h3>{html.escape(name)}</h3>"
                    f"<img style='max-width:100%' alt='{html.escape(name)}' src='data:image/png;base64,{data}'>"
                    "</section>")
    return ("<!doctype html><html><head><meta charset='utf-8'><title>interp report</title>"
            "<style>body{font-family:sans-serif;max-width:1200px;margin:auto}td,th{border:1px solid #ccc;"
            "padding:4px;vertical-align:top}table{border-collapse:collapse}</style></head><body>"
            + "".join(body) + "</body></html>\n")


def write(figures_dir: Path, out_dir: Path, parts: list[tuple[Section, list[Claim]]]) -> list[Path]:
    """REPORT.md and REPORT.html of the claims `parts` into `out_dir` (created); figures read from `figures_dir`."""
    doc = document(figures_dir, out_dir, parts)
    out_dir.mkdir(parents=True, exist_ok=True)
    write_text_atomic(out_dir / MARKDOWN, markdown(doc))
    write_text_atomic(out_dir / HTML, html_page(doc))
    return [out_dir / MARKDOWN, out_dir / HTML]


__all__ = ["HTML", "MARKDOWN", "Document", "anchor", "cell", "cells", "document", "html_page", "markdown", "write"]
