"""brain reindex: the vault alone rebuilds the index; incremental refreshes give the same rows."""

from __future__ import annotations

import datetime as dt
import os
from pathlib import Path

import pytest
from sqlalchemy import select, text
from sqlalchemy.orm import Session
from typer.testing import CliRunner

from brain_cli.cli import app
from brain_core.arcs import ArcSession, build_plan, render_arc
from brain_core.vault import frontmatter
from brain_kernel.db.models import Entry, Project
from brain_kernel.index import rebuild as rebuild_module
from brain_kernel.index.changes import sync_changes
from brain_kernel.index.entries import entry_rows
from brain_kernel.index.rebuild import rebuild
from brain_kernel.search import search_docs
from brain_kernel.settings import Settings
from brain_kernel.vault_store import Vault
from tests.support.progress_recorder import ProgressRecorder

NOW = dt.datetime.now(dt.timezone.utc)


def _arc(vault: Vault, sid: str, key: str | None, repo: str | None, prompt: str) -> str:
    start = NOW - dt.timedelta(hours=3)
    plan = build_plan(
        [
            ArcSession(
                session_id=sid,
                project=key,
                repo=repo,
                project_source="git" if key else "unresolved",
                cwd="/h/x",
                start=start,
                end=start + dt.timedelta(minutes=20),
                first_user_prompt=prompt,
            )
        ]
    )
    vault.write_atomic(plan.vault_path, render_arc(plan))
    return plan.vault_path


def _post(client, type_: str, content: str, **attrs: str) -> str:
    r = client.post("/marker", json={"type": type_, "content": content, "attrs": attrs})
    assert r.status_code == 201, r.text
    return r.json()["vault_path"]


def test_incremental_refresh_after_writes_equals_a_full_rebuild(client, settings: Settings, db: Session) -> None:
    vault = Vault(settings.vault)
    for i in range(3):
        _post(client, "lesson", f"lesson {i} about caching", repo="org1/api")
    _post(client, "lesson", "an unattributed lesson")
    _post(client, "decision", "use postgres", title="Use Postgres", repo="org1/api")
    _post(client, "signal", "disk is filling", title="Disk", severity="alert", repo="org2/api")
    _post(client, "signal", "fleet-wide freeze", title="Freeze", scope="fleet")
    _post(client, "milestone", "v1 shipped", repo="org1/api")
    _post(client, "milestone", "something happened")

    a = _arc(vault, "s-a", "api", "org1/api", "Build the parser for tokens")
    b = _arc(vault, "s-b", "web", "acme/web", "Polish the landing page copy")
    sync_changes(db, vault, [a, b])
    db.commit()

    # A keeper-style targeted edit, then a merge that tombstones b into a.
    vault.write_atomic(a, frontmatter.update(vault.read_text(a), {"heat": 7.5, "status": "active", "summary": "Parser work"}))
    sync_changes(db, vault, [a])
    stone = b.replace(".md", ".merged.md")
    vault.write_atomic(stone, frontmatter.update(vault.read_text(b), {"merged_into": a.rsplit("/", 1)[-1][:-3]}))
    os.remove(vault.path(b))
    vault.write_atomic(a, frontmatter.update(vault.read_text(a), {"projects": ["api", "web"]}))
    sync_changes(db, vault, [a, b, stone])
    vault.write_atomic("brain-feed/inject/x.md", "---\nid: x\ntitle: X\ntarget: all\n---\nhello\n")
    vault.write_atomic("brain-feed/projects/org1/api/intent.md", "---\nid: intent-org1-api\nproject: api\nrepo: org1/api\n---\nShip it.\n")
    sync_changes(db, vault, ["brain-feed/inject/x.md", "brain-feed/projects/org1/api/intent.md"])
    db.commit()
    incremental = entry_rows(db)

    summary = rebuild(db, vault)
    db.commit()
    full = entry_rows(db)

    assert incremental == full
    assert summary.entries == len(full)
    kinds = sorted({row["kind"] for row in full})
    assert kinds == ["arc", "decision", "inject", "intent", "lesson", "milestone", "signal"]
    assert not [row for row in full if row["vault_path"].endswith(".merged.md") or row["vault_path"] == b]
    merged = next(row for row in full if row["vault_path"] == a)
    assert merged["projects"] == ["api", "web"] and merged["heat"] == 7.5


def test_tombstoned_arcs_are_not_live_entries(settings: Settings, db: Session) -> None:
    vault = Vault(settings.vault)
    live = _arc(vault, "live", "api", "org1/api", "Keep this arc alive please")
    gone = _arc(vault, "gone", "api", "org1/api", "This arc was merged away")
    vault.write_atomic(gone.replace(".md", ".merged.md"), frontmatter.update(vault.read_text(gone), {"merged_into": "x"}))
    os.remove(vault.path(gone))
    rebuild(db, vault)
    db.commit()
    assert [e.vault_path for e in db.scalars(select(Entry).where(Entry.kind == "arc"))] == [live]


def test_reindex_records_projects_from_the_vault(settings: Settings, db: Session) -> None:
    vault = Vault(settings.vault)
    _arc(vault, "p1", "api", "org1/api", "Work on the first api")
    _arc(vault, "p2", "api", "org2/api", "Work on the second api")
    _arc(vault, "p3", "solo", None, "Work on a repo-less tool")
    rebuild(db, vault)
    db.commit()
    assert sorted((p.id, p.key, p.repo) for p in db.scalars(select(Project))) == [
        ("org1/api", "api", "org1/api"),
        ("org2/api", "api", "org2/api"),
        ("solo", "solo", None),
    ]


def test_reindex_command_prints_a_json_summary_and_is_safe_to_rerun(settings: Settings, db: Session) -> None:
    vault = Vault(settings.vault)
    _arc(vault, "c1", "api", "org1/api", "Run the reindex command twice")
    args = ["reindex", "--vault", str(settings.vault), "--database-url", str(settings.database_url)]
    runner = CliRunner()
    first = runner.invoke(app, args)
    second = runner.invoke(app, args)
    assert first.exit_code == 0 and second.exit_code == 0, first.output + second.output
    import json

    one, two = json.loads(first.stdout.strip().splitlines()[-1]), json.loads(second.stdout.strip().splitlines()[-1])
    assert one["entries"] == two["entries"] == 1 and two["removed"] == 0  # removed: rows the vault no longer holds
    assert one["by_kind"] == {"arc": 1}
    assert first.stderr.strip().splitlines()[-1] == f"reindex: {one['files']}/{one['files']}"  # progress on stderr


_VERSIONS = {  # each table a rebuild writes, by its key: a rewritten row moves (its ctid changes)
    "entries": "id",
    "projects": "id",
    "project_counts": "id::text",
    "vault_file_stats": "path",
    "vault_documents": "path",
    "vault_segments": "path || ':' || first_line",
}


def _row_versions(db: Session) -> dict[str, dict[str, str]]:
    from sqlalchemy import text

    return {table: dict(db.execute(text(f"SELECT {key}, ctid::text FROM {table}")).all()) for table, key in _VERSIONS.items()}


@pytest.mark.parametrize("apart", [False, True], ids=["in-process", "worker"])
def test_a_rebuild_of_an_unchanged_vault_rewrites_no_row(client, settings: Settings, db: Session, monkeypatch: pytest.MonkeyPatch, apart: bool) -> None:
    """A rerun of ``brain reindex`` writes nothing when nothing changed (no dead tuples), and only what a change moves;
    with the segments made by a worker too (which a rerun gives only the documents the index does not hold)."""
    if apart:
        monkeypatch.setattr(rebuild_module, "PREPARE_APART_BYTES", 0)
    vault = Vault(settings.vault)
    _post(client, "lesson", "a lesson about caching", repo="org1/api")
    _post(client, "decision", "use postgres", title="Use Postgres", repo="org1/api")
    arc = _arc(vault, "u1", "api", "org1/api", "Rebuild an unchanged vault twice")
    _arc(vault, "u2", "web", "acme/web", "Keep the landing page fast")
    vault.write_atomic("notes/plain.md", "a note that holds no entry\n")  # searched only
    rebuild(db, vault)  # the search index's first load: each document inserted once, none updated
    assert db.execute(text("SELECT n_tup_ins, n_tup_upd FROM pg_stat_xact_user_tables WHERE relname = 'vault_documents'")).one() == (5, 0)
    db.commit()
    before = _row_versions(db)
    assert all(before.values()), before  # every table holds rows to watch

    rebuild(db, vault)
    db.commit()
    assert _row_versions(db) == before

    # Touched without a change: the stamp moves in the file stats and the search index, nothing else.
    os.utime(vault.path("notes/plain.md"), ns=(10**18, 10**18))
    vault.write_atomic(arc, frontmatter.update(vault.read_text(arc), {"summary": "Rebuilt twice"}))
    rebuild(db, vault)
    db.commit()
    after = _row_versions(db)
    moved = {table: sorted(k for k, v in rows.items() if before[table].get(k) != v) for table, rows in after.items()}
    assert moved["vault_documents"] == sorted([arc, "notes/plain.md"])
    assert moved["vault_file_stats"] == [arc]  # notes have no file stats: they hold no entry
    assert [k.split(":")[0] for k in moved["vault_segments"]] == [arc]  # the touched note's text is the same
    assert len(moved["entries"]) == 1 and moved["projects"] == []


def test_a_rebuild_after_ticks_rewrites_no_file_stats_row(client, settings: Settings, db: Session) -> None:
    """A tick that rewrites an arc records the file's new mtime in its facts, as a rebuild reads it: the rebuild that
    follows finds the file stats as it would write them."""
    from tests.support.harness import brain

    vault = Vault(settings.vault)
    _post(client, "lesson", "a lesson for the tick", repo="org1/api")
    _arc(vault, "t1", "api", "org1/api", "Tick the arc into its region")
    where = ("--vault", str(settings.vault), "--database-url", str(settings.database_url))
    for command in (("reindex",), ("tick", "--no-ai"), ("tick", "--no-ai")):
        assert (result := brain(settings, *command, *where)).exit_code == 0, result.stderr
    rows = text("SELECT path, ctid::text, arc->>'mtime' FROM vault_file_stats ORDER BY path")
    before = db.execute(rows).all()
    assert any(path.startswith("frontal-lobe/") for path, _, _ in before)  # the tick moved (wrote) the arc
    assert brain(settings, "reindex", *where).exit_code == 0
    db.rollback()
    assert db.execute(rows).all() == before


def test_reindex_of_a_missing_vault_is_one_clear_line(tmp_path: Path, settings: Settings) -> None:
    result = CliRunner().invoke(app, ["reindex", "--vault", str(tmp_path / "nope"), "--database-url", str(settings.database_url)])
    assert result.exit_code == 2
    assert result.stderr.strip().startswith("error: vault folder")


def test_the_projects_gin_index_has_no_pending_list(db: Session) -> None:
    from sqlalchemy import text

    definition = db.execute(text("select indexdef from pg_indexes where indexname = 'ix_entries_projects_gin'")).scalar()
    assert definition is not None and "USING gin (projects)" in definition and "fastupdate=off" in definition


def test_a_rebuild_keeps_every_marker_acknowledged_while_it_ran(client, settings: Settings, db: Session) -> None:
    """Markers answered 201 during a rebuild are in the index after it (a rebuild used to clear them)."""
    vault = Vault(settings.vault)
    for i in range(6):
        _arc(vault, f"r{i}", "api", "org1/api", f"Rebuild around write number {i}")
    _post(client, "lesson", "Written before the rebuild.", repo="org1/api")

    def write_meanwhile(done: int, total: int) -> None:
        """Writers go on while the scan runs: a new file after the file list was taken, and an
        entry appended to the lesson log after the scan read it (the last file of this vault)."""
        if done == 2:
            assert client.post("/marker", json={"type": "decision", "content": "Decided during the rebuild.", "attrs": {"repo": "org1/api"}}).status_code == 201
        if done == total:
            assert client.post("/marker", json={"type": "lesson", "content": "Written during the rebuild.", "attrs": {"repo": "org1/api"}}).status_code == 201

    summary = rebuild(db, vault, progress=ProgressRecorder(on_step=write_meanwhile))
    db.commit()
    assert set(db.scalars(select(Entry.content).where(Entry.kind == "lesson"))) == {"Written before the rebuild.", "Written during the rebuild."}
    assert set(db.scalars(select(Entry.content).where(Entry.kind == "decision"))) == {"Decided during the rebuild."}
    assert summary.removed == 0
    contents = set(db.scalars(select(Entry.content).where(Entry.kind.in_(("lesson", "decision")))))
    again = rebuild(db, vault)  # and a later rebuild from the vault alone gives the same rows
    db.commit()
    assert set(db.scalars(select(Entry.content).where(Entry.kind.in_(("lesson", "decision"))))) == contents and again.removed == 0


def _indexes(db: Session) -> list[tuple[str, str]]:
    from sqlalchemy import text

    stmt = text("select indexname, indexdef from pg_indexes where tablename in ('entries', 'vault_documents', 'vault_segments') order by 1")
    keys = text(
        "select conname, pg_get_constraintdef(oid) from pg_constraint where contype = 'f'"
        " and conrelid in ('entries'::regclass, 'vault_documents'::regclass, 'vault_segments'::regclass) order by 1"
    )
    return [(name, ddl) for name, ddl in db.execute(stmt)] + [(name, ddl) for name, ddl in db.execute(keys)]


def _entries_locked(db: Session) -> bool:
    from sqlalchemy import text

    stmt = text("select exists (select 1 from pg_locks where relation = 'entries'::regclass and pid = pg_backend_pid() and mode = 'AccessExclusiveLock')")
    return bool(db.execute(stmt).scalar())


def test_a_first_build_loads_without_indexes_and_builds_them_once_after(client, settings: Settings, db: Session, monkeypatch: pytest.MonkeyPatch) -> None:
    """Into an empty index the secondary indexes and foreign keys are dropped for the load (the tables locked) and
    made again, exactly as the migrations define them; a rebuild of a populated index keeps them and takes no such lock."""
    vault = Vault(settings.vault)
    for i in range(3):
        _arc(vault, f"f{i}", "api", "org1/api", f"First build number {i}")
    before = _indexes(db)
    db.rollback()
    seen: list[tuple[list[tuple[str, str]], bool]] = []

    def restore(session: Session, ddl: list[str]) -> None:  # the state the load ran in, then the real restore
        seen.append((_indexes(session), _entries_locked(session)))
        real(session, ddl)

    real = rebuild_module.restore_indexes
    monkeypatch.setattr(rebuild_module, "restore_indexes", restore)
    rebuild(db, vault)
    during, locked = seen[0]
    assert locked and {name for name, _ in during} < {name for name, _ in before}
    assert {"pk_entries", "pk_vault_documents", "pk_vault_segments"} <= {name for name, _ in during}  # constraints stay
    assert "fk_vault_segments_path_vault_documents" in {name for name, _ in before} - {name for name, _ in during}
    assert _indexes(db) == before
    rows = entry_rows(db)
    db.commit()
    assert len(rows) == 3

    _post(client, "lesson", "Written between the builds.", repo="org1/api")
    seen.clear()
    rebuild(db, vault)
    assert seen[0] == (before, False) and _indexes(db) == before
    db.commit()
    assert [r for r in entry_rows(db) if r["kind"] == "arc"] == rows


def test_search_segments_made_by_a_worker_process_are_the_ones_made_in_process(
    client, settings: Settings, db: Session, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A large vault's segments are prepared by a worker process (``PREPARE_APART_BYTES``): the rows are the same,
    and none is made in this process, not even for a searchable file that holds no entry (a note, a dashboard)."""
    from sqlalchemy import text

    vault = Vault(settings.vault)
    _arc(vault, "w1", "api", "org1/api", "Worker process segments")
    for i in range(3):
        _post(client, "lesson", f"lesson {i} with a\ttab, a back\\slash and ünïcödé", repo="org1/api")
    Path(vault.path("notes")).mkdir(exist_ok=True)
    Path(vault.path("notes/odd.md")).write_bytes(b"crlf line\r\n\\N is not null\r\n\ttabbed\\t\n")
    db.execute(text("TRUNCATE entries, vault_documents, vault_segments, vault_file_stats CASCADE"))
    db.commit()
    segments = text("select path, first_line, last_line, entry_id, content, lowered, grams from vault_segments order by path, first_line")
    made: list[list[tuple[object, ...]]] = []

    def here(*args: object, **kwargs: object) -> None:
        raise AssertionError(f"segments made in the main process: {args[0]}")

    for apart in (0, 1 << 60):
        monkeypatch.setattr(rebuild_module, "PREPARE_APART_BYTES", apart)
        with monkeypatch.context() as only_apart:
            if apart == 0:
                only_apart.setattr(search_docs, "prepare", here)  # the spawned worker imports its own
            rebuild(db, vault)
        made.append([(*r[:6], sorted(r[6])) for r in db.execute(segments)])  # the codes are a set (their order is a process's hashing)
        db.rollback()
    assert made[0] == made[1]
    assert any(r[0] == "notes/odd.md" and "\\N is not null" in str(r[4]) for r in made[0]) and any(r[3] for r in made[0])
