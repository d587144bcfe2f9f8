"""The keeper's pages for people: each project's INDEX.md and the router PROJECTS.md.

A planted vault (arcs, and markers written by the kernel's own marker writer
at fixed moments) is ticked at a fixed instant; the pages must equal the
golden files in tests/data/index_pages, be rewritten only when their content
changes, and come back byte for byte after a full reindex.
"""

from __future__ import annotations

import datetime as dt
import os
from pathlib import Path

import pytest
import yaml
from sqlalchemy.orm import Session

from brain_core.arcs import ArcSession, build_plan, render_arc
from brain_core.markers import Attribution, parse_request
from brain_core.vault import frontmatter
from brain_kernel.feed.answers import global_answer
from brain_kernel.index.rebuild import rebuild
from brain_kernel.marker_service import write_marker
from brain_kernel.settings import Settings
from brain_kernel.vault_store import Vault
from brain_ops.keeper.tick import run_tick

NOW = dt.datetime(2026, 11, 29, 12, 0, tzinfo=dt.timezone.utc)
GOLDEN = Path(__file__).parent.parent / "data" / "index_pages"
PAGES = ("brain-feed/projects/org1/api/INDEX.md", "brain-feed/projects/acme/web/INDEX.md", "brain-feed/PROJECTS.md")


def _arc(vault: Vault, sid: str, key: str | None, repo: str | None, prompt: str, *, hours_ago: float, tools: int = 10) -> str:
    start = NOW - dt.timedelta(hours=hours_ago)
    session = ArcSession(
        session_id=sid,
        project=key,
        repo=repo,
        project_source="git" if key else "unresolved",
        cwd=f"/h/{key or sid}",
        start=start,
        end=start + dt.timedelta(minutes=30),
        num_tool_calls=tools,
        first_user_prompt=prompt,
    )
    plan = build_plan([session])
    vault.write_atomic(plan.vault_path, render_arc(plan))
    return plan.vault_path


def _marker(vault: Vault, type_: str, content: str, who: Attribution, *, hours_ago: float, n: int, **attrs: str) -> str:
    req = parse_request(type_, content, attrs, max_chars=4096)
    return write_marker(vault, req, who, marker_id=f"m{n:04d}", at=NOW - dt.timedelta(hours=hours_ago)).vault_path


def _plant(vault: Vault) -> None:
    api, web = Attribution("api", "org1/api"), Attribution("web", "acme/web")
    _arc(vault, "a1", "api", "org1/api", "Rewrite the request router for speed", hours_ago=2, tools=120)
    _arc(vault, "a2", "api", "org1/api", "Document the public endpoints", hours_ago=30)
    _arc(vault, "w1", "web", "acme/web", "Fix the flaky login test", hours_ago=5)
    _arc(vault, "o1", None, None, "Poke at a scratch script", hours_ago=3)
    _marker(vault, "lesson", "Pin the router's worker count.", api, hours_ago=3, n=1)
    _marker(vault, "lesson", "Old lesson beyond the window.", api, hours_ago=24 * 40, n=2)
    _marker(vault, "lesson", "Expired lesson [with brackets].", api, hours_ago=4, n=3, valid_until="2026-11-20")
    _marker(vault, "decision", "Route by prefix tree.", api, hours_ago=6, n=4, title="Adopt a prefix tree router")
    retracted = _marker(vault, "decision", "Use regexes everywhere.", api, hours_ago=7, n=5, title="Regex routing")
    vault.write_atomic(retracted, frontmatter.update(vault.read_text(retracted), {"status": "retracted"}))
    _marker(vault, "milestone", "Router v2 shipped.", api, hours_ago=1, n=6)
    _marker(vault, "signal", "Latency above budget on /search.", api, hours_ago=2, n=7, title="Search latency", severity="alert")
    cleared = _marker(vault, "signal", "Old outage.", api, hours_ago=8, n=8, title="Old outage", severity="high")
    vault.write_atomic(cleared, frontmatter.update(vault.read_text(cleared), {"status": "superseded"}))
    _marker(vault, "lesson", "Login tests need a fixed clock.", web, hours_ago=5, n=9)
    _marker(vault, "lesson", "Nobody owns this lesson.", Attribution(), hours_ago=2, n=10)


@pytest.fixture
def vault(settings: Settings) -> Vault:
    v = Vault(settings.vault)
    _plant(v)
    return v


def _pages(vault: Vault) -> dict[str, str]:
    return {rel: vault.read_text(rel) for rel in PAGES}


def _golden(rel: str) -> str:
    return (GOLDEN / rel.replace("/", "__")).read_text()


def test_pages_match_the_golden_files_for_a_planted_vault(vault: Vault, settings: Settings, db: Session) -> None:
    summary = run_tick(db, vault, settings, now=NOW, use_ai=False)
    db.commit()
    assert set(PAGES) <= set(summary.files_written)
    pages = _pages(vault)
    if os.environ.get("BRAIN_UPDATE_GOLDEN"):
        for rel, text in pages.items():
            (GOLDEN / rel.replace("/", "__")).write_text(text)
    for rel, text in pages.items():
        assert text == _golden(rel), rel
    # Left out: the retracted decision, the superseded signal, the expired lesson, the lesson beyond the window.
    api = pages["brain-feed/projects/org1/api/INDEX.md"]
    for gone in ("Regex routing", "Old outage", "Expired lesson", "Old lesson beyond"):
        assert gone not in api


def test_pages_are_rewritten_only_when_their_content_changes(vault: Vault, settings: Settings, db: Session) -> None:
    run_tick(db, vault, settings, now=NOW, use_ai=False)
    db.commit()
    stamps = {rel: vault.path(rel).stat().st_mtime_ns for rel in PAGES}
    again = run_tick(db, vault, settings, now=NOW, use_ai=False)
    db.commit()
    assert not set(PAGES) & set(again.files_written)
    assert {rel: vault.path(rel).stat().st_mtime_ns for rel in PAGES} == stamps
    req = parse_request("lesson", "Cache the parsed routes.", {}, max_chars=4096)
    write_marker(vault, req, Attribution("web", "acme/web"), marker_id="m0100", at=NOW - dt.timedelta(minutes=5))
    third = run_tick(db, vault, settings, now=NOW, use_ai=False)
    db.commit()
    changed = set(PAGES) & set(third.files_written)
    assert changed == {"brain-feed/projects/acme/web/INDEX.md", "brain-feed/PROJECTS.md"}
    assert "Cache the parsed routes." in vault.read_text("brain-feed/projects/acme/web/INDEX.md")


def test_pages_come_back_identical_after_a_reindex(vault: Vault, settings: Settings, db: Session) -> None:
    run_tick(db, vault, settings, now=NOW, use_ai=False)
    db.commit()
    before = _pages(vault)
    for rel in PAGES:
        vault.path(rel).unlink()
    rebuild(db, vault)
    db.commit()
    run_tick(db, vault, settings, now=NOW, use_ai=False)
    db.commit()
    assert _pages(vault) == before


def test_an_obsidian_vault_gets_wiki_links_too(vault: Vault, settings: Settings, db: Session) -> None:
    vault.path(".obsidian").mkdir()
    run_tick(db, vault, settings, now=NOW, use_ai=False)
    db.commit()
    api = vault.read_text("brain-feed/projects/org1/api/INDEX.md")
    assert (
        "[Adopt a prefix tree router](../../../../left/decisions/ADR-0001-adopt-a-prefix-tree-router.md) · [[left/decisions/ADR-0001-adopt-a-prefix-tree-router]]"
        in api
    )
    assert "[Index](projects/org1/api/INDEX.md) · [[brain-feed/projects/org1/api/INDEX]]" in vault.read_text("brain-feed/PROJECTS.md")


def _client_file_fallback(vault: Vault) -> dict[str, str]:
    """What upstream's client injects from the feed folder with its file fallback (UPSTREAM.md 0.21): every top-level
    ``brain-feed/*.md``, a file without frontmatter whole, one whose ``priority`` or ``ttl`` is not a whole number dropped."""
    taken: dict[str, str] = {}
    for path in sorted(vault.path("brain-feed").glob("*.md")):
        text = path.read_text()
        meta: dict[str, object] = {}
        if text.startswith("---\n"):
            block, _, text = text[4:].partition("\n---\n")
            meta = yaml.safe_load(block) or {}
        try:
            int(meta.get("priority", 5))  # type: ignore[call-overload]
            int(meta.get("ttl", 3600))  # type: ignore[call-overload]
        except (TypeError, ValueError):
            continue
        taken[path.stem] = text
    return taken


def test_the_router_page_is_not_injected_by_upstreams_file_fallback(vault: Vault, settings: Settings, db: Session) -> None:
    run_tick(db, vault, settings, now=NOW, use_ai=False)
    db.commit()
    assert vault.exists("brain-feed/PROJECTS.md")
    taken = _client_file_fallback(vault)
    assert "PROJECTS" not in taken
    assert "hot-arcs" in taken and "signals" in taken  # the feed files themselves still reach the client
    served = [e["id"] for e in global_answer(db, vault, now=NOW)["entries"]]  # GET /feed, the HTTP client's source
    assert "PROJECTS" not in served and "signals" in served, served
