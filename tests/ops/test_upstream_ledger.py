"""brain-ops behaviours of UPSTREAM.md section 5 that no other test pinned.

Each test names the rows of docs/compatibility-ledger.md it checks. Real
Postgres, a real Redis for the event bus, the ``brain`` command as a
subprocess; nothing mocked.
"""

from __future__ import annotations

import datetime as dt
import json
import stat
from pathlib import Path

import redis
from sqlalchemy.orm import Session

from brain_kernel.settings import Settings
from brain_kernel.ticks.events import bus_url
from brain_kernel.vault_store import Vault
from brain_ops.keeper.tick import run_tick
from tests.support.harness import brain
from tests.support.openai_stub import OpenAIStub
from tests.support.servers import free_port

NOW = dt.datetime(2026, 11, 29, 12, 34, 56, tzinfo=dt.timezone.utc)


def test_an_inbox_note_whose_name_is_taken_gets_the_drains_time(settings: Settings, db: Session) -> None:
    """Ledger O18: the drain moves a note to its tag's folder, ``-<HHMMSS>`` appended when the name is taken."""
    vault = Vault(settings.vault)
    vault.write_atomic("right/ideas/search-ranking.md", "---\ntitle: Older idea\n---\nolder\n")
    vault.write_atomic("raw/inbox/search-ranking.md", "---\ntitle: Search ranking\ntags: [idea]\n---\nnew idea\n")
    summary = run_tick(db, vault, settings, now=NOW, use_ai=False)
    db.commit()
    assert summary.stats["inbox_drained"] == 1
    assert vault.read_text("right/ideas/search-ranking.md") == "---\ntitle: Older idea\n---\nolder\n"
    moved = vault.read_text("right/ideas/search-ranking-123456.md")
    assert "new idea" in moved and "region: right-hemisphere" in moved and "status: active" in moved
    assert not vault.exists("raw/inbox/search-ranking.md")


def test_a_tick_leaves_its_dashboard_folders_as_the_vault_made_them(settings: Settings, db: Session) -> None:
    """Ledger O34: upstream chmod-ed every ``clusters/<date>/`` 777; no vault folder is made world-writable here."""
    vault = Vault(settings.vault)
    vault.write_atomic(
        "clusters/2026-11-29/2026-11-29-a-thread-0123456789ab.md",
        "---\ncluster_id: 2026-11-29-a-thread-0123456789ab\ntitle: A thread\nstatus: active\n---\nbody\n",
    )
    run_tick(db, vault, settings, now=NOW, use_ai=False)
    db.commit()
    folder = Path(settings.vault) / "clusters" / "2026-11-29"
    assert (folder / "_dashboard.md").exists()
    assert not folder.stat().st_mode & stat.S_IWOTH


def test_every_tick_publishes_its_event_a_failed_model_call_as_a_warning(settings: Settings, redis_url: str) -> None:
    """Ledger O15b: upstream published no event under ``--no-ai`` and none after a failed model call (UPSTREAM.md 0.25),
    so its ``warning`` for an AI error was never seen. Here every tick that writes publishes ``brain.tick.complete``."""
    s = settings.with_overrides(redis_url=redis_url, llm_base_url=f"http://127.0.0.1:{free_port()}/v1", llm_api_key="k")
    bus = redis.Redis.from_url(bus_url(redis_url, s.event_bus_db), decode_responses=True)
    try:
        failed = brain(s, "tick")
        assert failed.exit_code == 0, failed.stderr  # the deterministic half stands (UPSTREAM.md 8 item 10)
        deterministic = brain(s, "tick", "--no-ai")
        assert deterministic.exit_code == 0, deterministic.stderr
        events = [fields for _id, fields in bus.xrange("events:brain")]
        assert [e["event"] for e in events] == ["brain.tick.complete", "brain.tick.complete"]
        assert [e["severity"] for e in events] == ["warning", "info"]
    finally:
        bus.close()


def test_apply_answers_every_count_and_the_sections_it_parsed(settings: Settings, db: Session, tmp_path: Path) -> None:
    """Ledger O49b: upstream left a count key out when its section parsed nothing (UPSTREAM.md 0.15); here each count
    is present (0 when none) and ``sections`` says which sections parsed."""
    answer = tmp_path / "answer.md"
    answer.write_text("### 5. Brain Health\n7/10 — quiet week\n")
    result = brain(settings, "apply", "--ai-output", str(answer))
    assert result.exit_code == 0, result.stderr
    out = json.loads(result.stdout.strip().splitlines()[-1])
    assert out["sections"] == [5]
    assert {k: out[k] for k in ("edges_applied", "signals_applied", "merges_applied", "summaries_applied")} == dict.fromkeys(
        ("edges_applied", "signals_applied", "merges_applied", "summaries_applied"), 0
    )
    assert (out["health"]["score"], out["health"]["reason"], out["dry_run"]) == (7, "quiet week", False)


class _Keeper(OpenAIStub):
    def respond(self, body: dict) -> tuple[int, dict]:
        answer = "### 5. Brain Health\n7/10 — quiet week\n"
        return 200, {"id": "x", "object": "chat.completion", "choices": [{"index": 0, "message": {"role": "assistant", "content": answer}}]}


def test_the_keeper_asks_for_upstreams_model_when_none_is_set(settings: Settings, db: Session) -> None:
    """Ledger O11: with ``BRAIN_BRIEF_MODEL`` (``BRAIN_LLM_MODEL``) unset, the tick asks for ``brain-brief``."""
    vault = Vault(settings.vault)
    vault.write_atomic(
        "clusters/2026-11-29/2026-11-29-a-thread-0123456789ab.md",
        "---\ncluster_id: 2026-11-29-a-thread-0123456789ab\ntitle: A thread\nstatus: active\n---\nbody\n",
    )
    with _Keeper() as stub:
        configured = settings.with_overrides(llm_base_url=stub.url, llm_api_key="k", llm_model=None)
        summary = run_tick(db, vault, configured, now=NOW, use_ai=True)
    db.commit()
    assert summary.llm_calls >= 1 and stub.requests
    assert {r["body"]["model"] for r in stub.requests} == {"brain-brief"}
