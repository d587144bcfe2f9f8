"""Benchmark: the trial's marker counts per session, read through the session-id index and by a scan, in one run.

``brain extract`` counts the lessons, decisions and signals each observed
session posted (``brain_kernel.trial.outcomes.marker_counts``). The rows are
inserted with SQL on a fresh migrated database: ``--arcs`` arc rows (no
session id) and ``--markers`` marker rows spread over ``--sessions``
sessions. Then, alternating the two sides in every round, the same read
runs with the planner free (it takes ``ix_entries_marker_session``,
revision 0023) and with index and bitmap scans off (the plan before the
index: a scan of the entries), for a tick's handful of sessions and for a
batch of 5,000. Prints p50/p95 per side and the ratio.

Run: .venv/bin/python -m bench.bench_outcomes [--arcs 150000] [--markers 60000] [--sessions 11999] [--rounds 15]
"""

from __future__ import annotations

import argparse
import json
import random
import time
from typing import Any

from sqlalchemy import create_engine, text
from sqlalchemy.orm import Session

from bench.common import fresh_database, pct
from brain_kernel.trial.outcomes import marker_counts
from brain_migrations.runner import upgrade_to_head

_FILL = """
INSERT INTO entries (id, kind, title, content, project, projects, vault_path, occurred_at, metadata)
SELECT 'arc-' || n, 'arc', 'arc ' || n, repeat('words of an arc ', 20), 'p' || (n % 200), ARRAY['p' || (n % 200)],
       'arcs/' || n || '.md', now(), jsonb_build_object('cluster_id', 'c' || n)
  FROM generate_series(1, :arcs) AS n;
INSERT INTO entries (id, kind, title, content, project, projects, vault_path, occurred_at, severity, metadata)
SELECT 'm-' || n, (ARRAY['lesson', 'decision', 'signal', 'milestone'])[1 + n % 4], 'marker ' || n, 'a lesson learned',
       'p' || (n % 200), ARRAY['p' || (n % 200)], 'lessons/' || n || '.md', now(),
       CASE WHEN n % 8 = 2 THEN 'critical' END, jsonb_build_object('session_id', 's-' || (n % :sessions))
  FROM generate_series(1, :markers) AS n;
ANALYZE entries;
"""


def _time(engine: Any, sids: list[str], *, scan: bool) -> float:
    with engine.begin() as conn:
        if scan:
            conn.execute(text("SET LOCAL enable_indexscan = off"))
            conn.execute(text("SET LOCAL enable_bitmapscan = off"))
        db = Session(bind=conn)
        start = time.perf_counter()
        counts = marker_counts(db, sids)
        took = time.perf_counter() - start
        assert counts, "no session's markers were counted"
        return took


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--arcs", type=int, default=150_000)
    parser.add_argument("--markers", type=int, default=60_000)
    parser.add_argument("--sessions", type=int, default=11_999)
    parser.add_argument("--rounds", type=int, default=15)
    args = parser.parse_args()
    rng = random.Random(7)
    with fresh_database("bench-outcomes") as url:
        upgrade_to_head(url)
        engine = create_engine(url)
        with engine.begin() as conn:
            for statement in _FILL.split(";"):
                if statement.strip():
                    conn.execute(text(statement), {"arcs": args.arcs, "markers": args.markers, "sessions": args.sessions})
        rows: list[dict[str, Any]] = []
        for label, size in (("a tick (20 sessions)", 20), ("a batch (5,000 sessions)", 5000)):
            times: dict[bool, list[float]] = {False: [], True: []}
            for round_no in range(args.rounds):
                sids = [f"s-{rng.randrange(args.sessions)}" for _ in range(size)]
                for scan in (False, True) if round_no % 2 == 0 else (True, False):
                    times[scan].append(_time(engine, sids, scan=scan))
            row = {
                "read": label,
                "index_p50_ms": round(pct(times[False], 50), 2),
                "index_p95_ms": round(pct(times[False], 95), 2),
                "scan_p50_ms": round(pct(times[True], 50), 2),
                "scan_p95_ms": round(pct(times[True], 95), 2),
            }
            row["scan_over_index_p50"] = round(row["scan_p50_ms"] / max(row["index_p50_ms"], 1e-6), 1)
            rows.append(row)
            print(json.dumps(row), flush=True)
        engine.dispose()
    print(f"\n{'read':<26} {'index p50/p95 ms':>18} {'scan p50/p95 ms':>18} {'ratio':>6}")
    for row in rows:
        print(
            f"{row['read']:<26} {row['index_p50_ms']:>8} / {row['index_p95_ms']:<7} {row['scan_p50_ms']:>8} / {row['scan_p95_ms']:<7} "
            f"{row['scan_over_index_p50']:>6}"
        )


if __name__ == "__main__":
    main()
