"""Benchmark: the keeper tick (``brain tick --no-ai``) over a large vault, twice.

Builds a vault of 20,000 arcs in 200 projects, written directly in the vault
formats (arc files rendered by ``brain_core.arcs.render_arc``, one to twelve
sessions each, first sessions spread over 60 days of ``clusters/<date>/``
folders). Part of the vault looks as an upstream keeper left it six hours
earlier: heat and status as its tick computed them then, hot arcs promoted to
``frontal-lobe/conscious/``, cold old ones graduated into ``left/`` (some with
the copy upstream left behind in ``clusters/``); the rest is fresh from
``brain cluster`` (heat 0, active). Every arc body carries inline markers
(``brain_core.vault.inline``): most a lesson, many a signal of mixed
severities and sources (some repeated across arcs, a few resolved or
``(CLEARED: ...)``), some inject blocks with ``ttl_days``, some edges. Standing
region documents with their own markers and ``.merged.md`` tombstone pairs
complete it.

Then ``brain tick --no-ai`` runs as a subprocess, the command production
runs, on a fresh database (``BRAIN_TEST_DATABASE_URL`` when set, else an
embedded Postgres under ``.brain/bench-keeper-*``; migrated beforehand), and
again at least a minute later. The CLI uses the real clock, so every arc's
last activity and first session are generated away from the hour boundaries
heat, status, staleness and the lesson window count from (a whole number of
days, and 6 hours, +- ``--margin-minutes``): the second run crosses no
threshold and must write nothing.

Reported: wall time and peak RSS of each tick process (``os.wait4``), the
time of each step (from the progress lines on stderr), the first run's
keeper stats, the second run's ``vault_writes`` and ``files_written``, and the
files whose bytes changed in each run (a hash of the vault tree before and
after), checked against ``vault_writes`` (a move counts once there and
changes two paths). Exits non-zero when the second run writes any file.

Run: .venv/bin/python -m bench.bench_keeper [--arcs 20000 --projects 200]
"""

from __future__ import annotations

import argparse
import datetime as dt
import difflib
import hashlib
import json
import os
import random
import sys
import time
from pathlib import Path
from typing import Any

from bench.bench_feed import SENTENCES, WORDS
from bench.common import run_brain, scratch
from brain_core.arcs import ArcSession, build_plan, render_arc
from brain_core.heat import HeatRules, age_days, arc_activity, heat_of, status_of
from brain_core.vault import frontmatter
from brain_core.vault.regions import CONSCIOUS_DIR, place
from brain_kernel.settings import Settings
from brain_kernel.vault_store import Vault
from brain_migrations.runner import upgrade_to_head

NOW = dt.datetime.now(dt.timezone.utc).replace(microsecond=0)
UPSTREAM_TICK = NOW - dt.timedelta(hours=6)  # when the "upstream" keeper last scored the vault
RULES = HeatRules()  # the settings' defaults (BRAIN_PROMOTE_HEAT=5 ...)
SIGNALS = (
    "The {a} job is flaky on main: {b} times out about one run in five.",
    "{a} latency above budget after the {b} change.",
    "Deploy of {a} blocked: the {b} migration is not reversible.",
    "Disk on the {a} runner above 90%, {b} artefacts not pruned.",
    "The {a} token expires in days; {b} calls will fail afterwards.",
)
COMMON_SIGNALS = (  # the same alert noted in many arcs: deduplicated by (source, content hash)
    "CI is red on main since the lockfile bump.",
    "The staging database is read-only until the failover finishes.",
    "Rate limit on the package registry: installs fail intermittently.",
)
SEVERITIES = (("info", 25), ("warning", 35), ("alert", 10), ("high", 10), ("critical", 12), ("nuclear", 3), ("resolved", 5))
SOURCES = ("ci", "tests", "deploy", "monitor", "agent", "review")
SESSION_COUNTS = ((1, 45), (2, 22), (3, 12), (4, 7), (5, 5), (6, 4), (8, 3), (12, 2))
STANDING = (  # (path, region, project index or None)
    ("bridge/brain-system.md", "bridge", None),
    ("bridge/cross-cutting/release-train.md", "bridge", None),
    ("left/architecture.md", "left-hemisphere", 0),
    ("left/research/caching.md", "left-hemisphere", 3),
    ("left/incidents/outage-review.md", "left-hemisphere", 5),
    ("right/ideas/roadmap.md", "right-hemisphere", None),
    ("right/strategy/platform.md", "right-hemisphere", 1),
    ("pineal/principles.md", "pineal", None),
)


def projects(n: int) -> list[tuple[str, str]]:
    """(key, slug) pairs; one key in ten is shared by a second owner (as bench_feed)."""
    out = []
    for i in range(n):
        key = f"svc{i // 2}" if i % 10 < 2 else f"proj{i}"
        out.append((key, f"org{i % 10}/{key}"))
    return out


def near_threshold(at: dt.datetime, margin: dt.timedelta) -> bool:
    """True when ``at`` is within ``margin`` of a whole number of days before NOW, or of 6 hours, or later than NOW - margin.

    Heat (24 h, 72 h, the decay's whole days), status (6 h, 48 h), graduation
    (14 days), signal and inject staleness, ``ttl_days`` and the 7-day lesson
    window all count whole days or 6 hours from an arc's last activity or its
    first session.
    """
    age = NOW - at
    if age < margin:
        return True
    day = dt.timedelta(days=1)
    into_day = age % day
    return into_day < margin or day - into_day < margin or abs(age - dt.timedelta(hours=6)) < margin


def arc_sessions(n: int, key: str, slug: str, rng: random.Random, margin: dt.timedelta) -> list[ArcSession]:
    """The sessions of arc ``n``: last activity mostly weeks ago, some in the last hours; none near a threshold."""
    count = rng.choices([c for c, _ in SESSION_COUNTS], [w for _, w in SESSION_COUNTS])[0]
    while True:
        bucket = rng.random()
        if bucket < 0.03:
            hours = rng.uniform(0.5, 6)
        elif bucket < 0.08:
            hours = rng.uniform(6, 24)
        elif bucket < 0.16:
            hours = rng.uniform(24, 72)
        else:
            hours = rng.uniform(72, 24 * 59)
        end = NOW - dt.timedelta(hours=hours)
        sessions: list[ArcSession] = []
        for i in range(count):  # built backwards from the last one; gaps under the 240-minute split
            minutes = rng.randint(5, 180)
            start = end - dt.timedelta(minutes=minutes)
            heavy = rng.random() < 0.03
            sessions.append(
                ArcSession(
                    session_id=f"s{n:06d}-{i}",
                    project=key,
                    repo=slug,
                    project_source="git",
                    cwd=f"/home/op/dev/{key}",
                    git_branch=rng.choice(("main", "main", f"feature/{rng.choice(WORDS)}")),
                    start=start,
                    end=end,
                    num_user_turns=rng.randint(1, 40),
                    num_assistant_turns=rng.randint(1, 80),
                    num_tool_calls=rng.randint(1000, 3000) if heavy else rng.randint(0, 300),
                    joy_markers=rng.choice((0, 0, 0, 1, 2)),
                    first_user_prompt=f"Improve the {rng.choice(WORDS)} {rng.choice(WORDS)} of {key} (arc {n}, session {i})",
                )
            )
            end = start - dt.timedelta(minutes=rng.randint(5, 200))
        first = min(s.start for s in sessions if s.start)
        last = max(s.end for s in sessions if s.end)
        if not near_threshold(first, margin) and not near_threshold(last, margin):
            return sessions


def arc_markers(n: int, key: str, slug: str, previous: list[str], rng: random.Random) -> tuple[str, dict[str, int]]:
    """The inline markers of arc ``n``'s body, and how many of each it holds."""
    counts = {"lesson": 0, "signal": 0, "inject": 0, "edge": 0}
    parts = ["", "## Notes", ""]
    for _ in range(rng.choices((0, 1, 2), (15, 70, 15))[0]):
        text = rng.choice(SENTENCES).format(a=rng.choice(WORDS), b=rng.choice(WORDS))
        parts.append(f"<!-- @lesson -->\n{text} ({key}, arc {n}, lesson {counts['lesson']})\n<!-- @/lesson -->")
        counts["lesson"] += 1
    for _ in range(rng.choices((0, 1, 2), (55, 35, 10))[0]):
        severity = rng.choices([s for s, _ in SEVERITIES], [w for _, w in SEVERITIES])[0]
        source = rng.choice(SOURCES)
        if rng.random() < 0.2:
            text = rng.choice(COMMON_SIGNALS)
        else:
            text = rng.choice(SIGNALS).format(a=rng.choice(WORDS), b=rng.choice(WORDS)) + f" ({key}, arc {n})"
        if severity != "resolved" and rng.random() < 0.04:
            text += f" (CLEARED: fixed in {rng.getrandbits(28):07x})"
        parts.append(f"<!-- @signal severity={severity} source={source} -->{text}<!-- @/signal -->")
        counts["signal"] += 1
    if rng.random() < 0.06:
        target = rng.choice(("all", slug, key))
        ttl = rng.choice(("", " ttl_days=3", " ttl_days=7", " ttl_days=7", " ttl_days=14", " ttl_days=30"))
        parts.append(f"<!-- @inject target={target}{ttl} -->\nBefore touching {key}'s {rng.choice(WORDS)}, read arc {n}.\n<!-- @/inject -->")
        counts["inject"] += 1
    if previous and rng.random() < 0.15:
        parts.append(f"<!-- @edge type={rng.choice(('sibling', 'sibling', 'follows', 'blocks'))} target={rng.choice(previous[-50:])} -->")
        counts["edge"] += 1
    return "\n".join(parts) + "\n", counts


def as_upstream_left_it(text: str, rng: random.Random) -> tuple[str, str | None]:
    """The arc as the upstream tick six hours ago left it (heat, status, maybe moved), or fresh from ``brain cluster``."""
    meta = frontmatter.parse(text).meta
    activity = arc_activity(meta)
    if activity.last_active is None or activity.last_active > UPSTREAM_TICK or rng.random() < 0.4:
        return text, None
    status = status_of(activity, UPSTREAM_TICK)
    heat = heat_of(activity, UPSTREAM_TICK, RULES, status=status)
    where = place(
        "clusters/x/a.md",
        heat=heat,
        status=status,
        age_days=age_days(activity, UPSTREAM_TICK),
        region=meta.get("region"),
        promote=RULES.promote,
        demote=RULES.demote,
        graduate=RULES.graduate,
        graduate_age_days=RULES.graduate_age_days,
    )
    changes: dict[str, Any] = {"heat": heat, "status": "graduated" if where.graduate else status}
    folder = {"promote": CONSCIOUS_DIR, "graduate": "left"}.get(where.action or "")
    if folder == "left" and rng.random() < 0.3:
        folder = None  # graduated where it lies (upstream's tick failed to move it)
    if folder == "left":
        changes["region"] = "left-hemisphere"
    return frontmatter.update(text, changes), folder


def build_vault(vault: Vault, args: argparse.Namespace, rng: random.Random) -> dict[str, int]:
    """Write the arcs, standing documents and tombstones; returns what was written."""
    fleet = projects(args.projects)
    weights = [1 / (rank + 1) ** 0.7 for rank in range(len(fleet))]  # Zipf-skewed project sizes
    margin = dt.timedelta(minutes=args.margin_minutes)
    built = {"arcs": 0, "in_clusters": 0, "in_conscious": 0, "in_left": 0, "stale_copies": 0, "lesson": 0, "signal": 0, "inject": 0, "edge": 0}
    ids: list[str] = []
    for n in range(args.arcs):
        key, slug = fleet[n] if n < len(fleet) else rng.choices(fleet, weights)[0]
        plan = build_plan(arc_sessions(n, key, slug, rng, margin))
        markers, counts = arc_markers(n, key, slug, ids, rng)
        for k, v in counts.items():
            built[k] += v
        fresh = render_arc(plan) + markers
        text, folder = as_upstream_left_it(fresh, rng)
        if folder is None:
            rel = plan.vault_path
            built["in_clusters"] += 1
        else:
            rel = f"{folder}/{plan.cluster_id}.md"
            built["in_conscious" if folder == CONSCIOUS_DIR else "in_left"] += 1
            if folder == "left" and rng.random() < 0.2:  # upstream copied instead of moving: a stale copy stays
                vault.write_atomic(plan.vault_path, fresh)
                built["stale_copies"] += 1
        vault.write_atomic(rel, text)
        ids.append(plan.cluster_id)
        built["arcs"] += 1
    for i, (rel, region, project) in enumerate(STANDING):
        meta: dict[str, Any] = {"title": rel.rsplit("/", 1)[-1][:-3].replace("-", " ").title(), "region": region, "status": "active"}
        if project is not None:
            meta["project"], meta["repo"] = fleet[project]
        if i % 2:
            meta["created"] = (NOW - dt.timedelta(days=20, hours=12)).isoformat()
        body = [f"# {meta['title']}", "", "Standing notes kept across sessions.", ""]
        body.append(f"<!-- @lesson -->\nStanding lesson {i}: {SENTENCES[i % len(SENTENCES)].format(a=WORDS[i], b=WORDS[-i - 1])}\n<!-- @/lesson -->")
        body.append(f"<!-- @signal severity={('critical', 'warning')[i % 2]} source=review -->Standing risk {i}: {WORDS[i]} has no owner.<!-- @/signal -->")
        if i < 3:
            body.append(f"<!-- @inject target=all -->\nStanding rule {i}: never force-push to main.\n<!-- @/inject -->")
        vault.write_atomic(rel, frontmatter.render(meta, "\n" + "\n".join(body) + "\n"))
    for i in range(args.tombstones):  # an arc merged into another: the raw file and its tombstone, side by side
        key, slug = fleet[i % len(fleet)]
        plan = build_plan(arc_sessions(args.arcs + i, key, slug, rng, margin))
        raw = render_arc(plan)
        vault.write_atomic(plan.vault_path, raw)
        vault.write_atomic(plan.vault_path.replace(".md", ".merged.md"), frontmatter.update(raw, {"merged_into": rng.choice(ids), "status": "merged"}))
    built["standing"] = len(STANDING)
    built["tombstone_pairs"] = args.tombstones
    built["date_folders"] = sum(1 for p in vault.path("clusters").iterdir() if p.is_dir())
    return built


def tree_hashes(root: Path, keep: dict[str, bytes] | None = None) -> dict[str, str]:
    """Every file under ``root`` (hidden ones too) -> a hash of its bytes; their bytes into ``keep`` when given."""
    out: dict[str, str] = {}
    for folder, _dirs, files in os.walk(root):
        for name in files:
            path = Path(folder) / name
            data = path.read_bytes()
            rel = path.relative_to(root).as_posix()
            out[rel] = hashlib.blake2b(data, digest_size=16).hexdigest()
            if keep is not None:
                keep[rel] = data
    return out


def show_diff(rel: str, old: bytes | None, root: Path, lines: int = 40) -> str:
    """The first ``lines`` lines of a unified diff of one file the second run changed."""
    new = (root / rel).read_bytes() if (root / rel).exists() else b""
    diff = difflib.unified_diff(
        (old or b"").decode("utf-8", "replace").splitlines(),
        new.decode("utf-8", "replace").splitlines(),
        f"{rel} (first run)",
        f"{rel} (second run)",
        lineterm="",
    )
    return "\n".join(list(diff)[:lines])


def changed_paths(before: dict[str, str], after: dict[str, str]) -> list[str]:
    """Paths added, removed or rewritten with other bytes."""
    return sorted(p for p in before.keys() | after.keys() if before.get(p) != after.get(p))


def run_tick_cli(vault_root: Path, database_url: str, settings: Settings) -> dict[str, Any]:
    """``brain tick --no-ai`` in a subprocess: its summary, wall time, peak RSS and step times."""
    return run_brain(settings, "tick", "--no-ai", "--vault", str(vault_root), "--database-url", database_url)


def run(args: argparse.Namespace, database_url: str, tmp: Path) -> dict[str, Any]:
    rng = random.Random(args.seed)
    settings = Settings.explicit(vault=tmp / "vault", home=tmp / ".brain", user_home=tmp / "home", database_url=database_url)
    vault = Vault(settings.vault)
    vault.scaffold()
    t0 = time.perf_counter()
    built = build_vault(vault, args, rng)
    build_s = time.perf_counter() - t0
    print(f"built the vault in {build_s:.1f} s: {built}", file=sys.stderr)
    upgrade_to_head(database_url)  # the tick's own migration check then finds the schema at head

    before = tree_hashes(vault.root)
    first_started = time.monotonic()
    first = run_tick_cli(vault.root, database_url, settings)
    kept: dict[str, bytes] = {}
    between = tree_hashes(vault.root, kept)
    first_changed = changed_paths(before, between)
    print(f"first run: {first['wall_s']} s, {first['peak_rss_mb']} MB, {len(first_changed)} paths changed", file=sys.stderr)
    time.sleep(max(0.0, args.pause - (time.monotonic() - first_started)))  # the second run starts a minute after the first
    second = run_tick_cli(vault.root, database_url, settings)
    after = tree_hashes(vault.root)
    second_changed = changed_paths(between, after)
    for rel in second_changed[:10]:
        print(show_diff(rel, kept.get(rel), vault.root), file=sys.stderr)
    kept.clear()
    elapsed_min = (dt.datetime.now(dt.timezone.utc) - NOW).total_seconds() / 60

    s1, s2 = first.pop("summary"), second.pop("summary")

    def writes(summary: dict[str, Any], changed: list[str]) -> dict[str, Any]:
        expected = summary["vault_writes"] + len(summary["moves"])  # a move is one write and two paths
        return {
            "vault_writes": summary["vault_writes"],
            "moves": len(summary["moves"]),
            "files_written": summary["files_written"] if len(summary["files_written"]) <= 20 else len(summary["files_written"]),
            "paths_changed": len(changed),
            "paths_changed_match": len(changed) == expected,
        }

    stats = s1["stats"]
    return {
        "arcs": args.arcs,
        "projects": args.projects,
        "vault": built,
        "vault_files": len(before),
        "vault_mb": round(sum(p.stat().st_size for p in vault.root.rglob("*") if p.is_file()) / 2**20, 1),
        "build_vault_s": round(build_s, 1),
        "first": first
        | writes(s1, first_changed)
        | {
            "stats": {
                k: stats[k]
                for k in (
                    "arcs_scanned",
                    "created_backfilled",
                    "heat_changes",
                    "promotions",
                    "demotions",
                    "graduations",
                    "signals_collected",
                    "signals_written",
                    "signals_deduped",
                    "signals_tombstoned_cleared",
                    "signals_tombstoned_stale",
                    "inject_blocks_collected",
                    "lessons_collected",
                )
            },
            "arcs_updated": s1["arcs_updated"],
            "active_projects": len(s1["active_projects"]),
            "index": {k: v for k, v in s1["index"].items() if k != "skipped"},
            "skipped": len(s1["index"].get("skipped") or []),
        },
        "second": second | writes(s2, second_changed) | {"heat_changes": s2["stats"]["heat_changes"], "arcs_updated": s2["arcs_updated"]},
        "second_changed_paths": second_changed[:50],
        "minutes_from_generation_to_end": round(elapsed_min, 1),
        "clock_margin_held": elapsed_min < args.margin_minutes,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--arcs", type=int, default=20_000)
    parser.add_argument("--projects", type=int, default=200)
    parser.add_argument("--tombstones", type=int, default=12, help=".merged.md tombstone pairs")
    parser.add_argument("--margin-minutes", type=int, default=30, help="no arc's activity within this of a threshold; the whole bench must end within it")
    parser.add_argument("--pause", type=float, default=60, help="seconds from the first run's start to the second run's")
    parser.add_argument("--seed", type=int, default=11)
    args = parser.parse_args()
    with scratch("bench-keeper") as (tmp, url):
        result = run(args, url, tmp)
    print(json.dumps(result))
    first, second = result["first"], result["second"]
    ok = second["vault_writes"] == 0 and not second["files_written"] and second["paths_changed"] == 0
    print(
        f"brain tick --no-ai over {args.arcs} arcs: first run {first['wall_s']} s, {first['peak_rss_mb']} MB peak RSS, "
        f"{first['vault_writes']} vault writes; second run {second['wall_s']} s, {second['peak_rss_mb']} MB, "
        f"{second['vault_writes']} vault writes, {second['paths_changed']} files changed "
        f"({'nothing written: target met' if ok else 'TARGET MISSED: the second run wrote files'})",
        file=sys.stderr,
    )
    if not (first["paths_changed_match"] and second["paths_changed_match"]):
        print("the files whose bytes changed do not match the summary's vault_writes", file=sys.stderr)
        ok = False
    if not result["clock_margin_held"]:
        print(f"warning: the bench took longer than --margin-minutes ({args.margin_minutes}); thresholds may have been crossed", file=sys.stderr)
    if not ok:
        for path in result["second_changed_paths"]:
            print(f"  second run changed: {path}", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
