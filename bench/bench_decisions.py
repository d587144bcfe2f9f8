"""Benchmark: ``POST /marker`` of a decision (an ADR) in a vault that already holds a year of them.

A decision takes the next ADR number: one past the highest ``ADR-NNNN-``
file in ``left/decisions/`` (upstream's rule, so a vault's numbering
continues), claimed under ``left/decisions/.claims`` so that concurrent
writers never share one. The bench writes ``--existing`` ADR files (a year
of history at x16 holds 5,000: one decision per 200 lessons) in their own
format, each with its claim, as the kernel leaves them (an old vault has no
claims; they only add to the cost). It starts ``brain serve``
with one worker and posts ``--decisions`` decisions one after another from one
keep-alive client, each with its own ``X-Idempotency-Key``, first into an
empty vault and then into the full one, on the same machine in the same run.
It prints the p50 and p95 of each, and checks that every number is new and
that the numbers run on from the highest file's.

Run: .venv/bin/python -m bench.bench_decisions [--existing 5000] [--decisions 200]
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import time
import uuid
from typing import Any

import httpx

from bench.common import bench_home, pct, start_server, stop
from brain_core.markers import Attribution, parse_request
from brain_core.vault import layout
from brain_core.vault.logs import render_decision
from brain_kernel.vault_store import Vault


def write_decisions(vault: Vault, count: int) -> None:
    """``count`` ADR files numbered 1 to ``count``, as the kernel renders them, and their claims (as the kernel leaves them)."""
    claims = vault.path(layout.DECISIONS_DIR) / ".claims"
    claims.mkdir(parents=True, exist_ok=True)
    at = dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)
    for n in range(1, count + 1):
        req = parse_request("decision", f"Decision {n}: keep the plan.", {"repo": "org/app", "title": f"Adopt plan {n}"}, max_chars=4096)
        text = render_decision(req, Attribution("app", "org/app", None, "attrs"), number=n, marker_id=uuid.uuid4().hex, at=at)
        vault.path(layout.decision_path(n, req.title)).write_text(text, encoding="utf-8")
        (claims / f"{n:04d}").touch()


def post_decisions(base: str, count: int) -> tuple[list[float], list[int]]:
    """``count`` decisions from one client: each one's latency (s) and the ADR number it was given."""
    times: list[float] = []
    numbers: list[int] = []
    with httpx.Client(timeout=30) as http:
        for i in range(count):
            body = {"type": "decision", "content": f"Bench decision {i}.", "attrs": {"repo": "org/app", "title": f"Bench {i}"}}
            t0 = time.perf_counter()
            r = http.post(f"{base}/marker", json=body, headers={"X-Idempotency-Key": uuid.uuid4().hex})
            times.append(time.perf_counter() - t0)
            r.raise_for_status()
            number = layout.adr_number(r.json()["vault_path"])
            assert number is not None, r.json()
            numbers.append(number)
    return times, numbers


def run(existing: int, decisions: int) -> dict[str, Any]:
    with bench_home("bench-decisions") as (tmp, _url, settings, vault):
        vault.path(layout.DECISIONS_DIR).mkdir(parents=True, exist_ok=True)
        write_decisions(vault, existing)
        proc, base = start_server(settings, 1, tmp / "serve.log")
        try:
            post_decisions(base, 5)  # warm-up: the first requests open the pools
            times, numbers = post_decisions(base, decisions)
        finally:
            stop(proc)
    first = existing + 6  # after the files and the warm-up's five
    return {
        "existing": existing,
        "decisions": decisions,
        "p50_ms": round(pct(times, 50), 1),
        "p95_ms": round(pct(times, 95), 1),
        "numbers_in_order": numbers == list(range(first, first + decisions)),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--existing", type=int, default=5000, help="ADR files the full vault holds")
    parser.add_argument("--decisions", type=int, default=200, help="decisions posted into each vault")
    args = parser.parse_args()
    results = [run(0, args.decisions), run(args.existing, args.decisions)]
    for r in results:
        print(json.dumps(r))
    empty, full = results
    print(
        f"POST /marker decision: p50 {empty['p50_ms']} / p95 {empty['p95_ms']} ms into an empty vault, "
        f"p50 {full['p50_ms']} / p95 {full['p95_ms']} ms beside {full['existing']} ADRs"
    )
    if not all(r["numbers_in_order"] for r in results):
        raise SystemExit("an ADR number was reused or skipped")


if __name__ == "__main__":
    main()
