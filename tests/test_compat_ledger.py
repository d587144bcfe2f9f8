"""docs/compatibility-ledger.md stays checkable: every cited test exists, every row is backed, every link lands.

The ledger lists upstream's behaviours (UPSTREAM.md sections 1 to 7) one row
each, with the tests that check them or a link to the paragraph of
docs/compatibility.md that says why the kernel differs. This test fails when
a row cites a test node id that does not exist (found by parsing the test
files, not by running pytest), when a row has neither a test nor a link,
when a link names no heading of compatibility.md, when a suite's rows leave
out one of its UPSTREAM.md subsections, or when the per-suite counts written
in compatibility.md and README.md's Compatibility section differ from the
rows.
"""

from __future__ import annotations

import ast
import re
from collections import Counter
from dataclasses import dataclass
from functools import cache

from tests.support.harness import REPO_ROOT

LEDGER = REPO_ROOT / "docs" / "compatibility-ledger.md"
COMPAT = REPO_ROOT / "docs" / "compatibility.md"
README = REPO_ROOT / "README.md"
STATUSES = ("holds", "partial", "deliberate", "open")
NODE = re.compile(r"`(tests/[\w/]+\.py)::([\w:]+)`")
LINK = re.compile(r"\]\(compatibility\.md#([\w-]+)\)")
ROW_ID = re.compile(r"[A-Z]\d+[a-z]?")  # A1, O15b
# The UPSTREAM.md subsections each suite's rows must reach (the ledger's section column).
SECTIONS = {
    "brain-api": {f"1.{n}" for n in range(1, 11)},
    "embeddings": {"2"},
    "MCP": {"3"},
    "vault": {f"4.{n}" for n in range(1, 6)},
    "brain-ops": {f"5.{n}" for n in range(1, 11)},
    "deploy": {"6"},
    "agentihooks client": {"7"},
}


@dataclass(frozen=True)
class Row:
    suite: str
    id: str
    section: str
    behaviour: str
    status: str
    evidence: str


def parse(text: str) -> list[Row]:
    """The ledger's rows, each with the ``## `` heading (the upstream suite) it sits under.

    Every table line under a suite heading is a row but the header and the
    separator, so a row with a malformed id is reported, never skipped.
    """
    rows, suite = [], ""
    for line in text.splitlines():
        if line.startswith("## "):
            suite = line[3:].strip()
        elif suite and line.startswith("|") and not line.startswith(("|---", "| # |")):
            cells = [c.strip() for c in re.split(r"(?<!\\)\|", line.strip().strip("|"))]
            if len(cells) != 5:
                rows.append(Row(suite, cells[0], "", line, "malformed", ""))
                continue
            rows.append(Row(suite, *cells))
    return rows


def anchors(markdown: str) -> set[str]:
    """GitHub's anchors of a page's headings (as tests/test_docs.py computes them)."""
    return {re.sub(r"[^\w\- ]", "", h.strip().lower()).replace(" ", "-") for h in re.findall(r"^#{1,6} (.+)$", markdown, re.M)}


@cache
def defined_tests(path: str) -> frozenset[str]:
    """``name`` and ``Class::name`` of every test function a test file defines (parsed, not imported)."""
    file = REPO_ROOT / path
    if not file.is_file():
        return frozenset()
    names: set[str] = set()

    def walk(body: list[ast.stmt], prefix: str) -> None:
        for node in body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name.startswith("test"):
                names.add(prefix + node.name)
            elif isinstance(node, ast.ClassDef) and node.name.startswith("Test"):
                walk(node.body, f"{prefix}{node.name}::")

    walk(ast.parse(file.read_text()).body, "")
    return frozenset(names)


def problems(rows: list[Row], compat: str) -> list[str]:
    """What is wrong with the rows, one line each (empty: nothing)."""
    known = anchors(compat)
    found = []
    for row, count in Counter(r.id for r in rows).items():
        if count > 1:
            found.append(f"{row}: the id is used {count} times")
    for row in rows:
        where = f"{row.id} ({row.suite})"
        if not ROW_ID.fullmatch(row.id):
            found.append(f"{where}: the id is not a letter, a number and an optional letter")
        if row.status not in STATUSES:
            found.append(f"{where}: status {row.status!r} is not one of {STATUSES}")
            continue
        nodes, links = NODE.findall(row.evidence), LINK.findall(row.evidence)
        for path, name in nodes:
            if name not in defined_tests(path):
                found.append(f"{where}: no test {path}::{name}")
        for anchor in links:
            if anchor not in known:
                found.append(f"{where}: compatibility.md has no heading #{anchor}")
        if row.status in ("holds", "partial") and not nodes:
            found.append(f"{where}: {row.status} but no test is named")
        if row.status in ("deliberate", "open") and not links:
            found.append(f"{where}: {row.status} but no compatibility.md paragraph is linked")
        if row.status == "partial" and "Not checked:" not in row.evidence:
            found.append(f"{where}: partial but it does not say what is 'Not checked:'")
        if row.status == "holds" and "Not checked:" in row.evidence:
            found.append(f"{where}: holds yet says something is not checked (partial?)")
    return found


def summary(rows: list[Row], suite: str | None = None) -> str:
    """The count line compatibility.md gives for one suite; without a suite, README.md's line for every row."""
    counts = Counter(r.status for r in rows if suite is None or r.suite == suite)
    total = sum(counts.values())
    figures = f"{total} behaviours, {counts['holds']} hold, {counts['partial']} partial, {counts['deliberate']} deliberate, {counts['open']} open"
    return figures if suite is None else f"{suite}: {figures}"


def test_every_row_of_the_ledger_is_backed_and_every_citation_exists() -> None:
    rows = parse(LEDGER.read_text())
    assert len(rows) > 300  # the parse found the tables
    found = problems(rows, COMPAT.read_text())
    assert not found, "docs/compatibility-ledger.md:\n" + "\n".join(found)


def test_every_suite_reaches_each_of_its_upstream_subsections() -> None:
    rows = parse(LEDGER.read_text())
    assert {r.suite for r in rows} == set(SECTIONS)
    for suite, expected in SECTIONS.items():
        assert {r.section for r in rows if r.suite == suite} == expected, suite


def test_the_counts_in_compatibility_and_readme_are_the_ledgers() -> None:
    """compatibility.md gives each suite's line; README.md (kept under 10 kB) the line of the whole ledger."""
    rows = parse(LEDGER.read_text())
    compat, readme = COMPAT.read_text(), README.read_text()
    for suite in sorted({r.suite for r in rows}):
        line = summary(rows, suite)
        assert line in compat, f"docs/compatibility.md should say: {line}"
    readme = readme[readme.index("\n## Compatibility\n") :]
    readme = " ".join(readme[: readme.index("\n## ", 1)].split())
    assert summary(rows) in readme, f"README.md's Compatibility section should say: {summary(rows)}"


PLANTED = """
## brain-api

| # | § | behaviour | status | tests, or why not |
|---|---|---|---|---|
| A1 | 1.1 | a test that does not exist | holds | `tests/api/test_health.py::test_no_such_test` |
| A2 | 1.1 | a file that does not exist | holds | `tests/api/test_nowhere.py::test_health_answers_without_auth` |
| A3 | 1.1 | nothing behind it | holds | we believe so |
| A4 | 1.1 | deliberate without a link | deliberate | `tests/api/test_health.py::test_health_answers_without_auth` |
| A5 | 1.1 | a link to no heading | deliberate | [why](compatibility.md#no-such-paragraph) |
| A6 | 1.1 | partial without saying what | partial | `tests/api/test_health.py::test_health_answers_without_auth` |
| A7 | 1.1 | a status nobody knows | mostly | `tests/api/test_health.py::test_health_answers_without_auth` |
| A8 | 1.1 | a row that is fine | holds | `tests/api/test_health.py::test_health_answers_without_auth` |
| A8 | 1.1 | the same id again | deliberate | [why](compatibility.md#a-real-paragraph) |
| A-9 | 1.1 | an id that is no id | holds | `tests/api/test_health.py::test_health_answers_without_auth` |
"""


def test_a_planted_bad_ledger_is_caught_row_by_row() -> None:
    rows = parse(PLANTED)
    assert [r.id for r in rows] == ["A1", "A2", "A3", "A4", "A5", "A6", "A7", "A8", "A8", "A-9"]
    found = problems(rows, "# Compatibility\n\n#### A real paragraph\n")
    assert found == [
        "A8: the id is used 2 times",
        "A1 (brain-api): no test tests/api/test_health.py::test_no_such_test",
        "A2 (brain-api): no test tests/api/test_nowhere.py::test_health_answers_without_auth",
        "A3 (brain-api): holds but no test is named",
        "A4 (brain-api): deliberate but no compatibility.md paragraph is linked",
        "A5 (brain-api): compatibility.md has no heading #no-such-paragraph",
        "A6 (brain-api): partial but it does not say what is 'Not checked:'",
        "A7 (brain-api): status 'mostly' is not one of ('holds', 'partial', 'deliberate', 'open')",
        "A-9 (brain-api): the id is not a letter, a number and an optional letter",
    ]
    assert summary(rows, "brain-api") == "brain-api: 10 behaviours, 5 hold, 1 partial, 3 deliberate, 0 open"
    assert summary(rows) == "10 behaviours, 5 hold, 1 partial, 3 deliberate, 0 open"
