"""Scoped tokens (ADR 0021): two projects, three tokens (every project, org1/api only, org2/web only).

One vault and index are planted per test through the real app (markers, an
arc per project, ``brain reindex``); each route that returns memory is
probed with the restricted tokens, and ``test_every_route_and_tool_is_in_the_scope_contract``
fails when a route in the OpenAPI schema or an MCP tool is in neither the
probed list nor the list of routes that return no memory.
"""

from __future__ import annotations

import hashlib
import re
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from fastapi.testclient import TestClient
from pydantic import ValidationError

from brain_api.app import create_app
from brain_kernel.auth import Principal
from brain_kernel.settings import Settings
from brain_kernel.vault_store import Vault
from brain_mcp import tools
from tests.support.harness import REPO_ROOT, brain, make_settings
from tests.support.planting import arc_session, write_arc

ALL, API, WEB = "tok-all-0123456789", "tok-api-0123456789", "tok-web-0123456789"
WORD = "zebrafinch"


def _tokens() -> list[str]:
    # The web token is stored as its digest only.
    return [ALL, f"{API}=org1/api", f"sha256:{hashlib.sha256(WEB.encode()).hexdigest()}=org2/web"]


@dataclass
class World:
    client: TestClient
    settings: Settings
    arcs: dict[str, str]  # project -> cluster id
    files: dict[str, str]  # project -> its decision file

    def as_(self, token: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {token}"}

    def get(self, token: str, url: str, **params: Any) -> Any:
        return self.client.get(url, params=params, headers=self.as_(token))

    def post(self, token: str, url: str, body: Any, **kw: Any) -> Any:
        return self.client.post(url, json=body, headers={**self.as_(token), **kw.pop("headers", {})}, **kw)


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory, module_database_url: str) -> Iterator[World]:
    """Planted once for the module (a database of its own): the probes only add markers of their own."""
    settings = make_settings(tmp_path_factory.mktemp("scope"), module_database_url, tokens=_tokens())
    vault = Vault(settings.vault)
    vault.scaffold()
    arcs = {
        "api": write_arc(vault, [arc_session("s-api", "api", "org1/api", f"Build the {WORD} api pipeline", hours_ago=2)]),
        "web": write_arc(vault, [arc_session("s-web", "web", "org2/web", f"Build the {WORD} web pipeline", hours_ago=3)]),
    }
    with TestClient(create_app(settings)) as client:
        w = World(client, settings, arcs, {})
        for key, repo in (("api", "org1/api"), ("web", "org2/web")):
            for type_ in ("lesson", "decision"):
                r = w.post(ALL, "/marker", {"type": type_, "content": f"{WORD} {type_} of {key}", "attrs": {"repo": repo, "title": f"{key} {type_}"}})
                assert r.status_code == 201, r.text
                if type_ == "decision":
                    w.files[key] = r.json()["vault_path"]
        fleet = w.post(ALL, "/marker", {"type": "signal", "content": f"{WORD} fleet outage", "attrs": {"severity": "critical", "fleet": True}})
        assert fleet.status_code == 201, fleet.text
        result = brain(settings, "reindex")
        assert result.exit_code == 0, result.stderr
        result = brain(settings, "embed")
        assert result.exit_code == 0, result.stderr
        yield w


def _projects_of(feed: dict[str, Any]) -> set[str]:
    return {e["metadata"].get("project") for bucket in ("hot_arcs", "entries") for e in feed[bucket] if e["metadata"].get("scope") == "project"}


# -- probes: each route that returns memory, asked by the api token -------------------------------------


def _feed(w: World) -> None:
    own = w.get(API, "/feed")
    assert own.status_code == 200 and own.json()["scope"] == "project" and own.json()["project"]["repo"] == "org1/api"
    assert _projects_of(own.json()) == {"org1/api"} and "org2/web" not in own.text
    assert any(e["metadata"].get("scope") == "fleet" for e in own.json()["entries"])  # fleet signals still reach it
    assert w.get(API, "/feed", project="org2/web").status_code == 403
    assert w.get(API, "/feed", project="web").status_code == 403
    assert w.get(API, "/feed", project="api").status_code == 200
    assert w.get(WEB, "/feed").json()["project"]["repo"] == "org2/web"
    assert "hot_arcs" in w.get(ALL, "/feed").json() and "scope" not in w.get(ALL, "/feed").json()


def _projects(w: World) -> None:
    assert [p["id"] for p in w.get(API, "/projects").json()["projects"]] == ["org1/api"]
    assert {p["id"] for p in w.get(ALL, "/projects").json()["projects"]} == {"org1/api", "org2/web"}


def _vault_search(w: World) -> None:
    hits = w.get(API, "/vault/search", q=WORD).json()["results"]
    assert hits and all(w.files["web"] != h["path"] and w.arcs["web"] not in h["path"] for h in hits)
    assert w.arcs["api"] in " ".join(h["path"] for h in hits)
    assert w.get(API, "/vault/search", q=WORD, project="org2/web").status_code == 403
    everything = {h["path"] for h in w.get(ALL, "/vault/search", q=WORD, limit=50).json()["results"]}
    assert w.files["web"] in everything


def _vault_read(w: World) -> None:
    assert w.get(API, "/vault/read", path=w.files["api"]).status_code == 200
    assert w.get(API, "/vault/read", path=w.files["web"]).status_code == 404  # as a missing file answers
    assert w.get(API, "/vault/read", path="brain-feed/hot-arcs.md").status_code == 404
    assert w.get(ALL, "/vault/read", path=w.files["web"]).status_code == 200


def _vault_list(w: World) -> None:
    files = w.get(API, "/vault/list", prefix="", extensions="").json()["files"]
    assert w.files["api"] in files and w.files["web"] not in files
    assert all(not f.startswith("brain-feed/") for f in files)


def _arcs(w: World) -> None:
    assert w.get(API, f"/arcs/{w.arcs['api']}").status_code == 200
    assert w.get(API, f"/arcs/{w.arcs['web']}").status_code == 404


def _search(w: World) -> None:
    own = w.post(API, "/search", {"query": f"{WORD} pipeline", "limit": 20}).json()["results"]
    assert own and all(r["metadata"].get("project") in ("api", None) and "web" not in (r["metadata"].get("projects") or []) for r in own)
    assert w.post(API, "/search", {"query": WORD, "project": "org2/web"}).status_code == 403
    everyone = w.post(ALL, "/search", {"query": f"{WORD} pipeline", "limit": 20}).json()["results"]
    assert {"api", "web"} <= {r["metadata"].get("project") for r in everyone}


def _recall(w: World) -> None:
    asked = {"session_id": "scope-recall", "prompt": f"{WORD} pipeline"}
    assert w.post(API, "/recall", {**asked, "project": "org2/web"}).status_code == 403
    own = w.post(API, "/recall", {**asked, "project": "org1/api"})
    assert own.status_code == 200 and own.json()["project"] == "org1/api"
    assert w.post(ALL, "/recall", {**asked, "project": "org2/web"}).status_code == 200


def _by_key(w: World) -> None:
    assert w.get(API, f"/by-key/{w.arcs['api']}").status_code == 200
    assert w.get(API, f"/by-key/{w.arcs['web']}").status_code == 404
    assert w.get(ALL, f"/by-key/{w.arcs['web']}").status_code == 200


def _marker(w: World) -> None:
    other = w.post(API, "/marker", {"type": "lesson", "content": "not mine", "attrs": {"repo": "org2/web"}})
    assert other.status_code == 403
    squat = w.post(API, "/marker", {"type": "lesson", "content": "squat", "attrs": {"repo": "evil/web"}})
    assert squat.status_code == 403  # a restricted token creates no project outside its scope (ADR 0033)
    bare = w.post(API, "/marker", {"type": "lesson", "content": f"{WORD} unattributed lesson"})
    assert bare.status_code == 201 and bare.json()["project"] == "api"
    # Idempotency keys are namespaced by token: the same key from another token is another write.
    key = {"X-Idempotency-Key": "same-key"}
    first = w.post(API, "/marker", {"type": "lesson", "content": "api says"}, headers=key).json()
    second = w.post(WEB, "/marker", {"type": "lesson", "content": "web says"}, headers=key).json()
    assert first["project"] == "api" and second["project"] == "web" and "idempotent_replay" not in second
    assert first["idempotency_key"] == second["idempotency_key"] == "same-key"
    assert w.post(API, "/marker", {"type": "lesson", "content": "api says"}, headers=key).json()["idempotent_replay"] is True


def _sessions(w: World) -> None:
    assert w.post(API, "/sessions", {"session_id": "s-x", "repo": "org2/web", "cwd": ""}).status_code == 403
    assert w.post(API, "/sessions", {"session_id": "s-y", "repo": "org1/api", "cwd": ""}).status_code == 200


def _embed(w: World) -> None:
    assert w.post(API, "/embed", {"key": "k1", "content": "x", "metadata": {"repo": "org2/web"}}).status_code == 403
    assert w.post(API, "/index_artifact", {"key": "k1", "content": "x"}).status_code == 200  # its one project's
    assert w.post(API, "/embed", {"key": "k2", "content": "x", "metadata": {"repo": "org1/api"}}).status_code == 200
    assert w.post(API, "/prune", {"producer": "brain-arc"}).status_code == 403


def _entries(w: World) -> None:
    own, theirs = f"decision:{w.files['api']}", f"decision:{w.files['web']}"
    listed = w.get(API, "/entries").json()["entries"]
    assert own in {e["entry_id"] for e in listed} and all(e["project"] == "api" for e in listed)
    assert w.get(API, "/entries", project="org2/web").status_code == 403
    assert theirs in {e["entry_id"] for e in w.get(ALL, "/entries", limit=500).json()["entries"]}
    assert w.get(API, f"/entries/{own}").status_code == 200
    missing = w.get(API, "/entries/decision:left/decisions/ADR-9999-none.md")
    assert (w.get(API, f"/entries/{theirs}").status_code, w.get(API, f"/entries/{theirs}").json()) == (404, missing.json())
    assert w.get(ALL, f"/entries/{theirs}").status_code == 200


def _retract(w: World) -> None:
    theirs = f"decision:{w.files['web']}"
    refused = w.post(API, f"/entries/{theirs}/retract", {"reason": "not mine"})
    missing = w.post(API, "/entries/decision:left/decisions/ADR-9999-none.md/retract", {"reason": "nothing"})
    assert (refused.status_code, refused.json()) == (missing.status_code, missing.json()) == (404, {"detail": "entry not found"})
    mine = w.post(API, "/marker", {"type": "lesson", "content": "an api lesson to withdraw"}).json()["entry_id"]
    assert w.post(API, f"/entries/{quote(mine, safe='/:')}/retract", {"reason": "wrong"}).status_code == 200


def _expire(w: World) -> None:
    theirs = f"decision:{w.files['web']}"
    refused = w.post(API, f"/entries/{theirs}/expire", {"reason": "not mine"})
    missing = w.post(API, "/entries/decision:left/decisions/ADR-9999-none.md/expire", {"reason": "nothing"})
    assert (refused.status_code, refused.json()) == (missing.status_code, missing.json()) == (404, {"detail": "entry not found"})
    mine = w.post(API, "/marker", {"type": "lesson", "content": "an api lesson that no longer holds"}).json()["entry_id"]
    assert w.post(API, f"/entries/{quote(mine, safe='/:')}/expire", {"reason": "over"}).status_code == 200


def _pulls(w: World) -> None:
    body = {"project": "org2/web", "entry_ids": [], "text": "{}", "withheld_text": "{}"}
    assert w.post(API, "/pulls", body).status_code == 403  # another project's read is not its to record
    assert w.post(API, "/pulls", {**body, "project": "org1/api"}).json()["arm"] == "treatment"


def _ingest(w: World) -> None:
    own = w.client.post("/ingest", data={"message": "an api note on caching"}, headers=w.as_(API))
    assert own.status_code == 200 and own.json()["project"] == "org1/api", own.text
    assert "project: api" in (Path(w.settings.vault) / own.json()["obsidian_path"]).read_text()
    assert w.client.post("/ingest", data={"message": "not mine", "project": "org2/web"}, headers=w.as_(API)).status_code == 403
    name = f"refused{uuid.uuid4().hex[:8]}"
    refused = w.client.post("/ingest_with_files", data={"message": "x", "project": "org2/web"}, files={"files": (f"{name}.txt", b"x")}, headers=w.as_(API))
    assert refused.status_code == 403
    assert not list((Path(w.settings.vault) / "raw" / "inbox").glob(f"*{name}*"))  # refused before anything is written
    files = {"files": ("notes.txt", b"web notes", "text/plain")}
    mine = w.client.post("/ingest_with_files", data={"message": "web files"}, files=files, headers=w.as_(WEB))
    assert mine.status_code == 200 and mine.json()["project"] == "org2/web" and len(mine.json()["vault_paths"]) == 2
    assert w.client.post("/ingest", data={"message": "operator note", "project": "org2/web"}, headers=w.as_(ALL)).json()["project"] == "org2/web"


PROBES: dict[str, Callable[[World], None]] = {
    "GET /feed": _feed,
    "GET /projects": _projects,
    "GET /vault/search": _vault_search,
    "GET /vault/read": _vault_read,
    "GET /vault/list": _vault_list,
    "GET /arcs/{cluster_id}": _arcs,
    "POST /search": _search,
    "POST /recall": _recall,
    "GET /by-key/{key}": _by_key,
    "POST /marker": _marker,
    "POST /sessions": _sessions,
    "POST /embed": _embed,
    "POST /index_artifact": _embed,
    "POST /prune": _embed,
    "GET /entries": _entries,
    "GET /entries/{entry_id}": _entries,
    "POST /entries/{entry_id}/retract": _retract,
    "POST /entries/{entry_id}/expire": _expire,
    "POST /pulls": _pulls,
    "POST /ingest": _ingest,
    "POST /ingest_with_files": _ingest,
}
# Routes that return no project memory (counts, health, the fleet-wide alert, queue status), or whose probes need a tick.
NO_MEMORY = {
    "GET /health": "liveness, no auth",
    "GET /health/deep": "check results only",
    "GET /health/ready": "readiness, no memory",
    "GET /signal": "the fleet-wide amygdala alert, which reaches every project",
    "GET /metrics": "counts and timings",
    "POST /tick": "queues a tick; answers its id",
    # Probed by tests/api/test_scope_writes.py, whose worlds a tick changes:
    "GET /tick/{job_id}": "a tick's status and counts, cut to the token's projects",
    "POST /vault/write_inbox": "writes a note of the token's project",
    # The operator pages: probed with a bound token, in a browser and without, by tests/ui/.
    "GET /ui": "its projects' rows",
    "GET /ui/project": "its projects' pages; another's 404",
    "GET /ui/attribution": "a note only for a bound token",
    "GET /ui/keeper": "counts and timings, its projects' coverage",
    "GET /ui/signals": "its projects' and fleet-wide signals",
    "GET /ui/trial": "a note only for a bound token",
    "GET /ui/signin": "the sign-in form",
    "POST /ui/signin": "sets its own cookie",
    "POST /ui/signout": "clears its own cookie",
    "GET /ui/style.css": "a stylesheet",
}
MCP_SCOPED = {
    "kb_search",
    "kb_brief",
    "brain_search_arcs",
    "brain_get_arc",
    "brain_feed",
    "brain_marker",
    "brain_ingest",
    "brain_retract",
    "brain_expire",
    "brain_supersede",
}
MCP_NO_MEMORY = {"brain_tick": "queues a tick"}


def _scope_table() -> set[str]:
    """The first cell of every row of docs/security.md's scope table: ``METHOD /path`` or ``tool (MCP)``."""
    text = (REPO_ROOT / "docs" / "security.md").read_text(encoding="utf-8")
    table = text.split("## The scope table", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in table.splitlines() if line.startswith("| `")]
    return {re.match(r"\| `([^`]+)`", row).group(1) for row in rows}  # type: ignore[union-attr]


def _app_routes_and_tools(settings: Settings, app: Any = None) -> tuple[set[str], set[str]]:
    import anyio

    from brain_mcp.server import build_server

    schema = (app or create_app(settings)).openapi()
    routes = {f"{method.upper()} {path}" for path, item in schema["paths"].items() for method in item}
    server = build_server(settings, kernel=object())  # type: ignore[arg-type]
    return routes, {t.name for t in anyio.run(server.list_tools)}


def test_every_route_and_tool_is_in_the_scope_contract(tmp_path: Path) -> None:
    routes, names = _app_routes_and_tools(make_settings(tmp_path, None))
    assert routes == set(PROBES) | set(NO_MEMORY), "a route is missing from the scope contract (tests/api/test_scope.py)"
    assert names == MCP_SCOPED | set(MCP_NO_MEMORY), "an MCP tool is missing from the scope contract"
    table = _scope_table()
    missing = (routes | names) - table
    assert not missing, f"routes or MCP tools without a row in docs/security.md's scope table: {sorted(missing)}"
    assert table <= routes | names, f"rows naming no route or tool: {sorted(table - routes - names)}"


def test_a_new_route_without_a_row_in_the_scope_table_is_caught(tmp_path: Path) -> None:
    settings = make_settings(tmp_path, None)
    app = create_app(settings)

    @app.post("/notes")
    def notes() -> dict[str, str]:  # a writer someone forgot to put through the gate
        return {}

    routes, names = _app_routes_and_tools(settings, app)
    assert (routes | names) - _scope_table() == {"POST /notes"}


def test_restricted_tokens_reach_only_their_projects_over_http(world: World) -> None:
    for name, probe in PROBES.items():
        try:
            probe(world)
        except AssertionError as exc:
            raise AssertionError(f"{name}: {exc}") from exc


def test_restricted_tokens_reach_only_their_projects_over_mcp(world: World) -> None:
    k = tools.Kernel.open(world.settings)
    api, web = Principal("tapi", ("org1/api",)), Principal("tweb", ("org2/web",))
    try:
        found = tools.kb_search(k, WORD, limit=20, principal=api)
        refs = " ".join(r["ref"] for r in found["results"])
        assert found["count"] and world.arcs["api"] in refs and world.arcs["web"] not in refs and world.files["web"] not in refs
        assert "error" in tools.kb_search(k, WORD, project="org2/web", principal=api)
        arcs = tools.brain_search_arcs(k, f"{WORD} pipeline", principal=web)["arcs"]
        assert [a["cluster_id"] for a in arcs] == [world.arcs["web"]]
        assert "error" in tools.brain_get_arc(k, world.arcs["web"], principal=api)
        assert tools.brain_get_arc(k, world.arcs["api"], principal=api)["path"]  # its own arc, file and all
        assert tools.brain_feed(k, principal=api)["project"]["repo"] == "org1/api"
        assert "error" in tools.brain_feed(k, "org2/web", principal=api)
        assert "error" in tools.brain_marker(k, "lesson", "x", {"repo": "org2/web"}, principal=api)
        assert tools.brain_marker(k, "lesson", "mine", principal=web)["project"] == "web"
        assert tools.kb_brief(k, WORD, principal=api)["hits"]
        assert "outside" in tools.brain_ingest(k, "not mine", project="org2/web", principal=api)["error"]
        ingested = tools.brain_ingest(k, "an mcp note", principal=web)
        assert ingested["chunks_sent"] == 1 and ingested["results"][0]["detail"]["project"] == "org2/web"
        theirs = f"decision:{world.files['web']}"
        assert tools.brain_retract(k, theirs, "not mine", principal=api) == {"error": "entry not found"}
        assert tools.brain_expire(k, theirs, "not mine", principal=api) == {"error": "entry not found"}
        assert tools.brain_supersede(k, theirs, "decision", "mine now", principal=api) == {"error": "entry not found"}
        own = tools.brain_marker(k, "lesson", "an mcp lesson to replace", principal=web)["entry_id"]
        assert tools.brain_supersede(k, own, "lesson", "the mcp lesson, replaced", principal=web)["supersedes"] == [own]
        assert tools.brain_retract(k, own, "replaced anyway", principal=web)["entry"]["state"] == "retracted"
        assert tools.kb_search(k, WORD, limit=20)["count"] > found["count"]  # the operator sees both
    finally:
        k.close()


def test_a_token_bound_to_two_projects_names_one_for_its_feed(world: World) -> None:
    both = "tok-both-0123456789"
    settings = world.settings.with_overrides(tokens=[*_tokens(), f"{both}=org1/api|org2/web"])
    with TestClient(create_app(settings)) as client:
        h = {"Authorization": f"Bearer {both}"}
        assert client.get("/feed", headers=h).status_code == 403
        assert client.get("/feed", params={"project": "web"}, headers=h).status_code == 200
        assert {p["id"] for p in client.get("/projects", headers=h).json()["projects"]} == {"org1/api", "org2/web"}
        assert client.post("/marker", json={"type": "lesson", "content": "whose?"}, headers=h).status_code == 422
        assert client.get("/feed", headers={"Authorization": "Bearer nope"}).status_code == 401


@pytest.mark.parametrize("value", [",", " , ", "[]", "tok=", "tok=../etc", "sha256:abc", "=api"])
def test_token_settings_that_parse_to_no_token_are_refused(value: str) -> None:
    with pytest.raises(ValidationError) as err:
        Settings.explicit(tokens=value)
    assert "tok" not in str(err.value).replace("token", "")  # the message never repeats a token


def test_a_hashed_token_authenticates_and_unset_tokens_mean_auth_off(tmp_path: Path) -> None:
    from brain_kernel.auth import authenticate, parse_entries

    entries = parse_entries([f"sha256:{hashlib.sha256(b'hush').hexdigest()}=api", "plain"])
    found = authenticate("Bearer hush", entries)
    assert isinstance(found, Principal) and found.projects == ("api",) and "hush" not in found.name
    plain = authenticate("Bearer plain", entries)
    assert isinstance(plain, Principal) and plain.projects is None and plain.name != found.name
    assert authenticate("Bearer other", entries) == "invalid token" and authenticate(None, entries) == "missing bearer token"
    assert make_settings(tmp_path, None).token_entries == [] and "BRAIN_TOKENS" not in make_settings(tmp_path, None).to_environ()
