"""Benchmark: sustained lesson throughput of ``brain serve --workers 4``, with a loss check.

Starts the server as a subprocess on a free port with a temporary vault and a
fresh database (on ``BRAIN_TEST_DATABASE_URL`` when set, else an embedded
Postgres under ``.brain/bench-markers-*``), warms it up, then posts lessons
from many concurrent clients for the whole run, each with its own
``X-Idempotency-Key`` as real clients send. Prints lessons per second and
latency percentiles, then verifies that every lesson is in the day's log
exactly once and in the index; exits non-zero if any is lost or duplicated.

With ``--cwd-only`` the lessons name no project: each carries only
``attrs.cwd``, a folder of one of ``--projects`` real git repositories built
in the temporary home (origin remote, subfolders, a linked worktree), so the
server resolves every marker from the folder as a hook posting from a
working tree does; every answer must name the folder's project.

``--compare`` runs both kinds on one server, alternating batches (``--rounds``
of each), and prints the medians and the ratio.

``--embed-follow SECONDS`` sets the server's embed follower (ADR 0067; 0 turns
it off): run it with 0 and 1 alternately to see what embedding in the API
costs the writes. With it on, the run also prints ``searchable_s``, the time
from the last answer until no lesson waits for its vector.

Run: .venv/bin/python -m bench.bench_markers [--lessons 3000] [--concurrency 32] [--workers 4] [--cwd-only | --compare [--rounds 3]]
     [--embed-follow SECONDS]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
import uuid
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import httpx
from sqlalchemy import create_engine, text

from bench.common import fresh_database, pct, start_server, stop
from brain_core.vault.records import lesson_records
from brain_kernel.db.engine import normalise_url
from brain_kernel.settings import Settings
from tests.support.gitrepo import add_worktree, make_repo


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


def build_folders(home: Path, projects: int) -> list[tuple[str, str]]:
    """(folder, expected project key) of ``projects`` repositories: root, two subfolders, a worktree and its subfolder."""
    out: list[tuple[str, str]] = []
    for n in range(projects):
        repo = make_repo(home / "dev" / "org" / f"bench-{n}", f"git@github.com:org/bench-{n}.git")
        wt = add_worktree(repo, home / "trees" / f"bench-{n}-fix", f"fix-{n}")
        for folder in (repo, repo / "src", repo / "src" / "pkg" / "deep", wt, wt / "src"):
            folder.mkdir(parents=True, exist_ok=True)
            out.append((str(folder), f"bench-{n}"))
    return out


def lesson_bodies(args: argparse.Namespace, run_id: str, folders: list[tuple[str, str]], cwd_only: bool) -> list[dict]:
    """The measured lessons: naming their project, or (``cwd_only``) only their working folder."""
    bodies = []
    for n in range(args.lessons):
        content = f"bench {run_id} lesson {n}: appends take a lock and write once."
        if cwd_only:
            attrs = {"cwd": folders[n % len(folders)][0], "source": "bench"}
        else:
            attrs = {"project": f"org/bench-{n % args.projects}", "session_id": f"s-{n % 50}", "source": "bench"}
        bodies.append({"type": "lesson", "content": content, "attrs": attrs})
    return bodies


def check(settings: Settings, database_url: str, run_id: str, bodies: list[dict], responses: list[Reply], expected_project: dict[str, str]) -> dict:
    """Every lesson of one batch in the day's log exactly once, in the index, and (cwd-only) attributed to its folder's project."""
    failed = [r for r in responses if r.status_code != 201]
    misattributed = sum(
        1
        for b, r in zip(bodies, responses, strict=True)
        if r.status_code == 201 and "cwd" in b["attrs"] and r.json()["project"] != expected_project[b["attrs"]["cwd"]]
    )
    paths = sorted({r.json()["vault_path"] for r in responses if r.status_code == 201})
    found = Counter(rec.content for p in paths for rec in lesson_records((settings.vault / p).read_text(), p) if f"bench {run_id} lesson" in rec.content)
    expected = Counter(b["content"] for b in bodies)
    engine = create_engine(normalise_url(database_url))
    with engine.connect() as conn:
        indexed = conn.execute(text("select count(*) from entries where kind = 'lesson' and content like :p"), {"p": f"bench {run_id} lesson %"}).scalar_one()
    engine.dispose()
    return {
        "failed": len(failed),
        "lost": sum((expected - found).values()),
        "duplicated": sum((found - expected).values()),
        "indexed": indexed,
        "misattributed": misattributed,
    }


def _searchable_after(database_url: str, timeout: float = 600.0) -> float | None:
    """Seconds until no entry waits for its vector (the server's followers embedding what was posted), None past ``timeout``."""
    engine = create_engine(normalise_url(database_url))
    started = time.perf_counter()
    try:
        with engine.connect() as conn:
            while time.perf_counter() - started < timeout:
                if not conn.execute(text("SELECT count(*) FROM entries WHERE embed_pending")).scalar_one():
                    return round(time.perf_counter() - started, 2)
                conn.rollback()
                time.sleep(0.1)
    finally:
        engine.dispose()
    return None


def run(args: argparse.Namespace, database_url: str, tmp: Path) -> list[dict]:
    """One server; each batch of ``--lessons`` in its mode (alternating with ``--compare``), then every batch checked."""
    modes = (
        [["project", "cwd-only"][(r + i) % 2] for r in range(args.rounds) for i in range(2)] if args.compare else ["cwd-only" if args.cwd_only else "project"]
    )
    folders = build_folders(tmp / "home", args.projects) if "cwd-only" in modes else []
    expected_project = dict(folders)
    follow = {} if args.embed_follow is None else {"embed_follow_seconds": args.embed_follow}
    settings = Settings.explicit(vault=tmp / "vault", home=tmp / ".brain", user_home=tmp / "home", database_url=database_url, **follow)
    proc, base = start_server(settings, args.workers)
    batches = []
    searchable_s = None
    try:
        warm_id = uuid.uuid4().hex[:8]
        warm = [{"type": "lesson", "content": f"warm-up {warm_id} {n}", "attrs": {"project": "bench"}} for n in range(100)]
        asyncio.run(post_all(base, warm, args.concurrency))
        for mode in modes:
            run_id = uuid.uuid4().hex[:8]
            bodies = lesson_bodies(args, run_id, folders, mode == "cwd-only")
            wall, latencies, responses = asyncio.run(post_all(base, bodies, args.concurrency))
            batches.append((mode, run_id, bodies, wall, latencies, responses))
        if settings.embed_follow_seconds > 0:
            searchable_s = _searchable_after(database_url)
    finally:
        stop(proc)
    results = []
    for mode, run_id, bodies, wall, latencies, responses in batches:
        results.append(
            {
                "lessons": args.lessons,
                "mode": mode,
                "workers": args.workers,
                "concurrency": args.concurrency,
                "seconds": round(wall, 2),
                "lessons_per_s": round(args.lessons / wall, 1),
                "p50_ms": round(pct(latencies, 50), 1),
                "p95_ms": round(pct(latencies, 95), 1),
                "p99_ms": round(pct(latencies, 99), 1),
                "embed_follow_s": settings.embed_follow_seconds,
                "searchable_s": searchable_s,
                **check(settings, database_url, run_id, bodies, responses, expected_project),
            }
        )
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lessons", type=int, default=3000)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--projects", type=int, default=8, help="lessons are spread over this many projects")
    parser.add_argument("--cwd-only", action="store_true", help="lessons carry only attrs.cwd (a folder of a real repository), no project")
    parser.add_argument("--compare", action="store_true", help="alternate batches naming the project and cwd-only batches on one server")
    parser.add_argument("--rounds", type=int, default=3, help="with --compare: batches of each mode")
    parser.add_argument("--embed-follow", type=float, default=None, help="the server's BRAIN_EMBED_FOLLOW_SECONDS (0: off; default: the setting's)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-markers-") as tmp_name, fresh_database("bench-markers") as url:
        tmp = Path(tmp_name)
        (tmp / "home").mkdir()
        results = run(args, url, tmp)
    bad = False
    for result in results:
        print(json.dumps(result))
        print(
            f"{result['mode']}: {result['lessons_per_s']} lessons/s with {args.workers} workers, {args.concurrency} clients "
            f"(p50 {result['p50_ms']} ms, p95 {result['p95_ms']} ms); lost {result['lost']}, duplicated {result['duplicated']}, "
            f"indexed {result['indexed']}/{args.lessons}, failed {result['failed']}, misattributed {result['misattributed']}",
            file=sys.stderr,
        )
        bad = bad or bool(result["lost"] or result["duplicated"] or result["failed"] or result["misattributed"] or result["indexed"] != args.lessons)
    if args.compare:
        rate = {m: round(statistics.median(r["lessons_per_s"] for r in results if r["mode"] == m), 1) for m in ("project", "cwd-only")}
        p50 = {m: round(statistics.median(r["p50_ms"] for r in results if r["mode"] == m), 1) for m in ("project", "cwd-only")}
        print(
            f"median of {args.rounds}: project {rate['project']} lessons/s (p50 {p50['project']} ms), cwd-only {rate['cwd-only']} lessons/s "
            f"(p50 {p50['cwd-only']} ms): cwd-only at {rate['cwd-only'] / rate['project']:.0%} of the throughput",
            file=sys.stderr,
        )
    if bad:
        sys.exit(1)


if __name__ == "__main__":
    main()
