"""Inputs the fuzz run does not reach, found by hand: each is a 4xx with its reason, never a 500 (docs/http.md, Errors)."""

from __future__ import annotations

from typing import Any

import pytest


@pytest.mark.parametrize(
    ("method", "url", "body"),
    [
        ("GET", "/by-key/%00", None),
        ("GET", "/tick/%00", None),
        ("GET", "/feed?project=api&format=markdown&session_id=%00", None),
        ("GET", "/feed?format=markdown&session_id=%00", None),
        ("GET", "/feed?project=api&format=provenance&session_id=%00", None),
        ("POST", "/search", {"query": "E1234", "producer": "\u0000"}),
        ("POST", "/search", {"query": "E1234", "kind": "\u0000"}),
        ("POST", "/pulls", {"session_id": "\u0000", "entry_ids": [], "text": "", "withheld_text": ""}),
    ],
)
def test_a_nul_byte_anywhere_is_never_a_500(client: Any, method: str, url: str, body: Any) -> None:
    r = client.request(method, url, json=body)
    assert r.status_code < 500, (r.status_code, r.text)
    assert r.status_code in (200, 404) or "detail" in r.json()  # refused with a reason, or nothing found


def test_a_blank_query_an_unknown_kind_and_an_empty_project_are_refused_with_their_reason(client: Any) -> None:
    for blank in ("   ", "\t\n", "\u3000"):  # embedded, a blank text is the zero vector: every cosine NaN, every rank arbitrary
        r = client.post("/search", json={"query": blank, "mode": "vector"})
        assert r.status_code == 422 and "query is blank" in r.text, r.text
    unknown = client.post("/search", json={"query": "E1234", "kind": "foo"})
    assert unknown.status_code == 422 and "kind must be one of arc, lesson, decision, signal" in unknown.text
    assert client.get("/entries", params={"project": ""}).status_code == 422  # as the feed and search refuse it
