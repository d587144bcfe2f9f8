"""The catalog's key pins in the index (``project_pins``, revision 0010; ADR 0021).

A catalog entry with a key and a repo pins the key to that repository
(``brain_core.identity.catalog_pins``): ``?project=<key>`` resolves to it
and the key's entries that name no repo belong to it only
(``brain_core.membership.holds_unnamed``). The pins live in a table so the
SQL twins of the rule read them in the same statement as the rows.
``sync`` makes the table hold the catalog's pins; ``refresh`` runs it when
the API starts and when a command opens the database (``brain serve``,
``brain reindex``, ``brain tick``, ...), so an edited catalog takes effect at
the next start or keeper run. A pin written
or removed logs its key to the feed change log (a trigger), so stored feed
answers of the key are recomputed.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

from sqlalchemy import Engine, delete, select
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.exc import DBAPIError
from sqlalchemy.orm import Session

from brain_core.identity import catalog_pins
from brain_kernel.db.models import ProjectPin
from brain_kernel.errors import ConfigError
from brain_kernel.identity.resolver import load_catalog
from brain_kernel.settings import Settings

log = logging.getLogger(__name__)


def pins(session: Session) -> dict[str, str]:
    """Every pinned key -> its repo."""
    return dict(session.connection().execute(select(ProjectPin.key, ProjectPin.repo)).all())


def sync(session: Session, wanted: Mapping[str, str]) -> int:
    """Make ``project_pins`` hold exactly ``wanted`` (no commit); returns how many pins were written or removed."""
    have = pins(session)
    gone = sorted(k for k in have if k not in wanted)
    changed = {k: r for k, r in wanted.items() if have.get(k) != r}
    if gone:
        session.execute(delete(ProjectPin).where(ProjectPin.key.in_(gone)))
    if changed:
        stmt = insert(ProjectPin).values([{"key": k, "repo": r} for k, r in sorted(changed.items())])
        session.execute(stmt.on_conflict_do_update(index_elements=[ProjectPin.key], set_={"repo": stmt.excluded.repo}))
    return len(gone) + len(changed)


def sync_catalog(session: Session, settings: Settings) -> int | None:
    """``sync`` from the operator catalog (no commit); None, pins kept, when the catalog or the table cannot be used."""
    try:
        wanted = catalog_pins(load_catalog(settings))
    except ConfigError as exc:
        log.warning("catalog pins not refreshed: %s", exc)
        return None
    try:
        with session.begin_nested():
            return sync(session, wanted)
    except DBAPIError as exc:  # a read-only role: the pins stay as the last writer left them
        log.warning("catalog pins not written: %s", str(exc.orig or exc).splitlines()[0])
        return None


def refresh(engine: Engine, settings: Settings) -> int | None:
    """``sync_catalog`` in a transaction of its own (what a start or a command runs)."""
    with Session(engine) as session, session.begin():
        return sync_catalog(session, settings)
