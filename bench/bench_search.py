"""Benchmark: project-filtered search at 100,000 chunks over 200 projects, against brute force.

Builds 100,000 lesson entries of synthetic text in 200 projects of skewed
sizes (the largest about 16% of all rows, the smallest 100 rows: 0.1%),
then runs ``brain embed``'s job with the offline embedder (its throughput is
the first figure), starts ``brain serve`` and asks ``POST /search`` over
HTTP for every project's top 10 of one query. Each answer is compared with
a brute-force top 10 computed with numpy over that project's stored
vectors (recall@10), and the same for unfiltered search (HNSW) over all
rows. Prints one JSON line of figures and a summary line.

Run: .venv/bin/python -m bench.bench_search [--chunks 100000] [--projects 200] [--queries 200]
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import random
import sys
import tempfile
import time
from pathlib import Path

import httpx
import numpy as np
from sqlalchemy import create_engine, text
from sqlalchemy.orm import Session

from bench.common import fresh_database, pct, start_server, stop
from brain_core.entries import EntryRecord
from brain_kernel.db.engine import normalise_url
from brain_kernel.index.entries import touch_project, upsert_entries
from brain_kernel.search.embedders import OfflineEmbedder
from brain_kernel.settings import Settings
from brain_migrations.runner import upgrade_to_head
from brain_ops.embed import run_embed

WORDS = [
    "auth",
    "token",
    "clock",
    "test",
    "flaky",
    "retry",
    "cache",
    "parser",
    "schema",
    "index",
    "vector",
    "query",
    "feed",
    "lesson",
    "arc",
    "project",
    "repo",
    "branch",
    "merge",
    "helm",
    "chart",
    "deploy",
    "values",
    "pod",
    "node",
    "queue",
    "worker",
    "timeout",
    "latency",
    "budget",
    "signal",
    "alert",
    "incident",
    "outage",
    "rollback",
    "commit",
    "review",
    "refactor",
    "module",
    "package",
    "import",
    "layer",
    "settings",
    "database",
    "migration",
    "postgres",
    "redis",
    "compose",
    "image",
    "build",
    "lint",
    "format",
]


def project_sizes(total: int, projects: int, smallest: int) -> list[int]:
    """Sizes falling off like 1/rank (Zipf), the smallest ``smallest`` rows, summing to ``total``."""
    raw = [1.0 / (rank + 1) for rank in range(projects)]
    sizes = [max(smallest, int(total * w / sum(raw))) for w in raw]
    sizes[0] += total - sum(sizes)
    return sizes


def sentence(rng: random.Random) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(rng.randint(6, 14)))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chunks", type=int, default=100_000)
    parser.add_argument("--projects", type=int, default=200)
    parser.add_argument("--queries", type=int, default=200, help="queries per run (one per project up to --projects)")
    args = parser.parse_args()
    rng = random.Random(20261201)
    sizes = project_sizes(args.chunks, args.projects, max(1, args.chunks // 1000))
    now = dt.datetime.now(dt.timezone.utc)
    with fresh_database("bench-search") as url, tempfile.TemporaryDirectory() as tmp:
        upgrade_to_head(url)
        engine = create_engine(normalise_url(url))
        records = []
        for p, size in enumerate(sizes):
            key, repo = f"proj{p:03d}", f"bench/proj{p:03d}"
            for n in range(size):
                content = sentence(rng)
                records.append(
                    EntryRecord(
                        id=f"lesson:bench/{key}.md#{n}",
                        kind="lesson",
                        vault_path=f"bench/{key}.md",
                        title="",
                        content=content,
                        project=key,
                        repo=repo,
                        occurred_at=now,
                    )
                )
        with Session(engine) as db:
            upsert_entries(db, records)
            for p in range(len(sizes)):
                touch_project(db, f"proj{p:03d}", f"bench/proj{p:03d}", at=now)
            db.commit()
        embedder = OfflineEmbedder()
        with Session(engine) as db:
            t0 = time.perf_counter()
            summary = run_embed(db, embedder)
            db.commit()
            embed_s = time.perf_counter() - t0
        print(f"embedded {summary.chunks} chunks in {embed_s:.1f} s", file=sys.stderr)
        with engine.connect() as conn:
            rows = conn.execute(text("SELECT key, project, embedding::text FROM content_embeddings")).all()
        keys = np.array([r[0] for r in rows])
        owners = np.array([r[1] for r in rows])
        matrix = np.array([json.loads(r[2]) for r in rows], dtype=np.float32)
        settings = Settings.explicit(vault=Path(tmp) / "vault", home=Path(tmp) / ".brain", database_url=url, user_home=Path(tmp))
        proc, base = start_server(settings, workers=1)
        try:
            client = httpx.Client(base_url=base, timeout=30)
            for _ in range(5):
                client.post("/search", json={"query": "warm up", "project": "proj000"})
            recalls, latencies, worst = [], [], (1.0, "")
            order = list(range(len(sizes)))
            for q in range(min(args.queries, len(sizes))):
                p = order[q]
                key = f"proj{p:03d}"
                query = sentence(rng)
                qv = np.array(embedder.embed([query])[0], dtype=np.float32)
                mask = owners == key
                scores = matrix[mask] @ qv
                truth = set(keys[mask][np.argsort(-scores)[:10]])
                t = time.perf_counter()
                answer = client.post("/search", json={"query": query, "project": key, "limit": 10}).json()
                latencies.append(time.perf_counter() - t)
                got = {r["key"] for r in answer["results"]}
                recall = len(got & truth) / len(truth)
                recalls.append(recall)
                worst = min(worst, (recall, key))
                assert answer["exhaustive"] is True and len(answer["results"]) == min(10, int(mask.sum()))
            plain_recalls, plain_latencies = [], []
            for _ in range(50):
                query = sentence(rng)
                qv = np.array(embedder.embed([query])[0], dtype=np.float32)
                truth = set(keys[np.argsort(-(matrix @ qv))[:10]])
                t = time.perf_counter()
                answer = client.post("/search", json={"query": query, "limit": 10}).json()
                plain_latencies.append(time.perf_counter() - t)
                plain_recalls.append(len({r["key"] for r in answer["results"]} & truth) / 10)
        finally:
            stop(proc)
        engine.dispose()
    figures = {
        "chunks": summary.chunks,
        "projects": len(sizes),
        "largest_project_rows": sizes[0],
        "smallest_project_rows": sizes[-1],
        "embed_chunks_per_s": round(summary.chunks / embed_s, 1),
        "filtered_queries": len(recalls),
        "filtered_recall_at_10_min": min(recalls),
        "filtered_recall_at_10_mean": round(sum(recalls) / len(recalls), 4),
        "worst_project": worst[1],
        "filtered_p50_ms": round(pct(latencies, 50), 1),
        "filtered_p95_ms": round(pct(latencies, 95), 1),
        "unfiltered_recall_at_10_mean": round(sum(plain_recalls) / len(plain_recalls), 4),
        "unfiltered_p50_ms": round(pct(plain_latencies, 50), 1),
        "unfiltered_p95_ms": round(pct(plain_latencies, 95), 1),
    }
    print(json.dumps(figures))
    print(
        f"{figures['chunks']} chunks / {figures['projects']} projects: filtered recall@10 min {figures['filtered_recall_at_10_min']:.2f} "
        f"(mean {figures['filtered_recall_at_10_mean']:.4f}), p50 {figures['filtered_p50_ms']} ms, p95 {figures['filtered_p95_ms']} ms over HTTP; "
        f"unfiltered HNSW recall@10 {figures['unfiltered_recall_at_10_mean']:.3f}, p95 {figures['unfiltered_p95_ms']} ms; "
        f"brain embed {figures['embed_chunks_per_s']} chunks/s"
    )
    return 0 if min(recalls) == 1.0 else 1


if __name__ == "__main__":
    raise SystemExit(main())
