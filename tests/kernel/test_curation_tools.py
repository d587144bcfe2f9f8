"""The curation tools the MCP server answers with (``brain_kernel.curation.tools``): same answers, same scope rule."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator

import pytest
from sqlalchemy.orm import Session, sessionmaker

from brain_kernel import marker_service
from brain_kernel.auth import EVERYONE, Principal
from brain_kernel.curation.tools import expire_tool, retract_tool, supersede_tool
from brain_kernel.db.engine import make_engine, session_factory, unit_of_work
from brain_kernel.settings import Settings
from brain_kernel.vault_store import Vault

NOW = dt.datetime.now(dt.timezone.utc)
API = Principal(name="t0000000000a1", projects=("org1/api",))


@pytest.fixture
def factory(settings: Settings) -> Iterator[sessionmaker[Session]]:
    engine = make_engine(settings.database_url or "", pool_size=2)
    yield session_factory(engine)
    engine.dispose()


def _lesson(factory: sessionmaker[Session], settings: Settings, content: str, repo: str) -> str:
    with unit_of_work(factory) as db:
        outcome = marker_service.submit(db, Vault(settings.vault), settings, "lesson", content, {"repo": repo}, now=NOW)
    return outcome.body["entry_id"]


def test_retract_and_supersede_tools_keep_the_scope_rule(factory: sessionmaker[Session], settings: Settings) -> None:
    vault = Vault(settings.vault)
    mine, theirs = _lesson(factory, settings, "Api lesson.", "org1/api"), _lesson(factory, settings, "Web lesson.", "org2/web")
    missing = "lesson:left/reference/lessons-2026-01-01.md#0000"
    for ref in (theirs, missing):
        assert retract_tool(factory, vault, ref, "no", principal=API, now=NOW) == {"error": "entry not found"}
        assert expire_tool(factory, vault, ref, "no", principal=API, now=NOW) == {"error": "entry not found"}
        assert supersede_tool(factory, vault, settings, ref, "lesson", "mine now", principal=API, now=NOW) == {"error": "entry not found"}
    assert retract_tool(factory, vault, mine, "", principal=API, now=NOW) == {"error": "reason is required"}
    assert expire_tool(factory, vault, mine, "", principal=API, now=NOW) == {"error": "reason is required"}

    new = supersede_tool(factory, vault, settings, mine, "lesson", "Api lesson, corrected.", {"title": "fix"}, principal=API, now=NOW)
    assert new["supersedes"] == [mine] and new["project"] == "api"
    done = retract_tool(factory, vault, new["entry_id"], "wrong again", principal=API, now=NOW)
    assert done["entry"]["state"] == "retracted" and done["entry"]["retracted"]["by"] == API.name
    everyone = retract_tool(factory, vault, theirs, "the operator may", principal=EVERYONE, now=NOW)
    assert everyone["entry"]["retracted"]["by"] == "operator"


def test_the_expire_tool_expires_an_entry_now_and_a_second_call_writes_nothing(factory: sessionmaker[Session], settings: Settings) -> None:
    vault = Vault(settings.vault)
    mine = _lesson(factory, settings, "The api freeze holds.", "org1/api")
    done = expire_tool(factory, vault, mine, "the freeze ended", principal=API, now=NOW)
    assert done["entry"]["state"] == "expired" and done["history"][-1]["by"] == API.name
    path = settings.vault / "audit" / f"curation-{NOW:%Y-%m}.jsonl"
    before = path.read_text()
    again = expire_tool(factory, vault, mine, "the freeze ended", principal=API, now=NOW + dt.timedelta(minutes=1))
    assert again["entry"] == {**done["entry"]} and path.read_text() == before
