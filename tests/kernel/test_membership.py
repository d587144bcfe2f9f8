"""One membership rule: the core's ``belongs``/``key_is_unique`` and their SQL twins agree on every row.

Rows are generated from every shape an entry takes (primary project with and
without a repo, secondary projects of merged arcs, unattributed entries,
fleet-wide signals, keys shared by two repositories, aliases, mention-only
project rows, root-only projects), inserted once into a real Postgres
database of the module's own, and each project's members are asked of both
inside a transaction rolled back after every test.
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Iterator

import pytest
from sqlalchemy import Engine, create_engine, select
from sqlalchemy.orm import Session

from brain_core.entries import EntryRecord
from brain_core.identity import CatalogProject, catalog_pins
from brain_core.membership import KnownProject, belongs, holds_unnamed, key_is_unique, owns_key, unique_keys
from brain_kernel.db.engine import normalise_url
from brain_kernel.db.models import Entry
from brain_kernel.feed.feed_repo import key_owned_sql, key_unique_sql, list_projects, member, project_entries
from brain_kernel.identity import pins
from brain_kernel.identity.projects import AMBIGUOUS, EXACT, known_projects, lookup_project
from brain_kernel.index.entries import touch_project, upsert_entries

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
# The catalog's pins (ADR 0021): a shared key pinned to one of its repos, a unique one, one to a repo no row has.
PINS = {"api": "org1/api", "web": "acme/web", "solo": "acme/solo"}
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


def index_generated(tx: Session) -> list[EntryRecord]:
    """The generated projects and entries, written to the index (not committed)."""
    for p in PROJECTS:
        touch_project(tx, p.key, p.repo, root=p.root, aliases=p.aliases)
    records = generated_entries()
    upsert_entries(tx, records)
    tx.flush()
    return records


@pytest.fixture(scope="module")
def _indexed_database(module_database_url: str) -> Iterator[tuple[Engine, list[EntryRecord]]]:
    """The generated rows, indexed and committed once for the module (84 tests each indexed them anew: 3 s)."""
    engine = create_engine(normalise_url(module_database_url))
    try:
        with Session(engine) as session:
            records = index_generated(session)
            session.commit()
        yield engine, records
    finally:
        engine.dispose()


@pytest.fixture
def tx(_indexed_database: tuple[Engine, list[EntryRecord]]) -> Iterator[Session]:
    """A session on the module's indexed database inside a transaction rolled back after the test: no test sees another's writes."""
    conn = _indexed_database[0].connect()
    outer = conn.begin()
    session = Session(bind=conn, join_transaction_mode="create_savepoint")
    try:
        yield session
    finally:
        session.close()
        outer.rollback()
        conn.close()


@pytest.fixture
def indexed(_indexed_database: tuple[Engine, list[EntryRecord]]) -> list[EntryRecord]:
    return _indexed_database[1]


def _sql_members(db: Session, key: str, repo: str | None, unique: bool | None) -> set[str]:
    cond = member(key, repo, key_unique_sql(key) if unique is None else unique)
    return set(db.scalars(select(Entry.id).where(Entry.id.like("%:gen/%"), cond)))


@pytest.mark.parametrize("key, repo", [(k, r) for k in KEYS for r in REPOS])
def test_belongs_and_the_sql_member_agree(tx: Session, indexed: list[EntryRecord], key: str, repo: str | None) -> None:
    unique = key_is_unique(key, PROJECTS)
    expected = {r.id for r in indexed if belongs(r, key, repo, key_is_unique=unique)}
    assert _sql_members(tx, key, repo, unique) == expected  # the rule with a given uniqueness
    assert _sql_members(tx, key, repo, None) == expected  # uniqueness computed in the statement itself


def test_a_pin_gives_the_key_s_unnamed_entries_to_the_pinned_project_only() -> None:
    unnamed = EntryRecord("l:1", "lesson", "l.md", project="api", projects=("api",), repo=None)
    merged = EntryRecord("a:1", "arc", "a.md", project="web", projects=("web", "api"), repo="acme/web")
    squat = EntryRecord("l:2", "lesson", "l.md", project="api", projects=("api",), repo="evil/api")
    for record in (unnamed, merged):
        assert not belongs(record, "api", "org/api", key_is_unique=False)  # shared, unpinned: no one's
        assert belongs(record, "api", "org/api", key_is_unique=False, pin="org/api")
        assert not belongs(record, "api", "evil/api", key_is_unique=False, pin="org/api")
        assert not belongs(record, "api", "evil/api", key_is_unique=True, pin="org/api")  # a pin wins over uniqueness
    assert belongs(squat, "api", "evil/api", key_is_unique=False, pin="org/api")  # what names its repo stays its own
    assert not belongs(squat, "api", "org/api", key_is_unique=False, pin="org/api")
    assert holds_unnamed("org/api", key_is_unique=False, pin="org/api") and not holds_unnamed(None, key_is_unique=True, pin="org/api")
    assert holds_unnamed("x/api", key_is_unique=True) and not holds_unnamed("x/api", key_is_unique=False)
    catalog = [CatalogProject("api", "org/api"), CatalogProject("web", None), CatalogProject("db", "a/db"), CatalogProject("db", "b/db")]
    assert catalog_pins(catalog) == {"api": "org/api"}  # no repo pins nothing; a key declared twice neither


@pytest.mark.parametrize("key, repo", [(k, r) for k in KEYS for r in REPOS])
def test_belongs_and_the_sql_member_agree_with_pins(tx: Session, indexed: list[EntryRecord], key: str, repo: str | None) -> None:
    assert pins.sync(tx, PINS) == len(PINS) and pins.sync(tx, PINS) == 0
    unique = owns_key(key, repo, PROJECTS)  # P's repository carries its key, known or not
    expected = {r.id for r in indexed if belongs(r, key, repo, key_is_unique=unique, pin=PINS.get(key))}
    assert tx.scalar(select(key_owned_sql(key, repo))) == holds_unnamed(repo, key_is_unique=unique, pin=PINS.get(key))
    assert _sql_members(tx, key, repo, holds_unnamed(repo, key_is_unique=unique, pin=PINS.get(key))) == expected
    assert set(tx.scalars(select(Entry.id).where(Entry.id.like("%:gen/%"), member(key, repo, key_owned_sql(key, repo))))) == expected
    searched = {r.id for r in project_entries(tx, key, repo) if r.vault_path.startswith("gen/")}
    assert searched == expected


def test_a_pinned_key_resolves_to_its_repository_and_counts_follow_the_pin(tx: Session, indexed: list[EntryRecord]) -> None:
    assert lookup_project(tx, "api").status == AMBIGUOUS
    pins.sync(tx, PINS)
    found = lookup_project(tx, "api")
    assert (found.status, found.key, found.repo, found.candidates) == (EXACT, "api", "org1/api", ["org1/api"])
    assert lookup_project(tx, "solo").repo == "acme/solo"  # pinned to a repository no row has yet
    listed = {p.id: p for p in list_projects(tx)}
    for project in PROJECTS:
        if project.id in listed:
            unique = key_is_unique(project.key, PROJECTS)
            members = [r for r in indexed if belongs(r, project.key, project.repo, key_is_unique=unique, pin=PINS.get(project.key))]
            assert sum(listed[project.id].counts.values()) == len(members), project.id
    pins.sync(tx, {})
    assert lookup_project(tx, "api").status == AMBIGUOUS


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
