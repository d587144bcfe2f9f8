"""Benchmark: sustained lesson throughput of ``brain serve --workers 4``, with a loss check.

Starts the server as a subprocess on a free port with a temporary vault and a
fresh database (on ``BRAIN_TEST_DATABASE_URL`` when set, else an embedded
Postgres under ``.brain/bench-markers-*``), warms it up, then posts lessons
from many concurrent clients for the whole run, each with its own
``X-Idempotency-Key`` as real clients send. Prints lessons per second and
latency percentiles, then verifies that every lesson is in the day's log
exactly once and in the index; exits non-zero if any is lost or duplicated.

Run: .venv/bin/python -m bench.bench_markers [--lessons 3000] [--concurrency 32] [--workers 4]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import time
import uuid
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import httpx
from sqlalchemy import create_engine, text

from bench.common import fresh_database, pct, start_server
from brain_core.vault.records import lesson_records
from brain_kernel.db import normalise_url
from brain_kernel.settings import Settings


@dataclass
class Reply:
    """One HTTP answer: status code and decoded JSON body."""

    status_code: int
    body: dict

    def json(self) -> dict:
        return self.body


async def _client(host: str, port: int, jobs: asyncio.Queue, bodies: list[dict], replies: list, latencies: list[float]) -> None:
    """One keep-alive HTTP/1.1 connection posting bodies until the queue is empty.

    A minimal client on purpose: the bench measures the server, and a full HTTP
    client library would spend as much CPU per request as the server does on
    this machine's two cores.
    """
    reader, writer = await asyncio.open_connection(host, port)
    try:
        while not jobs.empty():
            i = jobs.get_nowait()
            payload = json.dumps(bodies[i]).encode()
            key = uuid.uuid5(uuid.NAMESPACE_URL, payload.decode()).hex
            head = (
                f"POST /marker HTTP/1.1\r\nHost: {host}:{port}\r\nContent-Type: application/json\r\n"
                f"X-Idempotency-Key: {key}\r\nContent-Length: {len(payload)}\r\n\r\n"
            ).encode()
            t0 = time.perf_counter()
            writer.write(head + payload)
            await writer.drain()
            status_line = await reader.readline()
            length = 0
            while (line := await reader.readline()) not in (b"\r\n", b""):
                name, _, value = line.decode("latin-1").partition(":")
                if name.lower() == "content-length":
                    length = int(value)
            data = await reader.readexactly(length)
            latencies.append(time.perf_counter() - t0)
            try:
                answer = json.loads(data)
            except ValueError:
                answer = {"detail": data.decode("utf-8", "replace")[:200] or "(empty body)"}
            replies[i] = Reply(int(status_line.split()[1]), answer)
    finally:
        writer.close()


async def post_all(base: str, bodies: list[dict], concurrency: int) -> tuple[float, list[float], list[Reply]]:
    """Post every body with ``concurrency`` connections; returns wall seconds, latencies and replies."""
    url = httpx.URL(base)
    jobs: asyncio.Queue[int] = asyncio.Queue()
    for i in range(len(bodies)):
        jobs.put_nowait(i)
    latencies: list[float] = []
    replies: list[Reply] = [None] * len(bodies)  # type: ignore[list-item]
    t0 = time.perf_counter()
    await asyncio.gather(*(_client(url.host, url.port, jobs, bodies, replies, latencies) for _ in range(concurrency)))
    return time.perf_counter() - t0, latencies, replies


def run(args: argparse.Namespace, database_url: str, tmp: Path) -> dict:
    settings = Settings.explicit(vault=tmp / "vault", home=tmp / ".brain", user_home=tmp / "home", database_url=database_url)
    proc, base = start_server(settings, args.workers)
    try:
        run_id = uuid.uuid4().hex[:8]
        warm = [{"type": "lesson", "content": f"warm-up {run_id} {n}", "attrs": {"project": "bench"}} for n in range(100)]
        asyncio.run(post_all(base, warm, args.concurrency))
        bodies = [
            {
                "type": "lesson",
                "content": f"bench {run_id} lesson {n}: appends take a lock and write once.",
                "attrs": {"project": f"org/bench-{n % args.projects}", "session_id": f"s-{n % 50}", "source": "bench"},
            }
            for n in range(args.lessons)
        ]
        wall, latencies, responses = asyncio.run(post_all(base, bodies, args.concurrency))
    finally:
        proc.terminate()
        proc.wait(30)
    failed = [r for r in responses if r.status_code != 201]
    paths = sorted({r.json()["vault_path"] for r in responses if r.status_code == 201})
    found = Counter(rec.content for p in paths for rec in lesson_records((settings.vault / p).read_text(), p) if f"bench {run_id} lesson" in rec.content)
    expected = Counter(b["content"] for b in bodies)
    engine = create_engine(normalise_url(database_url))
    with engine.connect() as conn:
        indexed = conn.execute(text("select count(*) from entries where kind = 'lesson' and content like :p"), {"p": f"bench {run_id} lesson %"}).scalar_one()
    engine.dispose()
    lost = sum((expected - found).values())
    duplicated = sum((found - expected).values())
    return {
        "lessons": args.lessons,
        "workers": args.workers,
        "concurrency": args.concurrency,
        "seconds": round(wall, 2),
        "lessons_per_s": round(args.lessons / wall, 1),
        "p50_ms": round(pct(latencies, 50), 1),
        "p95_ms": round(pct(latencies, 95), 1),
        "p99_ms": round(pct(latencies, 99), 1),
        "failed": len(failed),
        "lost": lost,
        "duplicated": duplicated,
        "indexed": indexed,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lessons", type=int, default=3000)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--projects", type=int, default=8, help="lessons are spread over this many projects")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-markers-") as tmp_name, fresh_database("bench-markers") as url:
        tmp = Path(tmp_name)
        (tmp / "home").mkdir()
        result = run(args, url, tmp)
    print(json.dumps(result))
    print(
        f"{result['lessons_per_s']} lessons/s with {args.workers} workers, {args.concurrency} clients "
        f"(p50 {result['p50_ms']} ms, p95 {result['p95_ms']} ms); lost {result['lost']}, duplicated {result['duplicated']}, "
        f"indexed {result['indexed']}/{args.lessons}, failed {result['failed']}",
        file=sys.stderr,
    )
    if result["lost"] or result["duplicated"] or result["failed"] or result["indexed"] != args.lessons:
        sys.exit(1)


if __name__ == "__main__":
    main()
