"""The operator pages over the real app (no browser): scope, cookies, CSRF, headers, 404s, and what each page shows.

Memory is the run's planted world (tests/support/planting.py, six projects
ticked once); a second app on the same database and vault has tokens, so
the same rows are read with auth on. Tests that only read share one copy of
that world for the module (``world``); a test that writes (a marker, a file,
a served session, a tick row) gets a copy of its own (``planted``). The
browser tests (test_browser.py) check what a person sees; these check the
rules fast.
"""

from __future__ import annotations

import html
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from brain_api.app import create_app
from brain_api.ui.auth import CSRF_COOKIE, TOKEN_COOKIE
from brain_api.ui.pages import DRY_RUN_PATH
from brain_kernel.settings import Settings
from tests.support.harness import ManualClock, PlantedImage, cloned_database, make_settings
from tests.support.planting import PROJECTS, Planted

ALL, API = "ui-all-token-0123456789", "ui-api-token-0123456789"
PAGES = ["/ui", "/ui/project?project=org1/api", "/ui/attribution", "/ui/keeper", "/ui/signals", "/ui/trial"]
OTHERS = [pid for pid in PROJECTS if pid != "org1/api"]


@dataclass
class Guarded:
    client: TestClient
    settings: Settings

    def signed_in(self, token: str) -> TestClient:
        """The client with a sign-in done through the form (the cookie jar then holds the token)."""
        self.client.cookies.clear()
        form = self.client.get("/ui/signin")
        csrf = re.search(r'name="csrf" value="([^"]+)"', form.text).group(1)  # type: ignore[union-attr]
        r = self.client.post("/ui/signin", data={"token": token, "csrf": csrf, "next": "/ui"}, follow_redirects=False)
        assert r.status_code == 303 and r.headers["location"] == "/ui", r.text
        return self.client


def _guarded_settings(folder: Path, database_url: str | None, vault: Path) -> Settings:
    """Settings for the app with tokens: one for every project, one bound to org1/api."""
    folder.mkdir()
    return make_settings(folder, database_url, vault=vault, tokens=[ALL, f"{API}=org1/api"])


@pytest.fixture
def guarded(planted: Planted, settings: Settings, tmp_path) -> Iterator[Guarded]:
    """The test's own copy of the planted world served by an app with tokens."""
    s = _guarded_settings(tmp_path / "guarded", settings.database_url, settings.vault)
    with TestClient(create_app(s), base_url="http://testserver") as client:
        yield Guarded(client, s)


@dataclass
class World:
    """One copy of the planted world for the module's read-only tests: an app with auth off, one with tokens."""

    client: TestClient
    guarded: Guarded
    planted: Planted


@pytest.fixture(scope="module")
def _world(tmp_path_factory: pytest.TempPathFactory, pg_admin_url: str, _planted_image: PlantedImage) -> Iterator[World]:
    """The run's planted image cloned once for the module (a clone per test cost 0.3 s), served by both apps.

    Only tests that write nothing use it, so each sees exactly the planted memory.
    """
    root = tmp_path_factory.mktemp("pages")
    with cloned_database(pg_admin_url, _planted_image.database_url) as url:
        settings = make_settings(root, url)
        planted = _planted_image.restore(settings)
        s = _guarded_settings(root / "guarded", url, settings.vault)
        with TestClient(create_app(settings, clock=ManualClock())) as client, TestClient(create_app(s), base_url="http://testserver") as guarded_client:
            yield World(client, Guarded(guarded_client, s), planted)


@pytest.fixture
def world(_world: World) -> World:
    """The module's shared world, its clients' cookies forgotten (the only state a client keeps between tests)."""
    _world.client.cookies.clear()
    _world.guarded.client.cookies.clear()
    return _world


def test_every_page_answers_with_auth_off_and_is_never_cached(world: World) -> None:
    client = world.client
    for url in PAGES:
        r = client.get(url)
        assert r.status_code == 200, (url, r.text[:500])
        assert r.headers["content-type"].startswith("text/html")
        assert r.headers["cache-control"] == "no-store"
        assert "Cookie" in r.headers["vary"]
        assert "script-src" not in r.headers["content-security-policy"] and "default-src 'none'" in r.headers["content-security-policy"]
    css = client.get("/ui/style.css")
    assert css.status_code == 200 and css.headers["content-type"].startswith("text/css")


def test_the_projects_page_counts_are_the_apis(world: World) -> None:
    client = world.client
    html = client.get("/ui").text
    for p in client.get("/projects").json()["projects"]:
        row = re.search(rf'<tr data-project="{re.escape(p["id"])}">(.*?)</tr>', html, re.S)
        assert row, p["id"]
        assert re.search(rf'class="num total">{p["total"]}<', row.group(1)), (p["id"], p["total"])
        for kind in ("arc", "lesson", "decision", "milestone", "signal"):
            assert f'data-kind="{kind}">{p["counts"].get(kind, 0)}<' in row.group(1), (p["id"], kind)
    assert 'class="orphans"' in html  # unattributed memory has its own row


def test_the_project_page_shows_the_block_the_connector_reads(world: World) -> None:
    import html as html_lib

    client = world.client

    for pid in ("org1/api", "acme/web", "infra"):
        block = client.get("/feed", params={"project": pid, "format": "markdown"}).text
        page = client.get("/ui/project", params={"project": pid}).text
        shown = re.search(r'<pre id="block" class="block">(.*?)</pre>', page, re.S).group(1)  # type: ignore[union-attr]
        assert html_lib.unescape(shown) == block


def test_an_unknown_project_and_a_malformed_one_are_not_found(world: World) -> None:
    client = world.client
    assert client.get("/ui/project", params={"project": "nobody/here"}).status_code == 404
    assert client.get("/ui/project", params={"project": "bad key!"}).status_code == 404
    assert client.get("/ui/project", params={"project": "api"}).status_code == 409  # two repositories share the key
    for missing in ({}, {"project": "  "}):  # no project named: a page saying so, never the API's JSON 422
        page = client.get("/ui/project", params=missing)
        assert page.status_code == 404 and page.headers["content-type"].startswith("text/html"), missing
        assert "No project named" in page.text and 'href="/ui"' in page.text, missing
    too_long = client.get("/ui/project", params={"project": "a" * 301})
    assert too_long.status_code == 404 and too_long.headers["content-type"].startswith("text/html")


def test_without_a_token_every_page_sends_to_the_sign_in_form(world: World) -> None:
    guarded = world.guarded
    for url in PAGES:
        r = guarded.client.get(url, follow_redirects=False)
        assert r.status_code == 303 and r.headers["location"].startswith("/ui/signin?next="), url
        assert r.headers["cache-control"] == "no-store"
    guarded.client.cookies.set(TOKEN_COOKIE, "not-a-token", path="/ui")
    assert guarded.client.get("/ui", follow_redirects=False).status_code == 303


def test_sign_in_keeps_the_token_in_an_httponly_strict_cookie(world: World) -> None:
    guarded = world.guarded
    c = guarded.client
    form = c.get("/ui/signin")
    set_csrf = form.headers["set-cookie"]
    assert CSRF_COOKIE in set_csrf and "httponly" in set_csrf.lower() and "samesite=strict" in set_csrf.lower() and "Path=/ui" in set_csrf
    csrf = re.search(r'name="csrf" value="([^"]+)"', form.text).group(1)  # type: ignore[union-attr]
    r = c.post("/ui/signin", data={"token": ALL, "csrf": csrf, "next": "/ui/keeper"}, follow_redirects=False)
    assert r.status_code == 303 and r.headers["location"] == "/ui/keeper"
    cookie = r.headers["set-cookie"]
    assert cookie.startswith(f"{TOKEN_COOKIE}=") and "httponly" in cookie.lower() and "samesite=strict" in cookie.lower() and "Path=/ui" in cookie
    assert "secure" not in cookie.lower()  # plain http here; https gets Secure
    assert c.get("/ui/keeper").status_code == 200
    assert c.get("/projects").status_code == 401  # the API never acts on the page cookie


def test_sign_in_over_https_marks_the_cookie_secure(world: World) -> None:
    # An app of its own on the shared world: leaving this client runs the app's shutdown, which the module's app must not see.
    with TestClient(create_app(world.guarded.settings), base_url="https://testserver") as c:
        form = c.get("/ui/signin")
        csrf = re.search(r'name="csrf" value="([^"]+)"', form.text).group(1)  # type: ignore[union-attr]
        r = c.post("/ui/signin", data={"token": ALL, "csrf": csrf}, follow_redirects=False)
        assert r.status_code == 303 and "secure" in r.headers["set-cookie"].lower()


def test_forms_without_the_csrf_token_or_from_another_site_are_refused(world: World) -> None:
    guarded = world.guarded
    c = guarded.client
    form = c.get("/ui/signin")
    csrf = re.search(r'name="csrf" value="([^"]+)"', form.text).group(1)  # type: ignore[union-attr]
    assert c.post("/ui/signin", data={"token": ALL, "csrf": "forged-forged-forged-forged"}).status_code == 403
    assert c.post("/ui/signin", data={"token": ALL, "csrf": csrf}, headers={"Origin": "https://evil.example"}).status_code == 403
    assert c.post("/ui/signin", data={"token": ALL, "csrf": csrf}, headers={"Origin": "null"}).status_code == 403
    behind_tls = c.post("/ui/signin", data={"token": ALL, "csrf": csrf}, headers={"Origin": "https://testserver"}, follow_redirects=False)
    assert behind_tls.status_code == 303  # a proxy ended TLS: same host, another scheme
    c.cookies.delete(TOKEN_COOKIE, path="/ui")
    bad = c.post("/ui/signin", data={"token": "wrong", "csrf": csrf}, follow_redirects=False)
    assert bad.status_code == 401 and TOKEN_COOKIE not in bad.headers.get("set-cookie", "")
    # never a redirect to another site, nor out of /ui as a browser resolves the path
    for outside in ("https://evil.example/", "//evil.example/x", "/ui/../feed", "/ui/%2e%2e/feed", "/uix", "/ui\r\nSet-Cookie: x=1"):
        off_site = c.post("/ui/signin", data={"token": ALL, "csrf": csrf, "next": outside}, follow_redirects=False)
        assert off_site.headers["location"] == "/ui", outside
    inside = c.post("/ui/signin", data={"token": ALL, "csrf": csrf, "next": "/ui/project?project=acme%2Fapi"}, follow_redirects=False)
    assert inside.headers["location"] == "/ui/project?project=acme%2Fapi"
    signed = guarded.signed_in(ALL)
    assert signed.post("/ui/signout", data={"csrf": "forged-forged-forged-forged"}).status_code == 403
    assert signed.get("/ui", follow_redirects=False).status_code == 200  # still signed in


def test_an_unknown_page_or_a_forms_address_answers_a_page_and_the_api_still_json(world: World) -> None:
    c = world.guarded.signed_in(ALL)
    missing = c.get("/ui/nope<script>x</script>")
    assert missing.status_code == 404 and missing.headers["content-type"].startswith("text/html")
    assert "No such page" in missing.text and "<script>x" not in missing.text and 'href="/ui"' in missing.text
    typed = c.get("/ui/signout")  # the sign-out form's address, typed into the address bar
    assert typed.status_code == 405 and typed.headers["content-type"].startswith("text/html") and "Not a page to open" in typed.text
    api = c.get("/no-such-route")
    assert (api.status_code, api.json()) == (404, {"detail": "Not Found"})


def test_sign_out_forgets_the_token(world: World) -> None:
    guarded = world.guarded
    c = guarded.signed_in(ALL)
    csrf = c.cookies.get(CSRF_COOKIE)
    r = c.post("/ui/signout", data={"csrf": csrf}, follow_redirects=False)
    assert r.status_code == 303 and f'{TOKEN_COOKIE}=""' in r.headers["set-cookie"]
    assert c.get("/ui", follow_redirects=False).status_code == 303


def test_a_bound_token_sees_only_its_project_on_every_page(world: World) -> None:
    guarded = world.guarded
    planted = world.planted
    c = guarded.signed_in(API)
    foreign = {t for pid in OTHERS for t in planted.owned[pid]} | planted.unattributed
    for url in PAGES:
        html = c.get(url).text
        for pid in OTHERS:
            assert pid not in html, (url, pid)
        leaked = {t for t in foreign if t in html}
        assert not leaked, (url, leaked)
    assert re.findall(r'<tr data-project="([^"]*)"', c.get("/ui").text) == ["org1/api"]
    for pid in OTHERS:  # another project reads exactly as one that does not exist
        other = c.get("/ui/project", params={"project": pid})
        missing = c.get("/ui/project", params={"project": "nobody/here"})
        assert other.status_code == missing.status_code == 404
        assert other.text.replace(pid, "X") == missing.text.replace("nobody/here", "X")
    assert "bound to projects" in c.get("/ui/attribution").text
    assert "a token that reaches every project" in c.get("/ui/trial").text


def test_the_header_token_works_as_the_cookie_does(world: World) -> None:
    guarded = world.guarded
    guarded.client.cookies.clear()
    r = guarded.client.get("/ui", headers={"Authorization": f"Bearer {API}"})
    assert r.status_code == 200 and re.findall(r'<tr data-project="([^"]*)"', r.text) == ["org1/api"]


def test_the_attribution_page_reads_a_stored_dry_run(client, planted: Planted, settings: Settings) -> None:
    assert "No backfill dry run is stored" in client.get("/ui/attribution").text
    path = settings.vault / DRY_RUN_PATH
    path.parent.mkdir(parents=True, exist_ok=True)
    plan = '{"path": "clusters/2026-11-30/c-1.md", "old": {"project": null}, "new": {"project": "api"}, "outcome": "changed", "source": "git"}'
    summary = '{"scanned": 12, "changed": 1, "unchanged": 10, "unresolved": 1, "by_source": {"git": 1}}'
    path.write_text(f"{plan}\n{summary}\n")
    html = client.get("/ui/attribution").text
    assert "12 arcs scanned, 1 would change" in html and "clusters/2026-11-30/c-1.md" in html


def test_the_project_search_answers_as_post_search(world: World) -> None:
    client, planted = world.client, world.planted
    word = sorted(planted.owned["acme/web"])[0]
    api = client.post("/search", json={"query": word, "project": "acme/web", "limit": 10}).json()
    page = client.get("/ui/project", params={"project": "acme/web", "q": word}).text
    assert f"{api['count']} result" in page
    for r in api["results"]:
        assert r["key"] in page


def test_the_timeline_marks_a_retracted_entry(client, planted: Planted) -> None:
    from urllib.parse import quote

    written = client.post("/marker", json={"type": "lesson", "content": "A lesson to withdraw soon.", "attrs": {"repo": "acme/web", "title": "Withdrawn one"}})
    assert written.status_code == 201, written.text
    r = client.post(f"/entries/{quote(written.json()['entry_id'], safe='/:')}/retract", json={"reason": "wrong"})
    assert r.status_code == 200, r.text
    page = client.get("/ui/project", params={"project": "acme/web"}).text
    row = re.search(r"<tr class=\"kind-lesson\">(?:(?!</tr>).)*Withdrawn one(?:(?!</tr>).)*</tr>", page, re.S)
    assert row and 'class="state-retracted">retracted<' in row.group(0)


def test_a_bound_tokens_keeper_page_names_no_file_and_no_error_text(guarded: Guarded, db) -> None:
    import datetime as dt

    from brain_kernel.ticks import tick_queue
    from brain_kernel.ticks.health import record_tick

    now = dt.datetime.now(dt.timezone.utc)
    secret = "clusters/2026-12-01/acme-web-secret-arc.md"
    record_tick(
        db, started_at=now, finished_at=now, source="brain-cli", dry_run=False, use_ai=False, ok=False, error=f"OSError: {secret}", arcs_scanned=3, stats={}
    )
    job = tick_queue.enqueue(db, dry_run=False, no_ai=True)
    tick_queue.claim_pending(db)
    tick_queue.finish(db, [job.job_id], status="completed", result={"vault_writes": 1, "files_written": [secret], "moves": [{"from": secret, "to": "x"}]})
    db.commit()
    everyone = guarded.signed_in(ALL).get("/ui/keeper").text
    assert secret in everyone and job.job_id in everyone
    bound = guarded.signed_in(API).get("/ui/keeper").text
    assert secret not in bound and "OSError" in bound and job.job_id in bound


def test_entry_text_is_escaped_on_every_page(client, planted: Planted) -> None:
    hostile = '<script>alert("x")</script>'
    r = client.post("/marker", json={"type": "signal", "content": "boom", "attrs": {"repo": "acme/web", "title": hostile, "severity": "critical"}})
    assert r.status_code == 201, r.text
    for url in ("/ui/signals", "/ui/project?project=acme/web"):
        page = client.get(url).text
        assert hostile not in page and "&lt;script&gt;" in page, url


def test_the_signals_page_counts_every_active_signal(world: World) -> None:
    from sqlalchemy import text

    client = world.client
    with client.app.state.engine.connect() as db:  # type: ignore[attr-defined]  # the app's own database
        active = db.execute(
            text("SELECT count(*) FROM entries WHERE kind = 'signal' AND (status IS NULL OR lower(status) NOT IN ('resolved', 'cleared'))")
        ).scalar()
    page = client.get("/ui/signals").text
    assert f"{active} active signal" in page
    cells = re.findall(r'<td class="num">(\d+)</td></tr>', page.split('id="ages-fleet"', 1)[1].split("<h2>", 1)[0])
    assert sum(int(c) for c in cells) == active  # the "all" column of the fleet-wide and projects tables


def test_the_trial_page_is_the_reports_figures(client, planted: Planted) -> None:
    for n in range(3):  # served blocks: each session's arm is recorded (no trial: treatment)
        assert client.get("/feed", params={"project": "org1/api", "format": "markdown", "session_id": f"ui-trial-{n}"}).status_code == 200
    html = client.get("/ui/trial").text
    arms = re.search(r'<table id="arms">.*?</table>', html, re.S)
    assert arms is not None
    waiting = re.search(r'<th scope="row">without outcomes</th><td class="num">(\d+)</td><td class="num">(\d+)</td>', arms.group(0))
    assert waiting is not None and waiting.groups() == ("3", "0")  # served, not extracted yet
    assert "Trial period: control 0%" in html and "Not enough projects" in html


def test_the_signals_page_leaves_out_withdrawn_and_expired_signals(client, planted: Planted) -> None:
    from urllib.parse import quote

    def signal(content: str, **attrs: str) -> str:
        r = client.post("/marker", json={"type": "signal", "content": content, "attrs": {"repo": "acme/web", "severity": "critical", **attrs}})
        assert r.status_code == 201, r.text
        return r.json()["entry_id"]

    before = client.get("/ui/signals").text
    withdrawn = signal("RETRACTEDALARM the disk filled")
    signal("EXPIREDALARM the freeze ended", valid_until="2020-01-01")
    kept = signal("LIVEALARM the registry is down")
    assert client.post(f"/entries/{quote(withdrawn, safe='/:')}/retract", json={"reason": "a false alarm"}).status_code == 200
    page = client.get("/ui/signals").text
    assert "LIVEALARM" in page and "RETRACTEDALARM" not in page and "EXPIREDALARM" not in page
    counted = int(re.search(r"(\d+) active signal", before).group(1))  # type: ignore[union-attr]
    assert f"{counted + 1} active signal" in page, (kept, page)


def test_a_held_out_projects_page_shows_the_block_its_sessions_read(client, planted: Planted, settings: Settings) -> None:
    """In the trial's control arm a session reads the neutral block: the page must not say the memory is what it reads."""
    assert 'id="held-out"' not in client.get("/ui/project?project=org1/api").text
    held = settings.with_overrides(trial_control_percent=100, trial_salt="a-salt-for-the-pages")
    with TestClient(create_app(held)) as other:
        page = other.get("/ui/project?project=org1/api").text
        read = other.get("/feed", params={"project": "org1/api", "format": "markdown", "session_id": "ui-held-1"}).text
    assert 'id="held-out"' in page and "No memory is shown in this block." in read
    assert html.escape(read.strip(), quote=False) in page  # the very text a session of it reads
