"""Every finding of the README ("What we found so far") names the report rows it quotes, as links
figures/REPORT.md#ID, and quotes them right: each ID is a row of the committed report (and of a fresh reading of
the tables), and the text before its links holds the row's value at the precision quoted (or a range "a to b"
around it), its CI where the text gives one in brackets, and any "k of n" the row's note gives. The report's rows
are checked against their tables in test_report.py, so a finding's numbers are checked against the tables."""

from __future__ import annotations

import re

import pytest

from analyses import report
from interp._util.paths import REPO_ROOT

README = REPO_ROOT / "README.md"
LINK = re.compile(r"\[[^\]]*\]\(figures/REPORT\.md#([^)\s]+)\)")
NUMBER = r"[+-]?\d+(?:\.\d+)?"


def findings() -> list[str]:
    """The numbered findings of the README's "What we found so far", each as one line of text."""
    text = README.read_text()
    section = text[text.index("## What we found so far"):]
    section = section[:section.index("\n## ", 3)]
    items = re.split(r"\n(?=\d+\. )", section)[1:]
    assert len(items) >= 3, "the README's findings are numbered items"
    return [" ".join(item.split()).replace("−", "-") for item in items]


def groups(finding: str) -> list[tuple[str, list[str]]]:
    """(the text since the previous group of links, the ids of this group): links separated only by ', ' or
    spaces are one group, quoting the numbers before them."""
    out, start, ids, first, end = [], 0, [], 0, 0
    for m in LINK.finditer(finding):
        if ids and re.fullmatch(r"[\s,]*", finding[end:m.start()]):
            ids.append(m.group(1))
        else:
            if ids:
                out.append((finding[start:first], ids))
                start = end
            ids, first = [m.group(1)], m.start()
        end = m.end()
    if ids:
        out.append((finding[start:first], ids))
    return out


def _matches(quoted: str, value: float) -> bool:
    decimals = len(quoted.partition(".")[2])
    return abs(float(quoted) - value) <= 0.5 * 10 ** -decimals + 1e-9


@pytest.fixture(scope="module")
def claims() -> dict[str, report.Claim]:
    return {c.id: c for c in report.claims(REPO_ROOT / "figures")}


@pytest.fixture(scope="module")
def committed_ids() -> set[str]:
    return set(re.findall(r'<a id="([^"]+)"></a>', (REPO_ROOT / "figures" / report.MARKDOWN).read_text()))


def test_every_finding_names_report_rows_that_exist(claims, committed_ids):
    for finding in findings():
        cited = [i for _, ids in groups(finding) for i in ids]
        assert cited, f"a README finding cites no row of figures/REPORT.md: {finding[:80]}..."
        for i in cited:
            assert i in committed_ids and i in claims, f"README cites figures/REPORT.md#{i}, which is no row"
            assert not claims[i].missing, f"README quotes {i}, which is not measured"


def test_every_quoted_number_matches_its_row(claims):
    checked = 0
    for finding in findings():
        for text, ids in groups(finding):
            numbers = re.findall(NUMBER, text)
            ranges = [(float(a), float(b)) for a, b in re.findall(rf"({NUMBER}) to ({NUMBER})", text)]
            brackets = re.findall(rf"\[({NUMBER}), ({NUMBER})\]", text)
            for i in ids:
                c = claims[i]
                assert any(_matches(n, c.value) for n in numbers) or any(a <= c.value <= b for a, b in ranges), \
                    f"README quotes {i} as {text[-60:]!r}, the row says {c.value:+.4f}"
                if brackets and (len(ids) == 1 or len(ids) == len(brackets)):
                    assert any(_matches(lo, c.ci[0]) and _matches(hi, c.ci[1]) for lo, hi in brackets), \
                        f"README's CI for {i} in {text[-60:]!r}; the row says [{c.ci[0]:+.4f}, {c.ci[1]:+.4f}]"
                checked += 1
            for count in re.findall(r"\d+ of \d+", text):
                assert any(count in claims[i].note for i in ids), f"README's '{count}' is in no note of {ids}"
            for a, b in ranges:   # a range's ends are the extremes of the rows it stands for
                values = [claims[i].value for i in ids]
                assert _matches(str(a), min(values)) and _matches(str(b), max(values)), (ids, a, b)
    assert checked >= 20


def test_the_checker_catches_a_wrong_number(claims):
    """The parsing above fails on a misquote (the test can fail)."""
    good = "-5.2% perplexity [-6.7, -3.8] ([report](figures/REPORT.md#allocation-early))"
    (text, ids), = groups(good)
    assert ids == ["allocation-early"] and any(_matches(n, claims["allocation-early"].value)
                                               for n in re.findall(NUMBER, text))
    wrong = text.replace("5.2", "5.4")
    assert not any(_matches(n, claims["allocation-early"].value) for n in re.findall(NUMBER, wrong))
