"""Benchmark: the hook process's wall time, start to exit, against a kernel that answers in about 10 ms.

A stand-in kernel (tests/support/hook_kernel.py) on 127.0.0.1 answers each
route after ``--delay`` (10 ms). The console script ``brain hook claude
<event>`` runs ``--runs`` times per event, HOME at a temporary folder holding
the client file:

- ``session-start``: ``POST /sessions`` and ``GET /feed?format=markdown``,
  the block printed;
- ``prompt-submit``: ``POST /recall`` for the session's prompt, the recalled
  entries printed;
- ``stop, 1 new marker``: a new session each run, so its one marker is
  queued and posted;
- ``stop, nothing new``: the same session again, every marker already sent.

In the same run, two floors: ``curl`` of ``GET /feed`` on the same server (a
process start plus one 10 ms answer) and ``python -c pass`` (the interpreter's
own start, which the machine's load moves most). It prints p50/p95 per event and
exits non-zero when a hook's p50 is over ``--target-ms`` (150).

Run: .venv/bin/python -m bench.bench_hook [--runs 40] [--delay 0.01]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

from bench.common import pct
from tests.support.hook_kernel import stub_kernel

BRAIN = Path(sys.executable).with_name("brain")
TRANSCRIPT_LINE = {
    "type": "assistant",
    "message": {"role": "assistant", "content": [{"type": "text", "text": "<!-- @lesson -->Pin the clock.<!-- @/lesson -->"}]},
}


def timed(cmd: list[str], stdin: str, env: dict[str, str]) -> float:
    """Seconds from start to exit; the command must exit 0."""
    started = time.perf_counter()
    proc = subprocess.run(cmd, input=stdin, capture_output=True, text=True, env=env, timeout=30)
    took = time.perf_counter() - started
    if proc.returncode != 0:
        raise SystemExit(f"{cmd} exited {proc.returncode}: {proc.stderr}")
    return took


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=40)
    parser.add_argument("--delay", type=float, default=0.01)
    parser.add_argument("--target-ms", type=float, default=150.0)
    args = parser.parse_args()
    home = Path(tempfile.mkdtemp(prefix="bench-hook-"))
    env = {**os.environ, "HOME": str(home)}
    transcript = home / "t.jsonl"
    transcript.write_text(json.dumps(TRANSCRIPT_LINE) + "\n")
    figures: dict[str, list[float]] = {}
    try:
        with stub_kernel(delay=args.delay) as stub:
            client = home / ".config" / "brain" / "client.json"
            client.parent.mkdir(parents=True)
            client.write_text(json.dumps({"url": stub.url, "token": "t"}))
            steady = {"session_id": "steady", "cwd": str(home), "transcript_path": str(transcript), "hook_event_name": "Stop"}
            timed([str(BRAIN), "hook", "claude", "stop"], json.dumps(steady), env)  # its marker is sent once, before the timing
            timed([str(BRAIN), "hook", "claude", "session-start"], json.dumps(steady), env)  # its prompts know their project
            curl = shutil.which("curl")
            for _ in range(args.runs):
                for name, event, payload in (
                    ("session-start", "session-start", {"session_id": str(uuid.uuid4()), "cwd": str(home), "source": "startup"}),
                    ("prompt-submit", "prompt-submit", {"session_id": "steady", "cwd": str(home), "prompt": "the login test is flaky"}),
                    ("stop, 1 new marker", "stop", {**steady, "session_id": str(uuid.uuid4())}),
                    ("stop, nothing new", "stop", steady),
                ):
                    figures.setdefault(name, []).append(timed([str(BRAIN), "hook", "claude", event], json.dumps(payload), env))
                figures.setdefault("python -c pass (floor)", []).append(timed([sys.executable, "-c", "pass"], "", env))
                if curl:
                    figures.setdefault("curl GET /feed (floor)", []).append(timed([curl, "-s", "-o", "/dev/null", f"{stub.url}/feed?project=widget"], "", env))
            markers = sum(1 for method, path, _, _ in stub.requests if (method, path) == ("POST", "/marker"))
    finally:
        shutil.rmtree(home, ignore_errors=True)
    print(f"brain hook, {args.runs} runs per event, kernel answering in {args.delay * 1000:.0f} ms; {markers} markers posted")
    missed = []
    for name, values in figures.items():
        p50, p95 = pct(values, 50), pct(values, 95)
        print(f"  {name:24s} p50 {p50:6.1f} ms  p95 {p95:6.1f} ms")
        if "(floor)" not in name and p50 > args.target_ms:
            missed.append(name)
    if markers != args.runs + 1:
        print(f"expected {args.runs + 1} markers posted, saw {markers}")
        return 1
    if missed:
        print(f"over the {args.target_ms:.0f} ms p50 target: {', '.join(missed)}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
