"""brain-api behaviours of UPSTREAM.md section 1 that no other test pinned, re-expressed over HTTP.

Each test names the rows of docs/compatibility-ledger.md it checks. Real
Postgres, the app over ASGI, the vault on disk; nothing mocked.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import os
import re
from pathlib import Path
from unittest import mock

import pytest
from fastapi.testclient import TestClient

from brain_api.app import create_app
from brain_core.vault import frontmatter
from brain_kernel.settings import Settings
from brain_kernel.vault_store import Vault
from tests.support.harness import make_settings


def _marker(client: TestClient, type_: object, content: object, attrs: object = None, key: str | None = None):
    body: dict[str, object] = {"type": type_, "content": content}
    if attrs is not None:
        body["attrs"] = attrs
    return client.post("/marker", json=body, headers={"X-Idempotency-Key": key} if key else {})


def test_token_settings_fall_back_from_kb_router_tokens_to_kb_router_token() -> None:
    """Ledger 1.1: ``KB_ROUTER_TOKENS``, or when it is empty ``KB_ROUTER_TOKEN``; comma lists, trimmed."""
    for env, tokens in (
        ({"KB_ROUTER_TOKENS": "", "KB_ROUTER_TOKEN": "a"}, ["a"]),
        ({"KB_ROUTER_TOKENS": " b , c ", "KB_ROUTER_TOKEN": "a"}, ["b", "c"]),
        ({"KB_ROUTER_TOKEN": "x, y"}, ["x", "y"]),
    ):
        with mock.patch.dict(os.environ, env, clear=False):
            os.environ.pop("BRAIN_TOKENS", None)
            for name in {"KB_ROUTER_TOKENS", "KB_ROUTER_TOKEN"} - set(env):
                os.environ.pop(name, None)
            assert Settings().tokens == tokens, env


def test_a_body_that_is_not_an_object_or_lacks_a_field_is_422(client: TestClient) -> None:
    """Ledger 1.1: framework validation failures are 422."""
    assert client.post("/marker", json=["lesson", "x"]).status_code == 422
    assert client.post("/marker", json={"type": "lesson"}).status_code == 422
    assert client.post("/vault/write_inbox", data={"title": "no content"}).status_code == 422


def test_deep_health_vault_check_writes_and_removes_its_probe(client: TestClient, settings: Settings) -> None:
    """Ledger 1.3: ``checks.vault`` is ``{ok, root, writable}`` and leaves no probe file behind."""
    answer = client.get("/health/deep").json()
    assert answer["service"] == "brain-api" and answer["status"] in ("ok", "degraded")
    assert answer["checks"]["vault"] == {"ok": True, "root": str(settings.vault.resolve()), "writable": True}
    assert not [p for p in settings.vault.iterdir() if p.name.startswith(".healthcheck")]


def test_signal_reads_the_configured_path_with_a_leading_slash_stripped(tmp_path: Path, database_url: str) -> None:
    """Ledger 1.5: ``AMYGDALA_SIGNAL_PATH`` names the alert file, a leading ``/`` stripped; ``last_updated`` is its mtime."""
    settings = make_settings(tmp_path, database_url, amygdala_signal_path="/alerts/now.md")
    Vault(settings.vault).scaffold()
    alert = settings.vault / "alerts" / "now.md"
    alert.parent.mkdir(parents=True)
    alert.write_text("---\nseverity: Warning\n---\n\n  disk filling  \n")
    os.utime(alert, (1_775_822_400, 1_775_822_400))  # 2026-04-10T12:00:00Z
    with TestClient(create_app(settings)) as client:
        answer = client.get("/signal").json()
    assert answer["vault_path"] == "alerts/now.md"
    assert (answer["active"], answer["severity"], answer["title"], answer["content"]) == (True, "warning", "AMYGDALA ALERT", "disk filling")
    assert dt.datetime.fromisoformat(answer["last_updated"]) == dt.datetime(2026, 4, 10, 12, tzinfo=dt.timezone.utc)


def test_an_alert_file_that_is_not_utf8_is_no_500(client: TestClient, settings: Settings) -> None:
    """Ledger 1.5 (UPSTREAM.md 0.1, a defect): upstream answered 500; the alert still reads."""
    (settings.vault / "brain-feed" / "amygdala-active.md").write_bytes(b"---\nseverity: critical\n---\n\nbad \xff byte\n")
    answer = client.get("/signal")
    assert answer.status_code == 200, answer.text
    assert answer.json()["active"] is True and answer.json()["severity"] == "critical"


@pytest.mark.parametrize(
    ("type_", "content", "attrs", "detail"),
    [
        ("note", "x", None, "invalid marker type: 'note'"),
        (" Todo ", "x", None, "invalid marker type: 'todo'"),
        ("lesson", "  \n ", None, "content is required"),
        ("lesson", "x" * 4097, None, "content exceeds 4KB limit"),
        ("lesson", "x", "a string", "attrs must be an object"),
        ("lesson", "x", [1], "attrs must be an object"),
        ("lesson", "x", 7, "attrs must be an object"),
    ],
    ids=["unknown-type", "type-trimmed-lowercased", "blank-content", "over-4096", "attrs-string", "attrs-list", "attrs-number"],
)
def test_marker_refusals_say_upstreams_reason(client: TestClient, type_: str, content: str, attrs: object, detail: str) -> None:
    """Ledger 1.6: the validation table's 400s and their details."""
    answer = _marker(client, type_, content, attrs)
    assert (answer.status_code, answer.json()) == (400, {"detail": detail})


@pytest.mark.parametrize("attrs", [None, [], "", 0, False])
def test_falsy_attrs_are_an_empty_object(client: TestClient, attrs: object) -> None:
    """Ledger 1.6 (UPSTREAM.md 0.3): ``attrs`` null, ``[]``, ``""``, ``0`` or ``false`` is ``{}``."""
    answer = client.post("/marker", json={"type": "lesson", "content": f"falsy attrs {attrs!r}", "attrs": attrs})
    assert answer.status_code == 201, answer.text
    expected = json.dumps({"type": "lesson", "content": f"falsy attrs {attrs!r}", "attrs": {}}, sort_keys=True)
    assert answer.json()["body_hash"] == hashlib.sha256(expected.encode()).hexdigest()[:16]


def test_the_content_limit_is_measured_after_trimming(client: TestClient) -> None:
    """Ledger 1.6 (UPSTREAM.md 0.6): 4096 characters with whitespace around them are accepted."""
    assert _marker(client, "lesson", "  \n" + "y" * 4096 + "\n  ").status_code == 201


def test_body_hash_is_upstreams_json_with_non_ascii_escaped(client: TestClient) -> None:
    """Ledger 1.6 (UPSTREAM.md 0.4): sorted keys, separators ``, `` and ``: ``, ``\\uXXXX`` escapes, the type normalised."""
    attrs = {"source": "ağent", "zeta": [1, {"b": 2, "a": "é"}]}
    answer = _marker(client, " LESSON ", "Grüße — über", attrs)
    canonical = (
        '{"attrs": {"source": "a\\u011fent", "zeta": [1, {"a": "\\u00e9", "b": 2}]}, "content": "Gr\\u00fc\\u00dfe \\u2014 \\u00fcber", "type": "lesson"}'
    )
    assert answer.status_code == 201
    assert answer.json()["body_hash"] == hashlib.sha256(canonical.encode()).hexdigest()[:16]
    assert answer.json()["idempotency_key"] == answer.json()["body_hash"]  # no header: the body hash is the key


def test_a_header_key_is_trimmed_and_an_unknown_attr_counts_in_the_hash(client: TestClient, settings: Settings) -> None:
    """Ledger 1.6: the trimmed header is the key; attrs the kernel does not use still change ``body_hash``."""
    first = _marker(client, "lesson", "Keyed lesson.", {"source": "a"}, key="  k-1  ")
    assert first.status_code == 201 and first.json()["idempotency_key"] == "k-1"
    replay = _marker(client, "lesson", "Keyed lesson.", {"source": "a"}, key="k-1")
    assert replay.json()["idempotent_replay"] is True and replay.json()["vault_path"] == first.json()["vault_path"]
    other = _marker(client, "lesson", "Keyed lesson.", {"source": "a", "colour": "blue"})
    assert other.json()["body_hash"] != first.json()["body_hash"]


def test_the_response_names_its_file_action_type_and_size(client: TestClient, settings: Settings) -> None:
    """Ledger 1.6: ``{ok, idempotency_key, body_hash, vault_path, action, marker_type, written_bytes}``; 201.

    ``written_bytes`` is upstream's file size for a new file; for an append it is what the append added
    (docs/compatibility.md, "written_bytes counts what the write added").
    """
    today = dt.datetime.now(dt.timezone.utc).date().isoformat()
    log = settings.vault / f"left/reference/lessons-{today}.md"
    for type_, action in (("lesson", "appended"), ("lesson", "appended"), ("milestone", "appended"), ("signal", "created"), ("decision", "created")):
        before = log.stat().st_size if type_ == "lesson" and log.exists() else 0
        answer = _marker(client, type_, f"A {type_} {os.urandom(4).hex()}.", {"title": "Named"})
        assert answer.status_code == 201
        body = answer.json()
        assert {"ok", "idempotency_key", "body_hash", "vault_path", "action", "marker_type", "written_bytes"} <= set(body)
        assert (body["ok"], body["action"], body["marker_type"]) == (True, action, type_)
        assert body["written_bytes"] == (settings.vault / body["vault_path"]).stat().st_size - before


def test_lesson_and_milestone_entries_keep_upstreams_header_parts(client: TestClient, settings: Settings) -> None:
    """Ledger 1.6: lessons go to ``left/reference/lessons-<date>.md``, unattributed milestones to ``daily/<date>.md``;
    the header keeps `` — <source> — `<session>``` and `` — <source> — scope=<s> — status=<s|done>``."""
    today = dt.datetime.now(dt.timezone.utc).date().isoformat()
    lesson = _marker(client, "lesson", "Lock the append.", {"source": "codex", "session_id": "s-9"}).json()
    assert lesson["vault_path"] == f"left/reference/lessons-{today}.md"
    text = (settings.vault / lesson["vault_path"]).read_text()
    assert re.search(r"^## \d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ .* — codex — `s-9`$", text, re.M), text
    bare = _marker(client, "lesson", "No source given.").json()
    assert re.search(r" — unknown$", (settings.vault / bare["vault_path"]).read_text(), re.M)
    milestone = _marker(client, "milestone", "Cut the release.", {"source": "codex", "scope": "phase-7"}).json()
    assert milestone["vault_path"] == f"daily/{today}.md"
    daily = (settings.vault / milestone["vault_path"]).read_text()
    assert re.search(r" — codex — scope=phase-7 — status=done$", daily, re.M), daily
    assert "Cut the release." in daily


def test_signal_files_keep_upstreams_name_id_and_severity_default(client: TestClient, settings: Settings) -> None:
    """Ledger 1.6: ``amygdala/<YYYYMMDDTHHMMSSZ>-<severity>-<slug>.md``, ``id: amygdala-<slug>``, source ``unknown``;
    a severity outside the known set is ``warning``; ``resolved`` is kept (UPSTREAM.md 8 item 3)."""
    made = _marker(client, "signal", "Queue backs up.", {"severity": "Bogus", "title": "Queue: backs up!"}).json()
    assert re.fullmatch(r"amygdala/\d{8}T\d{6}Z-warning-queue-backs-up\.md", made["vault_path"]), made["vault_path"]
    doc = frontmatter.parse((settings.vault / made["vault_path"]).read_text())
    assert (doc.meta["id"], doc.meta["title"], doc.meta["severity"], doc.meta["source"]) == (
        "amygdala-queue-backs-up",
        "Queue: backs up!",
        "warning",
        "unknown",
    )
    assert dt.datetime.fromisoformat(str(doc.meta["created"]).replace("Z", "+00:00")).tzinfo is not None
    assert "Queue backs up." in doc.body
    nuclear = _marker(client, "signal", "Prod down.", {"severity": "NUCLEAR", "source": "pager"}).json()
    assert "-nuclear-" in nuclear["vault_path"]
    resolved = _marker(client, "signal", "Recovered.", {"severity": "resolved"}).json()
    assert frontmatter.parse((settings.vault / resolved["vault_path"]).read_text()).meta["severity"] == "resolved"


def test_decision_files_keep_upstreams_id_status_and_heading(client: TestClient, settings: Settings) -> None:
    """Ledger 1.6: ``ADR-NNNN-<slug>.md``, ``id: ADR-NNNN``, ``status: proposed``, body ``# ADR-NNNN — <title>``."""
    made = _marker(client, "decision", "Keep keys in Postgres.", {"title": "Keys in Postgres", "source": "codex"}).json()
    assert made["vault_path"] == "left/decisions/ADR-0001-keys-in-postgres.md"
    doc = frontmatter.parse((settings.vault / made["vault_path"]).read_text())
    assert (doc.meta["id"], doc.meta["title"], doc.meta["status"], doc.meta["source"]) == ("ADR-0001", "Keys in Postgres", "proposed", "codex")
    assert "created" in doc.meta
    assert doc.body.lstrip().startswith("# ADR-0001 — Keys in Postgres\n\nKeep keys in Postgres.")


def test_a_posted_tick_defaults_to_a_full_tick_from_brain_api(client: TestClient) -> None:
    """Ledger 1.7: query parameters ``dry_run`` and ``no_ai`` default false, ``source`` ``brain-api``; 202."""
    posted = client.post("/tick")
    assert posted.status_code == 202
    body = posted.json()
    assert (body["dry_run"], body["no_ai"], body["status"]) == (False, False, "pending")
    assert re.fullmatch(r"[0-9a-f]{12}", body["job_id"])
    assert client.get(f"/tick/{body['job_id']}").json()["source"] == "brain-api"


def test_a_signal_file_without_created_takes_its_time_and_severity_from_either_name_form() -> None:
    """Ledger 1.6: upstream's ``20261101T080000Z-`` names read as this kernel's older ``20261101-080000-`` ones did."""
    from brain_core.vault.records import signal_record

    text = "---\ntitle: Disk\n---\n\nDisk full.\n"
    for path in ("amygdala/20261101T080000Z-critical-disk.md", "amygdala/20261101-080000-critical-disk.md"):
        record = signal_record(text, path)
        assert record.occurred_at == dt.datetime(2026, 11, 1, 8, tzinfo=dt.timezone.utc), path
        assert record.severity == "critical", path


def test_a_replayed_key_with_an_invalid_body_is_refused(client: TestClient, settings: Settings) -> None:
    """Ledger 1.6: upstream looked the key up before validating (UPSTREAM.md 8 item 1); a body refused here is refused
    whatever key it carries, and the key's first answer stays as it was."""
    first = _marker(client, "lesson", "Valid first.", key="k-valid")
    assert first.status_code == 201
    again = _marker(client, "note", "Invalid now.", key="k-valid")
    assert (again.status_code, again.json()) == (400, {"detail": "invalid marker type: 'note'"})
    assert _marker(client, "lesson", "Valid first.", key="k-valid").json()["idempotent_replay"] is True


@pytest.mark.parametrize(
    ("before", "separator"),
    [("", ""), ("tail without newline", "\n\n"), ("tail with newline\n", "\n"), ("tail with blank line\n\n", "")],
    ids=["empty", "no-newline", "newline", "blank-line"],
)
def test_an_append_separates_the_new_entry_as_upstream_did(client: TestClient, settings: Settings, before: str, separator: str) -> None:
    """Ledger 1.6: before the new entry, nothing after an empty file or a blank line, ``\\n`` after a newline, a blank
    line otherwise; the entry ends with a newline."""
    today = dt.datetime.now(dt.timezone.utc).date().isoformat()
    daily = settings.vault / "daily" / f"{today}.md"
    daily.parent.mkdir(parents=True, exist_ok=True)
    daily.write_text(before)
    made = _marker(client, "milestone", "Shipped it.").json()
    assert made["vault_path"] == f"daily/{today}.md"
    text = daily.read_text()
    if before:
        assert text.startswith(before + separator) and not text.startswith(before + separator + "\n"), repr(text[: len(before) + 4])
    assert text.endswith("\n")


def test_index_artifact_answers_what_embed_answers(client: TestClient) -> None:
    """Ledger 1.10: ``POST /index_artifact`` stores through ``/embed`` and answers its ``{key, chunks_stored, dimensions}``."""
    via_artifact = client.post("/index_artifact", json={"key": "art/one", "content": "An artifact body.", "producer": "artifact-store"})
    direct = client.post("/embed", json={"key": "art/two", "content": "An artifact body.", "producer": "artifact-store"})
    assert via_artifact.status_code == direct.status_code == 200
    assert via_artifact.json() == {**direct.json(), "key": "art/one"}
    assert set(direct.json()) == {"key", "chunks_stored", "dimensions"}
    [chunk] = client.get("/by-key/art/one").json()["chunks"]
    assert (chunk["producer"], chunk["content_type"]) == ("artifact-store", "text/plain")


def test_embeddings_routes_take_the_bearer_scheme_like_every_route(tmp_path: Path, database_url: str) -> None:
    """Ledger E2: upstream's embeddings service took a key with or without ``Bearer `` and refused an unknown one with
    ``Invalid API key``; here its routes answer as every route does (docs/compatibility.md, "One auth rule")."""
    settings = make_settings(tmp_path, database_url, tokens=["k1"])
    Vault(settings.vault).scaffold()
    body = {"query": "anything"}
    with TestClient(create_app(settings)) as client:
        assert client.post("/search", json=body, headers={"Authorization": "Bearer k1"}).status_code == 200
        bare = client.post("/search", json=body, headers={"Authorization": "k1"})
        assert (bare.status_code, bare.json()) == (401, {"detail": "missing bearer token"})
        wrong = client.post("/search", json=body, headers={"Authorization": "Bearer k2"})
        assert (wrong.status_code, wrong.json()) == (401, {"detail": "invalid token"})


def test_a_null_source_is_stored_as_unknown(client: TestClient, settings: Settings) -> None:
    """Ledger C13 (UPSTREAM.md 0.22): the client sends ``k=""`` as null; ``source`` null is written as ``unknown``."""
    lesson = _marker(client, "lesson", "Null source lesson.", {"source": None, "session_id": "s-null"}).json()
    assert re.search(r" — unknown — `s-null`$", (settings.vault / lesson["vault_path"]).read_text(), re.M)
    signal = _marker(client, "signal", "Null source signal.", {"source": None}).json()
    assert frontmatter.parse((settings.vault / signal["vault_path"]).read_text()).meta["source"] == "unknown"


def test_deep_health_reports_a_vault_it_cannot_write(client: TestClient, settings: Settings) -> None:
    """Ledger 1.3: an unwritable vault is ``checks.vault = {ok: false, root, error}`` and a degraded answer, still 200."""
    import shutil

    root = str(settings.vault.resolve())
    shutil.rmtree(settings.vault)
    settings.vault.write_text("a file where the vault folder should be\n")
    answer = client.get("/health/deep")
    assert answer.status_code == 200 and answer.json()["status"] == "degraded"
    vault = answer.json()["checks"]["vault"]
    assert (vault["ok"], vault["root"], set(vault)) == (False, root, {"ok", "root", "error"})
    assert vault["error"]


def test_the_alert_file_is_an_entry_of_the_global_feed(client: TestClient, settings: Settings) -> None:
    """Ledger 1.4: ``amygdala-active.md`` (priority 100) is in ``entries``, first by priority."""
    from tests.support.harness import brain

    alert = "---\nid: amygdala-active\ntitle: AMYGDALA ALERT\npriority: 100\nttl: 300\nseverity: critical\n---\n\n## [NUCLEAR] prod down\n"
    (settings.vault / "brain-feed" / "amygdala-active.md").write_text(alert)
    assert brain(settings, "reindex").exit_code == 0
    feed = client.get("/feed").json()
    [entry] = [e for e in feed["entries"] if e["id"] == "amygdala-active"]
    assert (entry["title"], entry["priority"], entry["ttl"], entry["severity"], entry["content"]) == (
        "AMYGDALA ALERT",
        100,
        300,
        "critical",
        "## [NUCLEAR] prod down",
    )
    assert feed["entries"][0]["id"] == "amygdala-active"
    assert not [e for e in feed["hot_arcs"] + feed["inject_blocks"] if e["id"] == "amygdala-active"]


def test_long_content_is_chunked_by_paragraphs_as_upstream_did(client: TestClient) -> None:
    """Ledger E8: over 4000 characters, paragraphs are packed while ``len + paragraph + 2 <= 4000``; a longer one stays whole."""
    content = "\n\n".join(["a" * 3000, "b" * 998, "c" * 5000, "d" * 10])
    stored = client.post("/embed", json={"key": "long/doc", "content": content, "producer": "ledger"})
    assert stored.status_code == 200 and stored.json()["chunks_stored"] == 3
    chunks = client.get("/by-key/long/doc").json()["chunks"]
    assert [c["chunk_idx"] for c in chunks] == [0, 1, 2]
    assert [c["text_preview"][:1] for c in chunks] == ["a", "c", "d"]
    assert [len(c["text_preview"]) for c in chunks] == [500, 500, 10]  # text_preview is chunk[:500]
    short = client.post("/embed", json={"key": "short/doc", "content": "x" * 4000, "producer": "ledger"})
    assert short.json()["chunks_stored"] == 1


def test_a_word_longer_than_a_lexeme_is_stored_and_searched(client: TestClient) -> None:
    """Ledger E6: upstream stored any content; a word over Postgres's 2 kB lexeme limit (a base64 run) used to refuse
    the whole chunk. The word is left out of the word side; the chunk is stored and found."""
    blob = "Q" * 3000
    stored = client.post("/embed", json={"key": "blob/doc", "content": f"certificate rotation notes {blob} end", "producer": "ledger"})
    assert stored.status_code == 200, stored.text
    found = client.post("/search", json={"query": "certificate rotation", "producer": "ledger"}).json()
    assert [r["key"] for r in found["results"]] == ["blob/doc"]
    assert client.post("/search", json={"query": blob, "producer": "ledger"}).status_code == 200


def test_files_below_the_feed_folder_are_not_global_feed_entries(client: TestClient, settings: Settings) -> None:
    """Ledger 1.4: only the top level of ``brain-feed/`` is read (``ticks/`` and other subfolders are not)."""
    from tests.support.harness import brain

    note = "---\nid: {id}\ntitle: Nested\npriority: 6\n---\n\nnested body\n"
    for folder, ident in (("ticks", "nested-tick"), ("archive/old", "nested-archive")):
        path = settings.vault / "brain-feed" / folder / f"{ident}.md"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(note.format(id=ident))
    (settings.vault / "brain-feed" / "top-level.md").write_text(note.format(id="top-level"))
    assert brain(settings, "reindex").exit_code == 0
    feed = client.get("/feed").json()
    ids = {e["id"] for bucket in ("hot_arcs", "inject_blocks", "entries") for e in feed[bucket]}
    assert "top-level" in ids and not ids & {"nested-tick", "nested-archive"}


def test_search_results_carry_upstreams_fields_and_a_four_place_score(client: TestClient) -> None:
    """Ledger E13, E16: ``{query, results, count}``; each result has upstream's fields and a score rounded to 4 places;
    every chunk of a key carries the metadata it was stored with."""
    content = "\n\n".join(["koala eucalyptus diet " * 150, "koala sleep hours " * 150])
    stored = client.post("/embed", json={"key": "k/koala", "content": content, "producer": "ledger", "metadata": {"source": "field-notes"}})
    assert stored.json()["chunks_stored"] == 2
    assert [c["metadata"]["source"] for c in client.get("/by-key/k/koala").json()["chunks"]] == ["field-notes", "field-notes"]
    for mode in ("vector", "hybrid"):
        found = client.post("/search", json={"query": "koala diet", "producer": "ledger", "mode": mode}).json()
        assert {"query", "results", "count"} <= set(found) and found["count"] == len(found["results"]) >= 1
        for result in found["results"]:
            assert {"key", "producer", "chunk_idx", "content_type", "text_preview", "metadata", "score"} <= set(result)
            assert round(result["score"], 4) == result["score"]
            assert result["metadata"]["source"] == "field-notes"


def test_an_arc_is_embedded_under_its_cluster_id_with_upstreams_metadata() -> None:
    """Ledger E24: key the ``cluster_id``, producer ``brain-arc``, metadata ``{region, heat (text), status, title,
    summary, path}``; the text leads with its title, summary and region as embed_arcs wrote it."""
    from brain_core.chunks import entry_doc
    from brain_core.vault.records import records_for

    text = (
        "---\ncluster_id: 2026-11-29-auth-flow-0123456789ab\ntitle: Auth flow\nregion: left-hemisphere\nstatus: active\n"
        "heat: 7\nsummary: Rebuilt the login redirect.\n---\n\n# Auth flow\n\nbody text\n"
    )
    [arc] = [r for r in records_for("clusters/2026-11-29/2026-11-29-auth-flow-0123456789ab.md", text) if r.kind == "arc"]
    doc = entry_doc(arc)
    assert doc is not None and (doc.key, doc.producer) == ("2026-11-29-auth-flow-0123456789ab", "brain-arc")
    assert {k: doc.metadata[k] for k in ("region", "heat", "status", "title", "summary", "path")} == {
        "region": "left-hemisphere",
        "heat": "7",
        "status": "active",
        "title": "Auth flow",
        "summary": "Rebuilt the login redirect.",
        "path": "clusters/2026-11-29/2026-11-29-auth-flow-0123456789ab.md",
    }
    assert doc.text.startswith("Title: Auth flow\n\nSummary: Rebuilt the login redirect.\n\nRegion: left-hemisphere")


def test_vault_list_and_search_default_to_upstreams_limits(client: TestClient, settings: Settings) -> None:
    """Ledger 1.8: ``/vault/list`` lists 500 files unless asked, ``/vault/search`` answers 20 results."""
    vault = Vault(settings.vault)
    for n in range(501):
        vault.write_atomic(f"left/research/many/n{n:03d}.md", "a platypus note\n")
    listed = client.get("/vault/list", params={"prefix": "left/research/many"}).json()
    assert (listed["count"], listed["truncated"]) == (500, True)
    assert client.get("/vault/search", params={"q": "platypus"}).json()["count"] == 20


def test_an_append_to_a_log_that_is_not_utf8_keeps_its_bytes(client: TestClient, settings: Settings) -> None:
    """Ledger 1.6 (UPSTREAM.md 0.7, a defect): upstream answered 500 for a target that was not UTF-8, and overwrote a
    target it could not read with the new entry alone. An append here never rewrites what is there."""
    today = dt.datetime.now(dt.timezone.utc).date().isoformat()
    daily = settings.vault / "daily" / f"{today}.md"
    daily.parent.mkdir(parents=True, exist_ok=True)
    before = b"# a hand-written day\n\nnotes in latin-1: caf\xe9\n\n"
    daily.write_bytes(before)
    answer = _marker(client, "milestone", "Shipped despite the encoding.")
    assert answer.status_code == 201, answer.text
    after = daily.read_bytes()
    assert after.startswith(before) and b"Shipped despite the encoding." in after
