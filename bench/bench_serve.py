"""Benchmark: how soon ``brain serve --workers N`` answers ``GET /health``, and the CPU a start and stop cost.

Each round starts the server on a free port against one migrated database,
times the first 200 from ``/health`` and the moment every worker's app has
started (from the process's start), stops it with SIGTERM and reads the CPU
of the server and every worker it reaped from ``os.wait4``. With
``--against DIR`` (another checkout, such as a ``git worktree add
/tmp/serve-old HEAD~1``) the rounds alternate between this checkout's code
and DIR's, the server's ``PYTHONPATH`` pointing at each checkout's source
folders in turn, so both meet the same machine (docs/performance.md,
"Reading a figure").

Run: .venv/bin/python -m bench.bench_serve [--workers 4] [--rounds 5] [--against /tmp/serve-old]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from pathlib import Path

from bench.common import bench_home, log_tail, start_server
from brain_kernel.settings import Settings

ROOT = Path(__file__).resolve().parent.parent
# The folders holding the import packages (pyproject.toml's packages.find).
SOURCES = ("services/brain-core", "services/brain-kernel", "services/brain-api", "services/brain-mcp", "services/brain-cli", "brain-ops", "migrations")


def one_start(settings: Settings, workers: int, tree: Path, log: Path) -> tuple[float, float, float]:
    """Start and stop ``brain serve`` from ``tree``: seconds to the first healthy answer and to every worker's app
    started (uvicorn's "Application startup complete." once per worker in ``log``), and CPU-s of the whole run."""
    os.environ["PYTHONPATH"] = os.pathsep.join(str(tree / folder) for folder in SOURCES)  # the child server's code
    log.unlink(missing_ok=True)
    t0 = time.monotonic()
    proc, _ = start_server(settings, workers=workers, log=log)
    healthy = time.monotonic() - t0
    while log.read_text(errors="replace").count("Application startup complete.") < workers:
        if time.monotonic() - t0 > 60:
            raise SystemExit(f"brain serve from {tree}: not every worker started in 60 s: {log_tail(log)}")
        time.sleep(0.01)
    ready = time.monotonic() - t0
    proc.terminate()
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise SystemExit(f"brain serve from {tree} exited {proc.returncode} on SIGTERM: {log_tail(log)}")
    return healthy, ready, usage.ru_utime + usage.ru_stime


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=5, help="starts of each checkout")
    parser.add_argument("--against", type=Path, help="another checkout to alternate with, started second in each pair")
    args = parser.parse_args()
    trees = {"this": ROOT} | ({"against": args.against.resolve()} if args.against else {})
    results: dict[str, list[tuple[float, float, float]]] = {name: [] for name in trees}
    with bench_home("bench-serve") as (tmp, _, settings, _):
        log = tmp / "serve.log"
        for tree in trees.values():  # one start each first: the page cache and the database warm up
            one_start(settings, args.workers, tree, log)
        for round_ in range(args.rounds):
            for name, tree in trees.items():
                healthy, ready, cpu = one_start(settings, args.workers, tree, log)
                results[name].append((healthy, ready, cpu))
                print(f"round {round_ + 1} {name}: healthy after {healthy:.2f} s, every worker {ready:.2f} s, {cpu:.2f} CPU-s", flush=True)
    for name, rows in results.items():
        summary = []
        for label, values in zip(("healthy", "every worker", "CPU-s"), zip(*rows, strict=True), strict=True):
            ordered = sorted(values)
            summary.append(f"{label} median {statistics.median(ordered):.2f} ({ordered[0]:.2f} to {ordered[-1]:.2f})")
        print(f"{name} ({trees[name]}): " + ", ".join(summary))


if __name__ == "__main__":
    main()
