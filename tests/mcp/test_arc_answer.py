"""``brain_get_arc``'s answer (``brain_mcp.answers.arc_answer``): upstream's embeddings form when the arc is indexed, the file otherwise."""

from __future__ import annotations

from brain_mcp.answers import arc_answer

CHUNKS = [
    {"producer": "brain-lesson", "metadata": {"title": "a lesson"}, "text_preview": "lesson"},
    {"producer": "brain-arc", "metadata": {"title": "Auth flow"}, "text_preview": "Title: Auth flow"},
]


def test_an_indexed_arc_answers_the_embeddings_form_with_its_file_beside() -> None:
    answer = arc_answer("a1", CHUNKS, "brain-arc", "clusters/d/a1.md", "x" * 3000)
    assert list(answer) == ["cluster_id", "source", "metadata", "text_preview", "path", "content"]
    assert answer["source"] == "embeddings" and answer["metadata"] == {"title": "Auth flow"} and len(answer["content"]) == 2000


def test_an_indexed_arc_without_its_file_and_a_file_without_an_index() -> None:
    assert arc_answer("a1", CHUNKS[:1], "brain-arc", None, None) == {
        "cluster_id": "a1",
        "source": "embeddings",
        "metadata": {"title": "a lesson"},
        "text_preview": "lesson",
    }
    assert arc_answer("a1", [], "brain-arc", "clusters/d/a1.md", "body") == {
        "cluster_id": "a1",
        "source": "vault",
        "path": "clusters/d/a1.md",
        "content": "body",
    }
    assert arc_answer("a1", [], "brain-arc", None, None) == {"error": "cluster_id not found: a1"}
