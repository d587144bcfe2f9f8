"""brain tick: heat and status written back with targeted edits, dry runs, intents with and without an LLM."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy.orm import Session
from typer.testing import CliRunner

from brain_cli.cli import app
from brain_core.arcs import ArcSession, build_plan, render_arc
from brain_core.feed.intent import sentences
from brain_core.vault import frontmatter
from brain_kernel.index.entries import entry_rows
from brain_kernel.index.rebuild import rebuild
from brain_kernel.settings import Settings
from brain_kernel.vault_store import Vault
from brain_ops.keeper.tick import run_tick
from tests.support.openai_stub import OpenAIStub
from tests.support.progress_recorder import ProgressRecorder

NOW = dt.datetime(2026, 11, 29, 12, 0, tzinfo=dt.timezone.utc)


def _arc(vault: Vault, sid: str, key: str, repo: str | None, prompt: str, *, hours_ago: float, tools: int = 10, joy: int = 0) -> str:
    start = NOW - dt.timedelta(hours=hours_ago)
    plan = build_plan(
        [
            ArcSession(
                session_id=sid,
                project=key,
                repo=repo,
                project_source="git",
                cwd=f"/h/{key}",
                start=start,
                end=start + dt.timedelta(minutes=30),
                num_tool_calls=tools,
                joy_markers=joy,
                first_user_prompt=prompt,
            )
        ]
    )
    vault.write_atomic(plan.vault_path, render_arc(plan))
    return plan.vault_path


def _snapshot(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.fixture
def vault(settings: Settings) -> Vault:
    v = Vault(settings.vault)
    _arc(v, "a1", "api", "org1/api", "Rewrite the request router for speed", hours_ago=2, tools=120)
    _arc(v, "a2", "api", "org1/api", "Document the public endpoints", hours_ago=30)
    _arc(v, "w1", "web", "acme/web", "Fix the flaky login test", hours_ago=5)
    _arc(v, "old", "legacy", "acme/legacy", "Migrate the old cron jobs", hours_ago=24 * 10, joy=2)
    _arc(v, "older", "legacy", "acme/legacy", "Abandoned spike on queues", hours_ago=24 * 8)
    return v


def _where(vault: Vault) -> dict[str, str]:
    """cluster_id -> vault path of every arc, wherever the keeper moved it."""
    out = {}
    for prefix in ("clusters", "frontal-lobe", "left"):
        if vault.exists(prefix):
            for p in vault.iter_files(prefix):
                meta = frontmatter.parse(p.read_text()).meta
                if meta.get("cluster_id"):
                    out[meta["cluster_id"]] = vault.rel(p)
    return out


def test_tick_writes_upstream_heat_and_status_with_targeted_edits_and_moves(vault: Vault, settings: Settings, db: Session) -> None:
    before = {frontmatter.parse(vault.read_text(vault.rel(x))).meta["cluster_id"]: vault.read_text(vault.rel(x)) for x in vault.iter_files("clusters")}
    summary = run_tick(db, vault, settings, now=NOW, use_ai=False)
    db.commit()
    assert summary.arcs_scanned == 5 and summary.arcs_updated == 5
    assert summary.statuses == {"active": 2, "complete": 1, "stalled": 2}
    where = _where(vault)
    titles = {}
    for cid, old in before.items():
        new = vault.read_text(where[cid])
        old_meta, new_meta = frontmatter.parse(old).meta, frontmatter.parse(new).meta
        assert {k for k in old_meta if old_meta[k] != new_meta.get(k)} <= {"heat", "status"}
        changed = [(a, b) for a, b in zip(old.splitlines(), new.splitlines(), strict=False) if a != b]
        assert all(a.startswith(("heat:", "status:")) for a, _ in changed), changed
        assert len(old.splitlines()) == len(new.splitlines())
        titles[new_meta["title"]] = (new_meta["heat"], new_meta["status"], where[cid].rsplit("/", 1)[0])
    # Upstream's formula: 2 h old, 1 session, active: 3 + 1 + 2 = 6, promoted (moved, not copied).
    assert titles["Rewrite the request router for speed"] == (6, "active", "frontal-lobe/conscious")
    assert titles["Fix the flaky login test"] == (6, "active", "frontal-lobe/conscious")
    assert titles["Document the public endpoints"] == (2, "complete", "clusters/2026-11-28")  # 30 h: +1, no longer active
    assert titles["Migrate the old cron jobs"][:2] == (2, "stalled")  # 10 days: the session and its joy marker
    assert titles["Abandoned spike on queues"][:2] == (1, "stalled")
    assert summary.stats["promotions"] == 2 and summary.stats["heat_changes"] == 5
    assert sorted(m["to"].split("/")[1] for m in summary.moves) == ["conscious", "conscious"]
    left = [p.name for p in vault.iter_files("clusters")]
    assert len([n for n in left if not n.startswith("_")]) == 3 and left.count("_dashboard.md") == 4  # one per date folder
    again = run_tick(db, vault, settings, now=NOW, use_ai=False)
    assert again.arcs_updated == 0 and again.vault_writes == 0 and again.files_written == []  # a rerun at the same instant changes nothing


def test_the_ticks_index_rows_equal_a_rebuild_from_the_files_it_wrote(vault: Vault, settings: Settings, db: Session) -> None:
    summary = run_tick(db, vault, settings, now=NOW, use_ai=False)  # arcs parsed once, rows built from the edited metadata
    db.commit()
    assert summary.arcs_updated == 5
    from_tick = entry_rows(db)
    rebuild(db, vault)
    db.commit()
    assert entry_rows(db) == from_tick
    assert sorted(row["heat"] for row in from_tick if row["kind"] == "arc") == sorted(
        frontmatter.parse(vault.read_text(path)).meta["heat"] for path in _where(vault).values()
    )


def test_tick_writes_intents_for_projects_active_in_72_hours_only(vault: Vault, settings: Settings, db: Session) -> None:
    summary = run_tick(db, vault, settings, now=NOW, use_ai=False)
    assert summary.active_projects == ["acme/web", "org1/api"]
    root = Path(settings.vault) / "brain-feed" / "projects"
    assert sorted(str(p.relative_to(root)) for p in root.rglob("intent.md")) == ["acme/web/intent.md", "org1/api/intent.md"]
    doc = frontmatter.parse((root / "org1/api/intent.md").read_text())
    assert doc.meta["project"] == "api" and doc.meta["repo"] == "org1/api" and doc.meta["source"] == "derived"
    assert "Rewrite the request router for speed" in doc.body
    hot = frontmatter.parse((Path(settings.vault) / "brain-feed" / "hot-arcs.md").read_text())
    assert hot.meta["id"] == "hot-arcs-2026-11-29" and hot.meta["title"] == "Active Hot Arcs"
    assert hot.body.index("Rewrite the request router") < hot.body.index("Migrate the old cron jobs")


def test_dry_run_writes_nothing(vault: Vault, settings: Settings) -> None:
    before = _snapshot(Path(settings.vault))
    result = CliRunner().invoke(app, ["tick", "--dry-run", "--no-ai", "--vault", str(settings.vault), "--database-url", str(settings.database_url)])
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout.strip().splitlines()[-1])
    assert summary["dry_run"] is True and summary["vault_writes"] == 0 and summary["arcs_updated"] == 5
    assert summary["stats"]["dry_run"] is True and "brain-feed/hot-arcs.md" in summary["files_written"]  # what it would write
    assert _snapshot(Path(settings.vault)) == before
    assert "tick:" in result.stderr


class _FakeLLM(OpenAIStub):
    """A local OpenAI-compatible chat endpoint that records requests and answers a fixed map (as the intent section)."""

    def __init__(self, answer: dict[str, str] | str, status: int = 200) -> None:
        super().__init__()
        self.answer, self.status = answer, status

    def respond(self, body: dict) -> tuple[int, dict]:
        content = self.answer if isinstance(self.answer, str) else f"### 4. Operator Intent\n{json.dumps(self.answer)}\n\n### 5. Brain Health\n8/10 — fine\n"
        return self.status, {"id": "x", "object": "chat.completion", "choices": [{"index": 0, "message": {"role": "assistant", "content": content}}]}


LONG = "Make the router twice as fast without breaking clients. " + " ".join(f"Then handle step number {i} carefully." for i in range(60))


@pytest.fixture
def fake_llm() -> Iterator[_FakeLLM]:
    with _FakeLLM({"org1/api": LONG, "unknown/project": "ignored."}) as fake:
        yield fake


def test_one_llm_call_returns_the_intent_map_capped_at_sentences(vault: Vault, settings: Settings, db: Session, fake_llm: _FakeLLM) -> None:
    configured = settings.with_overrides(llm_base_url=fake_llm.url, llm_api_key="sk-test", llm_model="fake-model")
    summary = run_tick(db, vault, configured, now=NOW, use_ai=True)
    assert summary.llm_calls == 1 and len(fake_llm.requests) == 1
    request = fake_llm.requests[0]
    assert request["path"] == "/v1/chat/completions" and request["auth"] == "Bearer sk-test"
    assert request["body"]["model"] == "fake-model"
    assert "org1/api" in request["body"]["messages"][-1]["content"] and "acme/web" in request["body"]["messages"][-1]["content"]
    assert summary.intent_sources == {"llm": 1, "derived": 1}  # acme/web was left out of the answer
    doc = frontmatter.parse((Path(settings.vault) / "brain-feed/projects/org1/api/intent.md").read_text())
    assert doc.meta["source"] == "llm"
    intent = doc.body.strip()
    assert intent.startswith("Make the router twice as fast") and len(intent) <= 400
    assert sentences(intent) == sentences(LONG)[: len(sentences(intent))]  # whole sentences, never cut
    web = frontmatter.parse((Path(settings.vault) / "brain-feed/projects/acme/web/intent.md").read_text())
    assert web.meta["source"] == "derived"


def test_no_ai_makes_no_llm_call(vault: Vault, settings: Settings, db: Session, fake_llm: _FakeLLM) -> None:
    summary = run_tick(db, vault, settings.with_overrides(llm_base_url=fake_llm.url), now=NOW, use_ai=False)
    assert summary.llm_calls == 0 and fake_llm.requests == []
    assert summary.intent_sources == {"derived": 2}


def test_a_failing_llm_falls_back_to_derived_intents(vault: Vault, settings: Settings, db: Session) -> None:
    with _FakeLLM("boom", status=500) as fake:
        summary = run_tick(db, vault, settings.with_overrides(llm_base_url=fake.url), now=NOW, use_ai=True)
    assert summary.llm_calls == 1 and summary.llm_error == "LLM endpoint answered 500"
    assert summary.intent_sources == {"derived": 2}


class _OnceUnavailableLLM(_FakeLLM):
    """503 on the first request (an overloaded endpoint), then the fixed map."""

    def respond(self, body: dict) -> tuple[int, dict]:
        if len(self.requests) == 1:
            return 503, {"error": {"message": "overloaded", "type": "server_error"}}
        return super().respond(body)


def test_a_503_then_200_is_retried_once_and_the_tick_stays_llm_driven(vault: Vault, settings: Settings, db: Session, caplog: pytest.LogCaptureFixture) -> None:
    with _OnceUnavailableLLM({"org1/api": "Ship the router."}) as llm, caplog.at_level("WARNING", logger="brain_kernel.http_client"):
        summary = run_tick(db, vault, settings.with_overrides(llm_base_url=llm.url), now=NOW, use_ai=True)
    assert len(llm.requests) == 2 and llm.requests[0]["body"] == llm.requests[1]["body"]
    assert summary.llm_calls == 1 and summary.llm_error is None and summary.intent_sources["llm"] == 1
    [retry] = [r.getMessage() for r in caplog.records if "retry" in r.getMessage()]
    assert "status 503; retry 1 of 2" in retry and "/v1/chat/completions" in retry


def test_project_feed_serves_the_keeper_intent(vault: Vault, settings: Settings, db: Session, client, fake_llm: _FakeLLM) -> None:
    run_tick(db, vault, settings.with_overrides(llm_base_url=fake_llm.url), now=NOW, use_ai=True)
    db.commit()
    feed = client.get("/feed", params={"project": "org1/api"}).json()
    intent = next(e for e in feed["entries"] if e["id"] == "project-intent")
    assert "Make the router twice as fast" in intent["content"]
    assert intent["metadata"]["source"] == "llm"


def test_the_tick_keeps_rows_written_while_it_ran_and_drops_stale_ones(vault: Vault, settings: Settings, db: Session) -> None:
    import uuid

    from sqlalchemy import select

    from brain_core.entries import EntryRecord
    from brain_kernel.db.models import Entry
    from brain_kernel.index.entries import upsert_entries

    fresh = EntryRecord(id=f"lesson:{uuid.uuid4().hex}", kind="lesson", vault_path="left/reference/lessons-x.md", project="api", repo="org1/api")
    stale = EntryRecord(id=f"lesson:{uuid.uuid4().hex}", kind="lesson", vault_path="left/reference/lessons-y.md", project="api", repo="org1/api")
    upsert_entries(db, [stale])
    db.commit()
    other = Session(db.get_bind())

    def index_meanwhile(message: str) -> None:  # another writer commits while the tick reads the vault
        if message == "collecting markers":
            upsert_entries(other, [fresh])
            other.commit()

    run_tick(db, vault, settings, now=NOW, use_ai=False, progress=ProgressRecorder(on_say=index_meanwhile))
    db.commit()
    other.close()
    ids = set(db.scalars(select(Entry.id)))
    assert fresh.id in ids  # as if a marker was indexed while the tick scanned the vault
    assert stale.id not in ids


def test_keeper_jobs_run_one_at_a_time(vault: Vault, settings: Settings, db: Session, database_url: str) -> None:
    """A tick waits for the keeper lock another job holds (a second scheduler, an apply); a dry run does not."""
    from sqlalchemy import create_engine, text
    from sqlalchemy.exc import OperationalError

    from brain_kernel.db.engine import hold_keeper_lock, normalise_url

    engine = create_engine(normalise_url(database_url))
    try:
        with Session(engine) as holder:
            hold_keeper_lock(holder)  # another keeper job, mid-transaction
            db.execute(text("SET lock_timeout = '200ms'"))
            assert run_tick(db, vault, settings, use_ai=False, dry_run=True).dry_run  # a dry run writes nothing: it does not wait
            db.rollback()
            db.execute(text("SET lock_timeout = '200ms'"))
            with pytest.raises(OperationalError, match="lock timeout"):
                run_tick(db, vault, settings, use_ai=False)
            db.rollback()
            holder.rollback()  # the other job ends: the tick runs
        assert run_tick(db, vault, settings, use_ai=False).arcs_scanned == 5
    finally:
        engine.dispose()
