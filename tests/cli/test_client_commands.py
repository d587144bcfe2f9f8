"""The client commands against a real running kernel (``brain serve``): status, feed, marker, search, projects,
``brain tick --remote --wait``, ``brain --version``; the URL and token from flags, ``BRAIN_TOKEN`` or the client file."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from importlib.metadata import version
from pathlib import Path

import pytest
from sqlalchemy import text

from brain_kernel.settings import KERNEL_VARIABLES, Settings
from tests.support.harness import Served, brain, make_settings, serve_in_thread
from tests.support.servers import free_port

TOKEN = "client-t0k"
LESSON = "Run the migrations before the integration suite, or the fixtures see an old schema"


@pytest.fixture
def client_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A user's config folder of its own (``$XDG_CONFIG_HOME/brain/client.json`` is the client file)."""
    config = tmp_path / "config"
    (config / "brain").mkdir(parents=True)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(config))
    return config / "brain" / "client.json"


def _json(result: object) -> dict:
    assert result.exit_code == 0, (result.exit_code, result.stderr)  # type: ignore[attr-defined]
    return json.loads(result.stdout)  # type: ignore[attr-defined]


def test_the_client_commands_read_and_write_through_the_kernel(served: Served, tmp_path: Path, client_home: Path) -> None:
    client_home.write_text(json.dumps({"url": served.base}))
    local = make_settings(tmp_path, None)  # nothing local: no database, no vault

    posted = _json(brain(local, "marker", "lesson", LESSON, "--project", "acme/api", "--attr", "title=migrations first"))
    assert posted["ok"] is True and posted["marker_type"] == "lesson" and posted["project"] == "api"
    assert LESSON in (served.settings.vault / posted["vault_path"]).read_text()  # the kernel's vault, not a local one
    assert not (tmp_path / "vault").exists()

    listed = _json(brain(local, "projects"))
    assert [p["key"] for p in listed["projects"]] == ["api"] and listed["projects"][0]["counts"]["lesson"] == 1

    feed = _json(brain(local, "feed", "acme/api"))
    assert feed["project"]["key"] == "api" and feed["scope"] == "project"
    block = brain(local, "feed", "acme/api", "--markdown")
    assert block.exit_code == 0 and "migrations" in block.stdout and not block.stdout.lstrip().startswith("{")

    embedded = brain(served.settings, "embed")  # search reads embedded entries (a tick embeds them too, ADR 0046)
    assert embedded.exit_code == 0, embedded.stderr
    found = _json(brain(local, "search", "migrations integration suite", "--project", "api"))
    assert found["count"] >= 1 and all(r["metadata"].get("project") == "api" for r in found["results"])

    status = _json(brain(local, "status"))
    assert status["url"] == served.base and status["version"] == version("brain-kernel")
    assert status["checks"]["vault"] and status["checks"]["database"]
    assert status["entries"]["lesson"] == 1 and status["projects"] == 1 and status["embed_pending"] == 0  # brain embed ran
    assert set(status["queue"]) >= {"pending", "running", "completed", "failed"} and "last_tick" in status


def test_tick_remote_wait_follows_the_queued_tick_to_its_end(served: Served, tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(KERNEL_VARIABLES)} | {"XDG_CONFIG_HOME": str(tmp_path / "none")}
    waiting = subprocess.Popen(
        [sys.executable, "-m", "brain_cli", "tick", "--remote", "--wait", "--no-ai", "--timeout", "60", "--url", served.base],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 30
        while not served.db.execute(text("select count(*) from tick_requests")).scalar_one():
            assert time.monotonic() < deadline and waiting.poll() is None, waiting.stderr.read() if waiting.stderr else ""
            time.sleep(0.02)
            served.db.rollback()
        drained = brain(served.settings, "tick-drain")
        assert drained.exit_code == 0, drained.stderr
        out, err = waiting.communicate(timeout=60)
    finally:
        if waiting.poll() is None:
            waiting.kill()
    assert waiting.returncode == 0, err
    answer = json.loads(out)
    assert answer["status"] == "completed" and answer["waited"] is True and answer["no_ai"] is True and answer["note"] == "tick completed"

    queued = _json(brain(make_settings(tmp_path, None), "tick", "--remote", "--url", served.base))
    assert queued["status"] == "pending" and queued["waited"] is False


def test_a_kernel_that_does_not_answer_is_one_error_line(tmp_path: Path, client_home: Path) -> None:
    down = f"http://127.0.0.1:{free_port()}"
    for args in (("status",), ("projects",), ("feed",), ("search", "x"), ("marker", "lesson", "x"), ("tick", "--remote")):
        result = brain(make_settings(tmp_path, None), *args, "--url", down)
        assert result.exit_code == 1, (args, result.stdout)
        assert result.stderr.startswith(f"error: kernel unavailable: cannot reach {down}") and len(result.stderr.strip().splitlines()) == 1


def test_the_token_comes_from_brain_token_or_the_client_file_for_its_own_url(tmp_path: Path, database_url: str, client_home: Path) -> None:
    (tmp_path / "guarded").mkdir()
    settings = make_settings(tmp_path / "guarded", database_url, tokens=[TOKEN])
    with serve_in_thread(settings) as base:  # the client is the subject: the kernel runs in this process
        local = make_settings(tmp_path, None)
        refused = brain(local, "projects", "--url", base)
        assert refused.exit_code == 1 and "wants a token and none was sent" in refused.stderr and TOKEN not in refused.stderr
        assert _json(brain(make_settings(tmp_path, None, client_token=TOKEN), "projects", "--url", base))["count"] == 0

        client_home.write_text(json.dumps({"url": base, "token": TOKEN}))
        assert _json(brain(local, "projects"))["count"] == 0  # the client file's URL and token
        other = base.replace("127.0.0.1", "localhost")
        assert brain(local, "projects", "--url", other).exit_code == 1  # another URL never gets the file's token


def test_version_is_the_distribution_s(tmp_path: Path) -> None:
    result = brain(make_settings(tmp_path, None), "--version")
    assert result.exit_code == 0 and result.stdout.strip() == f"brain {version('brain-kernel')}"


def test_tick_flags_of_the_remote_form_need_remote(settings: Settings) -> None:
    result = brain(settings, "tick", "--wait")
    assert result.exit_code == 2 and "--remote" in result.stderr
