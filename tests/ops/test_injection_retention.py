"""The tick deletes injection records past BRAIN_INJECTION_RETENTION_DAYS and keeps the rest (ADR 0050)."""

from __future__ import annotations

from pathlib import Path

from sqlalchemy import text

from brain_kernel.db.engine import make_engine
from brain_kernel.vault_store import Vault
from brain_ops.keeper.drain import run_tick_and_warm
from tests.support.harness import make_settings


def test_a_tick_deletes_records_past_their_retention_and_a_dry_run_deletes_none(tmp_path: Path, database_url: str) -> None:
    settings = make_settings(tmp_path, database_url, injection_retention_days=30)
    engine = make_engine(database_url, pooled=False)
    try:
        with engine.begin() as conn:
            for days in (45, 31, 29, 1):
                conn.execute(
                    text("INSERT INTO injections (at, kind, session_id, arm) VALUES (now() - make_interval(days => :d), 'block', :s, 'treatment')"),
                    {"d": days, "s": f"s-{days}"},
                )

        def kept() -> list[str]:
            with engine.connect() as conn:
                return sorted(conn.execute(text("SELECT session_id FROM injections")).scalars())

        run_tick_and_warm(engine, Vault(settings.vault), settings, use_ai=False, dry_run=True)
        assert kept() == ["s-1", "s-29", "s-31", "s-45"]
        run_tick_and_warm(engine, Vault(settings.vault), settings, use_ai=False, dry_run=False)
        assert kept() == ["s-1", "s-29"]
        forever = settings.with_overrides(injection_retention_days=0)
        with engine.begin() as conn:
            conn.execute(text("UPDATE injections SET at = at - interval '400 days'"))
        run_tick_and_warm(engine, Vault(settings.vault), forever, use_ai=False, dry_run=False)
        assert kept() == ["s-1", "s-29"]
    finally:
        engine.dispose()
