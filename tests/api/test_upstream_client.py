"""The upstream client against the kernel: the agentihooks hooks must keep working unchanged.

Each test drives the kernel the way the hooks do (UPSTREAM.md section 7,
emulated in tests/support/upstream_client.py) and asserts what the hooks read from
each answer: the feed items and what the ``brain`` channel ends up holding,
the ``/signal`` fields the amygdala hook acts on, whether a marker post counts
as delivered, and whether the outbox drains. Memory is planted through the
kernel's real writers (``POST /marker``, arc files, ``brain tick --no-ai``);
the feed tests that only read share one copy of it for the module (``world``).
"""

from __future__ import annotations

import datetime as dt
import json
import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from brain_core.vault import frontmatter
from brain_kernel.settings import Settings
from tests.support.harness import ManualClock, PlantedImage, Served, cloned_database, make_settings
from tests.support.planting import PROJECTS, Planted, run_cli
from tests.support.upstream_client import (
    FRAMING,
    AmygdalaHook,
    BrainAdapter,
    BrainHttp,
    BrainWriter,
    Marker,
    asgi_sender,
    fetch_feed,
    marker_key,
    marker_request,
    shape,
    shrink,
    unreachable_sender,
    urllib_sender,
    write_outbox_file,
)

BASE = "http://testserver"
TOKEN = "hooks-token-1"
HOT_ARCS = "Active Hot Arcs"
ALERT_FILE = "brain-feed/amygdala-active.md"


def http_for(client, token: str | None = None) -> BrainHttp:
    """The hooks' HTTP helper pointed at the in-process app (``BRAIN_URL`` with a trailing slash, as set by hand)."""
    return BrainHttp(BASE + "/", asgi_sender(client), token)


@pytest.fixture
def token_client(tmp_path: Path, database_url: str, client) -> Iterator[object]:
    """A second app on the same vault and database, with bearer tokens configured."""
    from fastapi.testclient import TestClient

    from brain_api.app import create_app

    with TestClient(create_app(make_settings(tmp_path, database_url, tokens=[TOKEN, "other-token"]))) as c:
        yield c


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory, pg_admin_url: str, _planted_image: PlantedImage) -> Iterator[tuple[object, Planted]]:
    """The run's planted image cloned once for the module's read-only feed tests (a clone per test cost 0.3 s): the app, what was planted.

    Only tests that write nothing use it, so each reads exactly the planted memory.
    """
    from fastapi.testclient import TestClient

    from brain_api.app import create_app

    with cloned_database(pg_admin_url, _planted_image.database_url) as url:
        settings = make_settings(tmp_path_factory.mktemp("upstream-client"), url)
        planted = _planted_image.restore(settings)
        with TestClient(create_app(settings, clock=ManualClock())) as client:
            yield client, planted


def unique() -> str:
    return "u" + uuid.uuid4().hex[:16]


def vault_count(vault: Path, needle: str) -> int:
    """How many times ``needle`` occurs in the vault's files (dot files included)."""
    total = 0
    for dirpath, _, files in os.walk(vault):
        for name in files:
            total += (Path(dirpath) / name).read_text(encoding="utf-8", errors="replace").count(needle)
    return total


def vault_snapshot(vault: Path) -> dict[str, bytes]:
    out = {}
    for dirpath, _, files in os.walk(vault):
        for name in files:
            path = Path(dirpath) / name
            out[str(path.relative_to(vault))] = path.read_bytes()
    return out


# ---------------------------------------------------------------------------
# The feed (brain_adapter)
# ---------------------------------------------------------------------------


def assert_nothing_dropped(payload: dict) -> None:
    """Every item of every bucket carries an id and content, and no id is in two buckets (or twice in one)."""
    where: dict[str, str] = {}
    for bucket in ("hot_arcs", "inject_blocks", "entries"):
        assert isinstance(payload.get(bucket), list), f"bucket {bucket} missing"
        for item in payload[bucket]:
            assert isinstance(item, dict), f"{bucket} holds a non-object {item!r}"
            assert item.get("id"), f"{bucket} item without an id would be keyed on its title or skipped: {item!r}"
            assert str(item.get("content") or "").strip(), f"{bucket} item {item['id']} has no content: the client skips it"
            assert str(item["id"]) not in where, f"id {item['id']} is in {where.get(str(item['id']))} and {bucket}: the client keeps only the first"
            where[str(item["id"])] = bucket


def table_rows(content: str) -> tuple[int, list[str]]:
    """(index of the ``| Arc ... Heat`` header line, the data rows after its rule line)."""
    lines = content.splitlines()
    header = next(i for i, line in enumerate(lines) if line.strip().startswith("| Arc") and "Heat" in line)
    rows = []
    for line in lines[header + 2 :]:
        if not line.strip().startswith("|"):
            break
        rows.append(line)
    return header, rows


def read_feed(client, project: str | None = None, token: str | None = None) -> tuple[dict, list]:
    """The raw answer and the client's reading of it, from one request."""
    http = http_for(client, token)
    entries = fetch_feed(http, project)
    exchange = http.last
    assert exchange.headers["Accept"] == "application/json"
    assert exchange.status == 200, exchange.raw[:300]
    return exchange.json(), entries


def test_global_feed_gives_the_client_a_framed_hot_arcs_table_and_drops_nothing(world: tuple[object, Planted]) -> None:
    client, planted = world
    payload, entries = read_feed(client)
    assert_nothing_dropped(payload)
    assert len(entries) == sum(len(payload[b]) for b in ("hot_arcs", "inject_blocks", "entries"))
    assert [e.priority for e in entries] == sorted((e.priority for e in entries), reverse=True)

    hot = [e for e in entries if e.title == HOT_ARCS]
    assert len(hot) == 1 and hot[0].content.strip(), "the client has no Active Hot Arcs item"
    _, rows = table_rows(hot[0].content)
    assert len(rows) > 5, "the planted fleet has more than five hot arcs"
    assert all(any(t in hot[0].content for t in planted.owned[p]) for p in PROJECTS), "a planted project's arcs are missing from the table"

    by_title = {b.title: b for b in shape(entries)}
    shown = by_title[HOT_ARCS].message
    assert shown.startswith(f"[{HOT_ARCS}]\n{FRAMING}")
    _, kept = table_rows(shown)
    assert kept[:5] == rows[:5]
    assert kept[5] == f"| ... | ... | ... | ... | *({len(rows) - 5} more arcs trimmed)* |"
    assert len(kept) == 6
    assert by_title["Operator Intent"].message.startswith(f"[Operator Intent]\n{FRAMING}")
    signals = next(e for e in entries if e.title == "Active Signals")
    assert signals.severity == "critical"  # a planted fleet signal is critical
    assert by_title["Active Signals"].severity == "critical"  # non-empty: not downgraded
    assert not by_title["Active Signals"].message.startswith(f"[Active Signals]\n{FRAMING}")


@pytest.mark.parametrize("project", list(PROJECTS))
def test_each_project_feed_reads_like_the_global_one_for_the_client(world: tuple[object, Planted], project: str) -> None:
    client, planted = world
    payload, entries = read_feed(client, project)
    assert payload["project"]["known"] is True
    assert_nothing_dropped(payload)
    assert len(entries) == sum(len(payload[b]) for b in ("hot_arcs", "inject_blocks", "entries"))
    hot = [e for e in entries if e.title == HOT_ARCS]
    assert len(hot) == 1 and hot[0].content.strip()
    _, rows = table_rows(hot[0].content)
    assert rows, f"{project}'s hot arcs table has no rows"
    shown = next(b for b in shape(entries) if b.title == HOT_ARCS).message
    assert shown.startswith(f"[{HOT_ARCS}]\n{FRAMING}")
    _, kept = table_rows(shown)
    assert kept == rows if len(rows) <= 5 else len(kept) == 6
    own = planted.owned[project]
    assert any(t in shown for t in own), f"none of {project}'s own memory reached the client"


def test_an_unknown_project_feed_still_gives_the_client_readable_items(world: tuple[object, Planted]) -> None:
    client, planted = world
    payload, entries = read_feed(client, "nobody/nothing")
    assert payload["project"]["known"] is False
    assert_nothing_dropped(payload)
    assert len(entries) == sum(len(payload[b]) for b in ("hot_arcs", "inject_blocks", "entries"))
    assert entries, "an unknown project must not clear the client's brain channel"
    assert any(t in e.content for e in entries for t in planted.fleet)


def test_an_unchanged_feed_is_not_republished(world: tuple[object, Planted]) -> None:
    """The client hashes (id, content, priority): a feed that did not change must not churn the channel."""
    client = world[0]
    for project in (None, "acme/web"):
        adapter = BrainAdapter(http_for(client), project)
        assert adapter.refresh() == "published"
        first = list(adapter.channel)
        assert adapter.refresh() == "unchanged"
        assert adapter.channel == first


def test_a_body_longer_than_1536_characters_is_cut_as_the_client_cuts_it(client, planted: Planted, settings: Settings) -> None:
    long_body = " ".join(f"word{i}" for i in range(600))
    (settings.vault / "brain-feed/inject").mkdir(parents=True, exist_ok=True)
    (settings.vault / "brain-feed/inject/long.md").write_text(
        frontmatter.render({"id": "inject-long", "title": "Long block", "target": "all"}, long_body + "\n")
    )
    run_cli(settings, "tick", "--no-ai")
    payload, entries = read_feed(client)
    assert_nothing_dropped(payload)
    block = next(e for e in entries if "word599" in e.content)
    assert len(block.content) > 1536
    shown = next(b for b in shape(entries) if b.title == block.title).message
    assert shown == f"[{block.title}]\n{block.content[:1536]}\n…[+{len(block.content) - 1536} bytes trimmed]"
    assert shrink(block.content) == block.content[:1536] + f"\n…[+{len(block.content) - 1536} bytes trimmed]"


def test_an_empty_signals_entry_reaches_the_client_as_info(client, settings: Settings) -> None:
    run_cli(settings, "tick", "--no-ai")
    payload, entries = read_feed(client)
    assert_nothing_dropped(payload)
    signals = next(e for e in entries if e.title == "Active Signals")
    assert signals.content == "No active signals."
    assert signals.severity == "info"
    assert next(b for b in shape(entries) if b.title == "Active Signals").severity == "info"


def test_with_tokens_the_client_reads_the_same_feed_and_without_one_reads_nothing(client, token_client, planted: Planted) -> None:
    _, open_entries = read_feed(client)
    _, entries = read_feed(token_client, token=TOKEN)
    assert [(e.id, e.content) for e in entries] == [(e.id, e.content) for e in open_entries]
    http = http_for(token_client)
    assert fetch_feed(http) == []
    assert "Authorization" not in http.last.headers
    assert http.last.status == 401 and http.last.json() == {"detail": "missing bearer token"}
    http = http_for(token_client, "stale-token")
    assert fetch_feed(http, "acme/web") == []
    assert http.last.status == 401 and http.last.json() == {"detail": "invalid token"}


# ---------------------------------------------------------------------------
# POST /marker (brain_writer_hook)
# ---------------------------------------------------------------------------

MARKER_ATTRS = {
    "lesson": {},
    "milestone": {"scope": "kb-router", "status": "done"},
    "signal": {"severity": "critical"},
    "decision": {"title": "Keep the hooks unchanged"},
}


@pytest.mark.parametrize("marker_type", list(MARKER_ATTRS))
def test_each_marker_type_posted_as_the_writer_posts_it_is_delivered_and_written(client, settings: Settings, marker_type: str) -> None:
    token = unique()
    marker = Marker(marker_type, f"Compatibility check for {marker_type}\nbody {token}", dict(MARKER_ATTRS[marker_type]))
    http = http_for(client)
    writer = BrainWriter(http, settings.vault.parent / "outbox")
    session = f"sess-{token}"
    body, key = marker_request(marker, session, None)
    assert body == {"type": marker_type, "content": marker.content, "attrs": {**MARKER_ATTRS[marker_type], "session_id": session, "source": "agent"}}
    assert key == uuid.uuid5(uuid.NAMESPACE_URL, f"{session}-{marker_type}-{marker.content}").hex
    answer = writer.post_marker(marker, session)
    assert http.last.headers["X-Idempotency-Key"] == key
    assert http.last.headers["Content-Type"] == "application/json"
    assert http.last.status == 201, http.last.raw[:300]
    assert answer is not None and answer["ok"] is True, "the writer would buffer this marker in its outbox"
    assert answer["idempotency_key"] == key and answer["marker_type"] == marker_type
    written = settings.vault / answer["vault_path"]
    assert written.is_file()
    text = written.read_text(encoding="utf-8")
    assert marker.content in text
    if marker_type == "milestone":
        assert "scope=kb-router" in text
    if marker_type == "signal":
        assert frontmatter.parse(text).meta["severity"] == "critical"


def assistant_line(text: str) -> str:
    return json.dumps({"type": "assistant", "message": {"role": "assistant", "content": [{"type": "text", "text": text}]}})


def test_the_stop_hook_delivers_the_first_five_transcript_markers(client, settings: Settings, tmp_path: Path) -> None:
    tokens = [unique() for _ in range(6)]
    transcript = tmp_path / "session.jsonl"
    transcript.write_text(
        "\n".join(
            [
                json.dumps({"type": "user", "message": {"role": "user", "content": "go"}}),
                assistant_line(f"Done.\n<!-- @lesson -->\nRetry with backoff\n{tokens[0]}\n<!-- @/lesson -->"),
                assistant_line(f"<!-- @milestone scope=kb-router status=done -->\nRouter cut over\n{tokens[1]}\n<!-- @/milestone -->\n<!-- @lesson inline -->"),
                assistant_line(f'<!-- @signal severity=warning source="" -->\nDisk filling\n{tokens[2]}\n<!-- @/signal -->'),
                assistant_line(f'<!-- @decision title="Use Postgres" -->\nPostgres it is\n{tokens[3]}\n<!-- @/decision -->'),
                assistant_line(f"<!-- @lesson -->\nFifth\n{tokens[4]}\n<!-- @/lesson -->\n<!-- @lesson -->\nSixth\n{tokens[5]}\n<!-- @/lesson -->"),
            ]
        )
        + "\n"
    )
    http = http_for(client)
    writer = BrainWriter(http, tmp_path / "outbox", agent_name="claude-code")
    result = writer.on_stop("sess-stop", transcript)
    assert [m.type for m in result.markers] == ["lesson", "milestone", "signal", "decision", "lesson"]
    assert result.markers[2].attrs["source"] is None  # k="" is sent as JSON null (UPSTREAM.md 0.22)
    posts = [x for x in http.exchanges if x.method == "POST"]
    assert [x.status for x in posts] == [201] * 5, [x.raw[:200] for x in posts]
    assert json.loads(posts[2].body)["attrs"]["source"] is None
    assert result.posted == 5 and result.buffered == [] and not (tmp_path / "outbox").exists()
    for token in tokens[:5]:
        assert vault_count(settings.vault, token) == 1
    assert vault_count(settings.vault, tokens[5]) == 0  # only the first five of a transcript are ever sent


# ---------------------------------------------------------------------------
# The outbox
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("project_in_attrs", [False, True], ids=["spec-drain", "project-path-in-attrs"])
def test_the_outbox_drains_free_scope_milestones_and_lessons(client, settings: Settings, tmp_path: Path, project_in_attrs: bool) -> None:
    """Upstream's scope is a free label: ``scope=kb-router`` or ``scope=phase-7`` must not wedge the drain."""
    outbox = tmp_path / "brain-outbox"
    project_dir = str(tmp_path / "home" / "dev" / "kb-router")
    start = dt.datetime(2026, 4, 10, 12, 0, 0, tzinfo=dt.timezone.utc)
    tokens = [unique() for _ in range(3)]
    markers = [
        Marker("milestone", f"Router shipped\n{tokens[0]}", {"scope": "kb-router"}),
        Marker("lesson", f"Pin the image digest\n{tokens[1]}", {}),
        Marker("milestone", f"Phase seven closed\n{tokens[2]}", {"scope": "phase-7", "status": "done"}),
    ]
    if project_in_attrs:  # later hooks and the sync script send the folder along
        for m in markers:
            m.attrs["project"] = project_dir
    files = [
        write_outbox_file(outbox, m, "sess-outbox", agent_name="agent-a", project=project_dir, at=start + dt.timedelta(seconds=i))
        for i, m in enumerate(markers)
    ]
    (outbox / "20260410T115959-lesson-0badf11e.json").write_text("{not json")
    (outbox / "20260410T115958-lesson-0badf11f.json").write_text(json.dumps({"type": "lesson", "attrs": {}}))
    assert json.loads(files[0].read_text())["project"] == project_dir

    http = http_for(client)
    result = BrainWriter(http, outbox, agent_name="agent-a").drain()
    assert result.stopped_at is None, f"the drain is wedged at {result.stopped_at}: {http.last.status} {http.last.raw[:300]!r}"
    assert result.delivered == [f.name for f in files]
    assert sorted(p.name for p in outbox.iterdir()) == ["20260410T115958-lesson-0badf11f.json.bad", "20260410T115959-lesson-0badf11e.json.bad"]
    for token in tokens:
        assert vault_count(settings.vault, token) == 1


def test_the_drain_stops_at_the_first_refused_post_and_resumes_later(token_client, settings: Settings, tmp_path: Path) -> None:
    outbox = tmp_path / "brain-outbox"
    start = dt.datetime(2026, 4, 10, 12, 0, 0, tzinfo=dt.timezone.utc)
    tokens = [unique() for _ in range(2)]
    for i, token in enumerate(tokens):
        write_outbox_file(outbox, Marker("lesson", f"Lesson {i}\n{token}"), "sess-d", agent_name="a", project="/p", at=start + dt.timedelta(seconds=i))
    refused = BrainWriter(http_for(token_client, "stale-token"), outbox).drain()
    assert refused.delivered == [] and refused.stopped_at is not None
    assert len(list(outbox.glob("*.json"))) == 2
    accepted = BrainWriter(http_for(token_client, TOKEN), outbox).drain()
    assert len(accepted.delivered) == 2 and list(outbox.iterdir()) == []
    assert all(vault_count(settings.vault, t) == 1 for t in tokens)


def test_markers_buffered_while_the_server_was_down_are_delivered_once(client, settings: Settings, tmp_path: Path) -> None:
    """Stop with brain-api down buffers; the next Stop drains the outbox, then re-posts the same markers (replays)."""
    tokens = [unique() for _ in range(3)]
    transcript = tmp_path / "s.jsonl"
    transcript.write_text(
        assistant_line(
            f"<!-- @lesson -->\nA\n{tokens[0]}\n<!-- @/lesson -->\n"
            f"<!-- @milestone scope=phase-7 -->\nB\n{tokens[1]}\n<!-- @/milestone -->\n"
            f"<!-- @signal severity=warning -->\nC\n{tokens[2]}\n<!-- @/signal -->"
        )
        + "\n"
    )
    outbox = tmp_path / "brain-outbox"
    down = BrainWriter(BrainHttp(BASE, unreachable_sender()), outbox, agent_name="worker-1", project_dir="/home/op/dev/api")
    first = down.on_stop("sess-down", transcript)
    assert first.posted == 0 and len(first.buffered) == 3

    http = http_for(client)
    second = BrainWriter(http, outbox, agent_name="worker-2").on_stop("sess-down", transcript)
    assert len(second.drain.delivered) == 3 and second.drain.stopped_at is None
    assert second.posted == 3 and second.buffered == []
    assert list(outbox.iterdir()) == []
    replays = [x.json() for x in http.exchanges[3:]]
    assert all(r["ok"] is True and r.get("idempotent_replay") is True for r in replays)
    for token in tokens:
        assert vault_count(settings.vault, token) == 1


# ---------------------------------------------------------------------------
# Idempotency as the client relies on it
# ---------------------------------------------------------------------------


def test_a_replay_with_another_source_is_accepted_and_written_once(client, settings: Settings) -> None:
    """The agent name at drain time can differ from the one at post time: same key, another ``source``."""
    token = unique()
    marker = Marker("lesson", f"Drain replays keep the key\n{token}")
    http = http_for(client)
    first = BrainWriter(http, settings.vault.parent / "ob", agent_name="agent-a").post_marker(marker, "sess-r")
    assert first is not None and http.last.status == 201
    before = vault_snapshot(settings.vault)
    again = BrainWriter(http, settings.vault.parent / "ob", agent_name="agent-b").post_marker(marker, "sess-r")
    assert json.loads(http.last.body)["attrs"]["source"] == "agent-b"
    assert http.last.headers["X-Idempotency-Key"] == marker_key("sess-r", "lesson", marker.content)
    assert http.last.status == 201, http.last.raw[:300]
    assert again is not None, "a refused replay would wedge the outbox for good"
    assert again["ok"] is True and again["idempotent_replay"] is True and again["body_mismatch"] is True
    assert again["vault_path"] == first["vault_path"]
    assert vault_snapshot(settings.vault) == before
    assert vault_count(settings.vault, token) == 1


def test_the_same_body_twice_without_a_key_is_written_once(client, settings: Settings) -> None:
    token = unique()
    http = http_for(client)
    body = {"type": "lesson", "content": f"No header here\n{token}", "attrs": {"session_id": "s-nokey", "source": "agent"}}
    first, again = http.post("/marker", body=body), http.post("/marker", body=body)
    assert [x.status for x in http.exchanges] == [201, 201]
    assert "X-Idempotency-Key" not in http.exchanges[0].headers
    assert first is not None and first["ok"] is True and "idempotent_replay" not in first
    assert again is not None and again["ok"] is True and again["idempotent_replay"] is True
    assert again["idempotency_key"] == first["body_hash"]
    assert vault_count(settings.vault, token) == 1


def test_markers_reposted_on_every_stop_are_written_once_across_workers(served: Served) -> None:
    """Upstream kept keys per process (here Postgres keeps them: ADR 0005); the hooks re-post the same first markers on every Stop."""
    token = unique()
    marker = Marker("lesson", f"Re-posted on every Stop\n{token}", {})
    http = BrainHttp(served.base, urllib_sender())
    writer = BrainWriter(http, Path("/nonexistent-outbox"), agent_name="fleet-agent")
    answers = [writer.post_marker(marker, "sess-fleet") for _ in range(8)]
    assert [x.status for x in http.exchanges] == [201] * 8
    assert all(a is not None and a["ok"] is True for a in answers)
    assert [bool(a.get("idempotent_replay")) for a in answers] == [False] + [True] * 7
    assert vault_count(served.settings.vault, token) == 1


# ---------------------------------------------------------------------------
# GET /signal (amygdala_hook)
# ---------------------------------------------------------------------------


def alert_text(heading: str, **meta: object) -> str:
    """The alert file as the amygdala daemon writes it (UPSTREAM.md 5.7)."""
    fields = {"id": "amygdala-active", "title": "AMYGDALA ALERT", "priority": 100, "ttl": 300, "severity": "critical", **meta}
    front = "".join(f"{k}: {v}\n" for k, v in fields.items() if v is not None)
    body = f"## {heading}\nSource: events:health | event: host.down\nTime: 2026-04-10 12:00 UTC\nAffected: db-1\n**ACTION REQUIRED: Halt non-critical operations. Operator notified.**\n"
    return f"---\n{front}---\n\n{body}"


def test_with_no_alert_file_the_hook_sees_all_clear_and_clears_nothing(client) -> None:
    http = http_for(client)
    hook = AmygdalaHook(http)
    assert hook.poll() == "idle"
    assert http.last.status == 200
    assert http.last.json()["active"] is False and http.last.json()["hash"] is None
    assert hook.channel == []


def test_the_alert_file_is_read_as_the_amygdala_hook_reads_it(client, settings: Settings) -> None:
    path = settings.vault / ALERT_FILE
    path.write_text(alert_text("[NUCLEAR] Database host down"))
    http = http_for(client)
    hook = AmygdalaHook(http)
    assert hook.poll() == "broadcast"
    answer = http.last.json()
    assert answer["active"] is True and answer["severity"] == "critical" and answer["title"] == "AMYGDALA ALERT"
    assert answer["content"].startswith("## [NUCLEAR] Database host down")
    assert answer["hash"] and len(answer["hash"]) == 16
    [shown] = hook.channel
    assert shown.message == f"[AMYGDALA ALERT]\n\n{answer['content']}"
    assert (shown.severity, shown.source, shown.persistent, shown.channel) == ("critical", "amygdala-hook", True, "amygdala")

    assert hook.poll() == "same"  # the same hash twice: nothing to do
    path.write_text(alert_text("[NUCLEAR] Database host down", ttl=301))
    assert hook.poll() == "broadcast" and hook.last_hash != answer["hash"]
    path.write_text(alert_text("[CRITICAL] Recovered", severity="resolved"))
    assert hook.poll() == "cleared"
    assert http.last.json()["active"] is False and http.last.json()["severity"] == "resolved"
    assert hook.channel == []


def test_an_alert_without_severity_or_title_uses_the_hooks_defaults(client, settings: Settings) -> None:
    (settings.vault / ALERT_FILE).write_text(alert_text("[NUCLEAR] Cluster offline", severity=None, title=None))
    http = http_for(client)
    hook = AmygdalaHook(http)
    assert hook.poll() == "broadcast"
    assert http.last.json()["severity"] == "critical" and http.last.json()["title"] == "AMYGDALA ALERT"
    assert hook.channel[0].message.startswith("[AMYGDALA ALERT]\n\n## [NUCLEAR] Cluster offline")


def test_a_signal_marker_from_an_agent_never_raises_the_alert(client) -> None:
    http = http_for(client)
    writer = BrainWriter(http, Path("/nonexistent-outbox"))
    assert writer.post_marker(Marker("signal", "Disk at 91% on build-3", {"severity": "warning"}), "sess-sig") is not None
    assert writer.post_marker(Marker("signal", "Pager storm", {"severity": "critical", "scope": "fleet"}), "sess-sig") is not None
    hook = AmygdalaHook(http)
    assert hook.poll() == "idle"
    assert http.last.json()["active"] is False


# ---------------------------------------------------------------------------
# Auth
# ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("headers", "detail"),
    [
        ({}, "missing bearer token"),
        ({"Authorization": f"bearer{TOKEN}"}, "missing bearer token"),
        ({"Authorization": f"Token {TOKEN}"}, "missing bearer token"),
        ({"Authorization": "Bearer not-a-token"}, "invalid token"),
    ],
    ids=["no-header", "no-space-after-scheme", "other-scheme", "unknown-token"],
)
@pytest.mark.parametrize("route", ["/feed", "/signal", "/marker"])
def test_auth_refusals_are_upstreams_401s(token_client, headers: dict, detail: str, route: str) -> None:
    if route == "/marker":
        r = token_client.post(route, json={"type": "lesson", "content": "x"}, headers=headers)
    else:
        r = token_client.get(route, headers=headers)
    assert r.status_code == 401
    assert r.json() == {"detail": detail}


def test_health_needs_no_token_and_names_the_service(token_client) -> None:
    http = BrainHttp(BASE, asgi_sender(token_client))
    answer = http.get("/health")
    assert http.last.status == 200
    assert answer is not None and answer["service"] == "brain-api" and answer["status"] == "ok"
    assert http_for(token_client, TOKEN).get("/signal") is not None
