"""The operator pages at ``/ui``: projects, a project, attribution, keeper, signals, and signing in (ADR 0049).

Server-rendered HTML from the package's templates, on the API's settings,
auth and scope gate: each page builds a ``Scope`` for the request's
principal (``brain_api.ui.auth``) and reads through the kernel's own readers
where the API has one, so a page shows what the API would answer the same
token. A project a token may not see, and one that does not exist, get the
same "no such project" page. Pages read only; the two forms that change
something (sign-in, sign-out) carry a CSRF token.
"""

from __future__ import annotations

import datetime as dt
import os
from importlib import resources
from typing import Annotated, Any
from urllib.parse import quote

from fastapi import APIRouter, Form, HTTPException, Query, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from jinja2 import Environment, PackageLoader, StrictUndefined, select_autoescape
from sqlalchemy.orm import Session

from brain_api.deps import ClockDep, ReadSessionDep, SettingsDep, VaultDep
from brain_api.responses import SIGN_IN_FIRST, page_errors
from brain_api.routes import embeddings as search_route
from brain_api.ui import auth, charts, reads, views
from brain_core.curation import state_of
from brain_core.feed.block import LABEL_CHARS, neutral
from brain_core.heat import HeatRules
from brain_core.keys import InvalidKey
from brain_core.membership import signal_is_fleet
from brain_core.times import iso
from brain_core.trial import CONTROL, control_block
from brain_core.vault.layout import BACKFILL_DIR
from brain_kernel.auth import Principal
from brain_kernel.feed.answers import DEFAULT_LESSON_DAYS, DEFAULT_TOP_N, project_block
from brain_kernel.feed.feed_repo import list_projects, top_arcs
from brain_kernel.identity.projects import EXACT, AmbiguousProject
from brain_kernel.scope import OutOfScope, Scope
from brain_kernel.settings import Settings
from brain_kernel.trial.records import arm_of, trial_config
from brain_kernel.trial.report import Period, trial_report
from brain_kernel.vault_store import Vault

router = APIRouter(tags=["ui"])

KIND_COLUMNS = ("arc", "lesson", "decision", "milestone", "signal")
DRY_RUN_PATH = f"{BACKFILL_DIR}/dry-run.jsonl"  # where an operator keeps a dry run's stdout for the attribution page
DRY_RUN_MAX_BYTES = 8_000_000
MAX_PROJECT_CHARS = 300  # a longer reference names no project (the API routes refuse it)
DRY_RUN_COMMAND = f"brain backfill --dry-run > $BRAIN_VAULT/{DRY_RUN_PATH}"
STYLESHEET = resources.files("brain_api.ui").joinpath("static", "ui.css").read_bytes()

_env = Environment(loader=PackageLoader("brain_api.ui", "templates"), autoescape=select_autoescape(default=True), undefined=StrictUndefined)


def _ago(moment: dt.datetime | None, now: dt.datetime) -> str:
    """``3 h ago``, ``2 d ago``: how long before ``now`` a moment was."""
    if moment is None:
        return "never"
    seconds = (now - moment).total_seconds()
    if seconds < 0:
        return "just now"
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
        if seconds >= size:
            return f"{int(seconds // size)} {unit} ago"
    return "just now"


_env.filters["iso"] = iso
_env.filters["ago"] = _ago


def _render(request: Request, template: str, principal: Principal | None, *, status: int = 200, **context: Any) -> Response:
    """A page from its template, with the common headers (and the CSRF cookie when the browser has none yet)."""
    csrf, new = auth.csrf_of(request)
    html = _env.get_template(template).render(request_path=request.url.path, principal=principal, auth_on=auth.auth_on(request), csrf=csrf, **context)
    return auth.finish(request, HTMLResponse(html, status_code=status), csrf=csrf, new_csrf=new)


def _sign_in_first(request: Request) -> Response:
    target = request.url.path + (f"?{request.url.query}" if request.url.query else "")
    return auth.finish(request, RedirectResponse(f"/ui/signin?next={quote(target, safe='')}", status_code=303))


def _not_found(request: Request, principal: Principal, what: str) -> Response:
    return _render(request, "missing.html", principal, status=404, what=what)


def no_such_page(request: Request, status: int) -> Response:
    """A 404 (no such page) or 405 (a form's address typed into the address bar) under /ui, as a page."""
    return _render(request, "nowhere.html", auth.principal_of(request), status=status, method_not_allowed=status == 405)


# -- projects -------------------------------------------------------------------------------------


@router.get("/ui", response_class=HTMLResponse, responses=SIGN_IN_FIRST, summary="The operator pages: projects")
def projects_page(request: Request, db: ReadSessionDep, clock: ClockDep, vault: VaultDep) -> Response:
    """Every project the token may see, with counts by kind, last activity, aliases and its feed answer's state."""
    principal = auth.principal_of(request)
    if principal is None:
        return _sign_in_first(request)
    now = clock()
    scope = Scope(db, principal)
    projects = [p for p in list_projects(db) if scope.allows_ref(p.key, p.repo)]
    projects.sort(key=lambda p: (p.last_active is None, -(p.last_active.timestamp() if p.last_active else 0), p.id))
    refs = sorted({ref for p in projects for ref in (p.id, p.key)})
    stored = reads.stored_refs(db, refs, top_n=DEFAULT_TOP_N, lesson_days=DEFAULT_LESSON_DAYS, vault_root=str(vault.root), now=now)
    rows = [
        {"p": p, "total": sum(p.counts.values()), "stored": p.id in stored or p.key in stored, "counts": [p.counts.get(k, 0) for k in KIND_COLUMNS]}
        for p in projects
    ]
    orphans = None if scope.restricted else reads.unattributed(db)
    top = sorted(rows, key=lambda r: (-r["total"], r["p"].id))[:20]
    chart = charts.bars([(r["p"].key, r["total"]) for r in top], label="Entries by project (the 20 largest)")
    return _render(request, "projects.html", principal, now=now, rows=rows, kinds=KIND_COLUMNS, orphans=orphans, chart=chart)


# -- a project ------------------------------------------------------------------------------------


def search_project(request: Request, db: Session, principal: Principal, project: str, query: str, *, limit: int = 10) -> dict[str, Any]:
    """The project's search as ``POST /search {query, project, limit}`` answers it: the route's own handler, its defaults.

    Called through the handler so the page searches as the API does (the
    mode, the embedder, the scope and its refusals) whatever it becomes.
    """
    return search_route.search(request, search_route.SearchIn(query=query, project=project, limit=limit), db, principal)


def heat_rules(settings: Settings) -> HeatRules:
    """The keeper's heat thresholds from the settings (what ``brain tick`` scores with)."""
    return HeatRules(
        promote=settings.promote_heat,
        demote=settings.demote_heat,
        graduate=settings.graduate_heat,
        graduate_age_days=settings.graduate_age_days,
        decay_start_days=settings.decay_start_days,
        decay_interval_days=settings.decay_interval_days,
    )


def entry_state(record: Any, now: dt.datetime) -> str:
    """An entry's curation state as the feeds judge it (ADR 0048): live, superseded, retracted or expired."""
    return state_of(record.status, record.meta, now)


@router.get(
    "/ui/project",
    response_class=HTMLResponse,
    responses={**SIGN_IN_FIRST, **page_errors(409, described={404: "No such project (or the token may not see it), or none named."})},
    summary="The operator pages: one project",
)
def project_page(
    request: Request,
    db: ReadSessionDep,
    clock: ClockDep,
    settings: SettingsDep,
    # Checked here rather than by FastAPI: a person who opens the page without a project reads a page, not a JSON 422.
    project: Annotated[str | None, Query(description="Short key or owner/name (at most 300 characters).")] = None,
    q: Annotated[str | None, Query(max_length=10_000, description="Search the project's memory (as POST /search).")] = None,
) -> Response:
    """A project's memory block (the connector's text), its hot arcs' heat by week, its timeline and its search."""
    principal = auth.principal_of(request)
    if principal is None:
        return _sign_in_first(request)
    ref = (project or "").strip()
    if not ref:
        return _render(request, "missing.html", principal, status=404, what=None)  # as a malformed key is: a page to move on from
    if len(ref) > MAX_PROJECT_CHARS:
        return _not_found(request, principal, ref[:MAX_PROJECT_CHARS] + "…")
    now = clock()
    scope = Scope(db, principal)
    try:
        found = scope.check(ref)  # outside the token's projects: the same page as a project that does not exist
    except (OutOfScope, InvalidKey):
        return _not_found(request, principal, ref)
    except AmbiguousProject as exc:
        return _render(request, "ambiguous.html", principal, status=409, ref=ref, candidates=exc.candidates)
    if found.status != EXACT:
        return _not_found(request, principal, ref)
    block = project_block(db, ref, top_n=DEFAULT_TOP_N, lesson_days=DEFAULT_LESSON_DAYS, now=now, scope=scope)
    # In the trial's control arm a session reads the neutral block, not this memory (ADR 0050): the page says so.
    held_out = arm_of(settings, repo=found.repo, project=found.key, session_id=None).arm == CONTROL
    control = control_block(neutral(found.repo or found.key, LABEL_CHARS)) if held_out else None
    summary = next((p for p in list_projects(db) if p.key == found.key and p.repo == found.repo), None)
    rules = heat_rules(settings)
    weeks = [(now - dt.timedelta(weeks=back)).date() for back in range(views.HEAT_WEEKS - 1, -1, -1)]
    arcs = []
    for arc in top_arcs(db, found.key, found.repo, limit=DEFAULT_TOP_N):
        heat = views.heat_by_week(arc.meta, now=now, rules=rules)
        arcs.append({"arc": arc, "heat": heat, "spark": charts.sparkline(heat, label=f"heat of {arc.title}")})
    timeline = [(r, entry_state(r, now)) for r in reads.timeline(db, found.key, found.repo)]
    results = error = None
    if q and q.strip():
        try:
            results = search_project(request, db, principal, ref, q.strip())
        except HTTPException as exc:  # the embedder failed (502) or the index cannot answer (503): said on the page
            error = str(exc.detail)
    return _render(
        request,
        "project.html",
        principal,
        now=now,
        found=found,
        ref=ref,
        summary=summary,
        kinds=KIND_COLUMNS,
        block=block,
        control=control,
        arcs=arcs,
        weeks=weeks,
        timeline=timeline,
        q=q or "",
        results=results,
        error=error,
    )


# -- attribution ----------------------------------------------------------------------------------


def stored_dry_run(vault: Vault) -> tuple[views.DryRun | None, dt.datetime | None, str | None]:
    """The dry run kept at ``DRY_RUN_PATH`` (its summary, changes and time), or why there is none to show."""
    path = vault.path(DRY_RUN_PATH)
    if not path.is_file() or not vault.contains(path):
        return None, None, None
    try:
        stat = os.stat(path)
        if stat.st_size > DRY_RUN_MAX_BYTES:
            return None, None, f"{DRY_RUN_PATH} is larger than {DRY_RUN_MAX_BYTES:,} bytes"
        with path.open(encoding="utf-8", errors="replace") as handle:
            run = views.parse_dry_run(handle)
    except OSError as exc:
        return None, None, f"{DRY_RUN_PATH} could not be read: {exc.strerror}"
    if run is None:
        return None, None, f"{DRY_RUN_PATH} holds no summary line (the last line of a finished dry run)"
    return run, dt.datetime.fromtimestamp(stat.st_mtime, dt.timezone.utc), None


@router.get("/ui/attribution", response_class=HTMLResponse, responses=SIGN_IN_FIRST, summary="The operator pages: attribution coverage")
def attribution_page(request: Request, db: ReadSessionDep, clock: ClockDep, vault: VaultDep) -> Response:
    """The share of sessions, arcs and markers with a project by week; unresolved sessions; the stored backfill dry run."""
    principal = auth.principal_of(request)
    if principal is None:
        return _sign_in_first(request)
    now = clock()
    if Scope(db, principal).restricted:  # coverage is the whole fleet's: nothing of it is a bound token's alone
        return _render(request, "attribution.html", principal, now=now, restricted=True)
    since = dt.datetime.combine(views.week_start(now) - dt.timedelta(weeks=views.SHARE_WEEKS - 1), dt.time(), dt.timezone.utc)
    series = {"sessions": reads.session_weeks(db, since=since), "arcs": reads.arc_weeks(db, since=since), "markers": reads.marker_weeks(db, since=since)}
    rows = views.share_rows(series, now=now)
    chart = charts.lines(
        [r.week.strftime("%m-%d") for r in rows],
        [(kind, [r.share(kind) for r in rows]) for kind in series],
        label="Share with a project by week (%)",
        unit="%",
        top=100.0,
    )
    groups, group_count = reads.unresolved_sessions(db)
    run, run_at, run_problem = stored_dry_run(vault)
    return _render(
        request,
        "attribution.html",
        principal,
        now=now,
        restricted=False,
        kinds=list(series),
        rows=rows,
        chart=chart,
        totals=reads.totals(db),
        groups=groups,
        group_count=group_count,
        run=run,
        run_at=run_at,
        run_problem=run_problem,
        dry_run_path=DRY_RUN_PATH,
        dry_run_command=DRY_RUN_COMMAND,
    )


# -- trial ----------------------------------------------------------------------------------------


@router.get("/ui/trial", response_class=HTMLResponse, responses=SIGN_IN_FIRST, summary="The operator pages: the holdout trial's report")
def trial_page(request: Request, db: ReadSessionDep, clock: ClockDep, settings: SettingsDep) -> Response:
    """``brain trial report`` as a page: per arm, projects and sessions; per outcome, the difference and its interval."""
    principal = auth.principal_of(request)
    if principal is None:
        return _sign_in_first(request)
    now = clock()
    if Scope(db, principal).restricted:  # arms span every project: nothing of the report is a bound token's alone
        return _render(request, "trial.html", principal, now=now, restricted=True)
    current = Period.of(trial_config(settings))
    # A table, not a chart: differences may be negative, and the intervals are the point; the same rounds as the CLI,
    # so the page and `brain trial report` print the same intervals.
    return _render(request, "trial.html", principal, now=now, restricted=False, data=trial_report(db, current, current=current))


# -- keeper ---------------------------------------------------------------------------------------

MOVE_STATS = ("promotions", "demotions", "graduations")


@router.get("/ui/keeper", response_class=HTMLResponse, responses=SIGN_IN_FIRST, summary="The operator pages: keeper health")
def keeper_page(request: Request, db: ReadSessionDep, clock: ClockDep) -> Response:
    """The last ticks (duration, outcome, files written, moves), the tick queue, embedding coverage and failures."""
    principal = auth.principal_of(request)
    if principal is None:
        return _sign_in_first(request)
    now = clock()
    scope = Scope(db, principal)
    ticks = reads.last_ticks(db)
    chart = charts.bars([(t.finished_at.strftime("%m-%d %H:%M"), t.duration_ms / 1000) for t in reversed(ticks)], label="Tick durations (s)", unit=" s")
    jobs = [{"job": job, "result": scope.cut_tick_result(job.result) or {}} for job in reads.queued(db)]
    coverage = reads.embedding_coverage(db, scope)
    return _render(
        request,
        "keeper.html",
        principal,
        now=now,
        restricted=scope.restricted,
        ticks=ticks,
        move_stats=MOVE_STATS,
        chart=chart,
        queue=reads.queue_counts(db),
        jobs=jobs,
        coverage=coverage,
        coverage_chart=charts.bars(
            [(c.kind, round(100.0 * c.embedded / c.entries, 1) if c.entries else 0.0) for c in coverage], label="Embedded (%)", unit="%"
        ),
        failures=reads.failed_ticks(db),
    )


# -- signals --------------------------------------------------------------------------------------


@router.get("/ui/signals", response_class=HTMLResponse, responses=SIGN_IN_FIRST, summary="The operator pages: active signals")
def signals_page(request: Request, db: ReadSessionDep, clock: ClockDep) -> Response:
    """Active signals by severity and age, fleet-wide and by project."""
    principal = auth.principal_of(request)
    if principal is None:
        return _sign_in_first(request)
    now = clock()
    scope = Scope(db, principal)
    signals = reads.active_signals(db, scope, now=now)
    fleet = [s for s in signals if signal_is_fleet(s)]
    mine = [s for s in signals if not signal_is_fleet(s)]
    limits = [days for _, days in views.AGE_BUCKETS if days is not None]
    tables = views.signal_tables(reads.signal_counts(db, scope, now=now, bucket_days=limits))
    everything = tables.pop("all")
    total = sum(everything.by_severity.values())
    chart = charts.bars([(sev, everything.by_severity[sev]) for sev in everything.severities], label="Active signals by severity")
    return _render(
        request,
        "signals.html",
        principal,
        now=now,
        fleet=fleet,
        mine=mine,
        total=total,
        shown=len(signals),
        tables=tables,
        buckets=[name for name, _ in views.AGE_BUCKETS],
        chart=chart,
        severity_of=views.severity_of,
    )


# -- signing in -----------------------------------------------------------------------------------


@router.get("/ui/signin", response_class=HTMLResponse, summary="The operator pages: the sign-in form")
def signin_page(request: Request, next_: Annotated[str | None, Query(alias="next", max_length=2048)] = None) -> Response:
    """The form that takes a token (with auth off, a note that the pages are open)."""
    return _render(request, "signin.html", auth.principal_of(request), next=auth.safe_next(next_), problem=None)


@router.post(
    "/ui/signin",
    status_code=303,
    response_class=RedirectResponse,
    responses={
        303: {"description": "Signed in (or auth is off): on to next (Location)."},
        **page_errors(401, 403, described={403: "The form expired (CSRF)."}),
    },
    summary="The operator pages: sign in with a token",
)
def signin(
    request: Request,
    token: Annotated[str, Form(max_length=auth.MAX_TOKEN_CHARS)],
    csrf: Annotated[str, Form(max_length=200)],
    next_: Annotated[str, Form(alias="next", max_length=2048)] = "/ui",
) -> Response:
    """Keep a known token in an HttpOnly, SameSite=Strict cookie and go on; an unknown one gets the form again (401)."""
    target = auth.safe_next(next_)
    if not auth.csrf_ok(request, csrf):
        return _render(request, "signin.html", None, status=403, next=target, problem="The form expired: sign in again.")
    if not auth.auth_on(request):
        return auth.finish(request, RedirectResponse(target, status_code=303))
    if auth.token_principal(request, token) is None:
        return _render(request, "signin.html", None, status=401, next=target, problem="That token is not known to this kernel.")
    response = RedirectResponse(target, status_code=303)
    auth.set_cookie(request, response, auth.TOKEN_COOKIE, token.strip())
    return auth.finish(request, response)


@router.post(
    "/ui/signout",
    status_code=303,
    response_class=RedirectResponse,
    responses={303: {"description": "Signed out: to the sign-in form (Location)."}, **page_errors(described={403: "The form expired (CSRF)."})},
    summary="The operator pages: sign out",
)
def signout(request: Request, csrf: Annotated[str, Form(max_length=200)]) -> Response:
    """Forget the token cookie."""
    if not auth.csrf_ok(request, csrf):
        return _render(request, "signin.html", None, status=403, next="/ui", problem="The form expired: sign out again.")
    response = RedirectResponse("/ui/signin", status_code=303)
    auth.clear_cookie(request, response, auth.TOKEN_COOKIE)
    return auth.finish(request, response)


@router.get(
    "/ui/style.css",
    response_class=Response,
    responses={200: {"description": "The stylesheet.", "content": {"text/css": {"schema": {"type": "string"}}}}},
    summary="The operator pages' stylesheet",
)
def stylesheet() -> Response:
    """The pages' one stylesheet (shipped in the package; no asset comes from elsewhere)."""
    return Response(STYLESHEET, media_type="text/css; charset=utf-8", headers={"Cache-Control": "public, max-age=3600", "X-Content-Type-Options": "nosniff"})
