"""POST /marker: each type written with its project, read back from the vault and the index."""

from __future__ import annotations

import datetime as dt
import os
import time
import uuid
from pathlib import Path

import pytest
from sqlalchemy import func, select, text
from sqlalchemy.orm import Session

from brain_core.identity import ProjectIdentity
from brain_core.vault import frontmatter
from brain_core.vault.records import decision_record, lesson_records, milestone_records, signal_record
from brain_kernel.db.models import Entry, IdempotencyKey, Project
from brain_kernel.identity.sessions import record_session
from brain_kernel.settings import Settings


def post(client, type_: str, content: str, key: str | None = None, **attrs: str):
    headers = {"X-Idempotency-Key": key} if key else {}
    return client.post("/marker", json={"type": type_, "content": content, "attrs": attrs}, headers=headers)


def entries(db: Session, kind: str | None = None) -> list[Entry]:
    db.expire_all()
    stmt = select(Entry).order_by(Entry.vault_path, Entry.id)
    if kind:
        stmt = stmt.where(Entry.kind == kind)
    return list(db.scalars(stmt))


def vault_snapshot(root: Path) -> dict[str, bytes]:
    """Every file under the vault (dot files included) and its bytes."""
    out = {}
    for dirpath, _, files in os.walk(root):
        for name in files:
            path = Path(dirpath) / name
            out[str(path.relative_to(root))] = path.read_bytes()
    return out


def index_snapshot(db: Session) -> dict[str, int]:
    db.expire_all()
    tables = ("entries", "projects", "idempotency_keys", "sessions", "learned_roots")
    return {t: db.execute(text(f"select count(*) from {t}")).scalar_one() for t in tables}


def test_lesson_with_a_project_is_appended_and_indexed(client, settings: Settings, db: Session) -> None:
    key = uuid.uuid5(uuid.NAMESPACE_URL, "lesson-1").hex
    r = post(
        client,
        "lesson",
        "Appends need flock.\nRead-modify-write loses entries.",
        key=key,
        project="the-cloud-clockwork/agentihooks",
        session_id="s-1",
        source="claude-code",
    )
    assert r.status_code == 201, r.text
    body = r.json()
    today = dt.datetime.now(dt.timezone.utc).date().isoformat()
    assert body["ok"] is True and body["marker_type"] == "lesson" and body["action"] == "appended"
    assert body["vault_path"] == f"left/reference/lessons-{today}.md"
    assert body["project"] == "agentihooks" and body["idempotency_key"] == key
    assert len(body["body_hash"]) == 16 and "idempotent_replay" not in body  # upstream's body hash
    text_ = (settings.vault / body["vault_path"]).read_text()
    assert body["written_bytes"] == len(text_.encode())
    assert text_.startswith(f"# Lessons {today}\n")
    assert "[project: agentihooks repo: the-cloud-clockwork/agentihooks]" in text_
    [row] = entries(db, "lesson")
    assert (row.project, row.repo, row.projects, row.content) == (
        "agentihooks",
        "the-cloud-clockwork/agentihooks",
        ["agentihooks"],
        "Appends need flock.\nRead-modify-write loses entries.",
    )
    assert row.title == "Appends need flock."
    assert row.meta["session_id"] == "s-1" and row.meta["source"] == "claude-code"
    [project] = db.scalars(select(Project)).all()
    assert (project.id, project.key, project.last_active is not None) == ("the-cloud-clockwork/agentihooks", "agentihooks", True)
    # the incremental row equals what a rebuild from the vault file gives
    [rebuilt] = lesson_records(text_, body["vault_path"])
    assert (rebuilt.id, rebuilt.project, rebuilt.content, rebuilt.occurred_at) == (row.id, row.project, row.content, row.occurred_at)


def test_signal_file_has_project_severity_and_scope_in_frontmatter(client, settings: Settings, db: Session) -> None:
    r = post(client, "signal", "Disk at 95% on the runner.", project="api", repo="org1/api", severity="HIGH", title="Disk: full\n---\nnot: frontmatter")
    assert r.status_code == 201, r.text
    path = r.json()["vault_path"]
    assert path.startswith("amygdala/") and path.endswith("-high-disk-full-not-frontmatter.md")
    doc = frontmatter.parse((settings.vault / path).read_text())
    assert doc.meta["title"] == "Disk: full\n---\nnot: frontmatter"
    assert (doc.meta["project"], doc.meta["repo"], doc.meta["severity"], doc.meta["scope"]) == ("api", "org1/api", "high", "project")
    [row] = entries(db, "signal")
    assert (row.project, row.repo, row.severity, row.scope, row.vault_path) == ("api", "org1/api", "high", "project", path)
    assert row.content == "Disk at 95% on the runner."


def test_fleet_signal_is_scoped_to_the_fleet(client, db: Session) -> None:
    r = post(client, "signal", "Upstream API rate limits everyone.", scope="fleet", project="api", repo="org1/api")
    assert r.status_code == 201, r.text
    [row] = entries(db, "signal")
    assert (row.scope, row.project) == ("fleet", "api")


def test_decision_gets_an_adr_number_status_and_project(client, settings: Settings, db: Session) -> None:
    r = post(client, "decision", "We use Postgres for idempotency keys.", project="org1/api", title="Idempotency in Postgres", status="proposed")
    assert r.status_code == 201, r.text
    path = r.json()["vault_path"]
    assert path == "left/decisions/ADR-0001-idempotency-in-postgres.md"
    doc = frontmatter.parse((settings.vault / path).read_text())
    assert (doc.meta["adr"], doc.meta["status"], doc.meta["project"], doc.meta["repo"]) == (1, "proposed", "api", "org1/api")
    [row] = entries(db, "decision")
    assert (row.project, row.repo, row.status, row.title, row.meta["adr"]) == ("api", "org1/api", "proposed", "Idempotency in Postgres", 1)
    assert row.content == "We use Postgres for idempotency keys."


def test_adr_numbering_continues_an_old_vault(client, settings: Settings) -> None:
    (settings.vault / "left/decisions/ADR-0041-old-choice.md").write_text("---\ntitle: Old\n---\nold\n")
    r = post(client, "decision", "Next one.", title="Next")
    assert r.json()["vault_path"] == "left/decisions/ADR-0042-next.md"
    r = post(client, "decision", "And the one after.", title="After/that: one")
    assert r.json()["vault_path"] == "left/decisions/ADR-0043-after-that-one.md"


def test_adr_numbers_count_every_adr_file_and_step_over_a_claim_never_written(client, settings: Settings) -> None:
    """The number is one past the highest ``ADR-NNNN-`` name in the folder (its names only, subfolders too, any case;
    not dot files or other suffixes); the claims are not listed: one left by a write that failed is stepped over."""
    decisions = settings.vault / "left/decisions"
    (decisions / "archive").mkdir(parents=True)
    (decisions / "adr-0007-lower-case.md").write_text("x\n")
    (decisions / "archive/ADR-0009-moved.md").write_text("x\n")
    (decisions / ".ADR-0050-hidden.md").write_text("x\n")
    (decisions / "ADR-0060-draft.txt").write_text("x\n")
    (decisions / ".claims").mkdir(exist_ok=True)
    (decisions / ".claims/0010").touch()  # claimed, its file never written
    (decisions / ".claims/0003").touch()  # below the highest file: never reached
    r = post(client, "decision", "Next.", title="Next")
    assert r.status_code == 201 and r.json()["vault_path"] == "left/decisions/ADR-0011-next.md"
    assert (decisions / ".claims/0011").exists()
    r = post(client, "decision", "Then.", title="Then")
    assert r.json()["vault_path"] == "left/decisions/ADR-0012-then.md"


def test_a_decision_removes_the_temp_files_killed_writers_left_and_keeps_a_fresh_one(client, settings: Settings) -> None:
    """A writer killed between its temp file and its link left ``.ADR-*.tmp`` for good: the next claim removes those
    older than the bound (ADR 0037) and keeps a younger one (a live writer's), other hidden files and the claims."""
    decisions = settings.vault / "left/decisions"
    (decisions / ".claims").mkdir(parents=True, exist_ok=True)
    for number in ("0001", "0002"):
        (decisions / ".claims" / number).touch()  # both writers claimed their number
    killed = decisions / ".ADR-0001-killed-writer.md.k1ll3d_x.tmp"
    live = decisions / ".ADR-0002-live-writer.md.l1ve_w8r.tmp"
    other = decisions / ".notes.tmp"  # hidden, but no name a vault write makes
    for path in (killed, live, other):
        path.write_text("---\ntitle: half\n---\n")
    long_ago = time.time() - 3600
    for path in (killed, other):
        os.utime(path, (long_ago, long_ago))
    r = post(client, "decision", "After the crash.", title="After")
    assert r.status_code == 201 and r.json()["vault_path"] == "left/decisions/ADR-0003-after.md", r.text
    assert not killed.exists()
    assert live.exists() and other.exists()
    assert sorted(p.name for p in (decisions / ".claims").iterdir()) == ["0001", "0002", "0003"]


def test_milestone_goes_to_the_project_blocks_file(client, settings: Settings, db: Session) -> None:
    r = post(client, "milestone", "Shipped project-scoped feed.", project="agentihooks")
    assert r.status_code == 201, r.text
    assert r.json()["vault_path"] == "left/projects/agentihooks/BLOCKS.md"
    text_ = (settings.vault / "left/projects/agentihooks/BLOCKS.md").read_text()
    assert "Shipped project-scoped feed." in text_
    [row] = entries(db, "milestone")
    assert (row.project, row.vault_path) == ("agentihooks", "left/projects/agentihooks/BLOCKS.md")
    assert [r.id for r in milestone_records(text_, row.vault_path)] == [row.id]


def test_milestone_without_a_project_goes_to_the_daily_note(client, settings: Settings, db: Session) -> None:
    r = post(client, "milestone", "Nobody knows where this belongs.", source="codex")
    today = dt.datetime.now(dt.timezone.utc).date().isoformat()
    assert r.status_code == 201 and r.json()["vault_path"] == f"daily/{today}.md" and r.json()["project"] is None
    [row] = entries(db, "milestone")
    assert row.project is None and row.projects == []
    assert not list((settings.vault / "left/projects").iterdir())


def test_a_milestone_routed_by_its_source_to_a_project_folder_stays_unattributed(client, settings: Settings, db: Session) -> None:
    """Upstream's routing (UPSTREAM.md 1.6) puts it in left/projects/<slug(source)>/BLOCKS.md; the folder names its source, not a project."""
    (settings.vault / "left/projects/claude-code").mkdir(parents=True)
    r = post(client, "milestone", "Released the hooks.", source="claude-code")
    assert r.status_code == 201 and r.json()["vault_path"] == "left/projects/claude-code/BLOCKS.md" and r.json()["project"] is None
    [row] = entries(db, "milestone")
    assert row.project is None and row.projects == []
    assert "claude-code" not in [p["key"] for p in client.get("/projects").json()["projects"]]
    attributed = post(client, "milestone", "Shipped the feed.", project="claude-code")  # a real project there still counts
    assert attributed.json()["project"] == "claude-code"
    assert [p["key"] for p in client.get("/projects").json()["projects"]] == ["claude-code"]


def test_marker_takes_its_project_from_the_session_index(client, db: Session) -> None:
    record_session(db, "sess-42", ProjectIdentity("billing", "acme/billing", "/src/billing", None, "/src/billing", "git"))
    db.commit()
    r = post(client, "lesson", "Session index wins over nothing.", session_id="sess-42")
    assert r.json()["project"] == "billing"
    [row] = entries(db, "lesson")
    assert (row.project, row.repo, row.meta["project_source"]) == ("billing", "acme/billing", "session")


def test_marker_resolves_its_cwd_through_the_layout_patterns(client, settings: Settings, db: Session) -> None:
    cwd = settings.user_home / "scratchpad" / "webshop" / "task-7"
    r = post(client, "lesson", "Scratch folders name their project.", cwd=str(cwd))
    assert r.json()["project"] == "webshop"
    [row] = entries(db, "lesson")
    assert (row.project, row.meta["project_source"]) == ("webshop", "layout")


def test_marker_with_no_evidence_stays_unattributed(client, settings: Settings, db: Session) -> None:
    r = post(client, "lesson", "No idea where I am.", cwd=str(settings.user_home / "random-folder"), session_id="unknown")
    assert r.status_code == 201 and r.json()["project"] is None
    [row] = entries(db, "lesson")
    assert row.project is None
    assert "[unattributed]" in (settings.vault / r.json()["vault_path"]).read_text()
    assert db.scalar(select(func.count()).select_from(Project)) == 0


def test_replay_returns_the_original_and_writes_nothing(client, settings: Settings, db: Session) -> None:
    key = uuid.uuid5(uuid.NAMESPACE_URL, "replay").hex
    first = post(client, "lesson", "Only once.", key=key, project="api")
    before = vault_snapshot(settings.vault)
    again = post(client, "lesson", "Only once.", key=key, project="api")
    assert again.status_code == 201
    assert again.json() == {**first.json(), "idempotent_replay": True}
    assert vault_snapshot(settings.vault) == before
    assert len(entries(db, "lesson")) == 1


def test_same_key_with_another_body_replays_the_original_and_says_so(client, settings: Settings, db: Session) -> None:
    """A refusal would wedge the client's outbox (it stops at the first refused POST): the original stands."""
    key = uuid.uuid5(uuid.NAMESPACE_URL, "conflict").hex
    first = post(client, "lesson", "First body.", key=key)
    assert first.status_code == 201
    before = vault_snapshot(settings.vault)
    r = post(client, "lesson", "Second body.", key=key)
    assert r.status_code == 201 and r.json() == {**first.json(), "idempotent_replay": True, "body_mismatch": True}
    assert vault_snapshot(settings.vault) == before


def test_an_expired_key_is_accepted_again(client, db: Session) -> None:
    key = uuid.uuid5(uuid.NAMESPACE_URL, "expired").hex
    assert post(client, "lesson", "Old.", key=key).status_code == 201
    db.execute(text("update idempotency_keys set expires_at = now() - interval '1 second'"))
    db.commit()
    r = post(client, "lesson", "New body, same key.", key=key)
    assert r.status_code == 201 and "idempotent_replay" not in r.json()
    assert len(entries(db, "lesson")) == 2
    db.expire_all()
    [stored] = db.scalars(select(IdempotencyKey)).all()
    assert stored.expires_at > dt.datetime.now(dt.timezone.utc)


def test_idempotency_keys_expire_after_the_configured_ttl(tmp_path: Path, database_url: str, db: Session) -> None:
    from fastapi.testclient import TestClient

    from brain_api.app import create_app
    from brain_kernel.vault_store import Vault
    from tests.support.harness import make_settings

    s = make_settings(tmp_path, database_url, idempotency_ttl_seconds=120)
    Vault(s.vault).scaffold()
    with TestClient(create_app(s)) as c:
        assert post(c, "lesson", "ttl", key="k-ttl").status_code == 201
    [stored] = db.scalars(select(IdempotencyKey)).all()
    assert dt.timedelta(seconds=100) < stored.expires_at - stored.created_at <= dt.timedelta(seconds=121)


def test_signal_names_that_collide_get_a_suffix(client, settings: Settings) -> None:
    paths = [post(client, "signal", f"same second {n}", title="Same title", severity="low").json()["vault_path"] for n in range(3)]
    assert len(set(paths)) == 3
    for path in paths:
        assert signal_record((settings.vault / path).read_text(), path).title == "Same title"


def test_titles_with_slashes_and_unicode_are_slugified(client, settings: Settings) -> None:
    r = post(client, "decision", "x", title="Use ../../etc/passwd: ünïcödé & co")
    path = r.json()["vault_path"]
    assert path == "left/decisions/ADR-0001-use-etc-passwd-unicode-co.md"
    assert decision_record((settings.vault / path).read_text(), path).title == "Use ../../etc/passwd: ünïcödé & co"


def test_content_that_looks_like_a_header_stays_in_its_entry(client, settings: Settings, db: Session) -> None:
    content = "before\n## 12:00 [project: evil] fake entry\n\\## already escaped\nafter"
    r = post(client, "lesson", content, project="api")
    rows = entries(db, "lesson")
    assert len(rows) == 1 and rows[0].content == content and rows[0].project == "api"
    assert [x.content for x in lesson_records((settings.vault / r.json()["vault_path"]).read_text(), "p")] == [content]


def test_auth_is_required_when_tokens_are_configured(tmp_path: Path, database_url: str) -> None:
    from fastapi.testclient import TestClient

    from brain_api.app import create_app
    from brain_kernel.vault_store import Vault
    from tests.support.harness import make_settings

    s = make_settings(tmp_path, database_url, tokens=["sekrit"])
    Vault(s.vault).scaffold()
    with TestClient(create_app(s)) as c:
        assert post(c, "lesson", "x").status_code == 401
        ok = c.post("/marker", json={"type": "lesson", "content": "x"}, headers={"Authorization": "Bearer sekrit"})
        assert ok.status_code == 201


BAD_BODIES = {
    "unknown type": {"type": "rumour", "content": "x"},
    "type not a string": {"type": 3, "content": "x"},
    "missing content": {"type": "lesson"},
    "empty content": {"type": "lesson", "content": ""},
    "blank content": {"type": "lesson", "content": "  \n\t\n"},
    "oversized content": {"type": "lesson", "content": "x" * 4097},
    "content not a string": {"type": "lesson", "content": ["x"]},
    "attrs a list": {"type": "lesson", "content": "x", "attrs": ["project", "api"]},
    "attrs a string": {"type": "lesson", "content": "x", "attrs": "project=api"},
    "NUL in type": {"type": "lesson\x00", "content": "x"},
}

# Upstream accepted these (its attrs are free); the kernel does too, uses what is usable and never guesses.
LENIENT_BODIES: dict[str, tuple[dict, str | None]] = {
    "attr value a number": ({"type": "lesson", "content": "x", "attrs": {"project": "api", "n": 3}}, "api"),
    "attr value an object": ({"type": "lesson", "content": "x", "attrs": {"title": {"a": 1}}}, None),
    "attr value null": ({"type": "lesson", "content": "x", "attrs": {"project": None}}, None),
    "project with dot-dot": ({"type": "milestone", "content": "x", "attrs": {"project": ".."}}, None),
    "project path traversal": ({"type": "milestone", "content": "x", "attrs": {"project": "../../etc"}}, None),
    "project absolute path": ({"type": "milestone", "content": "x", "attrs": {"project": "/etc/passwd"}}, None),
    "project control chars": ({"type": "milestone", "content": "x", "attrs": {"project": "api\x1b[31m"}}, None),
    "project newline": ({"type": "lesson", "content": "x", "attrs": {"project": "api\nrepo: x"}}, None),
    "repo dot-dot segment": ({"type": "signal", "content": "x", "attrs": {"repo": "org/../api"}}, None),
    "repo absolute": ({"type": "signal", "content": "x", "attrs": {"repo": "/srv/git/api"}}, None),
    "repo one segment": ({"type": "signal", "content": "x", "attrs": {"repo": "api"}}, None),
    "project and repo disagree": ({"type": "lesson", "content": "x", "attrs": {"project": "web", "repo": "org/api"}}, "api"),
    "worktree with slash": ({"type": "lesson", "content": "x", "attrs": {"project": "api", "worktree": "a/../b"}}, "api"),
    "NUL in title": ({"type": "signal", "content": "x", "attrs": {"title": "a\x00b"}}, None),
    "NUL in attr key": ({"type": "lesson", "content": "x", "attrs": {"a\x00": "b"}}, None),
    "NUL in session id": ({"type": "lesson", "content": "x", "attrs": {"session_id": "s\x00"}}, None),
    "relative cwd": ({"type": "lesson", "content": "x", "attrs": {"cwd": "work/api"}}, None),
    "free severity": ({"type": "signal", "content": "x", "attrs": {"severity": "very bad!"}}, None),
    "free scope label": ({"type": "milestone", "content": "x", "attrs": {"scope": "kb-router"}}, None),
    "free status": ({"type": "decision", "content": "x", "attrs": {"status": "maybe / later"}}, None),
    "oversized title": ({"type": "decision", "content": "x", "attrs": {"title": "t" * 5000}}, None),
    # Past the input limits the attrs the kernel reads are still read (upstream answered 201 to these too).
    "NUL in content": ({"type": "lesson", "content": "a\x00b"}, None),
    "100 attrs": ({"type": "lesson", "content": "x", "attrs": {"project": "api", **{f"k{i}": i for i in range(100)}}}, "api"),
    "attrs over 16 kB": ({"type": "lesson", "content": "x", "attrs": {"project": "api", "notes": "y" * 20_000}}, "api"),
    "an attr key of 129": ({"type": "lesson", "content": "x", "attrs": {"repo": "org/api", "k" * 129: 1}}, "api"),
}


@pytest.mark.parametrize("case", sorted(LENIENT_BODIES))
def test_upstream_payloads_are_accepted_and_unusable_attrs_ignored(case: str, client, settings: Settings, db: Session) -> None:
    body, project = LENIENT_BODIES[case]
    r = client.post("/marker", json=body)
    assert r.status_code == 201, (case, r.text)
    assert r.json()["project"] == project, case
    written = settings.vault / r.json()["vault_path"]
    assert written.resolve().is_relative_to(settings.vault.resolve()) and written.is_file()
    assert not (settings.vault.parent / "etc").exists()


@pytest.mark.parametrize("case", sorted(BAD_BODIES))
def test_bad_input_is_refused_and_writes_nothing(case: str, client, settings: Settings, db: Session) -> None:
    vault_before, index_before = vault_snapshot(settings.vault), index_snapshot(db)
    r = client.post("/marker", json=BAD_BODIES[case], headers={"X-Idempotency-Key": uuid.uuid4().hex})
    assert r.status_code in (400, 422), (case, r.status_code, r.text)
    assert r.json()["detail"], case
    assert vault_snapshot(settings.vault) == vault_before, case
    assert index_snapshot(db) == index_before, case


@pytest.mark.parametrize("raw", [b"not json", b"[1, 2]", b'"lesson"', b""])
def test_malformed_json_is_refused(raw: bytes, client, settings: Settings, db: Session) -> None:
    vault_before, index_before = vault_snapshot(settings.vault), index_snapshot(db)
    r = client.post("/marker", content=raw, headers={"Content-Type": "application/json"})
    assert r.status_code in (400, 422), r.text
    assert vault_snapshot(settings.vault) == vault_before and index_snapshot(db) == index_before


@pytest.mark.parametrize("key", ["has space", "x" * 200, "ключ", "../etc", "   "])
def test_any_idempotency_key_dedupes_and_none_is_refused(key: str, client, settings: Settings, db: Session) -> None:
    first = client.post("/marker", json={"type": "lesson", "content": f"keyed {key!r}"}, headers={"X-Idempotency-Key": key.encode("utf-8")})
    assert first.status_code == 201, first.text
    again = client.post("/marker", json={"type": "lesson", "content": f"keyed {key!r}"}, headers={"X-Idempotency-Key": key.encode("utf-8")})
    assert again.status_code == 201 and again.json()["idempotent_replay"] is True
    assert len(entries(db, "lesson")) == 1


def test_without_a_header_the_body_hash_is_the_key(client, settings: Settings, db: Session) -> None:
    body = {"type": " Lesson ", "content": "Dedupe on the body.", "attrs": {"session_id": "s-1", "source": "claude-code"}}
    first, again = client.post("/marker", json=body), client.post("/marker", json=body)
    assert first.status_code == again.status_code == 201
    assert first.json()["idempotency_key"] == first.json()["body_hash"] and again.json()["idempotent_replay"] is True
    import hashlib
    import json

    expected = hashlib.sha256(json.dumps({"type": "lesson", "content": body["content"], "attrs": body["attrs"]}, sort_keys=True).encode()).hexdigest()[:16]
    assert first.json()["body_hash"] == expected  # upstream's derivation, byte for byte
    assert len(entries(db, "lesson")) == 1


def test_project_slug_is_normalised(client, db: Session) -> None:
    r = post(client, "lesson", "x", project="  The-Cloud-Clockwork/AgentiHooks.git ")
    assert r.status_code == 201 and r.json()["project"] == "agentihooks"
    [row] = entries(db, "lesson")
    assert row.repo == "the-cloud-clockwork/agentihooks"


def test_content_limit_comes_from_settings(tmp_path: Path, database_url: str) -> None:
    from fastapi.testclient import TestClient

    from brain_api.app import create_app
    from brain_kernel.vault_store import Vault
    from tests.support.harness import make_settings

    s = make_settings(tmp_path, database_url, marker_max_chars=10)
    Vault(s.vault).scaffold()
    with TestClient(create_app(s)) as c:
        assert post(c, "lesson", "x" * 10).status_code == 201
        r = post(c, "lesson", "x" * 11)
        assert r.status_code == 400 and "10-character" in r.json()["detail"]


def test_purge_removes_only_expired_keys(db: Session) -> None:
    from brain_kernel import idempotency

    now = dt.datetime.now(dt.timezone.utc)
    for key in ("old-1", "old-2", "live"):
        assert idempotency.reserve(db, key, scope="marker", body_hash="h", ttl_seconds=60, at=now) is True
    db.execute(text("update idempotency_keys set expires_at = now() - interval '1 minute' where key like 'old-%'"))
    assert idempotency.purge_expired(db) == 2
    assert db.scalars(select(IdempotencyKey.key)).all() == ["live"]
    assert idempotency.reserve(db, "live", scope="marker", body_hash="other", ttl_seconds=60, at=now) is False
    assert db.scalar(select(IdempotencyKey.state).where(IdempotencyKey.key == "live")) == "pending"


def test_a_full_reindex_gives_the_rows_the_requests_wrote(client, settings: Settings, db: Session) -> None:
    from brain_kernel.index.rebuild import rebuild
    from brain_kernel.vault_store import Vault

    post(client, "lesson", "lesson body", project="org1/api", session_id="s1", source="codex")
    post(client, "lesson", "unattributed lesson")
    post(client, "milestone", "block done", project="api")
    post(client, "milestone", "daily block")
    post(client, "signal", "fleet alarm", scope="fleet", severity="critical", title="Fleet: alarm\n---")
    post(client, "decision", "we decided", project="org1/api", title="Decide/this", status="proposed")
    columns = ("id", "kind", "title", "content", "project", "projects", "repo", "scope", "status", "severity", "vault_path", "occurred_at", "meta")

    def rows() -> list[tuple]:
        return [tuple(getattr(e, c) for c in columns) for e in entries(db)]

    written = rows()
    assert len(written) == 6
    rebuild(db, Vault(settings.vault))
    db.commit()
    assert rows() == written


def test_a_vault_that_cannot_be_written_is_a_503_and_the_retry_succeeds(client, settings: Settings, db: Session) -> None:
    """UPSTREAM 1.6: OSError answers 503 `vault write failed`; the key stays pending, so the retry writes once."""
    logs = settings.vault / "left" / "reference"
    logs.rmdir()
    logs.write_text("not a folder")  # the day's log cannot be created under a file
    r = post(client, "lesson", "Try again later.", key="k-503")
    assert r.status_code == 503 and r.json()["detail"].startswith("vault write failed")
    logs.unlink()
    again = post(client, "lesson", "Try again later.", key="k-503")
    assert again.status_code == 201 and "idempotent_replay" not in again.json()
    assert [e.content for e in entries(db, "lesson")] == ["Try again later."]
