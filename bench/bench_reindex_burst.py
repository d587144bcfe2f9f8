"""Benchmark: ``brain reindex`` while a burst of markers reaches ``brain serve --workers 4``; it must finish and lose none.

Each run starts a server with ``--workers`` forked workers on a temporary
vault and a fresh database (``scratch``: on ``BRAIN_TEST_DATABASE_URL`` when
set, else an embedded Postgres under ``.brain/``), posts ``--lead`` markers
and reindexes once (the search index built, as on any server a reindex or a
tick has indexed: from then on each marker's file is followed into it), then
runs ``brain reindex`` (a subprocess with the server's settings) while
``--concurrency`` clients post ``--markers`` more: lessons, with every
``--mix``-th marker a decision, signal or milestone in turn, each with its
own ``X-Idempotency-Key``. A run passes when the reindex exits 0, every marker
is answered 201, and every answered marker is in the index afterwards: the
row of its file (``vault_path``) with its marker id (derived from its key and
the reserved moment, as ``markers.marker_id_for`` does). A failed reindex's
error line and the database log's deadlock report are printed.

Run: .venv/bin/python -m bench.bench_reindex_burst [--runs 5] [--markers 4000] [--concurrency 32] [--workers 4] [--lead 200]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

from sqlalchemy import create_engine, text

from bench.bench_markers import Reply, post_all
from bench.common import scratch, start_server, stop
from brain_kernel.db.engine import normalise_url
from brain_kernel.marker_service import marker_id_for
from brain_kernel.settings import Settings, child_environment

KINDS = ("decision", "signal", "milestone")


def marker_bodies(run_id: str, count: int, mix: int, projects: int) -> list[dict]:
    """``count`` markers over ``projects`` projects: lessons, every ``mix``-th another kind in turn."""
    bodies = []
    for n in range(count):
        kind = KINDS[(n // mix) % len(KINDS)] if mix and n % mix == mix - 1 else "lesson"
        attrs: dict = {"project": f"org/burst-{n % projects}", "session_id": f"s-{n % 50}", "source": "bench"}
        if kind == "decision":
            attrs["title"] = f"burst {run_id} decision {n}"
        if kind == "signal":
            attrs["severity"] = "warning"
        bodies.append({"type": kind, "content": f"burst {run_id} {kind} {n}: a reindex must not lose it.", "attrs": attrs})
    return bodies


def reindex(settings: Settings) -> tuple[int, float, str]:
    """``brain reindex`` in a subprocess: exit code, wall seconds, and its stderr's last lines."""
    script = Path(sys.executable).parent / "brain"
    cmd = [str(script)] if script.exists() else [sys.executable, "-m", "brain_cli"]
    t0 = time.monotonic()
    done = subprocess.run([*cmd, "reindex"], env=child_environment(settings), capture_output=True, check=False)
    err = [ln for ln in done.stderr.decode("utf-8", "replace").splitlines() if ln.strip() and not ln.startswith("reindex: ")]
    return done.returncode, time.monotonic() - t0, "\n".join(err[-6:])


def unindexed(database_url: str, replies: list[Reply]) -> int:
    """How many markers answered 201 have no row of their file with their marker id."""
    acknowledged = {r.body["idempotency_key"]: r.body["vault_path"] for r in replies if r is not None and r.status_code == 201}
    engine = create_engine(normalise_url(database_url))
    try:
        with engine.connect() as conn:
            moments = dict(conn.execute(text("SELECT key, created_at FROM idempotency_keys WHERE key = ANY(:k)"), {"k": list(acknowledged)}).all())
            held = set(conn.execute(text("SELECT vault_path, metadata ->> 'marker_id' FROM entries WHERE metadata ? 'marker_id'")).all())
    finally:
        engine.dispose()
    return sum(1 for key, path in acknowledged.items() if key not in moments or (path, marker_id_for(key, moments[key])) not in held)


def deadlock_report(database_url: str) -> str:
    """The deadlock lines of an embedded server's log (an external server's log is its operator's)."""
    engine = create_engine(normalise_url(database_url))
    try:
        with engine.connect() as conn:
            data_dir = conn.execute(text("SHOW data_directory")).scalar_one()
    finally:
        engine.dispose()
    log = Path(data_dir) / "log"
    if not log.exists():
        return ""
    lines = log.read_text(errors="replace").splitlines()
    keep: list[str] = []
    for i, line in enumerate(lines):
        if "deadlock detected" in line:
            keep.extend(lines[i : i + 8])
    return "\n".join(keep)


def one_run(args: argparse.Namespace, number: int) -> dict:
    """One fresh server and database: the lead markers, then the reindex beside the burst; the outcome."""
    with scratch("bench-reindex-burst") as (tmp, url):
        settings = Settings.explicit(vault=tmp / "vault", home=tmp / ".brain", user_home=tmp / "home", database_url=url)
        proc, base = start_server(settings, args.workers, tmp / "server.log")
        run_id = uuid.uuid4().hex[:8]
        try:
            lead = marker_bodies(f"{run_id}-lead", args.lead, args.mix, args.projects)
            _, _, lead_replies = asyncio.run(post_all(base, lead, args.concurrency))
            first = reindex(settings)  # the search index built: from now on each marker's file is followed into it
            if first[0] != 0:
                raise SystemExit(f"the first reindex (no burst) exited {first[0]}: {first[2]}")
            bodies = marker_bodies(run_id, args.markers, args.mix, args.projects)
            posted: list[tuple[float, list[float], list[Reply]]] = []
            poster = threading.Thread(target=lambda: posted.append(asyncio.run(post_all(base, bodies, args.concurrency))))
            poster.start()
            code, seconds, error = reindex(settings)
            poster.join()
        finally:
            stop(proc)
        if not posted:
            raise SystemExit("the burst's clients failed (see above)")
        wall, _, burst_replies = posted[0]
        replies = [*lead_replies, *burst_replies]
        report = deadlock_report(url) if code != 0 else ""
        return {
            "run": number,
            "reindex_exit": code,
            "reindex_s": round(seconds, 1),
            "markers": len(replies),
            "markers_per_s": round(args.markers / wall, 1),
            "not_201": sum(1 for r in replies if r is None or r.status_code != 201),
            "unindexed": unindexed(url, replies),
            "error": error if code != 0 else "",
            "deadlock": report,
        }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--markers", type=int, default=4000, help="markers posted while the reindex runs")
    parser.add_argument("--lead", type=int, default=200, help="markers posted before it starts (the reindex has rows to keep)")
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--projects", type=int, default=8, help="markers are spread over this many projects")
    parser.add_argument("--mix", type=int, default=10, help="every mix-th marker is a decision, signal or milestone (0: lessons only)")
    args = parser.parse_args()
    results = []
    for n in range(1, args.runs + 1):
        result = one_run(args, n)
        results.append(result)
        print(json.dumps({k: v for k, v in result.items() if k != "deadlock"}))
        ok = result["reindex_exit"] == 0 and not result["not_201"] and not result["unindexed"]
        print(
            f"run {n}: {'ok' if ok else 'FAILED'}: reindex exit {result['reindex_exit']} in {result['reindex_s']} s, "
            f"{result['markers']} markers ({result['markers_per_s']}/s during the reindex), not 201: {result['not_201']}, "
            f"unindexed: {result['unindexed']}",
            file=sys.stderr,
        )
        if result["error"]:
            print(result["error"], file=sys.stderr)
        if result["deadlock"]:
            print(result["deadlock"], file=sys.stderr)
    passed = sum(1 for r in results if r["reindex_exit"] == 0 and not r["not_201"] and not r["unindexed"])
    print(f"{passed} of {len(results)} runs finished with every acknowledged marker indexed", file=sys.stderr)
    if passed != len(results):
        sys.exit(1)


if __name__ == "__main__":
    main()
