"""Benchmark: kill -9 during keyed bursts of lessons, restart, retry every key; counts duplicates.

Runs ``brain serve`` (``--workers 1`` by default) as a subprocess in a process
group of its own, on a temporary vault and a fresh database (on
``BRAIN_TEST_DATABASE_URL`` when set, else an embedded Postgres under
``.brain/bench-crash-*``). Each cycle fires a burst of lessons, each with its
own ``X-Idempotency-Key``, from a thread pool; once ``--kill-after`` of them
are acknowledged the whole process group gets SIGKILL with requests in
flight. The server is restarted on the same vault and database and every key
of the burst is retried with the same body; the restarted server takes the
next cycle's burst. At the end every lesson must be in the vault's logs
exactly once and in the index exactly once; the bench prints per-cycle
figures and the totals, and exits non-zero on any duplicate, loss, refused
retry or acknowledged key that did not replay.

Run: .venv/bin/python -m bench.bench_crash [--cycles 10] [--burst 300] [--threads 16] [--kill-after 100] [--workers 1]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import uuid
from collections import Counter
from pathlib import Path

from sqlalchemy import create_engine, text

from bench.common import fresh_database
from brain_kernel.db.engine import normalise_url
from brain_kernel.settings import Settings
from tests.support.crash import Server, burst_and_kill, lesson_contents, retry_all


def run(args: argparse.Namespace, database_url: str, tmp: Path) -> dict:
    settings = Settings.explicit(vault=tmp / "vault", home=tmp / ".brain", user_home=tmp / "home", database_url=database_url)
    engine = create_engine(normalise_url(database_url))
    log = tmp / "serve.log"
    run_id = uuid.uuid4().hex[:8]
    all_contents: list[str] = []
    cycles: list[dict] = []
    server = Server(settings, args.workers, log)
    try:
        for c in range(args.cycles):
            contents = [f"crash {run_id} cycle {c} lesson {n}: written once whatever the kill" for n in range(args.burst)]
            bodies = [{"type": "lesson", "content": t, "attrs": {"project": "org/bench-crash", "session_id": f"s-{n % 50}"}} for n, t in enumerate(contents)]
            keys = [f"crash-{run_id}-{c}-{n}" for n in range(args.burst)]
            all_contents += contents
            acked, unanswered, _ = burst_and_kill(server, bodies, keys, args.threads, args.kill_after)
            with engine.connect() as conn:
                pending = conn.execute(
                    text("select count(*) from idempotency_keys where state = 'pending' and key like :p"), {"p": f"crash-{run_id}-{c}-%"}
                ).scalar_one()
            after_kill = lesson_contents(settings.vault)
            in_vault_unacked = sum(1 for i in unanswered if after_kill[contents[i]])
            server = Server(settings, args.workers, log)
            retried = retry_all(server, bodies, keys, args.threads)
            replays = {i for i, r in enumerate(retried) if r.status_code == 201 and r.json().get("idempotent_replay")}
            seen = lesson_contents(settings.vault)
            cycles.append(
                {
                    "cycle": c,
                    "acknowledged": len(acked),
                    "unanswered": len(unanswered),
                    "pending_at_kill": pending,
                    "in_vault_unacknowledged": in_vault_unacked,
                    "refused": sum(1 for r in retried if r.status_code != 201),
                    "acknowledged_not_replayed": len(set(acked) - replays),
                    "duplicates": sum(seen[t] - 1 for t in contents if seen[t] > 1),
                    "missing": sum(1 for t in contents if seen[t] == 0),
                }
            )
            print(json.dumps(cycles[-1]), file=sys.stderr)
    finally:
        server.kill()
    seen = lesson_contents(settings.vault)
    with engine.connect() as conn:
        indexed = Counter(conn.execute(text("select content from entries where kind = 'lesson' and content like :p"), {"p": f"crash {run_id} %"}).scalars())
    engine.dispose()
    return {
        "cycles": args.cycles,
        "burst": args.burst,
        "workers": args.workers,
        "keys": len(all_contents),
        "acknowledged_before_kill": sum(c["acknowledged"] for c in cycles),
        "unanswered": sum(c["unanswered"] for c in cycles),
        "pending_at_kill": sum(c["pending_at_kill"] for c in cycles),
        "in_vault_unacknowledged": sum(c["in_vault_unacknowledged"] for c in cycles),
        "refused": sum(c["refused"] for c in cycles),
        "acknowledged_not_replayed": sum(c["acknowledged_not_replayed"] for c in cycles),
        "vault_duplicates": sum(seen[t] - 1 for t in all_contents if seen[t] > 1),
        "vault_missing": sum(1 for t in all_contents if seen[t] == 0),
        "index_duplicates": sum(n - 1 for n in indexed.values() if n > 1),
        "index_missing": sum(1 for t in all_contents if indexed[t] == 0),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cycles", type=int, default=10)
    parser.add_argument("--burst", type=int, default=300, help="lessons per burst, each with its own key")
    parser.add_argument("--threads", type=int, default=16)
    parser.add_argument("--kill-after", type=int, default=100, help="acknowledged writes before the SIGKILL")
    parser.add_argument("--workers", type=int, default=1)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-crash-") as tmp_name, fresh_database("bench-crash") as url:
        tmp = Path(tmp_name)
        (tmp / "home").mkdir()
        result = run(args, url, tmp)
    print(json.dumps(result))
    print(
        f"{args.cycles} kill -9 cycles x {args.burst} keyed lessons ({args.workers} worker(s)): "
        f"{result['acknowledged_before_kill']} acknowledged before the kills, {result['pending_at_kill']} reservations pending, "
        f"{result['in_vault_unacknowledged']} written but unacknowledged; after retrying every key: "
        f"{result['vault_duplicates']} duplicates and {result['vault_missing']} missing in the vault, "
        f"{result['index_duplicates']} duplicates and {result['index_missing']} missing in the index, "
        f"{result['refused']} refused, {result['acknowledged_not_replayed']} acknowledged keys not replayed",
        file=sys.stderr,
    )
    bad = ("refused", "acknowledged_not_replayed", "vault_duplicates", "vault_missing", "index_duplicates", "index_missing")
    if any(result[k] for k in bad):
        sys.exit(1)


if __name__ == "__main__":
    main()
