"""Request dependencies: settings, the database session (the request owns the transaction), auth.

Dependencies that do no blocking I/O are ``async def``: FastAPI runs a sync
dependency in the thread pool, one hop each way, which cost more than the
dependency itself. ``get_db`` stays sync because its commit talks to the
database.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import AbstractContextManager
from typing import Annotated

from fastapi import Depends, HTTPException, Request
from sqlalchemy.orm import Session, sessionmaker

from brain_kernel.auth import EVERYONE, Principal, authenticate
from brain_kernel.clock import Clock
from brain_kernel.db.engine import unit_of_work
from brain_kernel.settings import Settings
from brain_kernel.vault_store import Vault


async def get_settings(request: Request) -> Settings:
    return request.app.state.settings


async def get_vault(request: Request) -> Vault:
    return request.app.state.vault


async def get_clock(request: Request) -> Clock:
    return request.app.state.clock


def get_db(request: Request) -> Iterator[Session]:
    """One session per request; committed when the handler returns, rolled back on error."""
    with unit_of_work(_write_factory(request)) as session:
        yield session


def _write_factory(request: Request) -> sessionmaker[Session]:
    factory = request.app.state.session_factory
    if factory is None:
        raise HTTPException(status_code=503, detail="database is not configured")
    return factory


async def get_unit_of_work(request: Request) -> Callable[[], AbstractContextManager[Session]]:
    """For a hot sync handler: its unit of work opened and committed on the handler's own thread.

    ``SessionDep`` is a sync dependency, so FastAPI enters and leaves it on the
    thread pool: two thread hops beside the handler's own. A handler that
    opens ``with uow() as db:`` itself makes one hop in all; it commits before
    it answers, as ``SessionDep`` does.
    """
    factory = _write_factory(request)
    return lambda: unit_of_work(factory)


async def get_read_db(request: Request) -> AsyncIterator[Session]:
    """A read-only session in autocommit mode: no BEGIN/COMMIT round trips on the read path.

    Each statement sees its own snapshot; read routes that need one snapshot for
    several statements must use ``SessionDep`` instead. Creating the session
    connects nothing (the handler's first statement checks a connection out) and
    closing it only returns that connection to the pool (an autocommit
    connection is idle, so the pool's reset sends nothing), so this runs on the
    event loop.
    """
    factory = request.app.state.read_session_factory
    if factory is None:
        raise HTTPException(status_code=503, detail="database is not configured")
    session = factory()
    try:
        yield session
    finally:
        session.close()


async def require_auth(request: Request) -> None:
    """Bearer-token check as upstream answers it (``brain_kernel.auth``): 401 for a missing or unknown token.

    The principal the token names is resolved here, once per request, and
    kept on ``request.state`` for ``get_principal``; 403 is kept for scope
    refusals (a known token asking outside its projects, ``OutOfScope``).
    """
    answer = authenticate(request.headers.get("authorization"), request.app.state.settings.token_entries)
    if isinstance(answer, str):
        raise HTTPException(status_code=401, detail=answer, headers={"WWW-Authenticate": "Bearer"})
    request.state.principal = answer


async def get_principal(request: Request) -> Principal:
    """The request's principal (``require_auth`` ran first: every memory router depends on it)."""
    principal = getattr(request.state, "principal", None)
    if principal is None:
        if request.app.state.settings.token_entries:  # a route without require_auth fails closed
            raise HTTPException(status_code=401, detail="missing bearer token", headers={"WWW-Authenticate": "Bearer"})
        return EVERYONE
    return principal


SettingsDep = Annotated[Settings, Depends(get_settings)]
VaultDep = Annotated[Vault, Depends(get_vault)]
ClockDep = Annotated[Clock, Depends(get_clock)]
# scope="function": the session commits when the handler returns, before the response is
# sent, so a client that got its answer can read its write (and a failed commit is not a 2xx).
SessionDep = Annotated[Session, Depends(get_db, scope="function")]
ReadSessionDep = Annotated[Session, Depends(get_read_db, scope="function")]
UnitOfWorkDep = Annotated[Callable[[], AbstractContextManager[Session]], Depends(get_unit_of_work)]
AuthDep = Depends(require_auth)
PrincipalDep = Annotated[Principal, Depends(get_principal)]
