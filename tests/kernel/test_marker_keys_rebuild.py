"""Marker idempotency outlives the database: each write's key is kept in its vault text and ``brain reindex``
remembers it again, so a client replaying its markers after the index was lost and rebuilt writes nothing (ADR 0035).
"""

from __future__ import annotations

import datetime as dt
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select, text
from sqlalchemy.orm import Session

from brain_api.app import create_app
from brain_kernel.db.models import IdempotencyKey
from brain_kernel.settings import Settings
from brain_kernel.vault_store import Vault
from tests.support.harness import ManualClock, brain, cloned_database, make_settings

TOKEN = "tok-all-0123456789"  # a token of every project: its keys are upstream's, in the one shared namespace

# Every type, each sent with a key and without one (then upstream's body hash is the key); the unattributed
# milestone goes to the day's note.
MARKERS: list[tuple[str, str, dict[str, Any]]] = [
    ("lesson", "Pin the resolver version.", {"project": "org1/api", "session_id": "s-1", "source": "claude-code"}),
    ("lesson", "An unattributed lesson.", {}),
    ("milestone", "v2 shipped", {"project": "org1/api", "scope": "release"}),
    ("milestone", "Nightly block done.", {}),
    ("signal", "Disk at 91% on build-3", {"severity": "warning", "project": "org1/api", "title": "Disk"}),
    ("decision", "We keep Postgres.", {"title": "Keep Postgres", "project": "org1/api"}),
]


def _bodies() -> list[tuple[dict[str, Any], str | None]]:
    out = []
    for n, (type_, content, attrs) in enumerate(MARKERS):
        out.append(({"type": type_, "content": f"{content} (keyed)", "attrs": attrs}, f"key-{n}"))
        out.append(({"type": type_, "content": content, "attrs": attrs}, None))
    return out


def _post_all(client: TestClient, token: str | None) -> list[dict[str, Any]]:
    answers = []
    for body, key in _bodies():
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        if key:
            headers["X-Idempotency-Key"] = key
        r = client.post("/marker", json=body, headers=headers)
        assert r.status_code == 201, r.text
        answers.append(r.json())
    return answers


def _vault_files(root: Path) -> dict[str, bytes]:
    out = {}
    for dirpath, _, files in os.walk(root):
        for name in files:
            path = Path(dirpath) / name
            out[str(path.relative_to(root))] = path.read_bytes()
    return out


def _run(settings: Settings, *command: str) -> dict[str, Any]:
    result = brain(settings, *command)
    assert result.exit_code == 0, result.stderr
    return json.loads(result.stdout.strip().splitlines()[-1])


@pytest.fixture
def lost_database(pg_admin_url: str, template_url: str) -> Iterator[str]:
    """The database after a loss: migrated and empty, the vault as it was."""
    with cloned_database(pg_admin_url, template_url) as url:
        yield url


@pytest.mark.parametrize(
    "command, token",
    [(("reindex",), None), (("reindex",), TOKEN), (("tick", "--no-ai"), None)],
    ids=["reindex", "reindex-token", "tick"],
)
def test_markers_replayed_after_the_database_is_lost_and_rebuilt_write_nothing(
    tmp_path: Path, database_url: str, lost_database: str, command: tuple[str, ...], token: str | None
) -> None:
    tokens = {"tokens": [TOKEN]} if token else {}
    settings = make_settings(tmp_path, database_url, **tokens)
    Vault(settings.vault).scaffold()
    with TestClient(create_app(settings)) as client:
        first = _post_all(client, token)
    assert not any(a.get("idempotent_replay") for a in first)
    assert {a["marker_type"] for a in first} == {"lesson", "milestone", "signal", "decision"}

    rebuilt = make_settings(tmp_path, lost_database, **tokens)  # the same vault, a new and empty database
    summary = _run(rebuilt, *command)  # a full rebuild, or the keeper's first tick (every file is new to it)
    assert (summary if command == ("reindex",) else summary["index"])["keys_restored"] == len(first)
    before = _vault_files(settings.vault)
    with TestClient(create_app(rebuilt)) as client:
        again = _post_all(client, token)

    assert again == [{**a, "idempotent_replay": True} for a in first]  # the original answers, the key as the client sent it
    assert _vault_files(settings.vault) == before  # no file grew, none was created


def test_a_client_re_posting_after_its_token_was_rotated_or_auth_turned_on_writes_nothing(tmp_path: Path, database_url: str) -> None:
    """Upstream keyed markers by the header or the body hash alone (UPSTREAM.md 1.6): the client re-posts its first
    markers on every Stop, across a token's rotation too. A token of every project keeps that namespace; only a
    token bound to projects has one of its own."""
    with TestClient(create_app(make_settings(tmp_path, database_url))) as client:
        first = _post_all(client, None)  # auth off
    before = _vault_files(tmp_path / "vault")
    for token in (TOKEN, "tok-rotated-0123456789"):
        with TestClient(create_app(make_settings(tmp_path, database_url, tokens=[token]))) as client:
            again = _post_all(client, token)
        assert again == [{**a, "idempotent_replay": True} for a in first], token
    assert _vault_files(tmp_path / "vault") == before
    bound = make_settings(tmp_path, database_url, tokens=["tok-api-0123456789=org1/api"])
    with TestClient(create_app(bound)) as client:
        r = client.post("/marker", json=_bodies()[0][0], headers={"Authorization": "Bearer tok-api-0123456789", "X-Idempotency-Key": "key-0"})
    assert r.status_code == 201 and "idempotent_replay" not in r.json()  # its own namespace: never another token's answer


def test_a_rebuild_restores_keys_younger_than_the_ttl_and_never_overwrites_a_row(
    client: TestClient, clock: ManualClock, settings: Settings, db: Session
) -> None:
    ttl = settings.idempotency_ttl_seconds
    clock.advance(-ttl - 3600)  # written an hour before the TTL's start
    old = client.post("/marker", json={"type": "lesson", "content": "Old news."}, headers={"X-Idempotency-Key": "old"})
    clock.advance(ttl + 3600)
    new = client.post("/marker", json={"type": "signal", "content": "Fresh alarm.", "attrs": {"title": "Fresh"}}, headers={"X-Idempotency-Key": "new"})
    assert old.status_code == new.status_code == 201
    db.execute(text("UPDATE idempotency_keys SET response = response || '{\"seen\": 1}'"))  # the live rows, told apart from a restore
    db.commit()

    assert _run(settings, "reindex")["keys_restored"] == 0  # every key is in the table: none is touched
    db.expire_all()
    assert [(k.key, k.response.get("seen")) for k in db.scalars(select(IdempotencyKey).order_by(IdempotencyKey.key))] == [("new", 1), ("old", 1)]

    db.execute(text("DELETE FROM idempotency_keys"))
    db.commit()
    assert _run(settings, "reindex")["keys_restored"] == 1  # the old write is past the TTL: replaying it is a new write
    db.expire_all()
    [row] = db.scalars(select(IdempotencyKey))
    written = dt.datetime.strptime(new.json()["vault_path"].rsplit("/", 1)[-1][:16], "%Y%m%dT%H%M%SZ").replace(tzinfo=dt.timezone.utc)  # its file's stamp
    assert (row.key, row.state, row.body_hash, row.response) == ("new", "done", new.json()["body_hash"], new.json())
    assert row.created_at == written and row.expires_at == written + dt.timedelta(seconds=ttl)


def test_keys_an_earlier_version_stored_with_a_tokens_prefix_still_replay(tmp_path: Path, database_url: str, db: Session) -> None:
    """Versions before namespaced every named token's keys (``t<12 hex>:key``), a token of every project's too: a client
    re-posting after the upgrade replays them, where it wrote every marker again (curation undone with them)."""
    from brain_kernel.auth import parse_entry

    settings = make_settings(tmp_path, database_url, tokens=[TOKEN])
    with TestClient(create_app(settings)) as client:
        first = _post_all(client, TOKEN)
    db.execute(text("UPDATE idempotency_keys SET key = :prefix || key"), {"prefix": f"{parse_entry(TOKEN).name}:"})  # as stored then
    db.commit()
    before = _vault_files(settings.vault)
    with TestClient(create_app(settings)) as client:
        again = _post_all(client, TOKEN)
    assert again == [{**a, "idempotent_replay": True} for a in first]
    assert _vault_files(settings.vault) == before
