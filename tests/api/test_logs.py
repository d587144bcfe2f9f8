"""``BRAIN_LOG_FORMAT=json``: one JSON object a line, each carrying the request's id; the start-up banner."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator
from contextlib import contextmanager

from fastapi.testclient import TestClient

from brain_kernel.log_format import JsonFormatter, masked_url
from brain_kernel.settings import Settings
from tests.support.harness import Served


@contextmanager
def _json_lines(name: str) -> Iterator[io.StringIO]:
    """The lines ``name`` logs while the block runs, through the server's JSON formatter."""
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(JsonFormatter())
    logger = logging.getLogger(name)
    logger.addHandler(handler)
    previous, logger.level = logger.level, logging.INFO
    try:
        yield stream
    finally:
        logger.removeHandler(handler)
        logger.level = previous


def test_a_json_log_line_carries_the_request_id_the_client_sent_or_a_new_one(settings: Settings) -> None:
    from brain_api.app import create_app

    with TestClient(create_app(settings.with_overrides(log_format="json"))) as client, _json_lines("brain.access") as stream:
        sent = client.get("/health", headers={"X-Request-ID": "req-42.a"})
        made = client.get("/entries/none", headers={"X-Request-ID": 'forged" id\nx'})  # not usable: replaced
    assert sent.headers["x-request-id"] == "req-42.a"
    assert len(made.headers["x-request-id"]) == 32 and made.headers["x-request-id"] != 'forged" id\nx'
    first, second = (json.loads(line) for line in stream.getvalue().splitlines())
    assert first["request_id"] == "req-42.a" and first["logger"] == "brain.access" and first["level"] == "info"
    assert (first["method"], first["route"], first["status"]) == ("GET", "/health", 200) and first["duration_ms"] >= 0
    assert second["request_id"] == made.headers["x-request-id"] and second["route"] == "/entries/{entry_id:path}"
    assert second["status"] == 404


def test_text_logs_answer_the_request_id_too_and_write_no_access_line_of_their_own(settings: Settings, client: TestClient) -> None:
    with _json_lines("brain.access") as stream:
        answer = client.get("/health")
    assert len(answer.headers["x-request-id"]) == 32 and stream.getvalue() == ""


def test_the_database_password_never_reaches_the_banner(served: Served) -> None:
    assert masked_url("postgresql://brain:s3cret@pg:5432/brain") == "postgresql://brain:***@pg:5432/brain"
    assert masked_url("postgresql+psycopg://u@h/db") == "postgresql+psycopg://u@h/db" and masked_url(None) == "(none)"
    log = (served.settings.home / "serve.log").read_text()
    banner = next(line for line in log.splitlines() if "brain serve: url http://" in line)
    assert f"vault {served.settings.vault.resolve()}" in banner and "version 0.1.0" in banner and "workers 4" in banner
    assert "auth " in banner and "database postgresql" in banner
