"""Prompt recall quotes an arc by what it is about, not by the labels and session table its search text opens with."""

from __future__ import annotations

from brain_kernel.search.embeddings import Hit
from brain_kernel.search.recall import FRAME, select_recall

ARC_TEXT = (
    "Title: Add retry with backoff to the uploader.\n\nRegion: frontal-lobe\n\n# Add retry with backoff to the uploader.\n\n"
    "Project: acme/gadget\n\n## Sessions\n\n| Session | Agent | Start | Minutes | Turns | Tools | Folder | Branch |\n|---|---|---|---|---|---|---|---|\n"
)
LESSON = "The uploader's retry must cap total wait at 30 s or the CI job times out first."


def _hit(key: str, text: str, **metadata: object) -> Hit:
    return Hit(
        key=key,
        producer="p",
        chunk_idx=0,
        content_type="text/markdown",
        text_preview=text,
        metadata=dict(metadata),
        score=0.9,
        scores={"vector": 0.9, "words": None},
    )


def test_an_arc_is_recalled_by_its_summary_else_its_title_and_a_lesson_by_its_text() -> None:
    hits = [
        _hit("lesson:left/reference/l.md#1", LESSON, kind="lesson", title=LESSON),
        _hit("arc-5917", ARC_TEXT, kind="arc", title="Add retry with backoff to the uploader.", summary=None),
        _hit("arc-7a01", ARC_TEXT, kind="arc", title="Uploader work", summary="Retries with jitter; the CI budget is 30 s."),
    ]
    text, ids = select_recall(hits, set(), limit=3, min_score=0.5, max_bytes=1024)
    assert text.splitlines() == [
        FRAME,
        f"- {LESSON} (lesson:left/reference/l.md#1)",
        "- Add retry with backoff to the uploader. (arc-5917)",
        "- Retries with jitter; the CI budget is 30 s. (arc-7a01)",
    ]
    assert ids == ("lesson:left/reference/l.md#1", "arc-5917", "arc-7a01")
