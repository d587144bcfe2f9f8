"""``brain repair`` over a vault upstream's defects damaged: a dry run writes nothing, a run repairs and audits, a rerun changes nothing."""

from __future__ import annotations

import json
from pathlib import Path

from sqlalchemy import select
from sqlalchemy.orm import Session

from brain_core.vault import frontmatter
from brain_kernel.db.models import Entry
from brain_kernel.settings import Settings
from brain_kernel.vault_store import Vault
from brain_ops.repair import run_repair
from tests.support.harness import brain

DAY = "clusters/2026-04-10"
RATIONALE = "Auth flow rework — merged because both arcs touch the login path, share two sessions; and the fix landed in one PR together"
ARC = (
    "---\r\n"
    "cluster_id: 2026-04-10-auth-aaaaaaaaaaaa\r\n"
    f'title: "{RATIONALE}"\r\n'
    "status: active\r\n"
    "heat: 6\r\n"
    "project: api\r\n"
    "projects: [api]\r\n"
    "---\r\n"
    "# Auth\r\n"
    "\r\n"
    "## Edges\r\n"
    "<!-- @edge type=related target=2026-04-09-db-bbbbbbbbbbbb -->\r\n"
    "<!-- @edge type=parent target=2026-04-09-db-bbbbbbbbbbbb -->\r\n"
    "<!-- @edge type=child target=2026-04-10-auth-aaaaaaaaaaaa -->\r\n"
    "\r\n"
    "<!-- @signal severity=resolved source=disk-full verify=test -d /var/log -->\r\n"
    "(CLEARED: fixed) disk almost full\r\n"
    "<!-- @/signal -->\r\n"
)
CHAIN = {
    f"{DAY}/2026-04-10-old-cccccccccccc.merged.md": "---\ncluster_id: 2026-04-10-old-cccccccccccc\ntitle: Old\n---\nshort\n",
    f"{DAY}/2026-04-10-old-cccccccccccc.merged.merged.md": "---\ncluster_id: 2026-04-10-old-cccccccccccc\ntitle: Old\n---\nthe longest text of the chain\n",
    f"{DAY}/2026-04-10-old-cccccccccccc.merged.merged.merged.md": "---\ncluster_id: 2026-04-10-old-cccccccccccc\n---\nmid\n",
}
ARC_PATH = f"{DAY}/2026-04-10-auth-aaaaaaaaaaaa.md"
CLEAN = "---\ncluster_id: 2026-04-10-fine-dddddddddddd\ntitle: Fine arc\n---\n# Fine\n\n<!-- @edge type=sibling target=x -->\n"


def _plant(settings: Settings) -> Vault:
    vault = Vault(settings.vault)
    vault.scaffold()
    (settings.vault / DAY).mkdir(parents=True, exist_ok=True)
    (settings.vault / ARC_PATH).write_bytes(ARC.encode())
    (settings.vault / DAY / "2026-04-10-fine-dddddddddddd.md").write_text(CLEAN)
    for rel, text in CHAIN.items():
        (settings.vault / rel).write_text(text)
    return vault


def _snapshot(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_repair_audits_every_change_keeps_other_bytes_and_reruns_as_a_no_op(settings: Settings, db: Session, tmp_path: Path) -> None:
    _plant(settings)
    before = _snapshot(settings.vault)

    dry = brain(settings, "repair", "--dry-run")
    assert dry.exit_code == 0, dry.stderr
    *planned, last = dry.stdout.strip().splitlines()
    summary = json.loads(last)
    assert summary["dry_run"] is True and summary["repairs"] == {"edge": 2, "merge-chain": 3, "merged-section": 0, "signal-quoting": 1, "title": 1}
    assert len(planned) == 7 and _snapshot(settings.vault) == before  # nothing written

    audit = tmp_path / "audit.jsonl"
    done = brain(settings, "repair", "--audit", str(audit))
    assert done.exit_code == 0, done.stderr
    summary = json.loads(done.stdout.strip().splitlines()[-1])
    assert summary["changed"] == 2 and summary["removed"] == 2 and summary["index"]["refreshed"] is True
    lines = [json.loads(line) for line in audit.read_text().splitlines()]
    assert [(line["file"], line["what"]) for line in lines if line["what"] != "merge-chain"] == [
        (ARC_PATH, "title"),
        (ARC_PATH, "edge"),
        (ARC_PATH, "edge"),
        (ARC_PATH, "signal-quoting"),
    ]
    assert {"file", "what", "before", "after"} <= set(lines[0])
    title = next(line for line in lines if line["what"] == "title")
    assert title["before"] == RATIONALE and title["after"] == "Auth flow rework"

    # The arc: only the damaged spans changed, CRLF kept.
    text = (settings.vault / ARC_PATH).read_bytes().decode()
    expected = (
        ARC.replace(f'title: "{RATIONALE}"', "title: Auth flow rework")
        .replace("<!-- @edge type=related target=2026-04-09-db-bbbbbbbbbbbb -->\r\n", "")
        .replace("<!-- @edge type=child target=2026-04-10-auth-aaaaaaaaaaaa -->\r\n", "")
        .replace("verify=test -d /var/log", 'verify="test -d /var/log"')
    )
    assert text == expected
    assert (settings.vault / DAY / "2026-04-10-fine-dddddddddddd.md").read_text() == CLEAN
    # The chain: one tombstone holding the longest text; the removed files' texts are in the audit.
    chain_files = sorted(p.name for p in (settings.vault / DAY).glob("2026-04-10-old-*"))
    assert chain_files == ["2026-04-10-old-cccccccccccc.merged.md"]
    assert (settings.vault / DAY / chain_files[0]).read_text() == CHAIN[f"{DAY}/2026-04-10-old-cccccccccccc.merged.merged.md"]
    removed = {line["file"]: line["before"] for line in lines if line["what"] == "merge-chain" and line["after"] is None}
    assert removed == {rel: CHAIN[rel] for rel in list(CHAIN)[1:]}

    # The index follows: the arc's entry has the clean title.
    row = db.execute(select(Entry.title).where(Entry.vault_path == ARC_PATH, Entry.kind == "arc")).scalar_one()
    signal = db.execute(select(Entry.status).where(Entry.vault_path == ARC_PATH, Entry.kind == "signal")).scalar_one()
    assert signal == "resolved"  # the signal parses again
    assert row == "Auth flow rework"
    assert frontmatter.parse(text).meta["title"] == "Auth flow rework"

    after = _snapshot(settings.vault)
    again = brain(settings, "repair", "--audit", str(audit))
    assert again.exit_code == 0, again.stderr
    rerun = json.loads(again.stdout.strip().splitlines()[-1])
    assert rerun["changed"] == 0 and rerun["removed"] == 0 and sum(rerun["repairs"].values()) == 0
    assert _snapshot(settings.vault) == after and len(audit.read_text().splitlines()) == len(lines)


def test_a_rerun_after_a_killed_repair_brings_the_index_up_to_the_files(settings: Settings, db: Session) -> None:
    vault = _plant(settings)
    assert brain(settings, "reindex").exit_code == 0
    titles = lambda: set(db.execute(select(Entry.vault_path, Entry.title).where(Entry.kind == "arc")).all())  # noqa: E731
    assert (ARC_PATH, RATIONALE) in titles()
    db.rollback()
    run_repair(vault)  # what a run killed after its vault writes and before its commit leaves: no index row changed
    assert (ARC_PATH, RATIONALE) in titles() and not (settings.vault / f"{DAY}/2026-04-10-old-cccccccccccc.merged.merged.md").exists()
    db.rollback()
    rerun = brain(settings, "repair")
    assert rerun.exit_code == 0, rerun.stderr
    summary = json.loads(rerun.stdout.strip().splitlines()[-1])
    assert summary["changed"] == 0 and summary["index"]["refreshed"] is True, summary
    arcs = titles()
    assert (ARC_PATH, "Auth flow rework") in arcs and not [path for path, _ in arcs if ".merged.merged" in path]


def test_repair_of_a_missing_vault_is_one_error_line(settings: Settings, tmp_path: Path) -> None:
    result = brain(settings, "repair", "--vault", str(tmp_path / "nowhere"))
    assert result.exit_code == 2 and result.stderr.startswith("error: ") and len(result.stderr.strip().splitlines()) == 1
