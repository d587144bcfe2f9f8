"""Vault read routes: /vault/read, /vault/list, /vault/search, /signal, /arcs/{id}, and GET /projects."""

from __future__ import annotations

import datetime as dt
import os

import pytest
from sqlalchemy.orm import Session

from brain_core.arcs import ArcSession, build_plan, render_arc
from brain_core.vault import frontmatter
from brain_kernel.index import rebuild
from brain_kernel.settings import Settings
from brain_kernel.vault import Vault

NOW = dt.datetime.now(dt.timezone.utc)


def _post(client, type_: str, content: str, **attrs: str) -> dict:
    r = client.post("/marker", json={"type": type_, "content": content, "attrs": attrs})
    assert r.status_code == 201, r.text
    return r.json()


def _arc(vault: Vault, sid: str, key: str, repo: str, prompt: str) -> tuple[str, str]:
    start = NOW - dt.timedelta(hours=2)
    plan = build_plan(
        [
            ArcSession(
                session_id=sid,
                project=key,
                repo=repo,
                project_source="git",
                cwd="/h",
                start=start,
                end=start + dt.timedelta(minutes=9),
                first_user_prompt=prompt,
            )
        ]
    )
    vault.write_atomic(plan.vault_path, render_arc(plan))
    return plan.cluster_id, plan.vault_path


def test_read_returns_content_and_size(client, settings: Settings) -> None:
    Vault(settings.vault).write_atomic("left/notes/a.md", "hello vault\n")
    r = client.get("/vault/read", params={"path": "left/notes/a.md"})
    assert r.status_code == 200
    assert r.json() == {"path": "left/notes/a.md", "size_bytes": 12, "content": "hello vault\n", "truncated": False}
    short = client.get("/vault/read", params={"path": "left/notes/a.md", "max_bytes": 5}).json()
    assert short["content"] == "hello" and short["truncated"] is True and short["size_bytes"] == 12


@pytest.mark.parametrize("path", ["../outside.md", "/etc/passwd", "left/../../x.md"])
def test_read_outside_the_vault_is_400(client, path: str) -> None:
    r = client.get("/vault/read", params={"path": path})
    assert r.status_code == 400, r.text
    assert "outside the vault" in r.json()["detail"]


def test_read_of_a_missing_file_or_folder_is_404(client) -> None:
    assert client.get("/vault/read", params={"path": "nope/missing.md"}).status_code == 404
    assert client.get("/vault/read", params={"path": "clusters"}).status_code == 404


def test_list_returns_files_under_a_prefix(client, settings: Settings) -> None:
    vault = Vault(settings.vault)
    vault.write_atomic("left/reference/one.md", "1")
    vault.write_atomic("left/reference/sub/two.txt", "2")
    vault.write_atomic("left/reference/.hidden.md", "3")
    r = client.get("/vault/list", params={"prefix": "left/reference"}).json()
    assert r["prefix"] == "left/reference"
    assert r["files"] == ["left/reference/one.md", "left/reference/sub/two.txt"] and r["count"] == 2
    assert client.get("/vault/list", params={"prefix": "../x"}).status_code == 400


def test_search_finds_tokens_with_line_snippets(client, settings: Settings) -> None:
    vault = Vault(settings.vault)
    vault.write_atomic("left/a.md", "# Title\nthe Quokka jumps\nnothing here\nquokka again with wombat\n")
    vault.write_atomic("left/b.txt", "only quokka\n")
    vault.write_atomic("left/c.json", "quokka wombat\n")
    r = client.get("/vault/search", params={"q": "quokka wombat"}).json()
    assert r["count"] == 1
    hit = r["results"][0]
    assert hit["path"] == "left/a.md" and hit["score"] == 3
    assert hit["snippets"] == [{"line": 2, "text": "the Quokka jumps"}, {"line": 4, "text": "quokka again with wombat"}]
    assert [h["path"] for h in client.get("/vault/search", params={"q": "quokka", "limit": 1}).json()["results"]] == ["left/a.md"]
    assert client.get("/vault/search", params={"q": "quokka", "prefix": "left/b.txt"}).json()["count"] == 1


def test_search_with_a_project_sees_only_that_projects_entries(client, settings: Settings) -> None:
    _post(client, "lesson", "shared zebra lesson for api one", repo="org1/api")
    _post(client, "lesson", "shared zebra lesson for api two", repo="org2/api")
    _post(client, "decision", "zebra crossing adopted", title="Zebra", repo="org1/api")
    one = client.get("/vault/search", params={"q": "zebra", "project": "org1/api"}).json()
    text = str(one)
    assert "api one" in text and "crossing" in text and "api two" not in text
    assert one["count"] == 2
    ambiguous = client.get("/vault/search", params={"q": "zebra", "project": "api"})
    assert ambiguous.status_code == 409 and ambiguous.json()["candidates"] == ["org1/api", "org2/api"]  # as GET /feed says it
    assert client.get("/vault/search", params={"q": "zebra", "project": "../x"}).status_code == 422
    assert client.get("/vault/search", params={"q": "zebra", "project": "nobody"}).json()["count"] == 0


def test_signal_reports_the_newest_active_signal(client) -> None:
    empty = client.get("/signal").json()
    assert empty["active"] is False and empty["vault_path"] is None
    _post(client, "signal", "first thing", title="First", severity="info")
    written = _post(client, "signal", "disk almost full", title="Disk", severity="critical", repo="org1/api")
    r = client.get("/signal").json()
    assert {k: r[k] for k in ("active", "severity", "title", "content", "vault_path")} == {
        "active": True,
        "severity": "critical",
        "title": "Disk",
        "content": "disk almost full",
        "vault_path": written["vault_path"],
    }
    assert r["hash"] and r["last_updated"]


def test_arcs_route_returns_frontmatter_and_resolves_tombstones(client, settings: Settings, db: Session) -> None:
    vault = Vault(settings.vault)
    live_id, live_path = _arc(vault, "s1", "api", "org1/api", "Keep the survivor arc")
    gone_id, gone_path = _arc(vault, "s2", "api", "org1/api", "Merge this one away")
    vault.write_atomic(gone_path.replace(".md", ".merged.md"), frontmatter.update(vault.read_text(gone_path), {"merged_into": live_id}))
    os.remove(vault.path(gone_path))
    rebuild(db, vault)
    db.commit()
    r = client.get(f"/arcs/{live_id}").json()
    assert r["cluster_id"] == live_id and r["vault_path"] == live_path
    assert r["frontmatter"]["repo"] == "org1/api" and "# Keep the survivor arc" in r["body"]
    merged = client.get(f"/arcs/{gone_id}").json()
    assert merged["cluster_id"] == live_id and merged["requested"] == gone_id and merged["merged_from"] == [gone_id]
    assert client.get("/arcs/arc-000000000000").status_code == 404
    assert client.get("/arcs/..%2Fetc").status_code in (404, 422)
    fresh_id, fresh_path = _arc(vault, "s3", "api", "org1/api", "Written after the last reindex")
    fresh = client.get(f"/arcs/{fresh_id}").json()  # not indexed yet: read from the vault
    assert fresh["cluster_id"] == fresh_id and fresh["vault_path"] == fresh_path and fresh["merged_from"] == []


def test_projects_lists_known_projects_with_counts_by_kind(client, settings: Settings, db: Session) -> None:
    vault = Vault(settings.vault)
    _arc(vault, "p1", "api", "org1/api", "Work on the first api")
    _post(client, "lesson", "one", repo="org1/api")
    _post(client, "lesson", "two", repo="org1/api")
    _post(client, "lesson", "three", repo="org2/api")
    _post(client, "decision", "four", repo="acme/web")
    rebuild(db, vault)
    db.commit()
    body = client.get("/projects").json()
    by_id = {p["id"]: p for p in body["projects"]}
    assert body["count"] == 3 == len(by_id)
    assert by_id["org1/api"]["counts"] == {"arc": 1, "lesson": 2} and by_id["org1/api"]["key"] == "api"
    assert by_id["org2/api"]["counts"] == {"lesson": 1}
    assert by_id["acme/web"]["counts"] == {"decision": 1} and by_id["acme/web"]["repo"] == "acme/web"
    assert all(p["last_active"] for p in body["projects"])


def test_read_routes_need_a_token_when_auth_is_on(tmp_path, database_url: str) -> None:
    from fastapi.testclient import TestClient

    from brain_api.app import create_app
    from tests.conftest import make_settings

    s = make_settings(tmp_path, database_url, tokens=["secret"])
    Vault(s.vault).scaffold()
    with TestClient(create_app(s)) as c:
        for url in ("/feed", "/feed?project=x", "/projects", "/signal", "/vault/list", "/vault/read?path=a", "/vault/search?q=a", "/arcs/x"):
            assert c.get(url).status_code == 401, url
        assert c.get("/feed", headers={"Authorization": "Bearer secret"}).status_code == 200


def test_project_search_looks_only_inside_the_projects_own_entries_of_a_shared_log(client, settings: Settings) -> None:
    """A line of another project's lesson that contains one of P's titles is not P's (it used to match)."""
    mine = _post(client, "lesson", "Always pin the resolver version.", project="org1/api", title="Fix")
    theirs = _post(client, "lesson", "Fix the secretq rotation before Friday.", project="acme/web")
    assert mine["vault_path"] == theirs["vault_path"]  # one shared log for the day
    leaked = client.get("/vault/search", params={"q": "secretq", "project": "org1/api"}).json()
    assert leaked["count"] == 0, leaked
    own = client.get("/vault/search", params={"q": "resolver", "project": "org1/api"}).json()
    assert own["count"] == 1 and [s["text"] for s in own["results"][0]["snippets"]] == ["Always pin the resolver version."]
    header = client.get("/vault/search", params={"q": "fix", "project": "org1/api"}).json()
    assert [s["text"] for s in header["results"][0]["snippets"]] == [
        next(line for line in (settings.vault / mine["vault_path"]).read_text().splitlines() if line.endswith("] Fix"))
    ]
    assert client.get("/vault/search", params={"q": "secretq", "project": "acme/web"}).json()["count"] == 1
