"""Benchmark: what the tick's embed step and the ``pending`` count cost (ADR 0046).

Two measurements, each on a fresh database (``BRAIN_TEST_DATABASE_URL`` when
set, else an embedded Postgres under ``.brain/``):

1. **The tick with and without its embed step, on a vault that did not
   change.** A keeper vault (``bench.bench_keeper.build_vault``: arcs with
   inline lessons, signals and inject blocks over many projects) is
   reindexed and embedded whole with the offline model, then ticked once to
   settle it. Then ``run_tick_and_warm`` (``brain tick --no-ai``'s sequence, in
   process) runs ``--rounds`` times with the step and as many without it,
   alternating, so both see the same machine load ("without" is the tick as
   it was: no pending count in its transaction, no step). Reported: p50 and
   p95 of each, the difference of the medians, and the step's own time.
   Then one lesson is written and a tick embeds it: that tick's step time.

2. **``pending`` at scale.** ``--entries`` lessons and arcs over
   ``--projects`` projects, one holding 30% (written through the index's
   upsert, as every writer's are), all marked embedded but ``--stale``
   of them. Each query ``--samples`` times: unscoped, the largest project,
   a small project, a token's scope of three projects; p50 and p95, and the
   plan of the largest project's count.

Run: .venv/bin/python -m bench.bench_embed_step [--arcs 2000 --rounds 15 --entries 100000]
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import random
import time
import uuid
from typing import Any

from sqlalchemy import event, text

import brain_ops.keeper.drain as drain
from bench.bench_keeper import build_vault
from bench.common import bench_home, pct, run_brain
from brain_core.entries import EntryRecord
from brain_core.markers import Attribution, parse_request
from brain_core.vault.logs import log_file_header, render_log_entry
from brain_kernel.db.engine import make_engine, session_factory
from brain_kernel.index.entries import touch_project, upsert_entries
from brain_kernel.search.pending import pending

NOW = dt.datetime.now(dt.timezone.utc)


def _stats(values: list[float]) -> dict[str, float]:
    return {"p50_ms": round(pct(values, 50), 2), "p95_ms": round(pct(values, 95), 2)}


def tick_step(args: argparse.Namespace) -> dict[str, Any]:
    """Measurement 1: ticks of an unchanged vault, alternating with and without the embed step."""
    with bench_home("bench-embed-tick") as (_tmp, url, settings, vault):
        built = build_vault(vault, argparse.Namespace(arcs=args.arcs, projects=args.projects, tombstones=4, margin_minutes=30), random.Random(7))
        reindex = run_brain(settings, "reindex")
        embedded = run_brain(settings, "embed")
        engine = make_engine(url, pooled=False)
        real_step, real_count = drain.embed_pending, drain.pending
        try:
            drain.run_tick_and_warm(engine, vault, settings, use_ai=False, dry_run=False)  # settles heat and the feed files
            with_step: list[float] = []
            without: list[float] = []
            step_ms: list[float] = []
            for _ in range(args.rounds):
                for on in (True, False):
                    # Off: the tick as it was before the step, without the pending count in its transaction either.
                    drain.embed_pending = real_step if on else (lambda *_a, **_k: {})  # type: ignore[assignment]
                    drain.pending = real_count if on else (lambda *_a, **_k: 0)  # type: ignore[assignment]
                    started = time.perf_counter()
                    summary = drain.run_tick_and_warm(engine, vault, settings, use_ai=False, dry_run=False)
                    (with_step if on else without).append(time.perf_counter() - started)
                    if on:
                        step_ms.append(summary.embeddings["ms"] / 1000)
                        assert summary.embeddings["embedded"] == 0 and summary.embeddings["pending"] == 0, summary.embeddings
            drain.embed_pending, drain.pending = real_step, real_count
            rel = f"left/reference/lessons-{NOW.date().isoformat()}.md"  # a lesson as a marker writes it, in a log of its own
            req = parse_request("lesson", "Pin the clock in the auth test so it stops flaking.", {"repo": "org0/p000"}, max_chars=4096)
            entry = render_log_entry("lesson", req, Attribution("p000", "org0/p000", None, "attrs"), marker_id=uuid.uuid4().hex, at=NOW)
            vault.path(rel).parent.mkdir(parents=True, exist_ok=True)
            vault.path(rel).write_text(log_file_header("lesson", rel) + entry, encoding="utf-8")
            one = drain.run_tick_and_warm(engine, vault, settings, use_ai=False, dry_run=False)
        finally:
            drain.embed_pending, drain.pending = real_step, real_count
            engine.dispose()
    return {
        "vault": built,
        "reindex_s": reindex["wall_s"],
        "embed_all_s": embedded["wall_s"],
        "embedded_chunks": embedded["summary"].get("chunks"),
        "rounds": args.rounds,
        "tick_with_step": _stats(with_step),
        "tick_without_step": _stats(without),
        "median_difference_ms": round(pct(with_step, 50) - pct(without, 50), 2),
        "step_alone": _stats(step_ms),
        "tick_after_one_new_lesson": {"embeddings": one.embeddings},
    }


def _entries(n: int, projects: list[tuple[str, str]], rng: random.Random) -> list[EntryRecord]:
    big = projects[0]
    out = []
    for i in range(n):
        key, repo = big if rng.random() < 0.3 else rng.choice(projects[1:])
        kind = "arc" if i % 4 == 0 else "lesson"
        path = f"clusters/2026-11-01/arc-{i}.md" if kind == "arc" else f"left/reference/lessons-2026-11-{i % 28 + 1:02d}.md"
        out.append(
            EntryRecord(
                id=f"{kind}:{path}#{i}" if kind == "lesson" else f"arc:{path}",
                kind=kind,
                vault_path=path,
                title=f"entry {i} of {key}",
                content=f"What was learned in {key}, number {i}: "
                + " ".join(rng.choice(("auth", "clock", "pool", "chart", "retry", "token")) for _ in range(30)),
                project=key,
                repo=repo,
                occurred_at=NOW,
                meta={"cluster_id": f"arc-{i}"} if kind == "arc" else {},
            )
        )
    return out


def pending_cost(args: argparse.Namespace) -> dict[str, Any]:
    """Measurement 2: the pending count at ``--entries`` entries, by scope."""
    rng = random.Random(3)
    fleet = [(f"p{n:03d}", f"org{n % 7}/p{n:03d}") for n in range(args.projects)]
    with bench_home("bench-pending") as (_tmp, url, _settings, _vault):
        engine = make_engine(url, pooled=False)
        try:
            with session_factory(engine)() as db:
                records = _entries(args.entries, fleet, rng)
                started = time.perf_counter()
                upsert_entries(db, records, fresh=True)
                for key, repo in fleet:
                    touch_project(db, key, repo, at=NOW)
                db.commit()
                write_s = time.perf_counter() - started
                db.execute(text("UPDATE entries SET embedded_hash = embed_hash"))
                stale = rng.sample([r.id for r in records], args.stale)
                db.execute(text("UPDATE entries SET embedded_hash = NULL WHERE id = ANY(:ids)"), {"ids": stale})
                db.commit()
            with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
                conn.execute(text("VACUUM ANALYZE entries"))
            small = next(p for p in fleet[1:] if p != fleet[0])
            cases = {
                "unscoped": {},
                "largest_project": {"project": fleet[0]},
                "small_project": {"project": small},
                "token_of_three_projects": {"within": fleet[:3]},
            }
            out: dict[str, Any] = {"entries": args.entries, "stale": args.stale, "write_s": round(write_s, 1)}
            with session_factory(engine)() as db:
                counts = {}
                for name, kw in cases.items():
                    times = []
                    for _ in range(args.samples):
                        started = time.perf_counter()
                        counts[name] = pending(db, **kw)
                        times.append(time.perf_counter() - started)
                    out[name] = {"count": counts[name], **_stats(times)}
                seen: list[tuple[str, Any]] = []
                connection = db.connection()

                def capture(_c: Any, _cur: Any, statement: str, parameters: Any, _ctx: Any, _many: bool) -> None:
                    seen.append((statement, parameters))

                event.listen(connection, "before_cursor_execute", capture)
                pending(db, fleet[0])
                event.remove(connection, "before_cursor_execute", capture)
                statement, parameters = seen[-1]
                plan = [r[0] for r in connection.exec_driver_sql(f"EXPLAIN (ANALYZE, BUFFERS) {statement}", parameters)]
                out["largest_project_plan"] = plan
        finally:
            engine.dispose()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--arcs", type=int, default=2_000)
    parser.add_argument("--projects", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--entries", type=int, default=100_000)
    parser.add_argument("--stale", type=int, default=20)
    parser.add_argument("--samples", type=int, default=200)
    parser.add_argument("--only", choices=("tick", "pending"), default=None)
    args = parser.parse_args()
    result: dict[str, Any] = {}
    if args.only in (None, "pending"):
        result["pending"] = pending_cost(args)
    if args.only in (None, "tick"):
        result["tick"] = tick_step(args)
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
