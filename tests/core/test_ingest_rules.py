"""The pure half of ingest (``brain_core.ingest``): reading a classifier's answer, the regex fallback, the note texts."""

from __future__ import annotations

import json

from brain_core.ingest import MAX_EXTRACTABLES, Extractable, defuse_markers, main_body, parse_classification, regex_classification

ANSWER = {
    "semantic_text": " Keep it warm. ",
    "extractables": [{"type": "URL", "value": " https://a.example/x ", "hint": "guide"}],
    "title": "T" * 100,
    "tags": ["a", "b", "a"],
}


def test_the_answer_is_found_fenced_leading_or_between_the_outermost_braces() -> None:
    text = json.dumps(ANSWER)
    for reply in (text, f"Sure!\n```json\n{text}\n```\nDone.", f"Here: {text} -- hope that helps"):
        found = parse_classification(reply)
        assert found is not None and found.by == "llm"
        assert found.semantic_text == "Keep it warm." and found.title == "T" * 80 and found.tags == ("a", "b")
        assert found.extractables == (Extractable("url", "https://a.example/x", "guide"),)
    for reply in ("no json here", "[1, 2]", "{not json}", ""):
        assert parse_classification(reply) is None


def test_the_regex_fallback_takes_every_url_by_its_shape() -> None:
    found = regex_classification("See https://github.com/org/repo/tree/main, https://www.youtube.com/watch?v=x and http://docs.example/a.\nThen ship.")
    assert [(e.type, e.value) for e in found.extractables] == [
        ("repo", "https://github.com/org/repo/tree/main"),
        ("youtube", "https://www.youtube.com/watch?v=x"),
        ("url", "http://docs.example/a"),
    ]
    assert found.semantic_text == "See and\nThen ship." and found.title == "See and Then ship." and found.by == "regex"


def test_references_past_the_cap_are_counted_not_fetched() -> None:
    found = regex_classification(" ".join(f"https://h.example/{i}" for i in range(MAX_EXTRACTABLES + 3)))
    assert len(found.extractables) == MAX_EXTRACTABLES and found.dropped == 3


def test_fetched_markers_are_inert_and_the_main_note_links_its_references() -> None:
    assert defuse_markers("a <!-- @signal severity=critical -->x<!-- @/signal --> <!--@inject -->") == (
        "a <!-- (at)signal severity=critical -->x<!-- (at)/signal --> <!--(at)inject -->"
    )
    body = main_body("", "abc123def456", "m" * 600, ["2026-01-01-a", "2026-01-01-b"])
    assert body.startswith("(no semantic text — ingested 2 references)\n\n---\n\n_ingest_batch: abc123def456_\n")
    assert f"_original_message: {'m' * 500}_\n" in body and body.endswith("## Related Vault Notes\n\n- [[2026-01-01-a]]\n- [[2026-01-01-b]]\n")
