"""Secrets in what is mined from transcripts: scrubbed on the way in."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

from sqlalchemy import select
from sqlalchemy.orm import Session

from brain_core.redact import REDACTED, scrub_document, scrub_report
from brain_core.transcripts import parse_claude, parse_codex
from brain_core.vault import frontmatter
from brain_kernel.models import Entry
from brain_kernel.vault import Vault
from tests.conftest import brain, make_settings
from tests.test_extract import NOW, T0, World
from tests.transcript_factory import claude_lines, codex_lines, write_codex

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


# -- the core ------------------------------------------------------------------------------------------------


def test_scrub_report_counts_each_kind_and_a_rescrub_counts_nothing() -> None:
    result = scrub_report(FIRST)
    assert result.text == f"Deploy {REDACTED} {REDACTED} with OPENAI_API_KEY={REDACTED} on staging"
    assert result.kinds == {"assignment": 1, "aws": 1, "github": 1} and result.removed == 3
    again = scrub_report(result.text + " password=" + REDACTED + f" https://u:{REDACTED}@host/x")
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
    result = brain(settings, "cluster", "--out-dir", str(tmp_path / "vault"), input=json.dumps(bundle))
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout)["created"] == 1
    assert _holding_secrets(tmp_path / "vault") == {}
