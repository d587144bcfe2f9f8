"""``brain_ingest``'s slicing and answer (``brain_mcp.answers.ingest_slices``), shared by the in-process and remote tools."""

from __future__ import annotations

from typing import Any

from brain_mcp.answers import MAX_INGEST_CHUNKS, ingest_slices


def _sender(fail_from: int | None = None) -> tuple[list[str], Any]:
    sent: list[str] = []

    def send(message: str) -> dict[str, Any]:
        sent.append(message)
        if fail_from is not None and len(sent) >= fail_from:
            return {"error": "kernel unavailable: timed out", "status": 503}
        return {"obsidian_path": f"raw/inbox/n{len(sent)}.md"}

    return sent, send


def test_content_is_sent_in_slices_with_upstreams_prefixes() -> None:
    sent, send = _sender()
    answer = ingest_slices("abcdefghij", "Doc", "agent", 4, send)
    assert sent == ["[Part 1/3 of Doc]\n\nabcd", "[Part 2/3 of Doc]\n\nefgh", "[Part 3/3 of Doc]\n\nij"]
    assert (answer["chunks_sent"], answer["total_chunks"], answer["title"], answer["producer"]) == (3, 3, "Doc", "agent")
    assert answer["results"][0] == {"chunk": 1, "ok": True, "status": 200, "detail": {"obsidian_path": "raw/inbox/n1.md"}}
    sent, send = _sender()
    assert ingest_slices("one", "Title", "agent", 100, send)["title"] == "Title" and sent == ["[Title]\n\none"]
    sent, send = _sender()
    assert ingest_slices("one", "", "agent", 100, send)["title"] is None and sent == ["one"]
    assert sent and ingest_slices("abcdef", "", "a", 3, _sender()[1])["results"][1]["detail"]  # untitled slices are "document"


def test_a_refused_first_slice_is_the_error_and_a_later_failure_its_result() -> None:
    _, send = _sender(fail_from=1)
    assert ingest_slices("abcdef", "", "agent", 3, send) == {"error": "kernel unavailable: timed out", "status": 503}
    _, send = _sender(fail_from=2)
    answer = ingest_slices("abcdef", "", "agent", 3, send)
    assert answer["chunks_sent"] == 1 and answer["results"][1] == {"chunk": 2, "ok": False, "error": "kernel unavailable: timed out", "status": 503}
    assert ingest_slices("  ", "", "agent", 3, send) == {"error": "content is empty"}
    assert "at most" in ingest_slices("x" * (MAX_INGEST_CHUNKS + 1), "", "agent", 1, send)["error"]
