"""Secrets in what is mined from transcripts: scrubbed on the way in, and ``brain scrub`` for arcs written before."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

from sqlalchemy import select, text
from sqlalchemy.orm import Session

from brain_core.arcs import ArcSession, build_plan, render_arc
from brain_core.redact import REDACTED, scrub_document
from brain_core.vault import frontmatter
from brain_kernel.db.models import Entry
from brain_kernel.vault_store import Vault
from tests.ops.test_extract import NOW, T0, World
from tests.support.harness import brain, make_settings
from tests.support.transcript_factory import claude_lines, codex_lines, parse_claude, parse_codex, write_codex

# Fake credentials of the real shapes: an AWS key id (AKIA + 16 upper-case alphanumerics), a GitHub token
# (ghp_ + 36 alphanumerics) and an OpenAI key assigned to its variable.
AWS = "AKIA" + "Q7ZR" * 4
GITHUB = "ghp_" + "a1B2c3D4e5" * 3 + "F6g7H8"
OPENAI = "sk-proj-" + "Zx9" * 15
SECRETS = (AWS, GITHUB, OPENAI)
FIRST = f"Deploy {AWS} {GITHUB} with OPENAI_API_KEY={OPENAI} on staging"
LAST = f"Rotate {GITHUB} and OPENAI_API_KEY={OPENAI}, then the AWS key {AWS}"
PROMPTS = [FIRST, "Now run the whole suite", LAST]


def _holding_secrets(root: Path) -> dict[str, list[str]]:
    """Every file under ``root`` holding any of the secrets (bytes compared), with the secrets it holds."""
    found: dict[str, list[str]] = {}
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        data = path.read_bytes()
        held = [s for s in SECRETS if s.encode() in data]
        if held:
            found[path.relative_to(root).as_posix()] = held
    return found


def _index_holding_secrets(db: Session) -> list[str]:
    rows = db.execute(select(Entry.vault_path, Entry.title, Entry.content)).all()
    return [path for path, title, content in rows if any(s in (title or "") or s in (content or "") for s in SECRETS)]


def _chunks_holding_secrets(db: Session) -> list[str]:
    """Search index chunks whose text (the preview a search answers with) holds a secret."""
    rows = db.execute(text("SELECT key, text_preview FROM content_embeddings")).all()
    return [key for key, preview in rows if any(s in preview for s in SECRETS)]


def _segments_holding_secrets(db: Session) -> list[str]:
    """Files whose text the vault search holds (its segments) with a secret in it."""
    rows = db.execute(text("SELECT path, content FROM vault_segments")).all()
    return sorted({path for path, content in rows if any(s in content for s in SECRETS)})


def _snapshot(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


# -- the core ------------------------------------------------------------------------------------------------


def test_a_scrub_counts_each_kind_and_a_rescrub_counts_nothing() -> None:
    result = scrub_document(FIRST)
    assert result.text == f"Deploy {REDACTED} {REDACTED} with OPENAI_API_KEY={REDACTED} on staging"
    assert result.kinds == {"assignment": 1, "aws": 1, "github": 1} and result.removed == 3
    again = scrub_document(result.text + " password=" + REDACTED + f" https://u:{REDACTED}@host/x")
    assert again.removed == 0 and again.kinds == {}


def test_a_cut_key_in_a_document_ends_at_its_line_and_line_ends_are_kept() -> None:
    mined = "---\r\ntitle: x\r\n---\r\n- a first: -----BEGIN RSA PRIVATE KEY----- MIIEowIBAAKCAQEA…\r\n- b first: keep this\r\n"
    assert scrub_document(mined).text == f"---\r\ntitle: x\r\n---\r\n- a first: {REDACTED}\r\n- b first: keep this\r\n"
    block = "note\n-----BEGIN PRIVATE KEY-----\nMIIEowIBAAKCAQEA\n  b3BlbnNzaC1rZXk=\nafter the key\n"
    assert scrub_document(block).text == f"note\n{REDACTED}\nafter the key\n"


def test_the_parsers_keep_prompts_and_title_hints_scrubbed() -> None:
    start = NOW - dt.timedelta(hours=1)
    claude = claude_lines("s1", "/tmp/x", start, PROMPTS)
    claude[0] = json.dumps({"type": "summary", "summary": f"Rotating {AWS} for the deploy", "leafUuid": "x"})
    codex = codex_lines("s2", "/tmp/x", start, PROMPTS, repo_url=f"https://x-access-token:{GITHUB}@github.com/acme/api.git")
    for summary in (parse_claude(claude, "s1"), parse_codex(codex)):
        kept = json.dumps(summary.activity())
        assert not [s for s in SECRETS if s in kept], kept
        assert summary.first_user_prompt == f"Deploy {REDACTED} {REDACTED} with OPENAI_API_KEY={REDACTED} on staging"
        assert REDACTED in summary.last_user_prompt
    assert parse_claude(claude, "s1").title_hint == f"Rotating {REDACTED} for the deploy"
    assert parse_codex(codex).repo_url is not None and GITHUB in parse_codex(codex).repo_url  # identity evidence, never written


# -- extract, cluster, tick --------------------------------------------------------------------------------------


def test_secrets_in_prompts_reach_no_vault_file_and_no_index_row(tmp_path: Path, database_url: str, db: Session) -> None:
    world = World(tmp_path, database_url)
    Vault(world.settings.vault).scaffold()
    path = world.claude_session("claude", world.api, prompts=PROMPTS)
    lines = path.read_text().splitlines()
    lines[0] = json.dumps({"type": "summary", "summary": f"Rotating {AWS} for the deploy", "leafUuid": "x"})
    path.write_text("\n".join(lines) + "\n")
    write_codex(
        world.codex,
        "019a0000-0000-7000-8000-00000000aaaa",
        str(world.api),
        T0 - dt.timedelta(hours=8),  # an arc of its own
        PROMPTS,
        repo_url=f"https://x-access-token:{GITHUB}@github.com/acme/api.git",
    )

    extract = brain(world.settings, "extract", "--since", "2d", "--min-turns", "1")
    assert extract.exit_code == 0, extract.stderr
    assert not [s for s in SECRETS if s in extract.stdout]
    bundle = json.loads(extract.stdout)
    assert {s["agent"] for s in bundle["sessions"]} == {"claude", "codex"}
    assert all(REDACTED in s["first_user_prompt"] and REDACTED in s["last_user_prompt"] for s in bundle["sessions"])

    cluster = brain(world.settings, "cluster", input=extract.stdout)
    assert cluster.exit_code == 0, cluster.stderr
    assert json.loads(cluster.stdout)["created"] == 2
    tick = brain(world.settings, "tick", "--no-ai")
    assert tick.exit_code == 0, tick.stderr

    vault = world.settings.vault
    assert _holding_secrets(vault) == {}
    arcs = sorted(vault.rglob("arc-*.md"))  # the keeper may have promoted one
    assert len(arcs) == 2
    for arc in arcs:
        doc = frontmatter.parse(arc.read_text())
        assert doc.meta["title"].startswith(f"Deploy {REDACTED} {REDACTED} with")  # clipped to the title's length
        assert f"first: Deploy {REDACTED} {REDACTED} with OPENAI_API_KEY={REDACTED} on staging" in doc.body
        assert f"last: Rotate {REDACTED} and OPENAI_API_KEY={REDACTED}, then the AWS key {REDACTED}" in doc.body
    assert REDACTED in (vault / "brain-feed" / "hot-arcs.md").read_text()
    assert db.scalar(select(Entry.id).where(Entry.kind == "arc").limit(1)) is not None
    assert _index_holding_secrets(db) == []


def test_a_bundle_written_before_the_scrub_gives_scrubbed_arcs(tmp_path: Path) -> None:
    settings = make_settings(tmp_path, None)
    start = T0.isoformat()
    session = {"session_id": "old-1", "agent": "claude", "project": "api", "repo": "acme/api", "project_source": "git", "start": start, "end": start}
    bundle = {"sessions": [{**session, "first_user_prompt": FIRST, "last_user_prompt": LAST, "title_hint": f"About {AWS}", "num_user_turns": 2}]}
    (tmp_path / "vault").mkdir()
    result = brain(settings, "cluster", "--out-dir", str(tmp_path / "vault"), input=json.dumps(bundle))
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout)["created"] == 1
    assert _holding_secrets(tmp_path / "vault") == {}


# -- brain scrub ---------------------------------------------------------------------------------------------


def _plant(vault: Vault, sid: str, start: dt.datetime, first: str, last: str, *, where: str | None = None, crlf: bool = False) -> str:
    """An arc as an older kernel wrote it: the prompts verbatim in its title and its Prompts section."""
    session = ArcSession(
        session_id=sid,
        project="api",
        repo="acme/api",
        project_source="git",
        cwd="/home/dev/api",
        start=start,
        end=start + dt.timedelta(minutes=40),
        num_user_turns=3,
        first_user_prompt=first,
        last_user_prompt=last,
    )
    plan = build_plan([session])
    text = render_arc(plan)
    rel = plan.vault_path if where is None else f"{where}/{plan.cluster_id}.md"
    vault.path(rel).parent.mkdir(parents=True, exist_ok=True)
    vault.path(rel).write_bytes((text.replace("\n", "\r\n") if crlf else text).encode())
    return rel


def _now_at(root: Path, rel: str) -> str:
    """Where the arc planted at ``rel`` is after a tick (found by its file name)."""
    (found,) = root.rglob(rel.rsplit("/", 1)[-1])
    return found.relative_to(root).as_posix()


def test_brain_scrub_replaces_only_the_secret_spans_of_existing_arcs(tmp_path: Path, database_url: str, db: Session) -> None:
    settings = make_settings(tmp_path, database_url)
    vault = Vault(settings.vault)
    vault.scaffold()
    planted = _plant(vault, "old-session-1", T0, FIRST, LAST)
    clean = _plant(vault, "old-session-3", T0 - dt.timedelta(hours=16), "Fix the flaky login test", "Commit it please")
    assert all(s in frontmatter.parse(vault.read_text(planted)).meta["title"] for s in (AWS, GITHUB))
    tick = brain(settings, "tick", "--no-ai")  # the keeper copies the titles into the dashboard and the hot table
    assert tick.exit_code == 0, tick.stderr
    planted, clean = (_now_at(settings.vault, rel) for rel in (planted, clean))  # the keeper may have promoted them
    in_region = _plant(vault, "old-session-2", T0 - dt.timedelta(hours=8), LAST, FIRST, where="right/ideas", crlf=True)  # CRLF, unticked
    holding = _holding_secrets(settings.vault)
    assert {planted, in_region, "brain-feed/hot-arcs.md"} <= set(holding)
    assert _index_holding_secrets(db) and _chunks_holding_secrets(db)  # the tick embedded them as they were
    db.rollback()
    before = _snapshot(settings.vault)
    mtimes = {rel: vault.path(rel).stat().st_mtime_ns for rel in before}

    dry = brain(settings, "scrub", "--dry-run", "--audit", str(tmp_path / "dry.jsonl"))
    assert dry.exit_code == 0, dry.stderr
    *lines, last = dry.stdout.strip().splitlines()
    summary = json.loads(last)
    assert summary["dry_run"] is True and summary["changed"] == len(holding) and summary["files_written"] == []
    assert {json.loads(line)["path"] for line in lines} == set(holding)
    assert _snapshot(settings.vault) == before

    audit = tmp_path / "audit.jsonl"
    real = brain(settings, "scrub", "--audit", str(audit))
    assert real.exit_code == 0, real.stderr
    summary = json.loads(real.stdout.strip().splitlines()[-1])
    assert summary["changed"] == len(holding) and summary["unchanged"] == summary["scanned"] - len(holding)
    assert sorted(summary["files_written"]) == sorted(holding) and summary["skipped"] == []
    assert summary["index"]["refreshed"] is True

    after = _snapshot(settings.vault)
    assert _holding_secrets(settings.vault) == {}
    assert set(after) == set(before)
    for rel, data in before.items():
        expected = data
        for secret in SECRETS:  # the byte diff: each secret's span replaced, nothing else
            expected = expected.replace(secret.encode(), REDACTED.encode())
        assert after[rel] == expected, rel
        if rel not in holding:
            assert vault.path(rel).stat().st_mtime_ns == mtimes[rel], f"{rel} was rewritten"
    assert b"\r\n" in after[in_region] and b"\n" not in after[in_region].replace(b"\r\n", b"")
    for rel in (planted, in_region):
        old, new = frontmatter.parse(before[rel].decode()), frontmatter.parse(after[rel].decode())
        assert new.strict and list(new.meta) == list(old.meta)
        assert new.meta["title"].startswith(f"Deploy {REDACTED} {REDACTED}") or new.meta["title"].startswith(f"Rotate {REDACTED}")
    assert after[clean] == before[clean]

    entries = [json.loads(line) for line in audit.read_text().splitlines()]
    assert {e["path"] for e in entries} == set(holding)
    assert sum(e["secrets_removed"] for e in entries) == summary["secrets_removed"] > 0
    assert all(set(e["kinds"]) <= {"assignment", "aws", "github"} for e in entries)
    assert not [s for s in SECRETS if s in audit.read_text()]
    assert _index_holding_secrets(db) == []
    assert _chunks_holding_secrets(db) == []  # the scrub re-embedded what it changed: no search answers a secret
    assert "search index:" in real.stderr, real.stderr
    db.rollback()

    rerun = brain(settings, "scrub")
    assert rerun.exit_code == 0, rerun.stderr
    again = json.loads(rerun.stdout.strip().splitlines()[-1])
    assert again["changed"] == 0 and again["secrets_removed"] == 0 and again["files_written"] == []
    assert _snapshot(settings.vault) == after


def test_a_rerun_after_a_killed_scrub_takes_the_secrets_out_of_the_index_too(tmp_path: Path, database_url: str, db: Session) -> None:
    settings = make_settings(tmp_path, database_url)
    vault = Vault(settings.vault)
    vault.scaffold()
    _plant(vault, "old-session-1", T0, FIRST, LAST)
    assert brain(settings, "tick", "--no-ai").exit_code == 0
    assert brain(settings, "reindex").exit_code == 0  # the vault search's index too
    held = set(_holding_secrets(settings.vault))
    assert _index_holding_secrets(db) and _chunks_holding_secrets(db) and _segments_holding_secrets(db)
    db.rollback()
    # What a scrub killed after its writes and before its commit leaves: clean files, an index as it was.
    for rel in held:
        vault.rewrite_listed(rel, scrub_document(vault.listed(rel).read_bytes().decode()).text.encode())
    assert _holding_secrets(settings.vault) == {}

    rerun = brain(settings, "scrub")
    assert rerun.exit_code == 0, rerun.stderr
    summary = json.loads(rerun.stdout.strip().splitlines()[-1])
    assert summary["changed"] == 0 and summary["index"]["files"] >= len(held), summary
    assert _index_holding_secrets(db) == [] and _chunks_holding_secrets(db) == [] and _segments_holding_secrets(db) == []


def test_a_scrub_or_repair_keeps_the_rows_of_markers_acknowledged_while_it_ran(tmp_path: Path, database_url: str, db: Session) -> None:
    """Their re-read of a shared log may precede a marker appended to it: the marker's row (written after the job
    started) is kept, not deleted as an entry the text read does not hold. Rows moved to the future stand in for it."""
    from fastapi.testclient import TestClient

    from brain_api.app import create_app

    settings = make_settings(tmp_path, database_url)
    Vault(settings.vault).scaffold()
    for command in ("scrub", "repair"):
        with TestClient(create_app(settings)) as client:
            earlier = client.post("/marker", json={"type": "lesson", "content": f"Written before the {command}.", "attrs": {"repo": "acme/api"}})
            assert earlier.status_code == 201, earlier.text
            assert brain(settings, "reindex").exit_code == 0  # the log's stats recorded: the marker below makes it stale
            posted = client.post("/marker", json={"type": "lesson", "content": f"Acknowledged during the {command}.", "attrs": {"repo": "acme/api"}})
            assert posted.status_code == 201, posted.text
        db.rollback()
        [row] = db.execute(select(Entry.id, Entry.vault_path).where(Entry.content.like(f"%during the {command}%"))).all()
        log = Path(settings.vault) / row.vault_path
        text_ = log.read_text()
        log.write_text(text_[: text_.index(f"Acknowledged during the {command}")].rsplit("## ", 1)[0])  # the read the job made
        db.execute(text("UPDATE entries SET updated_at = now() + interval '1 hour' WHERE id = :id"), {"id": row.id})
        db.commit()
        result = brain(settings, command)
        assert result.exit_code == 0, result.stderr
        db.rollback()
        assert db.execute(select(Entry.id).where(Entry.id == row.id)).scalar_one_or_none() == row.id, command
        log.write_text(text_)
