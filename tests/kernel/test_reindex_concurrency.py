"""``brain reindex`` beside the search follower: the rebuild's transaction and a follow's take the search index's locks in one order."""

from __future__ import annotations

import datetime as dt
import threading
import uuid

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.exc import DBAPIError
from sqlalchemy.orm import Session

from brain_core.markers import Attribution, parse_request
from brain_kernel.db.engine import normalise_url
from brain_kernel.index import rebuild as rebuild_module
from brain_kernel.index.changes import SEARCH, sync_changes
from brain_kernel.index.rebuild import rebuild
from brain_kernel.marker_service import write_marker
from brain_kernel.settings import Settings
from brain_kernel.vault_store import Vault
from tests.support.progress_recorder import ProgressRecorder

WHO = Attribution("api", "org1/api", None, "attrs")


def _marker(vault: Vault, kind: str, content: str, **attrs: str) -> str:
    """A marker written to the vault only (its index rows are the rebuild's and the follower's to make): its path."""
    req = parse_request(kind, content, {"repo": "org1/api", **attrs}, max_chars=4096)
    return write_marker(vault, req, WHO, marker_id=uuid.uuid4().hex, at=dt.datetime.now(dt.timezone.utc).replace(microsecond=0)).vault_path


def _until(condition, seconds: float = 10.0) -> bool:
    """Poll ``condition`` (another backend's state) until it holds or ``seconds`` pass."""
    deadline = threading.Event()
    timer = threading.Timer(seconds, deadline.set)
    timer.start()
    try:
        while not deadline.is_set():
            if condition():
                return True
            deadline.wait(0.01)
        return condition()
    finally:
        timer.cancel()


def test_a_rebuild_finishes_when_a_follow_claimed_a_new_file_and_waits_on_a_log_it_holds(
    settings: Settings, db: Session, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The defect's deadlock, driven step by step on real connections.

    The rebuild locks a changed day log's document in one batch and claims a
    new signal file's in a later one; a follow of both (a marker's search
    follower) claims the new file first, then waits on the log. The rebuild's
    deadlock check runs first (``deadlock_timeout``), as it did in the half of
    the bench's runs where ``brain reindex`` died: both must finish, and the
    index must hold both files as they are.
    """
    vault = Vault(settings.vault)
    log = _marker(vault, "lesson", "Indexed by the first build.")
    rebuild(db, vault)  # the search index built: a follow now writes it
    db.commit()
    assert _marker(vault, "lesson", "Appended after the first build.") == log
    signal = _marker(vault, "signal", "Created after the first build.", title="Disk", severity="alert")
    monkeypatch.setattr(rebuild_module, "REBUILD_BATCH", 1)  # each file its own batch, in the rebuild's order: the log first
    db.execute(text("SET deadlock_timeout = '100ms'"))  # the rebuild's backend finds a cycle before the follow's (1 s)

    engine = create_engine(normalise_url(str(settings.database_url)))
    watch = engine.connect().execution_options(isolation_level="AUTOCOMMIT")
    follow = Session(engine)
    follow_pid = follow.execute(text("SELECT pg_backend_pid()")).scalar_one()
    failures: list[BaseException] = []

    def follow_both() -> None:
        try:
            sync_changes(follow, vault, [log, signal], stores=frozenset({SEARCH}))
            follow.commit()
        except BaseException as exc:  # reported by the test thread
            follow.rollback()
            failures.append(exc)

    def log_locked() -> bool:
        try:
            watch.execute(text("SELECT 1 FROM vault_documents WHERE path = :p FOR UPDATE NOWAIT"), {"p": log})
        except DBAPIError:
            return True
        return False

    follower = threading.Thread(target=follow_both)

    def meanwhile(done: int, total: int) -> None:
        if done != 2:  # the signal file read (amygdala/ comes after left/): the log's batch is written or being written
            return
        assert _until(log_locked), "the rebuild did not lock the changed log"
        follower.start()
        blocked = lambda: bool(watch.execute(text("SELECT pg_blocking_pids(:pid)"), {"pid": follow_pid}).scalar())  # noqa: E731
        assert _until(blocked), "the follow did not wait on the rebuild"

    try:
        rebuild(db, vault, progress=ProgressRecorder(on_step=meanwhile))
        db.commit()
    finally:
        db.rollback()
        if follower.ident is not None:  # started: it ends once the rebuild's transaction does
            follower.join(30)
        follow.close()
        watch.close()
        engine.dispose()
    assert not failures, failures
    held = dict(db.execute(text("SELECT path, digest FROM vault_documents WHERE path = ANY(:p)"), {"p": [log, signal]}).all())
    assert sorted(held) == sorted([log, signal])
    lines = db.execute(text("SELECT string_agg(content, E'\\n' ORDER BY first_line) FROM vault_segments WHERE path = :p"), {"p": log}).scalar()
    assert "Appended after the first build." in lines


def _writes_alone(db: Session) -> bool:
    """Whether the given database session's transaction holds the search index's writer lock (``search_docs._WRITE_ALONE``)."""
    stmt = text(
        "SELECT EXISTS (SELECT 1 FROM pg_locks WHERE relation = 'vault_documents'::regclass AND pid = pg_backend_pid() AND mode = 'ShareRowExclusiveLock')"
    )
    return bool(db.execute(stmt).scalar())


def test_a_rebuild_takes_the_search_index_for_itself_only_once_it_changes_a_document(settings: Settings, db: Session) -> None:
    """A rerun over an unchanged vault leaves follows free to write (ADR 0028); one that changes a document holds the table."""
    vault = Vault(settings.vault)
    _marker(vault, "lesson", "Indexed by the first build.")
    rebuild(db, vault)
    db.commit()
    rebuild(db, vault)
    assert not _writes_alone(db)
    db.commit()
    _marker(vault, "lesson", "Appended before the second rebuild.")
    rebuild(db, vault)
    assert _writes_alone(db)
    db.commit()
