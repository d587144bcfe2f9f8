"""The deterministic keeper on a vault in upstream's layout (UPSTREAM.md 4 and 5.4): one tick, a second one, a dry run.

The vault holds region folders, inline markers of every type, an inbox note,
a ``.merged.md`` pair, a stale, a cleared and a mitigated signal, an inject
block past its ``ttl_days``, a replayed arc, an incident arc that graduates
in place and a signal file written by ``POST /marker``. Every fact checked
here is one section 5.4 describes, with the projects the kernel adds.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
from pathlib import Path

import pytest
from sqlalchemy.orm import Session

from brain_core.markers import Attribution, parse_request
from brain_core.vault import frontmatter
from brain_core.vault.logs import render_signal
from brain_kernel.settings import Settings
from brain_kernel.vault_store import Vault
from brain_ops.keeper.tick import STATS_KEYS, run_tick
from tests.support.harness import brain

NOW = dt.datetime(2026, 11, 29, 12, 0, tzinfo=dt.timezone.utc)

WEB_ARC = "2026-11-29-fix-the-login-redirect-0123456789ab"
BILLING_ARC = "2026-11-10-old-billing-webhooks-bbbbbbbbbbbb"
REPLAYED = "2026-11-25-first-cut-of-search-cccccccccccc"
REPLAYER = "2026-11-28-search-again-dddddddddddd"
MERGED = "2026-11-28-duplicate-eeeeeeeeeeee"
INCIDENT = "amygdala-2026-11-09T10-00-00Z-disk-down"


def _arc(
    cid: str,
    title: str,
    *,
    created: str,
    status: str,
    region: str,
    project: str | None,
    repo: str | None,
    sessions: list[str],
    body: str,
    signals: str = "{errors: 2, joy: 1, tools: 2400}",
    **extra: str,
) -> str:
    lines = [
        "---",
        f"cluster_id: {cid}",
        f"title: {title}",
        f"region: {region}",
        f"status: {status}",
        "heat: 0",
        f"source_sessions: [{', '.join(sessions)}]",
    ]
    if project:
        lines += [f"project: {project}", f"projects: [{project}]", f"repo: {repo}", "project_source: git"]
    lines += [f"created: {created}", f"signals: {signals}", "edges: []", "synthesized: false"]
    lines += [f"{k}: {v}" for k, v in extra.items()]
    return "\n".join(lines) + "\n---\n" + body


def _plant(root: Path) -> None:
    vault = Vault(root)
    vault.scaffold()
    w = vault.write_atomic
    w(
        f"clusters/2026-11-29/{WEB_ARC}.md",
        _arc(
            WEB_ARC,
            "Fix the login redirect",
            created="2026-11-29T08:00:00+00:00",
            status="active",
            region="left-hemisphere",
            project="web",
            repo="acme/web",
            sessions=["s-web-1", "s-web-2"],
            body=(
                "# Fix the login redirect\n\n"
                "<!-- @signal severity=warning source=login-ci -->\nLogin CI is flaky on main\n<!-- @/signal -->\n\n"
                "<!-- @signal severity=critical source=billing-alerts -->\nBilling webhooks failing (seen from web)\n<!-- @/signal -->\n\n"
                "<!-- @lesson -->\nClear the session cookie before the redirect.\n<!-- @/lesson -->\n\n"
                '<!-- @inject target=all ttl_days=7 -->\nWEBINJECT: run "make e2e" before pushing login changes.\n<!-- @/inject -->\n\n'
                f"<!-- @edge type=sibling target={BILLING_ARC} -->\n"
                "<!-- @decision date=2026-11-29 -->\nRedirect on the server, never in the client.\n<!-- @/decision -->\n\n"
                "<!-- @milestone status=done scope=web -->\nLogin redirect fixed on staging.\n<!-- @/milestone -->\n"
                "<!-- @signal severity=resolved source=old-flake -->\nOld flake (CLEARED: fixed in #12)\n<!-- @/signal -->\n"
            ),
        ),
    )
    w(
        f"clusters/2026-11-10/{BILLING_ARC}.md",
        _arc(
            BILLING_ARC,
            "Old billing webhooks",
            created="2026-11-10",
            status="complete",
            region="right-hemisphere",
            project="billing",
            repo="acme/billing",
            sessions=["s-bill-1"],
            body=(
                "# Old billing webhooks\n\n<!-- @signal severity=critical source=billing-alerts -->\nBilling webhooks failing\n<!-- @/signal -->\n"
                "<!-- @inject target=all -->\nBILLINJECT: billing is frozen.\n<!-- @/inject -->\n"
            ),
            signals="{errors: 0, joy: 0, tools: 10}",
            mitigates="billing-alerts",
        ),
    )
    w(
        f"clusters/2026-11-25/{REPLAYED}.md",
        _arc(
            REPLAYED,
            "First cut of search",
            created="2026-11-25",
            status="complete",
            region="left-hemisphere",
            project="web",
            repo="acme/web",
            sessions=["s-search-1"],
            body="# First cut of search\n",
        ),
    )
    w(
        f"clusters/2026-11-28/{REPLAYER}.md",
        _arc(
            REPLAYER,
            "Search again",
            created="2026-11-28",
            status="complete",
            region="left-hemisphere",
            project="web",
            repo="acme/web",
            sessions=["s-search-2"],
            body="# Search again\n",
            replayed_from=REPLAYED,
        ),
    )
    raw = _arc(MERGED, "Duplicate", created="2026-11-28", status="active", region="pineal", project=None, repo=None, sessions=["s-dup"], body="")
    w(f"clusters/2026-11-28/{MERGED}.md", raw + "<!-- @signal severity=critical source=ghost -->\nGHOST must not appear\n<!-- @/signal -->\n")
    w(f"clusters/2026-11-28/{MERGED}.merged.md", raw + "merged away\n")
    w(
        "left/projects/web/2026-11-20-web-notes.md",
        "---\ntitle: Web notes\nproject: web\nprojects: [web]\nrepo: acme/web\nproject_source: git\nstatus: active\ncreated: 2026-11-20\n---\n"
        "<!-- @signal severity=warning source=old-warning -->\nSTALE warning from last week\n<!-- @/signal -->\n"
        "<!-- @signal severity=critical source=cert-expiry -->\nCertificate expires on Friday\n<!-- @/signal -->\n"
        "<!-- @inject ttl_days=3 -->\nEXPIREDINJECT: old advice\n<!-- @/inject -->\n",
    )
    w(
        "bridge/connections.md",
        "---\ntitle: Connections\ncreated: 2026-11-28\n---\n# Connections\n\n"
        "<!-- @signal severity=info source=fleet-wide -->\nFLEETSIGNAL: the shared runner pool is being resized\n<!-- @/signal -->\n"
        "<!-- @inject target=all -->\nFLEETINJECT: every agent reads CLAUDE.md first.\n<!-- @/inject -->\n",
    )
    w(
        "amygdala/2026-11-09T10-00-00Z-disk-down.md",
        f'---\ncluster_id: {INCIDENT}\ntitle: "Disk down"\nregion: amygdala\nstatus: active\nheat: 10\nseverity: nuclear\ncreated: 2026-11-09\n---\n'
        "# Disk down\n\n<!-- @signal severity=nuclear source=disk -->\nDisk down on db-1\n<!-- @/signal -->\n",
    )
    req = parse_request("signal", "MARKERSIGNAL: disk 91% full", {"severity": "warning", "source": "df", "project": "infra"}, max_chars=4096)
    w("amygdala/20261129-110000-warning-disk-full.md", render_signal(req, Attribution("infra", None, "attrs"), marker_id="m-1", at=NOW - dt.timedelta(hours=1)))
    w("raw/inbox/idea-search-ranking.md", "---\ntitle: Search ranking idea\ntags: [idea, search]\n---\nRank by recency.\n")
    w("raw/inbox/README.md", "# Inbox\n\nDrop notes here.\n")


def _tree(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.fixture
def upstream_vault(settings: Settings) -> Vault:
    _plant(Path(settings.vault))
    return Vault(settings.vault)


def _meta(vault: Vault, rel: str) -> dict:
    return frontmatter.parse(vault.read_text(rel)).meta


def test_one_tick_on_an_upstream_vault(upstream_vault: Vault, settings: Settings, db: Session, client) -> None:
    vault = upstream_vault
    summary = run_tick(db, vault, settings, now=NOW, use_ai=False)
    db.commit()
    stats = summary.stats
    assert set(stats) == {*STATS_KEYS, "dry_run"}

    # 0. The inbox note moved by its first known tag; the README stayed.
    assert stats["inbox_drained"] == 1 and stats["inbox_errors"] == 0
    note = _meta(vault, "right/ideas/idea-search-ranking.md")
    assert note["region"] == "right-hemisphere" and note["status"] == "active"
    assert not vault.exists("raw/inbox/idea-search-ranking.md") and vault.exists("raw/inbox/README.md")

    # 1. Scan: the raw file beside its .merged.md is suppressed; standing docs are not arcs.
    # Arcs: web, billing, replayed, replayer, the dated web notes, the incident (the drained note has no date or id).
    assert stats["arcs_scanned"] == 6
    assert not any("GHOST" in line for line in vault.read_text("brain-feed/signals.md").splitlines())

    # 3. Heat with upstream's formula, inserted where missing; 4. promotion is a move.
    web = f"frontal-lobe/conscious/{WEB_ARC}.md"
    assert vault.exists(web) and not vault.exists(f"clusters/2026-11-29/{WEB_ARC}.md")
    assert _meta(vault, web)["heat"] == 10 and _meta(vault, web)["status"] == "active"  # 3 + 4 + 2 + 1 + 2, clamped
    assert _meta(vault, "left/projects/web/2026-11-20-web-notes.md")["heat"] == 0  # inserted (it had none)
    assert "heat" not in _meta(vault, "bridge/connections.md")  # a standing document gets no heat: arcs only (ADR 0014)
    # 2. Replay boost: 4 days old gives 0, tools +4, its session +1, joy +1, the newer arc's replay +1.
    assert _meta(vault, f"frontal-lobe/conscious/{REPLAYED}.md")["heat"] == 7
    assert stats["promotions"] >= 1 and stats["heat_changes"] >= 5

    # 6. Graduation by region: billing (19 days, cold) moves to right/; the incident arc graduates in place.
    billing = f"right/{BILLING_ARC}.md"
    assert _meta(vault, billing)["status"] == "graduated" and not vault.exists(f"clusters/2026-11-10/{BILLING_ARC}.md")
    assert _meta(vault, "amygdala/2026-11-09T10-00-00Z-disk-down.md")["status"] == "graduated"
    assert stats["graduations"] == 2
    assert {(m["to"], m["why"]) for m in summary.moves} >= {(web, "promote"), (billing, "graduate")}

    # 7-8. Signals: mitigated by the graduated billing arc, stale, cleared, the finished incident's, deduped.
    lines = [ln for ln in vault.read_text("brain-feed/signals.md").splitlines() if ln.startswith("- **[")]
    assert len(lines) == 4, lines
    text = "\n".join(lines)
    assert "- **[warning]** (login-ci) Login CI is flaky on main _(project: acme/web)_" in text
    assert "- **[critical]** (cert-expiry) Certificate expires on Friday _(project: acme/web)_" in text
    assert "- **[info]** (fleet-wide) FLEETSIGNAL: the shared runner pool is being resized _(fleet)_" in text
    assert "- **[warning]** (df) MARKERSIGNAL: disk 91% full _(project: infra)_" in text  # a POST /marker file takes part, as inline signals do
    assert stats["signals_tombstoned_mitigated"] == 2 and stats["signals_tombstoned_cleared"] == 1
    assert stats["signals_tombstoned_stale"] == 2  # last week's warning, and the graduated incident's nuclear signal
    assert stats["signals_written"] == 4 and stats["signals_collected"] == 9 and stats["signals_deduped"] == 0

    # Inject blocks: the web arc's (project) and the bridge's (fleet) are live; not the expired or the graduated billing
    # one. The fleet file upstream's clients inject everywhere holds the fleet's only: the web one is its project's.
    inject = vault.read_text("brain-feed/inject.md")
    assert "FLEETINJECT" in inject and "WEBINJECT" not in inject
    assert "EXPIREDINJECT" not in inject and "BILLINJECT" not in inject
    assert stats["inject_blocks_collected"] == 4 and stats["lessons_collected"] == 1

    # 10. Feed files in upstream's format, the hot table with the Project column.
    hot = frontmatter.parse(vault.read_text("brain-feed/hot-arcs.md"))
    assert hot.meta["id"] == "hot-arcs-2026-11-29" and hot.meta["priority"] == 10
    row = next(ln for ln in hot.body.splitlines() if ln.startswith(f"| {WEB_ARC} "))
    assert row == f"| {WEB_ARC} | 10 | left-hemisphere | active | acme/web | Fix the login redirect |"
    diff = vault.read_text("brain-feed/last-tick-diff.md")
    assert "Signals changed: 4" in diff and "Promotions: " in diff and "Graduations: 2" in diff
    assert frontmatter.parse(diff).meta["id"] == "last-tick-diff"
    # 11. Dashboards list the arcs created on each date folder's day, wherever they live now.
    dash = vault.read_text("clusters/2026-11-29/_dashboard.md")
    assert dash.startswith("# Cluster Dashboard — 2026-11-29") and f"[[{WEB_ARC}]]" in dash

    # The index: inline markers carry their arc's project; the feeds serve them by project.
    web_feed = client.get("/feed", params={"project": "acme/web"}).json()
    content = json.dumps(web_feed)
    assert "Login CI is flaky" in content and "WEBINJECT" in content and "FLEETINJECT" in content and "FLEETSIGNAL" in content
    assert "Billing webhooks failing" not in content and "BILLINJECT" not in content and "MARKERSIGNAL" not in content
    fleet_entries = [e for e in web_feed["entries"] if "FLEETSIGNAL" in e["content"]]
    assert fleet_entries and all(e["metadata"]["scope"] == "fleet" for e in fleet_entries)
    lesson_entry = next(e for e in web_feed["entries"] if e["id"] == "lessons")
    assert "Clear the session cookie" in lesson_entry["content"]
    billing_feed = json.dumps(client.get("/feed", params={"project": "acme/billing"}).json())
    assert "WEBINJECT" not in billing_feed and "Login CI" not in billing_feed and "FLEETINJECT" in billing_feed
    assert client.get(f"/arcs/{WEB_ARC}").json()["vault_path"] == web


def test_a_second_tick_changes_nothing_it_need_not(upstream_vault: Vault, settings: Settings, db: Session) -> None:
    run_tick(db, upstream_vault, settings, now=NOW, use_ai=False)
    db.commit()
    before = _tree(Path(settings.vault))
    again = run_tick(db, upstream_vault, settings, now=NOW + dt.timedelta(minutes=10), use_ai=False)
    db.commit()
    assert again.vault_writes == 0 and again.files_written == [] and again.moves == []
    assert again.stats["heat_changes"] == again.stats["promotions"] == again.stats["graduations"] == again.stats["inbox_drained"] == 0
    assert _tree(Path(settings.vault)) == before


def test_dry_run_leaves_every_byte_of_the_vault(upstream_vault: Vault, settings: Settings) -> None:
    before = _tree(Path(settings.vault))
    result = brain(settings, "tick", "--dry-run")
    assert result.exit_code == 0, result.stderr
    summary = json.loads(result.stdout.strip().splitlines()[-1])
    assert summary["dry_run"] is True and summary["stats"]["dry_run"] is True and summary["vault_writes"] == 0
    assert summary["stats"]["inbox_drained"] == 1 and summary["stats"]["arcs_scanned"] == 6  # computed as a real run would
    assert "no LLM configured" in result.stderr  # without --no-ai and no endpoint: deterministic, and it says so (ADR 0017)
    assert _tree(Path(settings.vault)) == before


def test_the_verifier_runs_only_allowed_commands_once_per_tick(upstream_vault: Vault, settings: Settings, db: Session, tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    rule = f"touch {marker}"
    upstream_vault.write_atomic(
        "bridge/checks.md",
        "---\ntitle: Checks\ncreated: 2026-11-29\n---\n"
        f'<!-- @signal severity=warning source=ok-check verify="true" -->\nVERIFIED claim\n<!-- @/signal -->\n'
        f'<!-- @signal severity=warning source=kept-check verify="false" -->\nKEPT claim\n<!-- @/signal -->\n'
        f'<!-- @signal severity=warning source=touch verify="{rule}" -->\nUNLISTED claim\n<!-- @/signal -->\n',
    )
    off = run_tick(db, upstream_vault, settings, now=NOW, use_ai=False, dry_run=True)
    without = 4  # the vault's other kept signals carry no verify: upstream counts each as skipped
    assert off.stats["signals_verified_skip"] == 3 + without  # off by default (upstream ran them as shell)
    on = settings.with_overrides(verifier_enabled=True, verify_commands=["true", "false"])
    summary = run_tick(db, upstream_vault, on, now=NOW, use_ai=False)
    assert (summary.stats["signals_verified_pass"], summary.stats["signals_verified_fail"], summary.stats["signals_verified_skip"]) == (1, 1, 1 + without)
    signals = upstream_vault.read_text("brain-feed/signals.md")
    assert "VERIFIED claim" not in signals and "KEPT claim" in signals and "UNLISTED claim" in signals
    assert not marker.exists()
