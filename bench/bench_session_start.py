"""Benchmark: session starts as the fleet makes them, while markers arrive (every read counts).

The dataset is ``bench_reads``'s x1 (200 projects, 20,000 arcs, 60,000
lessons, plus one hot project of 10,000 arcs and 90,000 lessons; the rows
COPYed, the search index built), served by ``brain serve --workers 4`` on a
fresh database. Then, for ``--seconds``:

- markers arrive at a steady ``--marker-rate`` per second (lessons naming a
  random project, the hot one a tenth of the time), each invalidating its
  project's stored answer as production writes do;
- ``--sessions`` session starts are spread over the window, each for a random
  project (the hot one a tenth of the time), as a new session's hook reads:
  ``GET /feed?project=<slug>`` with no cache directive. Every read is timed
  and its ``X-Brain-Feed`` header (``stored`` or ``live``) counted;
- right after each session start, the same project's memory is rebuilt as a
  client without the project feed would: ``GET /feed`` (the fleet feed), the
  project's arcs it lists read with ``GET /vault/read`` in parallel, and the
  last 14 daily lesson logs read in parallel, then the project's lessons
  picked out of them with the kernel's own parser (the client's work,
  timed with the requests).

It prints the stored-answer hit rate, the p50/p95 of every feed read and of
each kind apart (stored, computed live), of the hot project's reads, and of
the reconstruction; the figure of record is "every feed read", the stored
answer being a cache.

Run: .venv/bin/python -m bench.bench_session_start [--sessions 50] [--seconds 30] [--marker-rate 10]
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import json
import random
import sys
import time
from typing import Any

import httpx

from bench import bench_reads
from bench.bench_feed import projects
from bench.common import bench_home, pct, start_server, stop
from brain_core.vault.records import lesson_records


def _figures(times: list[float]) -> dict[str, Any]:
    if not times:
        return {"n": 0}
    return {"n": len(times), "p50_ms": round(pct(times, 50), 1), "p95_ms": round(pct(times, 95), 1)}


async def _markers(client: httpx.AsyncClient, rate: float, until: float, rng: random.Random, fleet: list[tuple[str, str]]) -> int:
    """Lessons at a steady rate until ``until``; returns how many were acknowledged."""
    sent, n, started = 0, 0, time.monotonic()
    while time.monotonic() < until:
        slug = bench_reads.HOT[1] if rng.random() < 0.1 else fleet[rng.randrange(len(fleet))][1]
        body = {"type": "lesson", "content": f"session-start bench lesson {n}: keep retries idempotent", "attrs": {"project": slug, "source": "bench"}}
        r = await client.post("/marker", json=body)
        sent += r.status_code == 201
        n += 1
        await asyncio.sleep(max(0.0, started + n / rate - time.monotonic()))
    return sent


async def _reconstruct(client: httpx.AsyncClient, key: str, slug: str) -> float:
    """The project's memory without the project feed: fleet feed, its arcs of the project, the last 14 lesson logs, filtered."""
    t = time.perf_counter()
    feed = (await client.get("/feed")).json()
    paths = [a["vault_path"] for a in feed.get("arcs", []) if a.get("project") == key or a.get("repo") == slug]
    days = [(bench_reads.NOW - dt.timedelta(days=d)).date().isoformat() for d in range(14)]
    logs = [f"left/reference/lessons-{day}.md" for day in days]
    replies = await asyncio.gather(*(client.get("/vault/read", params={"path": p}) for p in paths + logs))
    mine = 0
    for path, r in zip(paths + logs, replies, strict=True):
        if r.status_code == 200 and path in logs:
            mine += sum(1 for rec in lesson_records(r.json()["content"], path) if rec.repo == slug)
    return time.perf_counter() - t


async def _sessions(base: str, args: argparse.Namespace, rng: random.Random, fleet: list[tuple[str, str]]) -> dict[str, Any]:
    limits = httpx.Limits(max_connections=64, max_keepalive_connections=64)
    async with httpx.AsyncClient(base_url=base, timeout=120, limits=limits) as client, httpx.AsyncClient(base_url=base, timeout=120) as writer:
        for _, slug in fleet[:5]:  # warm-up: connections, plans
            (await client.get("/feed", params={"project": slug})).raise_for_status()
        start = time.monotonic()
        until = start + args.seconds
        marker_task = asyncio.create_task(_markers(writer, args.marker_rate, until, rng, fleet))
        reads: list[tuple[str, bool, float]] = []
        recon: list[float] = []
        for i in range(args.sessions):
            await asyncio.sleep(max(0.0, start + i * args.seconds / args.sessions - time.monotonic()))
            hot = rng.random() < 0.1
            key, slug = bench_reads.HOT if hot else fleet[rng.randrange(len(fleet))]
            t = time.perf_counter()
            r = await client.get("/feed", params={"project": slug})
            took = time.perf_counter() - t
            r.raise_for_status()
            reads.append((r.headers.get("X-Brain-Feed", "?"), hot, took))
            recon.append(await _reconstruct(client, key, slug))
        markers = await marker_task
    stored = [t for kind, _, t in reads if kind == "stored"]
    live = [t for kind, _, t in reads if kind != "stored"]
    return {
        "sessions": len(reads),
        "markers_acknowledged": markers,
        "marker_rate_per_s": args.marker_rate,
        "stored_hit_rate": round(len(stored) / len(reads), 3),
        "every_feed_read": _figures([t for *_, t in reads]),
        "stored_answers": _figures(stored),
        "computed_live": _figures(live),
        "hot_project_reads": _figures([t for _, hot, t in reads if hot]),
        "reconstruction": _figures(recon),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=50)
    parser.add_argument("--seconds", type=float, default=30.0, help="the window the session starts and markers spread over")
    parser.add_argument("--marker-rate", type=float, default=10.0, help="markers per second while sessions start")
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--seed", type=int, default=21)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    fleet = projects(200)
    with bench_home("bench-session") as (_tmp, url, settings, vault):
        built = bench_reads.build(vault, url, "x1", random.Random(14))
        print(f"built {json.dumps(built)}", file=sys.stderr)
        proc, base = start_server(settings, workers=args.workers)
        try:
            result = asyncio.run(_sessions(base, args, rng, fleet))
        finally:
            stop(proc)
    print(json.dumps({"dataset": built, **result}))
    every, recon = result["every_feed_read"], result["reconstruction"]
    print(
        f"{result['sessions']} session starts, {result['markers_acknowledged']} markers meanwhile: stored-answer hit rate {result['stored_hit_rate']:.0%}; "
        f"every feed read p50 {every['p50_ms']} ms / p95 {every['p95_ms']} ms (stored {result['stored_answers']}, live {result['computed_live']}, "
        f"hot project {result['hot_project_reads']}); reconstruction p50 {recon['p50_ms']} ms / p95 {recon['p95_ms']} ms",
        file=sys.stderr,
    )


if __name__ == "__main__":
    main()
