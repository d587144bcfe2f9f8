"""The incremental tick (ADR 0016): the file stats let a tick read only what changed.

An unchanged vault is not read and not written; a changed, added, deleted or
renamed file is picked up; a file touched without a change is read but not
re-indexed; and the index a run of ticks leaves equals a rebuild from the
vault alone.
"""

from __future__ import annotations

import datetime as dt
import os
from pathlib import Path

import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session

from brain_kernel.db.models import Entry, VaultFile
from brain_kernel.index.entries import entry_rows
from brain_kernel.index.rebuild import rebuild
from brain_kernel.settings import Settings
from brain_kernel.vault_store import Vault
from brain_ops.keeper.tick import run_tick
from tests.ops.test_keeper_upstream import NOW, WEB_ARC, _plant

LATER = NOW + dt.timedelta(minutes=5)


@pytest.fixture
def ticked(settings: Settings, db: Session) -> Vault:
    _plant(Path(settings.vault))
    vault = Vault(settings.vault)
    run_tick(db, vault, settings, now=NOW, use_ai=False)
    db.commit()
    return vault


def _contents(db: Session, kind: str) -> set[str]:
    return set(db.scalars(select(Entry.content).where(Entry.kind == kind)))


def _paths(db: Session) -> set[str]:
    return set(db.scalars(select(Entry.vault_path)))


def test_an_unchanged_vault_is_not_read_and_not_written(ticked: Vault, settings: Settings, db: Session) -> None:
    with_stats = set(db.scalars(select(VaultFile.path)))
    assert f"frontal-lobe/conscious/{WEB_ARC}.md" in with_stats and "bridge/connections.md" in with_stats
    before = entry_rows(db)
    again = run_tick(db, ticked, settings, now=LATER, use_ai=False)
    db.commit()
    assert again.read_files == 0 and again.scanned_files == len(with_stats)  # every live file, the intents too
    assert again.vault_writes == 0 and again.files_written == [] and again.index["files_reindexed"] == 0
    assert entry_rows(db) == before


def test_a_changed_added_deleted_and_renamed_file_is_picked_up(ticked: Vault, settings: Settings, db: Session) -> None:
    web = f"frontal-lobe/conscious/{WEB_ARC}.md"
    ticked.write_atomic(web, ticked.read_text(web) + "\n<!-- @lesson -->\nCHANGED: pin the redirect URL.\n<!-- @/lesson -->\n")
    ticked.write_atomic(
        "left/projects/web/2026-11-29-added-notes.md",
        "---\ntitle: Added\nproject: web\nprojects: [web]\nrepo: acme/web\nproject_source: git\ncreated: 2026-11-29\n---\n<!-- @lesson -->\nADDED lesson.\n<!-- @/lesson -->\n",
    )
    os.remove(ticked.path("amygdala/20261129-110000-warning-disk-full.md"))
    os.rename(ticked.path("bridge/connections.md"), ticked.path("bridge/links.md"))
    summary = run_tick(db, ticked, settings, now=LATER, use_ai=False)
    db.commit()
    assert summary.read_files == 3  # changed, added, renamed (its new name); the deleted one is only missed
    lessons = _contents(db, "lesson")
    assert "CHANGED: pin the redirect URL." in lessons and "ADDED lesson." in lessons
    assert not any("MARKERSIGNAL" in c for c in _contents(db, "signal"))
    paths = _paths(db)
    assert "bridge/links.md" in paths and "bridge/connections.md" not in paths
    assert "amygdala/20261129-110000-warning-disk-full.md" not in paths
    assert "MARKERSIGNAL" not in ticked.read_text("brain-feed/signals.md")
    with_stats = set(db.scalars(select(VaultFile.path)))
    assert "bridge/links.md" in with_stats and "bridge/connections.md" not in with_stats
    tick_rows = entry_rows(db)
    rebuild(db, ticked)
    db.commit()
    assert entry_rows(db) == tick_rows  # what the incremental ticks left is what the vault says


def test_a_file_touched_without_a_change_is_read_but_not_reindexed(ticked: Vault, settings: Settings, db: Session) -> None:
    target = ticked.path("bridge/connections.md")
    os.utime(target, ns=(target.stat().st_atime_ns, target.stat().st_mtime_ns + 10**9))
    before = entry_rows(db)
    summary = run_tick(db, ticked, settings, now=LATER, use_ai=False)
    db.commit()
    assert summary.read_files == 0 and summary.index["files_reindexed"] == 0 and summary.index["file_stats_rows"] == 1
    assert entry_rows(db) == before
    again = run_tick(db, ticked, settings, now=LATER, use_ai=False)
    assert again.index["file_stats_rows"] == 0  # the new mtime is known now


def test_an_arc_that_only_ages_is_scored_from_its_file_stats(ticked: Vault, settings: Settings, db: Session) -> None:
    web = f"frontal-lobe/conscious/{WEB_ARC}.md"
    later = NOW + dt.timedelta(hours=30)  # 34 h old: +1 instead of +3, and complete instead of active (no +2)
    summary = run_tick(db, ticked, settings, now=later, use_ai=False)
    db.commit()
    assert summary.read_files == 0
    assert summary.stats["heat_changes"] >= 1 and web not in {m["from"] for m in summary.moves}
    heat = db.scalar(select(Entry.heat).where(Entry.vault_path == web, Entry.kind == "arc"))
    text = ticked.read_text(web)
    assert heat == 8.0 and "heat: 8" in text and "status: complete" in text


def test_the_search_index_follows_marker_writes_and_ticks_once_a_reindex_built_it(ticked: Vault, settings: Settings, db: Session, client) -> None:
    from brain_kernel.search import search_docs

    rebuild(db, ticked)
    db.commit()
    assert search_docs.indexed(db, ticked)
    assert client.post("/marker", json={"type": "lesson", "content": "SEARCHTOKENA after the reindex", "attrs": {"repo": "acme/web"}}).status_code == 201
    hits = client.get("/vault/search", params={"q": "searchtokena"}).json()["results"]
    assert [h["path"] for h in hits] == [p for p in _paths(db) if p.startswith("left/reference/lessons-")][:1]
    ticked.write_atomic("bridge/connections.md", ticked.read_text("bridge/connections.md") + "\nSEARCHTOKENB edited by hand\n")
    run_tick(db, ticked, settings, now=LATER, use_ai=False)
    db.commit()
    assert [h["path"] for h in client.get("/vault/search", params={"q": "searchtokenb"}).json()["results"]] == ["bridge/connections.md"]
