"""One membership rule: the core's ``belongs``/``key_is_unique`` and their SQL twins agree on every row.

Rows are generated from every shape an entry takes (primary project with and
without a repo, secondary projects of merged arcs, unattributed entries,
fleet-wide signals, keys shared by two repositories, aliases, mention-only
project rows, root-only projects), inserted into a real Postgres inside a
rolled-back transaction, and each project's members are asked of both.
"""

from __future__ import annotations

import itertools
import random

import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session

from brain_core.entries import EntryRecord
from brain_core.membership import KnownProject, belongs, key_is_unique, unique_keys
from brain_kernel.feed_repo import key_unique_sql, list_projects, member, project_entries
from brain_kernel.index import touch_project, upsert_entries
from brain_kernel.models import Entry
from brain_kernel.projects import AMBIGUOUS, EXACT, known_projects, lookup_project

# Projects as the index may know them: shared keys, an alias, a mention-only row, a root-only repo.
PROJECTS = [
    KnownProject("api", "org1/api"),
    KnownProject("api", "org2/api"),
    KnownProject("web", "acme/web", aliases=("frontend",)),
    KnownProject("frontend", None),  # a mention of the alias's key before any repo: not a project of its own
    KnownProject("infra", None, root="/srv/infra"),  # a repo without a remote
    KnownProject("tools", "acme/tools"),
    KnownProject("tools", None, root="/home/op/tools"),  # the same key once more, without a remote
    KnownProject("solo", None),  # only ever mentioned
]
KEYS = ["api", "web", "frontend", "infra", "tools", "solo", "ghost"]
REPOS = [None, "org1/api", "org2/api", "acme/web", "acme/tools", "other/api"]


def generated_entries(n: int = 400, seed: int = 7) -> list[EntryRecord]:
    """Entries of every shape: (primary, repo, secondary keys, kind, scope) drawn at random."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        kind = rng.choice(["arc", "lesson", "decision", "signal", "milestone"])
        primary = rng.choice([None, *KEYS])
        repo = rng.choice(REPOS) if primary else None
        secondary = tuple(rng.sample(KEYS, rng.choice([0, 0, 1, 2]))) if kind == "arc" else ()  # merged arcs
        scope = "fleet" if kind == "signal" and rng.random() < 0.3 else "project"
        projects = tuple(dict.fromkeys([*([primary] if primary else []), *secondary]))
        out.append(
            EntryRecord(id=f"{kind}:gen/{i}.md", kind=kind, vault_path=f"gen/{i}.md", title=f"t{i}", project=primary, projects=projects, repo=repo, scope=scope)
        )
    return out


@pytest.fixture
def indexed(tx: Session) -> list[EntryRecord]:
    for p in PROJECTS:
        touch_project(tx, p.key, p.repo, root=p.root, aliases=p.aliases)
    records = generated_entries()
    upsert_entries(tx, records)
    tx.flush()
    return records


def _sql_members(db: Session, key: str, repo: str | None, unique: bool | None) -> set[str]:
    cond = member(key, repo, key_unique_sql(key) if unique is None else unique)
    return set(db.scalars(select(Entry.id).where(Entry.id.like("%:gen/%"), cond)))


@pytest.mark.parametrize("key, repo", [(k, r) for k in KEYS for r in REPOS])
def test_belongs_and_the_sql_member_agree(tx: Session, indexed: list[EntryRecord], key: str, repo: str | None) -> None:
    unique = key_is_unique(key, PROJECTS)
    expected = {r.id for r in indexed if belongs(r, key, repo, key_is_unique=unique)}
    assert _sql_members(tx, key, repo, unique) == expected  # the rule with a given uniqueness
    assert _sql_members(tx, key, repo, None) == expected  # uniqueness computed in the statement itself


def test_key_uniqueness_agrees_in_python_sql_and_the_lookup(tx: Session, indexed: list[EntryRecord]) -> None:
    known = known_projects(tx)
    assert sorted(known, key=lambda p: p.id) == sorted(PROJECTS, key=lambda p: p.id)
    listed = unique_keys(known)
    for key in KEYS:
        python = key_is_unique(key, known)
        sql = tx.scalar(select(key_unique_sql(key)))
        assert python == sql == listed.get(key, True), key
        status = lookup_project(tx, key).status
        assert (status == AMBIGUOUS) == (not python), key
    assert {k: key_is_unique(k, known) for k in ("api", "tools", "web", "frontend", "infra")} == {
        "api": False,
        "tools": False,
        "web": True,
        "frontend": True,
        "infra": True,
    }
    assert lookup_project(tx, "frontend").status == EXACT and lookup_project(tx, "frontend").repo == "acme/web"


def test_projects_listing_counts_exactly_the_feed_members(tx: Session, indexed: list[EntryRecord]) -> None:
    listed = {p.id: p for p in list_projects(tx)}
    for project in PROJECTS:
        if project.id not in listed:
            continue  # a mention folded into the real project of its key
        unique = key_is_unique(project.key, PROJECTS)
        members = [r for r in indexed if belongs(r, project.key, project.repo, key_is_unique=unique)]
        counts = {kind: n for kind, group in itertools.groupby(sorted(r.kind for r in members)) if (n := len(list(group)))}
        assert listed[project.id].counts == counts, project.id
        searched = {r.id for r in project_entries(tx, project.key, project.repo) if r.vault_path.startswith("gen/")}
        assert searched == {r.id for r in members}, project.id
