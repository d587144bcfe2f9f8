"""Benchmark: ``run_extract`` (per-session identity) against the basename-only pass it replaces.

Builds, in a temporary folder, a user home with real git repositories (origin
remotes, a few sharing a short name), linked worktrees, subfolders, scratch
folders matched by the layout patterns, and folders that no longer exist;
300 working folders in all. It writes 5,000 Claude Code transcripts and 1,000
Codex rollouts spread over those folders (Codex ones carry the repository URL
when their folder was a checkout), then measures, in the same run and on the
same warm files:

* the basename pass: the same parsing, project = basename(cwd) (the upstream rule);
* ``run_extract``: the same parsing plus identity resolution before grouping.

* ``run_extract`` with a database (a fresh, migrated one: ``BRAIN_TEST_DATABASE_URL``'s
  server, else an embedded Postgres), as ``brain extract`` runs with ``DATABASE_URL``:
  the first run (every session new) and an unchanged rerun, each committed,
  and the session rows the rerun wrote (rows whose ``xmin`` moved, counted in
  the database, not by the job).

Every run starts with the process's git caches emptied, as a fresh ``brain
extract`` process does. It prints the times, the ratios (target <= 1.5 for
resolution, <= 1.3 for the database runs), the git calls made per distinct
folder (bound 2: in-process reads and git processes apart), and how many
sessions the basename rule gets wrong compared with the resolver (figures
of record are copied into docs/performance.md by hand). Exits
non-zero when a bound is broken or the unchanged rerun writes a session row.

Run from the repository root: .venv/bin/python -m bench.bench_extract [--claude 5000] [--codex 1000] [--folders 300] [--no-database]
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path

from sqlalchemy import text
from sqlalchemy.orm import Session

from bench.common import fresh_database
from brain_kernel.db.engine import make_engine
from brain_kernel.identity.resolver import clear_git_caches
from brain_kernel.identity.transcript_files import find_transcripts
from brain_kernel.settings import Settings
from brain_migrations.runner import upgrade_to_head
from brain_ops.extract import ScanStats, iter_summaries, run_extract
from tests.support.transcript_factory import add_worktree, make_repo, write_claude, write_codex

REPO_ROOT = Path(__file__).resolve().parent.parent
WORDS = [
    "fix",
    "the",
    "flaky",
    "login",
    "test",
    "port",
    "uploader",
    "retry",
    "backoff",
    "cache",
    "layer",
    "parser",
    "migration",
    "schema",
    "index",
    "feed",
    "keeper",
    "arc",
    "session",
    "worktree",
]


def build_folders(home: Path, total: int, rng: random.Random) -> list[tuple[Path, str | None, str]]:
    """(folder, remote url, kind) for ``total`` working folders of every kind."""
    n_repos = max(4, total // 5)
    folders: list[tuple[Path, str | None, str]] = []
    repos: list[tuple[Path, str]] = []
    for i in range(n_repos):
        name = "api" if i % 12 == 0 else f"proj{i:03d}"  # a few repos share the key "api"
        owner = f"org{i:03d}" if name == "api" else "acme"
        path = home / ("dev" if i % 2 else "src") / (name if name != "api" else f"api-{i}") / ("" if i % 3 else "checkout")
        remote = f"git@github.com:{owner}/{name}.git" if i % 10 else f"https://gitlab.com/{owner}/sub/{name}"
        make_repo(path, remote)
        repos.append((path, remote))
        folders.append((path, remote, "root"))
    kinds = ["subfolder", "worktree", "scratch", "deleted", "subfolder", "deleted"]
    k = 0
    while len(folders) < total:
        kind = kinds[k % len(kinds)]
        repo, remote = repos[k % len(repos)]
        k += 1
        if kind == "subfolder":
            path = repo / "src" / f"mod{k}" / "lib"
            path.mkdir(parents=True, exist_ok=True)
            folders.append((path, remote, kind))
        elif kind == "worktree":
            path = home / "wt" / f"{repo.name}-{k}"
            add_worktree(repo, path, f"feature-{k}")
            folders.append((path, remote, kind))
        elif kind == "scratch":
            path = home / "scratchpad" / f"task-project-{k % 17}" / f"task{k}"
            path.mkdir(parents=True, exist_ok=True)
            folders.append((path, None, kind))
        else:
            folders.append((home / "gone" / f"deleted-{k}", remote if k % 2 else None, kind))
    folders.append((home, None, "home"))
    return folders[:total]


def prompt(rng: random.Random) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(rng.randint(5, 14))).capitalize()


def write_transcripts(home: Path, settings: Settings, folders: list[tuple[Path, str | None, str]], n_claude: int, n_codex: int, rng: random.Random) -> int:
    """Write the transcripts; returns total bytes."""
    base = dt.datetime.now(dt.timezone.utc) - dt.timedelta(days=5)
    total = 0
    for i in range(n_claude):
        folder, _, _ = folders[i % len(folders)]
        start = base + dt.timedelta(minutes=37 * i)
        sid = f"{i:08d}-0000-4000-8000-{rng.getrandbits(48):012x}"
        path = write_claude(
            settings.resolved_claude_dir, sid, str(folder), start, [prompt(rng) for _ in range(rng.randint(3, 8))], filler_chars=rng.randint(200, 3000)
        )
        total += path.stat().st_size
    for i in range(n_codex):
        folder, remote, _ = folders[(i * 7) % len(folders)]
        start = base + dt.timedelta(minutes=53 * i)
        sid = f"019a{i:04x}-0000-7000-8000-{rng.getrandbits(48):012x}"
        path = write_codex(
            settings.resolved_codex_dir,
            sid,
            str(folder),
            start,
            [prompt(rng) for _ in range(rng.randint(3, 8))],
            repo_url=remote,
            filler_chars=rng.randint(200, 3000),
        )
        total += path.stat().st_size
    return total


def basename_pass(settings: Settings) -> list[dict]:
    """The upstream rule over the same files and the same parsing: project = basename(cwd)."""
    files = find_transcripts(settings.resolved_claude_dir, settings.resolved_codex_dir)
    out = []
    for item, summary in iter_summaries(files, since=None, until=None, min_turns=1, stats=ScanStats()):
        entry = summary.activity()
        entry["project"] = os.path.basename(summary.cwd.rstrip("/")) if summary.cwd else None
        entry["transcript"] = str(item.path)
        out.append(entry)
    return out


def timed(fn, *args, **kwargs):  # type: ignore[no-untyped-def]
    clear_git_caches()  # every run resolves like a fresh process
    start = time.perf_counter()
    result = fn(*args, **kwargs)
    return time.perf_counter() - start, result


def _row_versions(db: Session) -> dict[str, str]:
    return dict(db.execute(text("SELECT session_id, xmin::text FROM sessions")).all())


def database_runs(settings: Settings, rounds: int) -> dict[str, float | int]:
    """``run_extract`` with a database: first run, unchanged rerun (best of ``rounds``), rows the rerun wrote."""
    with fresh_database("bench-extract") as url:
        upgrade_to_head(url)
        engine = make_engine(url, pool_size=2)
        try:

            def one_run() -> dict:
                with Session(engine) as db:
                    bundle = run_extract(settings, since=None, min_turns=1, db=db)
                    db.commit()
                return bundle

            first_t, first = timed(one_run)
            with Session(engine) as db:
                before = _row_versions(db)
            rerun_times, written, recorded = [], 0, 0
            for _ in range(rounds):
                t, again = timed(one_run)
                rerun_times.append(t)
                with Session(engine) as db:
                    after = _row_versions(db)
                written = max(written, sum(1 for sid, version in after.items() if before.get(sid) != version))
                recorded = max(recorded, again["sessions_recorded"])
                before = after
        finally:
            engine.dispose()
    return {
        "first_s": first_t,
        "first_recorded": first["sessions_recorded"],
        "rows": len(before),
        "rerun_s": min(rerun_times),
        "rerun_written": written,
        "rerun_recorded": recorded,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--claude", type=int, default=5000)
    parser.add_argument("--codex", type=int, default=1000)
    parser.add_argument("--folders", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--no-record", action="store_true", help="accepted for old command lines; the bench only prints")
    parser.add_argument("--no-database", action="store_true", help="skip the runs with a database")
    args = parser.parse_args()
    rng = random.Random(7)
    tmp = Path(tempfile.mkdtemp(prefix="bench-extract-"))
    try:
        home = tmp / "home"
        home.mkdir()
        settings = Settings.explicit(
            vault=tmp / "vault",
            home=tmp / ".brain",
            user_home=home,
            claude_dir=home / ".claude" / "projects",
            codex_dir=home / ".codex",
            layout_patterns=["~/scratchpad/{project}/*"],
        )
        t0 = time.perf_counter()
        folders = build_folders(home, args.folders, rng)
        size = write_transcripts(home, settings, folders, args.claude, args.codex, rng)
        setup = time.perf_counter() - t0
        print(f"setup: {len(folders)} folders, {args.claude + args.codex} transcripts, {size / 1e6:.1f} MB in {setup:.1f} s", file=sys.stderr)

        basename_pass(settings)  # warm the page cache for both passes
        base_times, extract_times = [], []
        bundle: dict = {}
        baseline: list[dict] = []
        for _ in range(args.rounds):
            t, baseline = timed(basename_pass, settings)
            base_times.append(t)
            t, bundle = timed(run_extract, settings, since=None, min_turns=1)
            extract_times.append(t)
        base_t, extract_t = min(base_times), min(extract_times)
        ratio = extract_t / base_t
        sessions = bundle["sessions"]
        distinct = len({s["cwd"] for s in sessions if s["cwd"]})
        existing = len({s["cwd"] for s in sessions if s["cwd"] and Path(s["cwd"]).exists()})
        per_folder = bundle["git_calls"] / max(distinct, 1)
        db_runs = None if args.no_database else database_runs(settings, max(1, args.rounds // 2))
        by_source = bundle["by_source"]
        truth = {s["transcript"]: s["project"] for s in sessions}
        wrong = sum(1 for b in baseline if b["project"] != truth.get(b["transcript"]))

        figures = {
            "transcripts (Claude / Codex)": f"{args.claude:,} / {args.codex:,} ({size / 1e6:.0f} MB)",
            "working folders (distinct / existing on disk)": f"{distinct} / {existing}",
            "basename-only pass (same parsing)": f"{base_t:.2f} s",
            "`run_extract` (resolution before grouping)": f"{extract_t:.2f} s",
            "ratio (target <= 1.5)": f"{ratio:.2f}x",
            "git calls (in-process reads / git processes)": (
                f"{bundle['git_calls']} ({per_folder:.2f} per distinct folder; bound 2): {bundle['git_reads']} / {bundle['git_processes']}"
            ),
            "sessions by source": ", ".join(f"{k} {v}" for k, v in by_source.items()),
            "sessions where basename(cwd) differs from the resolved project": f"{wrong} of {len(sessions)}",
        }
        db_ok = True
        if db_runs is not None:
            first_ratio, rerun_ratio = db_runs["first_s"] / base_t, db_runs["rerun_s"] / base_t
            figures.update(
                {
                    "with a database, first run (every session new)": (
                        f"{db_runs['first_s']:.2f} s ({first_ratio:.2f}x the basename pass, {db_runs['first_recorded']} session rows written)"
                    ),
                    "with a database, unchanged rerun": f"{db_runs['rerun_s']:.2f} s ({rerun_ratio:.2f}x the basename pass)",
                    "session rows the unchanged rerun wrote (xmin moved / reported)": (
                        f"{db_runs['rerun_written']} / {db_runs['rerun_recorded']} of {db_runs['rows']}"
                    ),
                    "with a database / without one, first run and rerun (target <= 1.3)": (
                        f"{db_runs['first_s'] / extract_t:.2f}x / {db_runs['rerun_s'] / extract_t:.2f}x"
                    ),
                }
            )
            db_ok = db_runs["rerun_written"] == 0 and max(db_runs["first_s"], db_runs["rerun_s"]) / extract_t <= 1.3
        for key, value in figures.items():
            print(f"{key}: {value}")
        ok = ratio <= 1.5 and per_folder <= 2 and db_ok
        if not ok:
            print("FAIL: a bound is broken", file=sys.stderr)
        return 0 if ok else 1
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
