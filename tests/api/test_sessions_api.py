"""``POST /sessions``: explicit identities, resolution from cwd, updates, validation, auth."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient
from sqlalchemy.orm import Session

from brain_api.app import create_app
from brain_kernel.db.models import LearnedRoot, Project, SessionRow
from brain_kernel.identity.projects import lookup_project
from brain_kernel.identity.resolver import IdentityResolver
from brain_kernel.settings import Settings
from tests.support.gitrepo import add_worktree, make_repo


def test_explicit_repo_is_stored_normalised_with_source_attrs(client: TestClient, db: Session) -> None:
    resp = client.post(
        "/sessions",
        json={"session_id": "s-1", "repo": "git@github.com:Org1/API.git", "worktree": "api-fix", "cwd": "/nowhere/api-fix", "agent": "Claude"},
    )
    assert resp.status_code == 200, resp.text
    body = resp.json()
    assert body == {
        "session_id": "s-1",
        "agent": "claude",
        "created": True,
        "cwd": "/nowhere/api-fix",
        "project": "api",
        "repo": "org1/api",
        "root": None,
        "worktree": "api-fix",
        "source": "attrs",
    }
    row = db.get(SessionRow, "s-1")
    assert (row.project, row.repo, row.worktree, row.source, row.agent) == ("api", "org1/api", "api-fix", "attrs", "claude")
    project = db.get(Project, "org1/api")
    assert project is not None and project.last_active is None  # known; active only once it has entries


def test_cwd_in_a_worktree_resolves_by_git_and_teaches_the_roots(client: TestClient, settings: Settings, db: Session) -> None:
    home = settings.user_home
    repo = make_repo(home / "dev" / "openrig", "https://github.com/acme/openrig.git")
    wt = add_worktree(repo, home / "trees" / "openrig-fix", "fix")
    resp = client.post("/sessions", json={"session_id": "s-2", "cwd": str(wt / "."), "agent": "codex"})
    assert resp.status_code == 200, resp.text
    body = resp.json()
    assert (body["project"], body["repo"], body["root"], body["worktree"], body["source"]) == (
        "openrig",
        "acme/openrig",
        str(repo),
        "openrig-fix",
        "git",
    )
    assert {r.path for r in db.query(LearnedRoot)} == {str(repo), str(wt)}
    # A worktree the client names is kept, even with no project or repo beside it.
    named = client.post("/sessions", json={"session_id": "s-2b", "cwd": str(repo), "worktree": "hotfix"}).json()
    assert (named["project"], named["repo"], named["worktree"], named["source"]) == ("openrig", "acme/openrig", "hotfix", "git")
    assert db.get(SessionRow, "s-2b").worktree == "hotfix"


def test_a_repost_updates_the_session(client: TestClient, settings: Settings, db: Session) -> None:
    first = client.post("/sessions", json={"session_id": "s-3", "project": "web", "cwd": ""})
    assert first.json()["created"] is True
    again = client.post("/sessions", json={"session_id": "s-3", "project": "org2/api", "cwd": "/srv/api"})
    assert again.status_code == 200
    assert again.json()["created"] is False
    row = db.get(SessionRow, "s-3")
    db.refresh(row)
    assert (row.project, row.repo, row.cwd) == ("api", "org2/api", "/srv/api")
    hit = IdentityResolver(settings, db).resolve(None, session_id="s-3")
    assert (hit.project, hit.repo, hit.source) == ("api", "org2/api", "session")


def test_an_unresolvable_cwd_is_stored_as_unresolved(client: TestClient, settings: Settings, db: Session) -> None:
    resp = client.post("/sessions", json={"session_id": "s-4", "cwd": str(settings.user_home)})
    assert resp.status_code == 200
    assert (resp.json()["project"], resp.json()["source"]) == (None, "unresolved")
    assert db.get(SessionRow, "s-4").source == "unresolved"  # type: ignore[union-attr]
    assert db.query(Project).count() == 0


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"session_id": "s", "project": "../etc", "cwd": "/x"}, "project"),
        ({"session_id": "s", "project": "a b", "cwd": "/x"}, "project"),
        ({"session_id": "s", "repo": "not-a-slug", "cwd": "/x"}, "repo"),
        ({"session_id": "s", "repo": "/srv/git/api.git", "cwd": "/x"}, "repo"),
        ({"session_id": "s", "project": "web", "repo": "org1/api", "cwd": "/x"}, "project"),
        ({"session_id": "s", "project": "api", "worktree": "../x", "cwd": "/x"}, "worktree"),
        ({"session_id": "s", "worktree": "a/b", "cwd": "/x"}, "worktree"),
        ({"session_id": "../s", "cwd": "/x"}, "session_id"),
        ({"session_id": "s", "cwd": "/x", "agent": "Claude Code!"}, "agent"),
        ({"session_id": "s"}, "cwd"),
        ({"cwd": "/x"}, "session_id"),
        ({"session_id": "s", "project": 5, "cwd": "/x"}, "project"),
    ],
)
def test_bad_input_is_a_422_with_a_reason(client: TestClient, db: Session, body: dict, field: str) -> None:
    resp = client.post("/sessions", json=body)
    assert resp.status_code == 422, resp.text
    detail = resp.json()["detail"]
    assert any(field in [str(p) for p in err["loc"]] and err["msg"] for err in detail), detail
    assert db.query(SessionRow).count() == 0


def test_sessions_need_a_token_when_auth_is_on(settings: Settings) -> None:
    secured = settings.with_overrides(tokens=["t0ken"])
    with TestClient(create_app(secured)) as client:
        body = {"session_id": "s-5", "project": "api", "cwd": "/x"}
        assert client.post("/sessions", json=body).status_code == 401
        assert client.post("/sessions", json=body, headers={"Authorization": "Bearer wrong"}).status_code == 401
        assert client.post("/sessions", json=body, headers={"Authorization": "Bearer t0ken"}).status_code == 200


def test_registered_sessions_make_a_short_key_ambiguous(client: TestClient, db: Session) -> None:
    for sid, repo in (("a", "org1/api"), ("b", "org2/api"), ("c", "org1/api")):
        assert client.post("/sessions", json={"session_id": sid, "repo": repo, "cwd": ""}).status_code == 200
    found = lookup_project(db, "api")
    assert (found.status, found.candidates) == ("ambiguous", ["org1/api", "org2/api"])
    assert lookup_project(db, "org2/api").status == "exact"


def test_a_mentioned_key_is_not_a_second_repository(db: Session) -> None:
    from brain_kernel.index.entries import touch_project

    touch_project(db, "api", None)
    assert lookup_project(db, "api").status == "exact"
    touch_project(db, "api", "org1/api")
    found = lookup_project(db, "api")
    assert (found.status, found.repo) == ("exact", "org1/api")
    touch_project(db, "api", "org2/api")
    assert lookup_project(db, "api").status == "ambiguous"
    assert lookup_project(db, "nothing").status == "unknown"


def test_lookup_refuses_malformed_refs(db: Session) -> None:
    from brain_core.keys import InvalidKey

    for ref in ("../etc", "a/../b", "", "a b"):
        with pytest.raises(InvalidKey):
            lookup_project(db, ref)


def test_an_unreadable_catalog_is_a_503_for_the_operator(settings: Settings, tmp_path) -> None:
    catalog = tmp_path / "catalog.yaml"
    catalog.write_text("projects: [unclosed\n")
    with TestClient(create_app(settings.with_overrides(catalog_path=catalog))) as c:
        for path, body in (
            ("/sessions", {"session_id": "s-cat", "cwd": str(tmp_path)}),
            ("/marker", {"type": "lesson", "content": "x", "attrs": {"cwd": str(tmp_path)}}),
        ):
            r = c.post(path, json=body)
            assert r.status_code == 503, (path, r.text)
            assert r.json()["detail"].startswith(f"catalog file {catalog} is not valid YAML"), r.text


def test_registering_a_session_keeps_the_stored_feed_answer(client: TestClient) -> None:
    """ "Register the session, then read the feed" is served the stored answer (it used to be recomputed)."""
    assert client.post("/marker", json={"type": "lesson", "content": "Cache the resolver.", "attrs": {"repo": "org1/api"}}).status_code == 201
    first = client.get("/feed", params={"project": "org1/api"})
    assert first.headers["X-Brain-Feed"] == "live"
    registered = client.post("/sessions", json={"session_id": "s-feed", "repo": "org1/api", "cwd": "/nowhere/api", "agent": "claude"})
    assert registered.status_code == 200
    again = client.get("/feed", params={"project": "org1/api"})
    assert again.headers["X-Brain-Feed"] == "stored"
    assert again.json()["project"]["last_active"] == first.json()["project"]["last_active"]
