"""A marker posted without a title is titled by its content's first line; every text that shows title and content says it once.

The memory block, the project feed's sections, the lessons file and the text
search embeds (which prompt recall quotes) printed ``title: content`` even
when the title was the content's start clipped with an ellipsis, and a
decision's line always did.
"""

from __future__ import annotations

import datetime as dt

import pytest

from brain_core.chunks import entry_doc
from brain_core.entries import EntryRecord, entry_id
from brain_core.feed.block import serve_block
from brain_core.feed.project import ProjectMemory, ProjectRef
from brain_core.feed.sections import decisions_markdown, lessons_markdown
from brain_core.markers import default_title
from brain_core.text import title_repeats

NOW = dt.datetime(2026, 12, 5, 12, 0, tzinfo=dt.timezone.utc)
API = ProjectRef(key="api", repo="org1/api", known=True, last_active=NOW)
LONG = "The token expiry in tests/test_login.py reads the wall clock; pin the clock in the auth fixture or the login test flakes one run in ten."
SHORT = "Auth tokens live 15 minutes; refresh tokens 7 days."


def _rec(kind: str, content: str, title: str, **extra: object) -> EntryRecord:
    path = f"left/{kind}/{abs(hash(content))}.md"
    return EntryRecord(
        id=entry_id(kind, path), kind=kind, vault_path=path, title=title, content=content, project="api", repo="org1/api", occurred_at=NOW, **extra
    )  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("title", "content", "repeats"),
    [
        (default_title(LONG), LONG, True),  # clipped on a word, with an ellipsis
        (default_title(SHORT), SHORT, True),
        (default_title("# Heading\nthe body"), "# Heading\nthe body", True),
        ("", "anything", True),
        ("Migrations first", "Run migrations before the app starts.", False),
        ("Run migrations…", "Run the tests first.", False),
    ],
)
def test_a_title_repeats_its_content_only_when_it_is_the_contents_start(title: str, content: str, repeats: bool) -> None:
    assert title_repeats(title, content) is repeats


def test_the_memory_block_says_a_default_title_once() -> None:
    memory = ProjectMemory(
        lessons=(_rec("lesson", LONG, default_title(LONG)),),
        decisions=(
            _rec("decision", SHORT, default_title(SHORT), status="proposed"),
            _rec("decision", "Answers live in Postgres.", "Stored answers", status="accepted"),
        ),
    )
    text = serve_block(API, memory, now=NOW).text
    assert f"- 2026-12-05 {LONG}\n" in text
    assert f"- 2026-12-05 {SHORT} (proposed)\n" in text
    assert "- 2026-12-05 Stored answers (accepted): Answers live in Postgres.\n" in text
    assert text.count("wall clock") == 1 and text.count("refresh tokens") == 1


def test_the_feed_sections_and_the_search_text_say_a_default_title_once() -> None:
    lesson = _rec("lesson", LONG, default_title(LONG))
    decision = _rec("decision", SHORT, default_title(SHORT), status="proposed")
    assert lessons_markdown([lesson]) == f"- 2026-12-05 {LONG}"
    assert decisions_markdown([decision]) == f"- 2026-12-05 {SHORT} (proposed)"
    assert decisions_markdown([_rec("decision", "Answers live in Postgres.", "Stored answers")]) == "- 2026-12-05 **Stored answers**: Answers live in Postgres."
    for record in (lesson, decision):
        doc = entry_doc(record)
        assert doc is not None and doc.text == record.content
