"""The vault's file search leaves withdrawn entries out (ADR 0064), as ``POST /search`` does (ADR 0048).

Markers go in through ``POST /marker``, curation through ``/entries``; the
vault is a real folder, the index a real Postgres. Every search is asked of
the file scan (a vault no rebuild has indexed) and of the search index (one
indexed before the writes, which follow them through ``sync_changes``), and
through the MCP tool ``kb_search`` in-process and over HTTP.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from fastapi.testclient import TestClient
from sqlalchemy.orm import Session

from brain_api.app import create_app
from brain_core.vault import frontmatter
from brain_kernel.search import search_docs
from brain_kernel.settings import Settings
from brain_kernel.vault_store import Vault
from brain_mcp import tools
from brain_mcp.remote import Remote
from tests.support.harness import Served, make_settings

ALL, WIDGET, WEB = "tok-all-0123456789", "tok-widget-0123456789", "tok-web-0123456789"
QUERY = "auth token lifetime"


def _as(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


@pytest.fixture(params=["files", "index"])
def kernel(request: pytest.FixtureRequest, tmp_path: Path, database_url: str, db: Session) -> Iterator[tuple[TestClient, Settings]]:
    settings = make_settings(tmp_path, database_url, tokens=[ALL, f"{WIDGET}=acme/widget", f"{WEB}=org2/web"])
    vault = Vault(settings.vault)
    vault.scaffold()
    if request.param == "index":
        search_docs.rebuild_documents(db, vault)  # indexed before the writes: they reach it through sync_changes
        db.commit()
    assert search_docs.indexed(db, vault) is (request.param == "index")
    with TestClient(create_app(settings)) as client:
        yield client, settings


def _post(client: TestClient, type_: str, content: str, token: str = ALL, **attrs: Any) -> dict[str, Any]:
    r = client.post("/marker", json={"type": type_, "content": content, "attrs": attrs}, headers=_as(token))
    assert r.status_code == 201, r.text
    return r.json()


def _retract(client: TestClient, entry_id: str, reason: str) -> None:
    r = client.post(f"/entries/{quote(entry_id, safe='/:')}/retract", json={"reason": reason}, headers=_as(ALL))
    assert r.status_code == 200, r.text


def _search(client: TestClient, q: str, token: str = ALL, **params: Any) -> dict[str, Any]:
    r = client.get("/vault/search", params={"q": q, **params}, headers=_as(token))
    assert r.status_code == 200, r.text
    return r.json()


def _states(answer: dict[str, Any]) -> dict[str, str | None]:
    return {hit["path"]: hit["state"] for hit in answer["results"]}


def _adr(settings: Settings, written: dict[str, Any]) -> str:
    return str(frontmatter.parse((Path(settings.vault) / written["vault_path"]).read_text()).meta["id"])


def _decisions(client: TestClient, settings: Settings) -> tuple[dict[str, Any], dict[str, Any]]:
    """ADR-0001, then ADR-0002 superseding it, both of acme/widget and both naming the query's words."""
    first = _post(client, "decision", "The auth token lifetime is one hour.", repo="acme/widget", title="Token lifetime")
    second = _post(
        client, "decision", "The auth token lifetime is fifteen minutes.", repo="acme/widget", title="Shorter tokens", supersedes=_adr(settings, first)
    )
    return first, second


def test_a_superseded_then_reinstated_decision_leaves_and_rejoins_the_file_search(kernel: tuple[TestClient, Settings]) -> None:
    client, settings = kernel
    first, second = _decisions(client, settings)
    one, two = first["vault_path"], second["vault_path"]
    for params in ({}, {"project": "acme/widget"}):
        assert _states(_search(client, QUERY, **params)) == {two: "live"}, params
        assert _states(_search(client, QUERY, include_withdrawn=True, **params)) == {one: "superseded", two: "live"}, params
    _retract(client, _adr(settings, second), "fifteen minutes logged everyone out mid-deploy")
    for params in ({}, {"project": "acme/widget"}):
        found = _search(client, QUERY, **params)
        assert _states(found) == {one: "live"}, params  # ADR-0001 is back (ADR 0060), ADR-0002 gone, preview and all
        assert "fifteen" not in str(found) and found["count"] == 1
        everything = _search(client, QUERY, include_withdrawn=True, **params)
        assert _states(everything) == {one: "live", two: "retracted"}, params
    assert _search(client, "fifteen")["count"] == 0
    assert _states(_search(client, "fifteen", include_withdrawn=True)) == {two: "retracted"}


def test_a_scoped_token_sees_only_its_projects_withdrawn_or_not(kernel: tuple[TestClient, Settings]) -> None:
    client, settings = kernel
    first, second = _decisions(client, settings)
    theirs = _post(client, "decision", "Web auth token lifetime is a day.", repo="org2/web", title="Web tokens")
    _retract(client, theirs["entry_id"], "wrong for web")
    assert _states(_search(client, QUERY, WIDGET)) == {second["vault_path"]: "live"}
    assert _states(_search(client, QUERY, WIDGET, include_withdrawn=True)) == {first["vault_path"]: "superseded", second["vault_path"]: "live"}
    assert _search(client, QUERY, WEB)["count"] == 0  # its own decision is retracted
    assert _states(_search(client, QUERY, WEB, include_withdrawn=True)) == {theirs["vault_path"]: "retracted"}
    refused = client.get("/vault/search", params={"q": QUERY, "project": "org2/web", "include_withdrawn": True}, headers=_as(WIDGET))
    assert refused.status_code == 403
    assert client.get("/vault/search", params={"q": QUERY, "include_withdrawn": "maybe"}, headers=_as(ALL)).status_code == 422


def test_an_expired_decision_stays_searchable_marked(kernel: tuple[TestClient, Settings]) -> None:
    client, _ = kernel
    dated = _post(client, "decision", "Freeze the auth token lifetime until the audit.", repo="acme/widget", title="Freeze", valid_until="2000-01-01")
    lasting = _post(client, "decision", "Rotate the auth token signing key monthly.", repo="acme/widget", title="Rotate")
    assert _states(_search(client, QUERY)) == {dated["vault_path"]: "expired", lasting["vault_path"]: "live"}


def test_a_withdrawn_lesson_of_a_shared_log_matches_nothing_and_no_snippet_shows_it(kernel: tuple[TestClient, Settings]) -> None:
    """The log stays a hit for its live entries; the retracted entry's lines neither match nor reach a snippet's context.

    The log's curation record stays searchable: its header names the entry it retracts, marked ``Retracted:``.
    """
    client, _ = kernel
    wrong = _post(client, "lesson", "Rotate the zebrakey every week.", repo="acme/widget")
    right = _post(client, "lesson", "Rotate the cache warmer nightly.", repo="acme/widget")
    assert wrong["vault_path"] == right["vault_path"]  # one shared log for the day
    log = wrong["vault_path"]
    before = _search(client, "rotate", context_lines=10)
    assert "zebrakey" in str(before) and before["results"][0]["match_count"] == 4  # two entries, a header and a body line each
    _retract(client, wrong["entry_id"], "the vault's keeper does it now")
    for params in ({}, {"project": "acme/widget"}):
        after = _search(client, "rotate", context_lines=10, **params)
        assert [h["path"] for h in after["results"]] == [log] and after["results"][0]["state"] is None, params  # a log is no one entry
        hit = after["results"][0]
        assert hit["match_count"] == 3, params  # the live entry's two lines and the curation record's header
        shown = [line for s in hit["snippets"] for line in s["snippet"].splitlines()]
        assert "Rotate the zebrakey every week." not in shown, params  # the withdrawn body: no match, no context
        assert all("Retracted: Rotate the zebrakey" in line for line in shown if "zebrakey" in line), params
        [record] = _search(client, "zebrakey", context_lines=0, **params)["results"]
        assert [s["text"] for s in record["snippets"]] == [next(line for line in shown if "Retracted:" in line)], params
        everything = _search(client, "zebrakey", context_lines=0, include_withdrawn=True, **params)["results"]
        assert [s["text"] for s in everything[0]["snippets"]][1] == "Rotate the zebrakey every week.", params


def _caught_up(client: TestClient) -> None:
    """The app's search follower has indexed what it wrote: the tool, like another process, reads the index (one pass behind)."""
    follower = getattr(client.app.state, "search_follower", None)
    assert follower is None or follower.flush()


def test_kb_search_leaves_a_retracted_decision_out_in_process(kernel: tuple[TestClient, Settings]) -> None:
    client, settings = kernel
    first, second = _decisions(client, settings)
    k = tools.Kernel.open(settings)
    try:
        _caught_up(client)
        for project in (None, "acme/widget"):
            found = tools.kb_search(k, QUERY, include_artifact=False, project=project)
            assert [r["ref"] for r in found["results"]] == [second["vault_path"]], project
        _retract(client, _adr(settings, second), "fifteen minutes logged everyone out")
        _caught_up(client)
        for project in (None, "acme/widget"):
            found = tools.kb_search(k, QUERY, include_artifact=False, project=project)
            assert [r["ref"] for r in found["results"]] == [first["vault_path"]] and "fifteen" not in str(found), project
            assert found["results"][0]["metadata"] == {"state": "live"}, project
        r = client.post(f"/entries/{quote(_adr(settings, first), safe='/:')}/expire", json={"reason": "tokens are now opaque"}, headers=_as(ALL))
        assert r.status_code == 200, r.text
        _caught_up(client)
        for project in (None, "acme/widget"):
            [hit] = tools.kb_search(k, QUERY, include_artifact=False, project=project)["results"]
            assert (hit["ref"], hit["metadata"]) == (first["vault_path"], {"state": "expired"}), project  # still found, and said to be stale
    finally:
        k.close()


def test_kb_search_leaves_a_retracted_decision_out_over_http(served: Served) -> None:
    remote = Remote(served.base, None)
    try:
        first = remote.brain_marker("decision", "The auth token lifetime is one hour.", {"repo": "acme/widget", "title": "Token lifetime"})
        adr = frontmatter.parse((Path(served.settings.vault) / first["vault_path"]).read_text()).meta["id"]
        second = remote.brain_supersede(adr, "decision", "The auth token lifetime is fifteen minutes.", {"repo": "acme/widget", "title": "Shorter"})
        assert second["supersedes"] == [first["entry_id"]]
        found = remote.kb_search(QUERY, 10, False, True, 0.0, "acme/widget")
        assert [r["ref"] for r in found["results"]] == [second["vault_path"]]
        assert remote.brain_retract(second["entry_id"], "fifteen minutes logged everyone out")["entry"]["state"] == "retracted"
        for project in (None, "acme/widget"):
            found = remote.kb_search(QUERY, 10, False, True, 0.0, project)
            assert [r["ref"] for r in found["results"]] == [first["vault_path"]] and "fifteen" not in str(found), project
            assert found["results"][0]["metadata"] == {"state": "live"}, project
        remote.brain_expire(first["entry_id"], "tokens are now opaque")
        [hit] = remote.kb_search(QUERY, 10, False, True, 0.0, "acme/widget")["results"]
        assert hit["metadata"] == {"state": "expired"}
    finally:
        remote.close()
