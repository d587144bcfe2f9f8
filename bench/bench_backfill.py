"""Benchmark: ``brain backfill`` over 20,000 arcs holding 60,000 source sessions, twice.

Builds a home with real git repositories (``--repos``, with origin remotes)
and a vault of arcs written as ``brain cluster`` renders them (three sessions
each, a session table with each session's folder), then mislabelled as the
upstream kernel left them: half in upstream's flat form (the basename of a
working folder as ``project:``, no ``projects`` or ``project_source``), half
in the kernel's form with a wrong project; a tenth live in
``frontal-lobe/conscious/``. The sessions' evidence is mixed the way a
deployed kernel sees it: 70% in the session index, 15% only as Claude Code
transcripts on disk (found by session id), 15% only in the arc's own session
table (a folder inside a repository, a third of them deleted from disk since).

The index and the file stats are built first (``brain reindex``, not
timed), as a deployed kernel has them. Then ``brain backfill`` runs as a
subprocess on that database (``BRAIN_TEST_DATABASE_URL`` when set, else an
embedded Postgres under ``.brain/``), and again. Reported: wall time and
peak RSS of each run, its summary, and the files whose bytes changed (a hash
of the vault tree before and after). Target: the first run in at most 30 s,
the second writes 0 files. Exits non-zero when the second run writes any
file.

Run: .venv/bin/python -m bench.bench_backfill [--arcs 20000 --repos 40]
"""

from __future__ import annotations

import argparse
import datetime as dt
import hashlib
import json
import random
import shutil
import sys
from pathlib import Path
from typing import Any

from sqlalchemy import create_engine
from sqlalchemy.orm import Session

from bench.common import run_brain, scratch
from brain_core.arcs import ArcSession, build_plan, render_arc
from brain_core.identity import ProjectIdentity
from brain_core.vault import frontmatter
from brain_kernel.db.engine import normalise_url
from brain_kernel.identity.sessions import SessionRecord, record_sessions
from brain_kernel.settings import Settings
from brain_kernel.vault_store import Vault
from brain_migrations.runner import upgrade_to_head
from tests.support.transcript_factory import make_repo, write_claude

START = dt.datetime(2026, 9, 1, 9, 0, tzinfo=dt.timezone.utc)
PROMPTS = ["Fix the flaky upload test in the storage module", "Run the suite again"]


def _tree_hash(root: Path) -> dict[str, str]:
    return {p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(root.rglob("*.md"))}


def build(args: argparse.Namespace, url: str, tmp: Path) -> Settings:
    """Repos, transcripts, session rows and the mislabelled vault."""
    rng = random.Random(args.seed)
    home = tmp / "home"
    settings = Settings.explicit(
        vault=tmp / "vault", home=tmp / ".brain", database_url=url, user_home=home, claude_dir=home / ".claude" / "projects", codex_dir=home / ".codex"
    )
    vault = Vault(settings.vault)
    vault.scaffold()
    repos = []
    for n in range(args.repos):
        repo = make_repo(home / "dev" / f"service-{n:02d}", f"git@github.com:acme/service-{n:02d}.git")
        for sub in ("src/api", "src/jobs", "docs", "tools/cli"):
            (repo / sub).mkdir(parents=True, exist_ok=True)
        repos.append(repo)
    records: list[SessionRecord] = []
    deleted: list[Path] = []
    counts = {"session_index": 0, "transcript": 0, "arc_table": 0}
    for a in range(args.arcs):
        repo = repos[rng.randrange(len(repos))]
        slug = f"acme/{repo.name}"
        sessions = []
        for k in range(3):
            sid = f"s{a:05d}-{k}"
            sub = rng.choice(("src/api", "src/jobs", "docs", "tools/cli"))
            cwd = repo / sub
            kind = rng.random()
            if kind < 0.15 and rng.random() < 1 / 3:
                cwd = repo / sub / f"gone-{a}"  # a folder deleted since: created, then removed below
                if not cwd.exists():
                    cwd.mkdir(parents=True)
                    deleted.append(cwd)
            start = START + dt.timedelta(days=a % 60, minutes=40 * k)
            sessions.append(
                ArcSession(sid, project="x", cwd=str(cwd), start=start, end=start + dt.timedelta(minutes=20), num_user_turns=3 + k, num_assistant_turns=4)
            )
            if kind < 0.15:
                counts["arc_table"] += 1
            elif kind < 0.30:
                write_claude(settings.resolved_claude_dir, sid, str(cwd), start, PROMPTS)
                counts["transcript"] += 1
            else:
                records.append(SessionRecord(sid, ProjectIdentity(repo.name, slug, str(repo), None, str(cwd), "git"), agent="claude", started_at=start))
                counts["session_index"] += 1
        plan = build_plan(sessions)
        text = render_arc(plan)
        wrong = Path(sessions[0].cwd or "x").name
        if a % 2 == 0:  # upstream's form: a basename project and nothing else
            text = frontmatter.update(text, {"project": wrong}, remove=("projects", "repo", "worktrees", "project_source"))
        else:
            text = frontmatter.update(text, {"project": wrong, "projects": [wrong], "repo": None, "project_source": "git"})
        rel = plan.vault_path if a % 10 else f"frontal-lobe/conscious/{plan.cluster_id}.md"
        target = vault.path(rel)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
    for path in deleted:
        shutil.rmtree(path)
    engine = create_engine(normalise_url(url))
    with Session(engine) as db:
        record_sessions(db, records)
        db.commit()
    engine.dispose()
    print(f"built {args.arcs} arcs, {3 * args.arcs} sessions ({counts}), {len(deleted)} deleted folders", file=sys.stderr)
    return settings


def run(args: argparse.Namespace, url: str, tmp: Path) -> dict[str, Any]:
    upgrade_to_head(url)
    settings = build(args, url, tmp)
    run_brain(settings, "reindex")
    out: dict[str, Any] = {"arcs": args.arcs, "sessions": 3 * args.arcs, "repos": args.repos}
    for label in ("first", "second"):
        before = _tree_hash(settings.vault)
        result = run_brain(settings, "backfill", "--audit", str(tmp / f"audit-{label}.jsonl"))
        after = _tree_hash(settings.vault)
        summary = result["summary"]
        out[label] = {
            "wall_s": result["wall_s"],
            "peak_rss_mb": result["peak_rss_mb"],
            "startup_s": result["startup_s"],
            "cpu_s": {"user": result["user_cpu_s"], "sys": result["sys_cpu_s"]},  # the job's own (the database's is not counted)
            "summary": {k: summary[k] for k in ("scanned", "changed", "unchanged", "unresolved", "by_source", "by_outcome", "files_written", "index")},
            "paths_changed": sum(1 for k in after if before.get(k) != after[k]),
        }
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--arcs", type=int, default=20_000)
    parser.add_argument("--repos", type=int, default=40)
    parser.add_argument("--seed", type=int, default=16)
    args = parser.parse_args()
    with scratch("bench-backfill") as (tmp, url):
        result = run(args, url, tmp)
    print(json.dumps(result))
    first, second = result["first"], result["second"]
    ok = second["summary"]["files_written"] == 0 and second["paths_changed"] == 0
    print(
        f"brain backfill over {args.arcs} arcs ({3 * args.arcs} sessions): first run {first['wall_s']} s, "
        f"{first['summary']['files_written']} files written; second run {second['wall_s']} s, "
        f"{second['summary']['files_written']} files written ({'target met' if ok and first['wall_s'] <= 30 else 'TARGET MISSED'})",
        file=sys.stderr,
    )
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
