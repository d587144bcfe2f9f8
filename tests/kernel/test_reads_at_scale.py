"""Read routes bounded by their answer (ADR 0008, revision 0008): the feed's ordered reads and the projects aggregate.

- The feed statement splits P's rows in two: rows that list exactly their own
  project, read by ``project = key`` through ordered btrees, and the few
  others, read by ``member`` through a partial GIN index. The split is held
  equal to ``belongs`` over generated rows, and ``EXPLAIN`` on an analysed
  table shows no sequential scan of ``entries`` for a small project, a hot one
  and an unknown one, with and without a repo.
- ``GET /projects`` counts from ``project_counts``, deltas written by triggers:
  after every batch of random inserts, updates (of each column a count
  depends on), deletes and folds, the listing equals one computed from the
  entries themselves by the core rule.
"""

from __future__ import annotations

import datetime as dt
import itertools
import random
from types import SimpleNamespace
from typing import Any

import pytest
from sqlalchemy import select, text
from sqlalchemy.orm import Session

from brain_core.entries import EntryRecord
from brain_core.membership import KnownProject, belongs, holds_unnamed, key_is_unique, unique_keys
from brain_core.vault.records import ACTIVITY_KINDS
from brain_kernel.curation.states import now_text
from brain_kernel.db.models import Entry, Project
from brain_kernel.feed.feed_repo import FEED_RULES, PROJECT_SQL, FeedRule, compact_project_counts, list_projects
from brain_kernel.identity import pins
from brain_kernel.index.entries import touch_project, upsert_entries
from tests.kernel.test_membership import KEYS, PINS, PROJECTS, REPOS, index_generated

NOW = dt.datetime(2026, 12, 1, 12, tzinfo=dt.timezone.utc)


@pytest.fixture
def generated(tx: Session) -> list[EntryRecord]:
    return index_generated(tx)


def _rows_where(tx: Session, rule: FeedRule, cond: str, params: dict[str, Any]) -> set[str]:
    sql = f"WITH u (ok) AS (SELECT {rule.held}) SELECT e.id FROM entries e WHERE e.id LIKE '%%:gen/%%' AND ({cond})"
    return set(tx.connection().exec_driver_sql(sql, params).scalars())


def test_the_feed_split_is_the_membership_rule(tx: Session, generated: list[EntryRecord]) -> None:
    """The feed statement's own rows and other rows (``FEED_RULES``): together exactly ``belongs``, and never both,
    without pins and with the catalog's; its ``held`` (``u.ok``) is ``holds_unnamed``."""
    for pinned in ({}, PINS):
        pins.sync(tx, pinned)
        for key, repo in itertools.product(KEYS, REPOS):
            unique = key_is_unique(key, PROJECTS)
            expected = {r.id for r in generated if belongs(r, key, repo, key_is_unique=unique, pin=pinned.get(key))}
            rule = FEED_RULES[repo is not None]
            params = {"key": key, "keys": [key], "repo": repo}
            held = tx.connection().exec_driver_sql(f"SELECT {rule.held}", params).scalar()
            assert held == holds_unnamed(repo, key_is_unique=unique, pin=pinned.get(key)), (key, repo, pinned)
            own, others = _rows_where(tx, rule, rule.own, params), _rows_where(tx, rule, rule.other, params)
            assert own | others == expected, (key, repo, pinned)
            assert not own & others


def _plant_many(db: Session) -> None:
    """About 16,000 rows: 40 projects of 250 rows each, one hot project of 5,000, merged arcs, fleet signals, inject blocks."""
    db.execute(
        text("""
        INSERT INTO projects (id, key, repo, root, aliases) SELECT 'org/p' || i, 'p' || i, 'org/p' || i, NULL, '{}' FROM generate_series(0, 40) i;
        INSERT INTO entries (id, kind, title, content, project, projects, repo, scope, status, heat, vault_path, occurred_at)
        SELECT (ARRAY['arc','lesson','lesson','lesson','decision','milestone','signal'])[1 + n % 7] || '\\:g/' || n, (ARRAY['arc','lesson','lesson','lesson','decision','milestone','signal'])[1 + n % 7],
               't', 'c', 'p' || p, ARRAY['p' || p], 'org/p' || p, CASE WHEN n % 50 = 0 THEN 'fleet' ELSE 'project' END, NULL, n % 11, 'g/' || n || '.md',
               TIMESTAMPTZ '2026-12-01' - (n % 400) * interval '1 day'
          FROM generate_series(1, 15000) n, LATERAL (SELECT CASE WHEN n <= 5000 THEN 40 ELSE n % 40 END AS p) q;
        INSERT INTO entries (id, kind, title, content, project, projects, repo, scope, heat, vault_path, occurred_at)
        SELECT 'arc\\:m/' || n, 'arc', 't', 'c', 'p' || (n % 40), ARRAY['p' || (n % 40), 'p' || ((n + 1) % 40)], 'org/p' || (n % 40), 'project', n % 7, 'm/' || n || '.md',
               TIMESTAMPTZ '2026-12-01' - n * interval '1 hour'
          FROM generate_series(1, 200) n;
        INSERT INTO entries (id, kind, title, content, projects, scope, heat, vault_path, occurred_at)
        SELECT 'inject\\:i' || n, 'inject', 't', 'c', '{}', 'project', 0, 'brain-feed/inject.md', TIMESTAMPTZ '2026-12-01' FROM generate_series(1, 5) n;
        ANALYZE entries;
        ANALYZE projects;
        """)
    )


def _entries_nodes(node: dict[str, Any]) -> list[dict[str, Any]]:
    found = [node] if node.get("Relation Name") == "entries" else []
    for child in node.get("Plans", ()):
        found += _entries_nodes(child)
    return found


def test_the_feed_statement_reads_only_what_it_returns(tx: Session) -> None:
    """No table scan of ``entries``, and no index read of more rows than a section's limit, for a small
    project, a hot one (5,000 rows, 200 arcs), one without its repo and an unknown one."""
    _plant_many(tx)
    conn = tx.connection()
    for key, repo in (("p3", "org/p3"), ("p40", "org/p40"), ("p3", None), ("nobody", None)):
        params = {"key": key, "keys": [key], "since": NOW - dt.timedelta(days=14), "top_n": 10, "now": now_text(NOW)}
        if repo is not None:
            params["repo"] = repo
        sql = PROJECT_SQL[repo is not None]
        plan = "\n".join(row[0] for row in conn.exec_driver_sql("EXPLAIN " + sql, params))
        assert "Seq Scan on entries" not in plan, plan
        assert "ix_entries_projects_gin" not in plan, plan  # P's whole GIN posting list is never read
        (analysed,) = conn.exec_driver_sql("EXPLAIN (ANALYZE, FORMAT JSON) " + sql, params).scalar()
        for node in _entries_nodes(analysed["Plan"]):
            read = (node["Actual Rows"] + node.get("Rows Removed by Filter", 0) + node.get("Rows Removed by Index Recheck", 0)) * node["Actual Loops"]
            assert read <= 400, (key, repo, node["Node Type"], node.get("Index Name"), read)
        if key == "p40":  # the hot project: its sections are ordered scans that stop at their limits
            assert "Index Scan using ix_entries_project_kind_occurred" in plan and "Index Scan using ix_entries_project_hot_arcs" in plan, plan


# -- GET /projects from the trigger-kept deltas -----------------------------------------------------------------


def _expected(db: Session) -> dict[str, tuple[dict[str, int], dt.datetime | None]]:
    """The listing computed from the entries themselves by the core rule (what the aggregate must equal)."""
    stored = {p.id: p.last_active for p in db.scalars(select(Project))}
    known = [KnownProject(p.key, p.repo, p.root, tuple(p.aliases)) for p in PROJECTS]
    with_repo = {p.key for p in known if p.repo}
    listed = [p for p in known if p.repo or p.root or p.key not in with_repo]
    unique = unique_keys(listed)
    # Rows exactly as stored (an EntryRecord would add its project to ``projects``; a raw UPDATE need not).
    rows: list[Any] = [
        SimpleNamespace(kind=k, project=pr, projects=tuple(ps), repo=r, occurred_at=at)
        for k, pr, ps, r, at in db.execute(select(Entry.kind, Entry.project, Entry.projects, Entry.repo, Entry.occurred_at))
    ]
    out = {}
    for p in listed:
        members = [r for r in rows if belongs(r, p.key, p.repo, key_is_unique=unique.get(p.key, True))]
        counts: dict[str, int] = {}
        for r in members:
            counts[r.kind] = counts.get(r.kind, 0) + 1
        dated = [r.occurred_at for r in members if r.kind in ACTIVITY_KINDS and r.occurred_at is not None]
        out[p.id] = (counts, max(dated) if dated else stored[p.id])
    return out


def _listed(db: Session) -> dict[str, tuple[dict[str, int], dt.datetime | None]]:
    return {p.id: (p.counts, p.last_active) for p in list_projects(db)}


def _random_record(rng: random.Random, n: int) -> EntryRecord:
    kind = rng.choice(["arc", "lesson", "decision", "signal", "milestone", "intent"])
    primary = rng.choice([None, *KEYS])
    secondary = tuple(rng.sample(KEYS, rng.choice([0, 0, 0, 1, 2]))) if kind == "arc" else ()
    at = rng.choice([None, NOW - dt.timedelta(hours=rng.randint(0, 500))])
    return EntryRecord(
        id=f"{kind}:rnd/{n}.md",
        kind=kind,
        vault_path=f"rnd/{n}.md",
        project=primary,
        projects=tuple(dict.fromkeys([*([primary] if primary else []), *secondary])),
        repo=rng.choice(REPOS) if primary else None,
        occurred_at=at,
    )


def test_project_counts_stay_exact_through_random_writes_and_folds(tx: Session) -> None:
    rng = random.Random(14)
    for p in PROJECTS:
        touch_project(tx, p.key, p.repo, root=p.root, aliases=p.aliases)
    upsert_entries(tx, [_random_record(rng, n) for n in range(300)])
    tx.flush()
    assert _listed(tx) == _expected(tx)
    for round_ in range(8):
        ids = list(tx.scalars(select(Entry.id).where(Entry.id.like("%:rnd/%"))))
        # The newest rows go first, so a group's last activity must come back from the entries.
        newest = list(tx.scalars(select(Entry.id).where(Entry.occurred_at.is_not(None)).order_by(Entry.occurred_at.desc()).limit(5)))
        tx.execute(Entry.__table__.delete().where(Entry.id.in_(newest + rng.sample(ids, 10))))
        for eid in rng.sample([i for i in ids if i not in newest], 15):
            change = rng.choice(["project", "repo", "kind", "occurred_at", "projects", "heat"])
            values = {
                "project": {"project": rng.choice(KEYS)},
                "repo": {"repo": rng.choice(REPOS)},
                "kind": {"kind": rng.choice(["lesson", "decision"])},
                "occurred_at": {"occurred_at": NOW - dt.timedelta(hours=rng.randint(-50, 600))},
                "projects": {"projects": rng.sample(KEYS, 2)},
                "heat": {"heat": rng.random()},  # changes no count: logs nothing
            }[change]
            tx.execute(Entry.__table__.update().where(Entry.id == eid).values(**values))
        upsert_entries(tx, [_random_record(rng, 1000 + round_ * 50 + n) for n in range(20)])
        tx.flush()
        assert _listed(tx) == _expected(tx), round_
        if round_ % 3 == 2:
            compact_project_counts(tx)
            groups = tx.scalar(text("SELECT count(*) FROM (SELECT DISTINCT member_key, repo, is_primary, kind FROM project_counts) g"))
            assert tx.scalar(text("SELECT count(*) FROM project_counts")) == groups  # one row per group
            assert tx.scalar(text("SELECT count(*) FROM project_counts WHERE gone IS NOT NULL")) == 0
            assert _listed(tx) == _expected(tx), round_
    tx.execute(text("TRUNCATE entries CASCADE"))
    assert tx.scalar(text("SELECT count(*) FROM project_counts")) == 0
    assert all(counts == {} for counts, _ in _listed(tx).values())


def test_an_unchanged_rewrite_writes_no_delta(tx: Session) -> None:
    """A refresh that rewrites rows as they were (what every keeper tick does) adds nothing to the aggregate."""
    rng = random.Random(3)
    records = [_random_record(rng, n) for n in range(50)]
    upsert_entries(tx, records)
    tx.flush()
    before = tx.scalar(text("SELECT count(*) FROM project_counts"))
    upsert_entries(tx, records)
    tx.execute(text("UPDATE entries SET heat = heat + 1, title = 'x'"))
    tx.flush()
    assert tx.scalar(text("SELECT count(*) FROM project_counts")) == before
