"""Health routes and bearer-token auth."""

from __future__ import annotations

from importlib.metadata import version
from pathlib import Path

from fastapi.testclient import TestClient

from brain_api.app import create_app
from brain_kernel.settings import Settings
from tests.support.harness import make_settings
from tests.support.openai_stub import OpenAIStub


def test_health_answers_without_auth(tmp_path: Path, database_url: str) -> None:
    settings = make_settings(tmp_path, database_url, tokens=["secret"])
    with TestClient(create_app(settings)) as client:
        body = client.get("/health").json()
        assert body == {
            "status": "ok",
            "service": "brain-api",
            "vault_root": str(settings.vault.resolve()),
            "vault_mounted": False,
            "version": version("brain-kernel"),
        }


def test_deep_health_reports_vault_database_and_schema(client: TestClient) -> None:
    response = client.get("/health/deep")
    assert response.status_code == 200, response.text
    checks = response.json()["checks"]
    assert checks["vault"]["ok"] and checks["database"]["ok"]
    assert checks["schema"]["ok"] and checks["schema"]["current"] == checks["schema"]["head"]
    # Upstream's clients read the embedder's check as ``embedding_api`` (UPSTREAM.md 2), with its keys.
    api = checks["embedding_api"]
    assert {"ok", "model", "api_base", "model_dim", "schema_dim", "dim_match", "latency_ms"} <= set(api)
    assert api["api_base"] is None  # the offline model: no endpoint
    assert {k: v for k, v in api.items() if k != "api_base"} == checks["embeddings"]


def test_deep_health_is_degraded_and_ready_is_503_when_the_database_is_gone(tmp_path: Path) -> None:
    settings = make_settings(tmp_path, "postgresql://nobody@127.0.0.1:1/none")
    (tmp_path / "vault").mkdir()
    with TestClient(create_app(settings)) as client:
        deep = client.get("/health/deep")
        ready = client.get("/health/ready")
        for answer in (
            client.get("/feed", params={"project": "acme/web"}),
            client.get("/projects"),
            client.post("/marker", json={"type": "lesson", "content": "x"}),
        ):
            assert answer.status_code == 503 and answer.json()["detail"].startswith("database unavailable: "), answer.text
    assert deep.status_code == 200 and deep.json()["status"] == "degraded"  # upstream: always 200
    assert deep.json()["checks"]["database"]["ok"] is False and deep.json()["checks"]["vault"]["writable"] is True
    assert ready.status_code == 503 and ready.json()["status"] == "degraded"


def test_ready_is_200_when_everything_answers(client: TestClient) -> None:
    ready = client.get("/health/ready")
    assert ready.status_code == 200 and ready.json()["status"] == "ok"


def test_auth_is_enforced_when_tokens_are_configured(tmp_path: Path, database_url: str) -> None:
    settings = make_settings(tmp_path, database_url, tokens=["t1", "t2"])
    (tmp_path / "vault").mkdir()
    with TestClient(create_app(settings)) as client:
        missing = client.get("/health/deep")
        assert missing.status_code == 401 and missing.json() == {"detail": "missing bearer token"}
        wrong = client.get("/health/deep", headers={"Authorization": "Bearer nope"})
        assert wrong.status_code == 401 and wrong.json() == {"detail": "invalid token"}  # upstream: 401, never 403
        assert client.get("/health/deep", headers={"Authorization": "bearer t2"}).status_code == 200  # the scheme is case-insensitive (ADR 0033)
        assert client.get("/health/deep", headers={"Authorization": "Bearer t2"}).status_code == 200


def test_settings_accept_upstream_aliases() -> None:
    env = {"VAULT_ROOT": "/srv/vault", "POSTGRES_URL": "postgresql://a@b/c", "KB_ROUTER_TOKEN": "x,y"}
    import os
    from unittest import mock

    with mock.patch.dict(os.environ, env, clear=False):
        for key in ("BRAIN_VAULT", "DATABASE_URL", "BRAIN_TOKENS", "KB_ROUTER_TOKENS"):
            os.environ.pop(key, None)
        settings = Settings()
    assert settings.vault == Path("/srv/vault")
    assert settings.database_url == "postgresql://a@b/c"
    assert settings.tokens == ["x", "y"]


class _Models(OpenAIStub):
    def __init__(self, status: int, ids: list[str]) -> None:
        super().__init__()
        self.status, self.ids = status, ids

    def respond_get(self, path: str) -> tuple[int, object]:
        return self.status, {"object": "list", "data": [{"id": i, "object": "model"} for i in self.ids]}


def test_deep_health_asks_the_llm_endpoint_for_its_models_and_readiness_does_not(tmp_path: Path, database_url: str) -> None:
    """Upstream's ``checks.inference`` (UPSTREAM.md 1.3); an LLM outage degrades deep health but never readiness."""
    for status, ok in ((200, True), (401, False)):
        with _Models(status, ["brain-brief", "brain-classify"]) as stub:
            (folder := tmp_path / str(status)).mkdir()
            (folder / "vault").mkdir()
            settings = make_settings(folder, database_url).with_overrides(llm_base_url=stub.url, llm_api_key="sk-test-key")
            with TestClient(create_app(settings)) as client:
                deep, ready = client.get("/health/deep").json(), client.get("/health/ready")
        inference = deep["checks"]["inference"]
        assert inference["ok"] is ok and inference["url"] == f"{stub.url}/models" and inference["http_status"] == status
        assert [(r["path"], r["auth"]) for r in stub.requests] == [("/v1/models", "Bearer sk-test-key")]
        assert deep["status"] == ("ok" if ok else "degraded")
        if ok:
            assert inference["model_count"] == 2 and inference["classify_model"] == "brain-classify" and inference["classify_model_available"] is True
        assert ready.status_code == 200 and "inference" not in ready.json()["checks"]


def test_deep_health_has_no_inference_check_without_an_llm_endpoint(client: TestClient) -> None:
    assert "inference" not in client.get("/health/deep").json()["checks"]  # a deterministic deployment is a valid one
