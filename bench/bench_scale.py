"""Benchmark: every job and read route at a year of fleet history, x1 / x4 / x16, in one run.

For each size the vault is written in its own formats (``bench_reads``'s
dataset: 200 projects, one key in ten shared by two owners; x1 = 20,000 arcs
and 60,000 lessons over 60 days, x4 = 80,000 and 240,000 over 240 days,
x16 = 100,000 and 1,000,000 over 365 days; plus one hot project of 10,000
arcs and 90,000 lessons; and decisions, milestones and signals as marker
files, one per 200, 50 and 500 lessons) on a fresh, migrated database, and
then, each as production runs it:

1. ``brain reindex`` (subprocess: wall time, peak RSS), database size;
2. ``brain tick --no-ai`` on the indexed vault (first run), database size,
   ``VACUUM ANALYZE`` (what autovacuum does after the bulk load);
3. ``brain tick --no-ai`` again with nothing new (second run);
4. ``brain serve --workers 4``; 100 lessons posted; ``brain tick --no-ai``
   again (the cost of 100 new markers is its wall time minus the second
   run's);
5. the read routes through that server (``bench_reads.measure``): the
   project feed computed afresh (``Cache-Control: no-cache``) for 40 sampled
   projects and for the hot project, ``/projects``, ``/vault/search`` with and
   without a project for five query classes;
6. ``POST /marker`` with 32 clients, alternating batches that name their
   project and batches with only a ``cwd`` (folders of real git repositories
   and worktrees made in the temporary home): lessons/s, p50, p95; then
   300 lessons from one client, the service time (with 32 clients in flight
   a request waits about 32 / throughput on average, whatever the code);
7. ``brain reindex`` again on the same database, the index current (a rerun:
   its wall time, peak RSS and the rows of the index it wrote, which should
   be those of the files the markers since the last tick changed); then
   of the vault as the ticks left it (arcs graduated into their region
   folders), into a second empty database (ADR 0027);
8. for x1 and x4 only (as the issue's table), ``brain extract``'s
   ``run_extract`` on 5,000 Claude + 1,000 Codex transcripts per x1 (scaled
   by 4 for x4): without a database, with one (first run) and an unchanged
   rerun, and the session rows the rerun wrote.

It prints one JSON object per size, then the issue's table with the issue's
figures (before) beside this run's (after), and the targets it checks; exits
non-zero when a target is missed. Peak RSS is each process's own
(``os.wait4``).

Run: .venv/bin/python -m bench.bench_scale [--sizes x1,x4,x16] [--no-extract] [--samples 40] [--rounds 3]
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import json
import random
import sys
import time
import uuid
from pathlib import Path
from typing import Any

from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url

from bench import bench_extract, bench_markers, bench_reads
from bench.bench_feed import projects
from bench.common import REPO_ROOT, admin, bench_home, pct, run_brain, start_server, stop, upgrade_to_head
from brain_core.markers import Attribution, parse_request
from brain_core.vault.layout import decision_path, milestone_path, signal_path
from brain_core.vault.logs import log_file_header, render_decision, render_log_entry, render_signal
from brain_kernel.db.engine import normalise_url
from brain_kernel.settings import Settings
from brain_kernel.vault_store import Vault

SEVERITIES = ("info", "warning", "critical")
TARGETS = {
    "tick_second_s": {"x1": 5.0, "x16": 20.0},
    "tick_100_markers_extra_s": 2.0,
    "reindex_x16_s": 120.0,
    "reindex_x16_rss_mb": 400.0,
    "feed_p95_ms": 15.0,
    "projects_x16_p95_ms": 50.0,
    "search_x16_p95_ms": 100.0,
    "marker_p50_x16_ms": 15.0,
    "cwd_vs_project_ratio": 1.2,
    "marker_lessons_per_s": 300.0,
    "extract_db_ratio": 1.3,
}
# The table (figures taken before the work, partly on a loaded machine).
BEFORE: dict[str, dict[str, str]] = {
    "tick first run": {"x1": "144 s, 345 MB", "x4": "543 s, 1,107 MB"},
    "tick second run, nothing new": {"x1": "108 s"},
    "tick after 100 new markers (extra over the second run)": {},
    "reindex": {"x1": "95 s, 292 MB", "x4": "300 s, 917 MB"},
    "reindex of the vault its ticks left (arcs in their region folders)": {},
    "reindex again, nothing changed (rows written)": {},
    "database size after the first tick": {"x4": "665 MB"},
    "feed computed afresh p50 / p95": {"x1": "13 / 20 ms", "x4": "26 / 42 ms", "x16": "56 / 101 ms"},
    "feed computed afresh, hot project p50 / p95": {"x1": "189 ms"},
    "/projects p50 / p95": {"x1": "200 ms", "x4": "468 ms", "x16": "1,406 ms"},
    "/vault/search?project= p50 / p95 (worst query class)": {"x1": "643 ms", "x4": "1,235 ms", "x16": "3,624 ms"},
    "/vault/search p50 / p95 (worst query class)": {"x1": "3.3 s", "x4": "12.4 s"},
    "POST /marker naming the project: lessons/s, p50 / p95": {"x1": "202/s, p95 285 ms"},
    "POST /marker cwd only: lessons/s, p50 / p95": {"x1": "89/s, p95 697 ms"},
    "POST /marker, one client (service time): p50 / p95": {},
    "extract without a database / first / unchanged rerun (rows rewritten)": {"x1": "5.4 s / 14.0 s / 9.1 s (1,591)", "x4": "- / 60.8 s / 38.5 s"},
}


def write_markers(vault: Vault, size: str, rng: random.Random) -> dict[str, int]:
    """Decisions (ADR files), milestones (each project's BLOCKS.md log) and signals (amygdala files) of ``size``."""
    _arcs, lessons, days = bench_reads.SIZES[size]
    fleet = projects(200)
    counts = {"decision": lessons // 200, "milestone": lessons // 50, "signal": lessons // 500}

    def when() -> dt.datetime:
        return bench_reads.NOW - dt.timedelta(hours=rng.uniform(1, 24 * days))

    for n in range(1, counts["decision"] + 1):
        key, slug = fleet[rng.randrange(len(fleet))]
        req = parse_request(
            "decision", bench_reads._sentences(rng, 2), {"repo": slug, "title": f"Adopt the {rng.choice(bench_reads.WORDS)} plan {n}"}, max_chars=4096
        )
        rel = decision_path(n, req.title)
        vault.path(rel).write_text(
            render_decision(req, Attribution(key, slug, None, "attrs"), number=n, marker_id=uuid.uuid4().hex, at=when()), encoding="utf-8"
        )
    logs: dict[str, list[str]] = {}
    for _ in range(counts["milestone"]):
        key, slug = fleet[rng.randrange(len(fleet))]
        at = when()
        rel = milestone_path(key, at)
        req = parse_request("milestone", bench_reads._sentences(rng, 1), {"repo": slug}, max_chars=4096)
        entries = logs.setdefault(rel, [log_file_header("milestone", rel)])
        entries.append(render_log_entry("milestone", req, Attribution(key, slug, None, "attrs"), marker_id=uuid.uuid4().hex, at=at))
    for rel, parts in logs.items():
        vault.path(rel).parent.mkdir(parents=True, exist_ok=True)
        vault.path(rel).write_text("".join(parts), encoding="utf-8")
    for n in range(counts["signal"]):
        key, slug = fleet[rng.randrange(len(fleet))]
        attrs: dict[str, Any] = {"repo": slug, "severity": SEVERITIES[n % 3], "source": "bench", "title": f"{rng.choice(bench_reads.WORDS)} alert {n}"}
        if n % 10 == 0:
            attrs = {"severity": "warning", "source": "bench", "title": f"fleet alert {n}", "scope": "fleet"}
        req = parse_request("signal", bench_reads._sentences(rng, 1), attrs, max_chars=4096)
        at = when()
        who = Attribution(key, slug, None, "attrs") if "repo" in attrs else Attribution(None, None, None, "none")
        vault.path(signal_path(req.title, req.severity or "info", at)).write_text(render_signal(req, who, marker_id=uuid.uuid4().hex, at=at), encoding="utf-8")
    return counts


def _rows(url: str, statement: str) -> list[Any]:
    """The rows one statement reads from the database at ``url``."""
    engine = create_engine(normalise_url(url))
    try:
        with engine.connect() as conn:
            return list(conn.execute(text(statement)).all())
    finally:
        engine.dispose()


def database_mb(url: str) -> float:
    return round(_rows(url, "SELECT pg_database_size(current_database())")[0][0] / 1e6, 1)


# The tables whose rows a rebuild makes from the vault (the change log's compaction and the rebuild's own
# record, ``feed_changes`` and ``vault_search_state``, are bookkeeping, reported apart).
DATA_TABLES = ("entries", "projects", "project_counts", "vault_file_stats", "vault_documents", "vault_segments")


def rows_written(url: str) -> dict[str, int]:
    """Rows inserted, updated and deleted so far in each table of the database (the server's statistics, as flushed)."""
    return dict(_rows(url, "SELECT relname, n_tup_ins + n_tup_upd + n_tup_del FROM pg_stat_user_tables"))


def vacuum_analyze(url: str) -> None:
    engine = create_engine(normalise_url(url), isolation_level="AUTOCOMMIT")
    try:
        with engine.connect() as conn:
            conn.execute(text("VACUUM ANALYZE"))
    finally:
        engine.dispose()


def reindex_ticked(settings: Settings, url: str, vault: Vault) -> dict[str, Any]:
    """``brain reindex`` of the vault as its ticks left it, into a second empty database on the same server.

    The first reindex reads the vault as written, its arcs spread over
    ``clusters/<date>/``; after a tick they have graduated into their region
    folders (one folder of every arc at x16), the layout an operator reindexes.
    """
    name = f"ticked_{uuid.uuid4().hex[:8]}"
    admin(url, f'CREATE DATABASE "{name}"')  # issued from the bench's own database: no other database assumed
    target = make_url(url).set(database=name).render_as_string(hide_password=False)
    try:
        upgrade_to_head(target)
        return _job(run_brain(settings.with_overrides(database_url=target), "reindex", "--vault", str(vault.root), "--database-url", target))
    finally:
        admin(url, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def _job(result: dict[str, Any]) -> dict[str, Any]:
    summary = result.pop("summary")
    keep = ("vault_writes", "read_files", "scanned_files", "arcs_scanned", "entries", "files", "documents")
    result["summary"] = {k: summary[k] for k in keep if k in summary}
    if "files_written" in summary:
        result["summary"]["files_written"] = len(summary["files_written"])
    return result


def post_markers(base: str, args: argparse.Namespace, tmp: Path, settings: Settings, url: str) -> dict[str, Any]:
    """Alternating batches of lessons naming their project and cwd-only ones (``bench_markers``), checked for loss."""
    margs = argparse.Namespace(lessons=args.marker_lessons, projects=args.marker_projects)
    folders = bench_markers.build_folders(tmp / "home", args.marker_projects)
    expected = dict(folders)
    out: dict[str, list[dict[str, Any]]] = {"project": [], "cwd-only": []}
    for r in range(args.marker_rounds):
        for mode in ("project", "cwd-only") if r % 2 == 0 else ("cwd-only", "project"):
            run_id = uuid.uuid4().hex[:8]
            bodies = bench_markers.lesson_bodies(margs, run_id, folders, mode == "cwd-only")
            wall, latencies, replies = asyncio.run(bench_markers.post_all(base, bodies, args.concurrency))
            checked = bench_markers.check(settings, url, run_id, bodies, replies, expected)
            out[mode].append(
                {"lessons_per_s": round(len(bodies) / wall, 1), "p50_ms": round(pct(latencies, 50), 1), "p95_ms": round(pct(latencies, 95), 1), **checked}
            )

    # The service time: one client, so nothing queues (32 clients in flight wait 32 / throughput on average).
    run_id = uuid.uuid4().hex[:8]
    bodies = bench_markers.lesson_bodies(argparse.Namespace(lessons=args.service_lessons, projects=args.marker_projects), run_id, folders, False)
    wall, latencies, replies = asyncio.run(bench_markers.post_all(base, bodies, 1))
    checked = bench_markers.check(settings, url, run_id, bodies, replies, expected)
    service = {"lessons_per_s": round(len(bodies) / wall, 1), "p50_ms": round(pct(latencies, 50), 1), "p95_ms": round(pct(latencies, 95), 1), **checked}

    def median(rows: list[dict[str, Any]], key: str) -> float:
        values = sorted(row[key] for row in rows)
        return values[len(values) // 2]

    return {
        "service": service,
        **{
            mode: {
                "lessons_per_s": median(rows, "lessons_per_s"),
                "p50_ms": median(rows, "p50_ms"),
                "p95_ms": median(rows, "p95_ms"),
                "lost": sum(r["lost"] for r in rows),
                "duplicated": sum(r["duplicated"] for r in rows),
                "failed": sum(r["failed"] for r in rows),
                "misattributed": sum(r["misattributed"] for r in rows),
            }
            for mode, rows in out.items()
        },
    }


def extract_runs(factor: int, tmp: Path) -> dict[str, Any]:
    """``run_extract`` without a database, then with one (first run, unchanged rerun), on ``factor`` x (5,000 + 1,000) transcripts."""
    rng = random.Random(7)
    home = tmp / "extract-home"
    home.mkdir()
    settings = Settings.explicit(
        vault=tmp / "extract-vault",
        home=tmp / ".brain-extract",
        user_home=home,
        claude_dir=home / ".claude" / "projects",
        codex_dir=home / ".codex",
        layout_patterns=["~/scratchpad/{project}/*"],
    )
    folders = bench_extract.build_folders(home, 300, rng)
    bench_extract.write_transcripts(home, settings, folders, 5000 * factor, 1000 * factor, rng)
    bench_extract.basename_pass(settings)  # warm the page cache
    without, _ = bench_extract.timed(bench_extract.run_extract, settings, since=None, min_turns=1)
    db = bench_extract.database_runs(settings, 1)
    return {
        "transcripts": 6000 * factor,
        "without_db_s": round(without, 2),
        "first_s": round(db["first_s"], 2),
        "rerun_s": round(db["rerun_s"], 2),
        "rerun_written": db["rerun_written"],
        "first_ratio": round(db["first_s"] / without, 2),
        "rerun_ratio": round(db["rerun_s"] / without, 2),
    }


def run_size(size: str, args: argparse.Namespace) -> dict[str, Any]:
    rng = random.Random(args.seed)
    out: dict[str, Any] = {"size": size}
    with bench_home(f"bench-scale-{size}") as (tmp, url, settings, vault):
        t0 = time.perf_counter()
        bench_reads.write_vault(vault, size, rng)
        out["markers"] = write_markers(vault, size, rng)
        out["build_vault_s"] = round(time.perf_counter() - t0, 1)
        say = lambda message: print(f"{size}: {message}", file=sys.stderr, flush=True)  # noqa: E731
        say(f"vault written in {out['build_vault_s']} s")
        where = ("--vault", str(vault.root), "--database-url", url)
        out["reindex"] = _job(run_brain(settings, "reindex", *where))
        out["database_mb_after_reindex"] = database_mb(url)
        say(f"reindex {out['reindex']['wall_s']} s, {out['reindex']['peak_rss_mb']} MB")
        out["tick_first"] = _job(run_brain(settings, "tick", "--no-ai", *where))
        out["database_mb_after_tick"] = database_mb(url)
        say(f"first tick {out['tick_first']['wall_s']} s, {out['tick_first']['peak_rss_mb']} MB")
        vacuum_analyze(url)
        out["tick_second"] = _job(run_brain(settings, "tick", "--no-ai", *where))
        say(f"second tick {out['tick_second']['wall_s']} s")
        server_log = tmp / "serve.log"
        proc, base = start_server(settings, workers=args.workers, log=server_log)
        try:
            fleet = projects(200)
            bodies = [
                {"type": "lesson", "content": f"scale bench new lesson {n}: {bench_reads._sentences(rng, 1)}", "attrs": {"project": fleet[n % len(fleet)][1]}}
                for n in range(100)
            ]
            asyncio.run(bench_markers.post_all(base, bodies, 8))
            out["tick_after_100_markers"] = _job(run_brain(settings, "tick", "--no-ai", *where))
            out["tick_100_markers_extra_s"] = round(out["tick_after_100_markers"]["wall_s"] - out["tick_second"]["wall_s"], 1)
            say(f"tick after 100 markers {out['tick_after_100_markers']['wall_s']} s")
            out["reads"] = bench_reads.measure(base, args, rng, url)
            say("reads measured")
            out["post_marker"] = post_markers(base, args, tmp, settings, url)
            say("markers measured")
        except BaseException:
            say("the server's last lines:\n" + "\n".join(server_log.read_text(errors="replace").splitlines()[-30:]))
            raise
        finally:
            stop(proc)
        written = rows_written(url)
        out["reindex_rerun"] = _job(run_brain(settings, "reindex", *where))  # the index current: a rerun
        after = rows_written(url)
        moved = {table: n - written.get(table, 0) for table, n in after.items() if n != written.get(table, 0)}
        out["reindex_rerun"]["rows_written"] = sum(n for table, n in moved.items() if table in DATA_TABLES)
        out["reindex_rerun"]["rows_written_by_table"] = moved
        say(f"reindex again, nothing changed {out['reindex_rerun']['wall_s']} s, {out['reindex_rerun']['peak_rss_mb']} MB")
        out["reindex_ticked"] = reindex_ticked(settings, url, vault)
        say(f"reindex of the ticked vault {out['reindex_ticked']['wall_s']} s, {out['reindex_ticked']['peak_rss_mb']} MB")
        if args.extract and size in ("x1", "x4"):
            out["extract"] = extract_runs(1 if size == "x1" else 4, tmp)
            say("extract measured")
    return out


def _worst(reads: dict[str, Any], prefix: str) -> str:
    rows = {k: v for k, v in reads.items() if k.startswith(prefix) and "short token" not in k}
    key = max(rows, key=lambda k: rows[k]["p95_ms"])
    return f"{rows[key]['p50_ms']} / {rows[key]['p95_ms']} ms ({key[len(prefix) :].strip()})"


def after_cells(r: dict[str, Any]) -> dict[str, str]:
    reads, markers = r["reads"], r["post_marker"]
    cells = {
        "tick first run": f"{r['tick_first']['wall_s']} s, {r['tick_first']['peak_rss_mb']:.0f} MB",
        "tick second run, nothing new": f"{r['tick_second']['wall_s']} s, {r['tick_second']['peak_rss_mb']:.0f} MB",
        "tick after 100 new markers (extra over the second run)": f"{r['tick_after_100_markers']['wall_s']} s (+{r['tick_100_markers_extra_s']} s)",
        "reindex": f"{r['reindex']['wall_s']} s, {r['reindex']['peak_rss_mb']:.0f} MB",
        "reindex of the vault its ticks left (arcs in their region folders)": f"{r['reindex_ticked']['wall_s']} s, {r['reindex_ticked']['peak_rss_mb']:.0f} MB",
        "reindex again, nothing changed (rows written)": (
            f"{r['reindex_rerun']['wall_s']} s, {r['reindex_rerun']['peak_rss_mb']:.0f} MB ({r['reindex_rerun']['rows_written']})"
        ),
        "database size after the first tick": f"{r['database_mb_after_tick']:.0f} MB (after reindex {r['database_mb_after_reindex']:.0f} MB)",
        "feed computed afresh p50 / p95": f"{reads['feed']['p50_ms']} / {reads['feed']['p95_ms']} ms",
        "feed computed afresh, hot project p50 / p95": f"{reads['feed_hot']['p50_ms']} / {reads['feed_hot']['p95_ms']} ms",
        "/projects p50 / p95": f"{reads['projects']['p50_ms']} / {reads['projects']['p95_ms']} ms",
        "/vault/search?project= p50 / p95 (worst query class)": _worst(reads, "search_project"),
        "/vault/search p50 / p95 (worst query class)": _worst(reads, "search "),
    }
    for mode, label in (("project", "naming the project"), ("cwd-only", "cwd only")):
        m = markers[mode]
        cells[f"POST /marker {label}: lessons/s, p50 / p95"] = f"{m['lessons_per_s']}/s, {m['p50_ms']} / {m['p95_ms']} ms"
    m = markers["service"]
    cells["POST /marker, one client (service time): p50 / p95"] = f"{m['p50_ms']} / {m['p95_ms']} ms ({m['lessons_per_s']}/s)"
    if "extract" in r:
        e = r["extract"]
        cells["extract without a database / first / unchanged rerun (rows rewritten)"] = (
            f"{e['without_db_s']} s / {e['first_s']} s / {e['rerun_s']} s ({e['rerun_written']}); {e['first_ratio']}x / {e['rerun_ratio']}x"
        )
    return cells


def table(results: list[dict[str, Any]]) -> str:
    after = {r["size"]: after_cells(r) for r in results}
    sizes = [r["size"] for r in results]
    lines = ["| measure | " + " | ".join(f"{s} before | {s} after" for s in sizes) + " |", "|---|" + "---|---|" * len(sizes)]
    for measure, before in BEFORE.items():
        cells = [f"{before.get(s, '-')} | {after[s].get(measure, '-')}" for s in sizes]
        lines.append(f"| {measure} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def misses(r: dict[str, Any]) -> list[str]:
    size, reads, markers = r["size"], r["reads"], r["post_marker"]
    out = []
    if size in TARGETS["tick_second_s"] and r["tick_second"]["wall_s"] > TARGETS["tick_second_s"][size]:
        out.append("tick second run")
    if r["tick_100_markers_extra_s"] > TARGETS["tick_100_markers_extra_s"]:
        out.append("tick after 100 markers")
    if reads["feed"]["p95_ms"] > TARGETS["feed_p95_ms"] or reads["feed_hot"]["p95_ms"] > TARGETS["feed_p95_ms"]:
        out.append("feed afresh p95")
    if any(m["lost"] or m["duplicated"] or m["failed"] or m["misattributed"] for m in markers.values()):
        out.append("markers lost, duplicated, failed or misattributed")
    if size == "x16":
        for job, label in (("reindex", "reindex at x16"), ("reindex_ticked", "reindex of the ticked vault at x16")):
            if r[job]["wall_s"] > TARGETS["reindex_x16_s"] or r[job]["peak_rss_mb"] > TARGETS["reindex_x16_rss_mb"]:
                out.append(label)
        if reads["projects"]["p95_ms"] > TARGETS["projects_x16_p95_ms"]:
            out.append("/projects at x16")
        out += [f"{k} at x16" for k, v in reads.items() if k.startswith("search") and "short token" not in k and v["p95_ms"] > TARGETS["search_x16_p95_ms"]]
        # The p50 target is the service time (one client): with 32 clients in flight at the 300/s target a request
        # waits about 32 / 300 s = 107 ms whatever the code (Little's law), so both cannot hold for the loaded batches.
        if markers["service"]["p50_ms"] > TARGETS["marker_p50_x16_ms"]:
            out.append("POST /marker p50 at x16 (one client)")
    if min(markers["project"]["lessons_per_s"], markers["cwd-only"]["lessons_per_s"]) < TARGETS["marker_lessons_per_s"]:
        out.append("POST /marker below 300 lessons/s (4 workers, 32 clients)")
    if markers["cwd-only"]["p50_ms"] > TARGETS["cwd_vs_project_ratio"] * markers["project"]["p50_ms"]:
        out.append("cwd-only marker more than 20% slower than one naming its project")
    if "extract" in r and r["extract"]["first_ratio"] > TARGETS["extract_db_ratio"]:
        out.append("extract with a database")
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="x1,x4,x16")
    parser.add_argument("--samples", type=int, default=40, help="projects sampled for the feed (10 of them for searches)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--workers", type=int, default=4, help="brain serve workers")
    parser.add_argument("--concurrency", type=int, default=32, help="marker clients")
    parser.add_argument("--marker-lessons", type=int, default=1500, help="lessons per marker batch")
    parser.add_argument("--marker-projects", type=int, default=8, help="git repositories the cwd-only lessons come from")
    parser.add_argument("--marker-rounds", type=int, default=2, help="batches of each marker mode, alternating")
    parser.add_argument("--service-lessons", type=int, default=300, help="lessons posted by one client (the service time)")
    parser.add_argument("--no-extract", dest="extract", action="store_false", help="skip the extract runs (x1, x4)")
    parser.add_argument("--seed", type=int, default=14)
    args = parser.parse_args()
    args.scan = False
    (REPO_ROOT / ".brain").mkdir(exist_ok=True)
    results = []
    for size in args.sizes.split(","):
        result = run_size(size.strip(), args)
        print(json.dumps(result), flush=True)
        results.append(result)
    print(table(results))
    missed = {r["size"]: m for r in results if (m := misses(r))}
    print(f"targets {'missed: ' + json.dumps(missed) if missed else 'met'} (short tokens are reported, not targeted)")
    if missed:
        sys.exit(1)


if __name__ == "__main__":
    main()
