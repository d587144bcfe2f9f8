"""Vault read routes: /vault/read, /vault/list, /vault/search, /signal, /arcs/{id}, and GET /projects."""

from __future__ import annotations

import datetime as dt
import os
import re
import shutil

import pytest
from sqlalchemy.orm import Session

from brain_core.arcs import ArcSession, build_plan, render_arc
from brain_core.vault import frontmatter
from brain_kernel.index.rebuild import rebuild
from brain_kernel.settings import Settings
from brain_kernel.vault_store import Vault

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


@pytest.mark.parametrize("path", ["../outside.md", "left/../../x.md", "/../../etc/passwd"])
def test_read_outside_the_vault_is_400(client, path: str) -> None:
    r = client.get("/vault/read", params={"path": path})
    assert r.status_code == 400, r.text
    assert r.json() == {"detail": "path escapes vault root"}


def test_read_strips_a_leading_slash_and_resolves_under_the_vault(client, settings: Settings) -> None:
    Vault(settings.vault).write_atomic("left/notes/a.md", "hello\n")
    assert client.get("/vault/read", params={"path": "/left/notes/a.md"}).json()["content"] == "hello\n"
    absolute = client.get("/vault/read", params={"path": "/etc/passwd"})  # the vault's etc/passwd, which is absent
    assert absolute.status_code == 404 and absolute.json() == {"detail": "not found"}


def test_read_of_a_missing_file_is_404_a_folder_or_empty_path_400(client) -> None:
    missing = client.get("/vault/read", params={"path": "nope/missing.md"})
    assert missing.status_code == 404 and missing.json() == {"detail": "not found"}
    folder = client.get("/vault/read", params={"path": "clusters"})
    assert folder.status_code == 400 and folder.json() == {"detail": "path is not a file"}
    for empty in ("", "   "):
        r = client.get("/vault/read", params={"path": empty})
        assert r.status_code == 400 and r.json()["detail"] == "path is required", empty
    assert client.get("/vault/read").status_code == 422


def test_read_returns_up_to_five_mebibytes_by_default(client, settings: Settings) -> None:
    big = "x" * (2 * 1024 * 1024) + "\n"  # over the old 1 MiB default
    Vault(settings.vault).write_atomic("left/big.txt", big)
    whole = client.get("/vault/read", params={"path": "left/big.txt"}).json()
    assert whole["truncated"] is False and whole["size_bytes"] == len(big) and whole["content"] == big
    assert client.get("/vault/read", params={"path": "left/big.txt", "max_bytes": 5 * 1024 * 1024}).status_code == 200
    assert client.get("/vault/read", params={"path": "left/big.txt", "max_bytes": 5 * 1024 * 1024 + 1}).status_code == 422
    assert client.get("/vault/read", params={"path": "left/big.txt", "max_bytes": 0}).status_code == 422


def test_read_replaces_invalid_utf8_and_drops_a_character_cut_by_max_bytes(client, settings: Settings) -> None:
    vault = Vault(settings.vault)
    vault.path("left/bad.md").write_bytes(b"ok \xff end\n")
    assert client.get("/vault/read", params={"path": "left/bad.md"}).json()["content"] == "ok \ufffd end\n"
    vault.write_atomic("left/accent.md", "caf\u00e9!")  # the é is two bytes: 4 bytes cut it in half
    cut = client.get("/vault/read", params={"path": "left/accent.md", "max_bytes": 4}).json()
    assert cut["content"] == "caf" and cut["truncated"] is True and cut["size_bytes"] == 6


def test_list_returns_files_under_a_prefix(client, settings: Settings) -> None:
    vault = Vault(settings.vault)
    vault.write_atomic("left/reference/one.md", "1")
    vault.write_atomic("left/reference/sub/two.txt", "2")
    vault.write_atomic("left/reference/.hidden.md", "3")
    r = client.get("/vault/list", params={"prefix": "left/reference"}).json()
    assert r["prefix"] == "left/reference"
    assert r["files"] == ["left/reference/one.md", "left/reference/sub/two.txt"] and r["count"] == 2
    escape = client.get("/vault/list", params={"prefix": "../x"})
    assert escape.status_code == 400 and escape.json() == {"detail": "path escapes vault root"}


def test_list_filters_by_extension_and_skips_tool_folders(client, settings: Settings) -> None:
    vault = Vault(settings.vault)
    for rel in ("k/a.md", "k/b.MARKDOWN", "k/c.txt", "k/d.json", "k/e", "k/node_modules/x.md", "k/.git/y.md", "k/.trash/z.md"):
        vault.write_atomic(rel, "x")

    def listed(**params: str) -> list[str]:
        return client.get("/vault/list", params={"prefix": "k", **params}).json()["files"]

    assert listed() == ["k/a.md", "k/b.MARKDOWN", "k/c.txt"]  # the default: .md, .markdown, .txt
    assert listed(extensions="json") == ["k/d.json"]  # the dot is optional
    assert listed(extensions=" .MD , txt ") == ["k/a.md", "k/c.txt"]  # trimmed and lower-cased (upstream's defect fixed)
    assert listed(extensions="") == ["k/a.md", "k/b.MARKDOWN", "k/c.txt", "k/d.json", "k/e"]  # empty: every file
    # Named as the prefix, a dot folder or file is still no way in: nothing listed, nothing searched.
    vault.write_atomic("k/.git/config", "[remote] url = https://x:ghp_secretword@github.com/a/b\n")
    vault.write_atomic("k/.env.md", "secretword\n")
    for prefix in ("k/.git", "k/.git/config", "k/.git/y.md", "k/.trash", "k/.env.md"):
        assert client.get("/vault/list", params={"prefix": prefix, "extensions": ""}).json()["files"] == [], prefix
        assert client.get("/vault/search", params={"q": "secretword", "prefix": prefix}).json()["results"] == [], prefix
    assert client.get("/vault/list", params={"prefix": "k/node_modules"}).json()["files"] == ["k/node_modules/x.md"]  # named: walked, as upstream


def test_list_of_a_missing_prefix_a_file_and_the_limit(client, settings: Settings) -> None:
    vault = Vault(settings.vault)
    for rel in ("m/z.md", "m/a/y.md", "m/a/x.md", "m/b.md"):
        vault.write_atomic(rel, "x")
    assert client.get("/vault/list", params={"prefix": "m/nothing"}).json() == {"prefix": "m/nothing", "count": 0, "files": [], "truncated": False}
    assert client.get("/vault/list", params={"prefix": "/m/b.md"}).json() == {"prefix": "/m/b.md", "count": 1, "files": ["m/b.md"], "truncated": False}
    whole = client.get("/vault/list", params={"prefix": "m"}).json()
    assert whole["files"] == ["m/a/x.md", "m/a/y.md", "m/b.md", "m/z.md"] and whole["truncated"] is False
    cut = client.get("/vault/list", params={"prefix": "m", "limit": 3}).json()
    assert cut["count"] == 3 and cut["truncated"] is True and cut["files"] == sorted(cut["files"])
    assert set(cut["files"]) < set(whole["files"])
    assert client.get("/vault/list", params={"prefix": "m", "limit": 4}).json()["truncated"] is False
    assert client.get("/vault/list", params={"limit": 5000}).status_code == 200
    assert client.get("/vault/list", params={"limit": 5001}).status_code == 422
    assert client.get("/vault/list", params={"limit": 0}).status_code == 422


def test_search_finds_tokens_with_line_snippets(client, settings: Settings) -> None:
    vault = Vault(settings.vault)
    vault.write_atomic("left/a.md", "# Title\nthe Quokka jumps\nnothing here\nquokka again with wombat\n")
    vault.write_atomic("left/b.txt", "only quokka\n")
    vault.write_atomic("left/c.json", "quokka wombat\n")
    r = client.get("/vault/search", params={"q": "quokka wombat"}).json()
    assert r["query"] == "quokka wombat" and r["count"] == 2  # a line with any token is a hit (upstream)
    hit, partial = r["results"]
    assert hit["path"] == "left/a.md" and hit["score"] == 2 + 20  # two hit lines, every token present
    assert hit["snippets"] == [
        {"line": 2, "snippet": "# Title\nthe Quokka jumps\nnothing here\nquokka again with wombat", "text": "the Quokka jumps"},
        {"line": 4, "snippet": "the Quokka jumps\nnothing here\nquokka again with wombat", "text": "quokka again with wombat"},
    ]
    assert (partial["path"], partial["score"], partial["tokens_matched"], partial["tokens_total"]) == ("left/b.txt", 1, 1, 2)
    assert [h["path"] for h in client.get("/vault/search", params={"q": "quokka", "limit": 1}).json()["results"]] == ["left/a.md"]
    assert client.get("/vault/search", params={"q": "quokka", "prefix": "left/b.txt"}).json()["count"] == 1


def test_search_scores_hit_lines_filename_hits_and_the_all_tokens_bonus(client, settings: Settings) -> None:
    vault = Vault(settings.vault)
    vault.write_atomic("notes/ibex-guide.md", "nothing relevant\n")
    vault.write_atomic("notes/many.markdown", "ibex\n" * 40)
    vault.write_atomic("notes/both.txt", "an ibex\nand a yak\n")
    vault.write_atomic("notes/UPPER.MD", "IBEX shouting\n")
    vault.write_atomic("notes/skip.json", "ibex\n")
    vault.write_atomic("notes/node_modules/pkg/ibex.md", "ibex\n")
    vault.write_atomic("notes/.obsidian/ibex.md", "ibex\n")
    r = client.get("/vault/search", params={"q": "IBEX yak", "prefix": "notes"}).json()
    by_path = {h["path"]: h for h in r["results"]}
    assert set(by_path) == {"notes/ibex-guide.md", "notes/many.markdown", "notes/both.txt", "notes/UPPER.MD"}
    named = by_path["notes/ibex-guide.md"]  # a filename hit alone is enough
    assert named == {
        "path": "notes/ibex-guide.md",
        "score": 10,
        "match_count": 0,
        "tokens_matched": 0,
        "tokens_total": 2,
        "filename_match": True,
        "snippets": [],
        "title": "ibex-guide",
        "state": None,  # a note is no entry: no curation state (ADR 0064)
    }
    many = by_path["notes/many.markdown"]
    assert many["score"] == 30 and many["match_count"] == 40 and len(many["snippets"]) == 3  # capped at 30 lines, 3 snippets
    assert many["title"] == "many" and many["filename_match"] is False
    assert by_path["notes/both.txt"]["score"] == 2 + 20 and by_path["notes/both.txt"]["tokens_matched"] == 2
    assert by_path["notes/UPPER.MD"]["score"] == 1
    assert [h["path"] for h in r["results"]] == ["notes/many.markdown", "notes/both.txt", "notes/ibex-guide.md", "notes/UPPER.MD"]
    assert client.get("/vault/search", params={"q": "md", "prefix": "notes/UPPER.MD"}).json()["results"][0]["score"] == 10


def test_search_snippets_carry_context_lines_right_trimmed(client, settings: Settings) -> None:
    Vault(settings.vault).write_atomic("left/ctx.md", "one\ntwo   \nthree okapi\nfour\nfive\n")

    def snippet(n: int) -> list[dict]:
        return client.get("/vault/search", params={"q": "okapi", "context_lines": n}).json()["results"][0]["snippets"]

    assert snippet(0) == [{"line": 3, "snippet": "three okapi", "text": "three okapi"}]
    assert snippet(1)[0]["snippet"] == "two   \nthree okapi\nfour"
    assert snippet(10)[0]["snippet"] == "one\ntwo   \nthree okapi\nfour\nfive"
    Vault(settings.vault).write_atomic("left/tail.md", "okapi end   \n\n\n")
    tail = client.get("/vault/search", params={"q": "okapi", "prefix": "left/tail.md"}).json()["results"][0]
    assert tail["snippets"][0]["snippet"] == "okapi end"


def test_search_parameters_are_bounded(client) -> None:
    assert client.get("/vault/search", params={"q": "a", "limit": 200}).status_code == 200
    for params in ({"q": "a", "limit": 201}, {"q": "a", "limit": 0}, {"q": "a", "context_lines": 11}, {"q": ""}, {}):
        r = client.get("/vault/search", params=params)
        assert r.status_code == 422 and "detail" in r.json(), params
    escape = client.get("/vault/search", params={"q": "a", "prefix": "../x"})
    assert escape.status_code == 400 and escape.json() == {"detail": "path escapes vault root"}
    assert client.get("/vault/search", params={"q": "a", "prefix": "no/such/folder"}).json()["count"] == 0


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


def test_signal_reads_the_amygdala_alert_file_only(client, settings: Settings) -> None:
    """UPSTREAM.md 1.5: the alert file, never signal markers (one agent's warning is not a fleet banner)."""
    absent = client.get("/signal").json()
    assert absent == {
        "active": False,
        "severity": None,
        "title": None,
        "content": None,
        "hash": None,
        "last_updated": None,
        "vault_path": "brain-feed/amygdala-active.md",
    }
    _post(client, "signal", "disk almost full", title="Disk", severity="critical", repo="org1/api")
    assert client.get("/signal").json()["active"] is False  # a signal marker reaches signals.md, not /signal
    alert = settings.vault / "brain-feed" / "amygdala-active.md"
    text = "---\nid: amygdala-active\ntitle: AMYGDALA ALERT\nseverity: CRITICAL\n---\n\n## [NUCLEAR] prod is down\n"
    alert.write_text(text)
    r = client.get("/signal").json()
    import hashlib

    assert {k: r[k] for k in ("active", "severity", "title", "content", "hash", "vault_path")} == {
        "active": True,
        "severity": "critical",
        "title": "AMYGDALA ALERT",
        "content": "## [NUCLEAR] prod is down",
        "hash": hashlib.sha256(text.encode()).hexdigest()[:16],
        "vault_path": "brain-feed/amygdala-active.md",
    }
    assert r["last_updated"]
    alert.write_text("---\nseverity: resolved\n---\n")
    resolved = client.get("/signal").json()
    assert resolved["active"] is False and resolved["severity"] == "resolved" and resolved["content"] is None and resolved["title"] == "AMYGDALA ALERT"
    alert.write_text("---\nseverity: apocalyptic\ntitle:\n---\nbody\n")
    odd = client.get("/signal").json()
    assert (odd["active"], odd["severity"], odd["title"]) == (True, "critical", "")  # unknown severity: critical; empty title stays empty


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
    from tests.support.harness import make_settings

    s = make_settings(tmp_path, database_url, tokens=["secret"])
    Vault(s.vault).scaffold()
    with TestClient(create_app(s)) as c:
        for url in ("/feed", "/feed?project=x", "/projects", "/signal", "/vault/list", "/vault/read?path=a", "/vault/search?q=a", "/arcs/x"):
            assert c.get(url).status_code == 401, url
        assert c.post("/vault/write_inbox", data={"title": "t", "content": "c"}).status_code == 401
        assert not list((s.vault / "raw/inbox").glob("*.md"))
        assert c.get("/feed", headers={"Authorization": "Bearer secret"}).status_code == 200


def test_project_search_looks_only_inside_the_projects_own_entries_of_a_shared_log(client, settings: Settings) -> None:
    """A line of another project's lesson that contains one of P's titles is not P's (it used to match)."""
    mine = _post(client, "lesson", "Always pin the resolver version.", project="org1/api", title="Fix")
    theirs = _post(client, "lesson", "Fix the secretq rotation before Friday.", project="acme/web")
    assert mine["vault_path"] == theirs["vault_path"]  # one shared log for the day
    leaked = client.get("/vault/search", params={"q": "secretq", "project": "org1/api"}).json()
    assert leaked["count"] == 0, leaked
    own = client.get("/vault/search", params={"q": "resolver", "project": "org1/api", "context_lines": 10}).json()
    assert own["count"] == 1 and [s["text"] for s in own["results"][0]["snippets"]] == ["Always pin the resolver version."]
    assert "secretq" not in str(own) and "Friday" not in str(own)  # context stops at the other project's entry
    unfiltered = client.get("/vault/search", params={"q": "resolver", "context_lines": 10}).json()
    assert "secretq" in unfiltered["results"][0]["snippets"][0]["snippet"]  # without a project the context reaches it
    header = client.get("/vault/search", params={"q": "fix", "project": "org1/api"}).json()
    assert [s["text"] for s in header["results"][0]["snippets"]] == [
        next(
            line for line in (settings.vault / mine["vault_path"]).read_text().splitlines() if re.search(r"\] Fix( — .*)?$", line)
        )  # my entry's header, whatever the log appends after the title
    ]
    assert client.get("/vault/search", params={"q": "secretq", "project": "acme/web"}).json()["count"] == 1


def _inbox(settings: Settings) -> list[str]:
    return sorted(p.name for p in (settings.vault / "raw/inbox").iterdir() if not p.name.startswith("."))


def test_write_inbox_writes_a_note_with_quoted_frontmatter(client, settings: Settings, clock) -> None:
    clock.advance(400 * 86400)  # the file's date and `created` come from the app's clock
    title = "Disk: full\n--- really #1"
    r = client.post("/vault/write_inbox", data={"title": title, "content": "body text", "tags": "ops, disk,,", "artifact_refs": " r1 "})
    assert r.status_code == 200, r.text
    body = r.json()
    today = clock().date().isoformat()
    assert body["path"] == f"raw/inbox/{today}-disk-full-really-1.md"
    assert body["tags"] == ["ops", "disk"] and body["artifact_refs"] == ["r1"]
    text = (settings.vault / body["path"]).read_text()
    assert body["size_bytes"] == len(text.encode()) and text.startswith("---\n")
    doc = frontmatter.parse(text)
    assert list(doc.meta) == ["title", "created", "tags", "artifact_refs"]
    assert doc.meta["title"] == title  # quoted by the codec, so the colon and the fence cannot break the file
    created = dt.datetime.fromisoformat(doc.meta["created"])
    assert created.utcoffset() == dt.timedelta(0) and abs(created - clock()) < dt.timedelta(minutes=1)
    assert len(doc.meta["created"].split(".")[1].split("+")[0]) == 6  # microseconds
    assert doc.meta["tags"] == ["ops", "disk"] and doc.meta["artifact_refs"] == ["r1"]
    assert doc.body == "body text\n"
    plain = client.post("/vault/write_inbox", data={"title": "Plain", "content": "ends\n"}).json()
    assert plain["tags"] == [] and plain["artifact_refs"] == []
    doc = frontmatter.parse((settings.vault / plain["path"]).read_text())
    assert list(doc.meta) == ["title", "created"] and doc.body == "ends\n"


def test_write_inbox_never_reuses_a_name(client, settings: Settings) -> None:
    first = client.post("/vault/write_inbox", data={"title": "Same", "content": "one"}).json()
    second = client.post("/vault/write_inbox", data={"title": "Same", "content": "two"}).json()
    assert first["path"].endswith("-same.md")
    assert re.fullmatch(re.escape(first["path"][: -len(".md")]) + r"-[0-9a-f]{6}\.md", second["path"]), second["path"]
    assert frontmatter.parse((settings.vault / first["path"]).read_text()).body == "one\n"
    assert frontmatter.parse((settings.vault / second["path"]).read_text()).body == "two\n"


def test_write_inbox_slug_falls_back_to_note(client) -> None:
    assert client.post("/vault/write_inbox", data={"title": "!!! ???", "content": "x"}).json()["path"].endswith("-note.md")
    assert client.post("/vault/write_inbox", data={"title": "Untitled", "content": "x"}).json()["path"].endswith("-untitled.md")


@pytest.mark.parametrize(
    ("data", "status"),
    [
        ({"title": "   ", "content": "x"}, 400),
        ({"title": "t" * 201, "content": "x"}, 400),
        ({"title": "t", "content": "x" * 200_001}, 400),
        ({"title": "t", "content": "  \n "}, 400),
        ({"title": "t"}, 422),
        ({"content": "x"}, 422),
        ({"title": "", "content": "x"}, 422),  # FastAPI reads an empty form field as a missing one
    ],
)
def test_write_inbox_refuses_bad_input_and_writes_nothing(client, settings: Settings, data: dict, status: int) -> None:
    r = client.post("/vault/write_inbox", data=data)
    assert r.status_code == status, r.text
    assert "detail" in r.json()
    assert _inbox(settings) == []


def test_write_inbox_limits_are_inclusive(client) -> None:
    assert client.post("/vault/write_inbox", data={"title": "t" * 200, "content": "x" * 200_000}).status_code == 200


def test_write_inbox_answers_503_when_the_vault_cannot_take_it(client, settings: Settings) -> None:
    inbox = settings.vault / "raw/inbox"
    shutil.rmtree(inbox)
    inbox.write_text("a file where the inbox folder should be\n")
    r = client.post("/vault/write_inbox", data={"title": "Lost", "content": "x"})
    assert r.status_code == 503 and r.json()["detail"].startswith("vault write failed: ")
    assert "no free" not in r.json()["detail"]  # a broken inbox folder is not taken for a name clash
    assert sorted(p.name for p in (settings.vault / "raw").iterdir()) == ["backfill", "inbox"]  # the scaffold's: no temp file left behind


def test_an_arc_path_that_is_a_folder_answers_404_never_500(client, settings: Settings, db: Session) -> None:
    vault = Vault(settings.vault)
    (vault.path("clusters") / "2026-12-01" / "arc-folder0001.md").mkdir(parents=True)  # a hand-edited vault
    answer = client.get("/arcs/arc-folder0001")
    assert answer.status_code == 404 and answer.json() == {"detail": "arc arc-folder0001 not found"}
    rebuild(db, vault)
    db.commit()
    assert client.get("/arcs/arc-folder0001").status_code == 404
