"""Benchmark: what leaving withdrawn entries out costs the vault's indexed text search (ADR 0064).

Builds ``bench_reads``'s x1 layout (20,000 arcs, 60,000 lessons in day
logs, decisions, milestones and signals over 200 projects, the search index
rebuilt over the files), then withdraws ``--retract`` lessons (retracted)
and ``--supersede`` decisions (superseded) in the index, as curation leaves
them. Each query class is then searched in-process through
``search_docs.search`` three ways, their order rotated every round: leaving
the withdrawn out with their sets bound as one array literal each (what
every search does), the same with the sets bound as Python lists (as they
were before ``text_array``: psycopg adapts a list element by element), and
with ``include_withdrawn`` (the statements with nothing to leave out).
Prints p50/p95 per class and side, and the time the read of the withdrawn
rows takes on its own.

Run: .venv/bin/python -m bench.bench_withdrawn [--retract 2000] [--supersede 20] [--rounds 15]
"""

from __future__ import annotations

import argparse
import json
import random
import time
from collections.abc import Callable

from sqlalchemy import create_engine, text
from sqlalchemy.orm import Session

from bench.bench_feed import WORDS, projects
from bench.bench_reads import RARE, build
from bench.common import bench_home, pct
from brain_kernel.db.engine import normalise_url, text_array
from brain_kernel.search import search_docs
from brain_kernel.search.withdrawn import withdrawn

LITERAL, LISTS, EVERYTHING = "leaving out (literal)", "leaving out (lists)", "everything"
SIDES = [LITERAL, LISTS, EVERYTHING]


def _withdraw(session: Session, lessons: int, decisions: int, rng: random.Random) -> dict[str, int]:
    """Retract ``lessons`` random lessons and supersede ``decisions`` random decisions, in the rows only (what the search reads)."""
    ids = [r for (r,) in session.execute(text("SELECT id FROM entries WHERE kind = 'lesson'"))]
    gone = rng.sample(ids, min(lessons, len(ids)))
    session.execute(text("UPDATE entries SET status = 'retracted' WHERE id = ANY(:ids)"), {"ids": gone})
    decided = [r for (r,) in session.execute(text("SELECT id FROM entries WHERE kind = 'decision'"))]
    old = rng.sample(decided, min(decisions, len(decided)))
    session.execute(text("UPDATE entries SET status = 'superseded' WHERE id = ANY(:ids)"), {"ids": old})
    session.commit()
    return {"retracted": len(gone), "superseded": len(old)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--retract", type=int, default=2000)
    parser.add_argument("--supersede", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--seed", type=int, default=14)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    fleet = projects(200)
    queries: dict[str, Callable[[], str]] = {
        "rare token": lambda: rng.choice(RARE),
        "a project's key": lambda: rng.choice(fleet)[0],
        "frequent word": lambda: rng.choice(WORDS),
        "two words": lambda: f"{rng.choice(WORDS)} {rng.choice(('regenerate', 'idempotent', 'duplicate', 'regressions'))}",
    }
    with bench_home("bench-withdrawn") as (_tmp, url, _settings, vault):
        built = build(vault, url, "x1", rng)
        engine = create_engine(normalise_url(url))
        with Session(engine) as session:
            planted = _withdraw(session, args.retract, args.supersede, rng)
            session.execute(text("ANALYZE entries"))
            session.commit()
            print(json.dumps({"built": built, "planted": planted}))
            times: dict[tuple[str, str], list[float]] = {}
            read: list[float] = []
            for make in queries.values():  # warm-up: plans, page cache
                search_docs.search(session, make())
                search_docs.search(session, make(), include_withdrawn=True)
            for n in range(args.rounds):
                for label, make in queries.items():
                    q = make()
                    for side in SIDES[n % 3 :] + SIDES[: n % 3]:
                        search_docs.text_array = list if side == LISTS else text_array  # type: ignore[assignment]
                        t = time.perf_counter()
                        search_docs.search(session, q, include_withdrawn=side == EVERYTHING)
                        times.setdefault((label, side), []).append(time.perf_counter() - t)
                        session.rollback()
                search_docs.text_array = text_array
                t = time.perf_counter()
                withdrawn(session)
                read.append(time.perf_counter() - t)
                session.rollback()
        engine.dispose()
    print(f"{'class':<18}" + "".join(f"{side + ' p50 / p95 ms':>34}" for side in SIDES))
    for label in queries:
        print(f"{label:<18}" + "".join(f"{f'{pct(times[label, side], 50):.1f} / {pct(times[label, side], 95):.1f}':>34}" for side in SIDES))
    print(f"the read of the withdrawn rows alone: p50 {pct(read, 50):.1f} ms, p95 {pct(read, 95):.1f} ms")


if __name__ == "__main__":
    main()
