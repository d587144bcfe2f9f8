"""The API's OpenAPI document: valid by a maintained validator, readable operation ids, auth where it applies,
a typed success on every operation, error statuses only where they can happen, and real answers that match it."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any, get_args

import pytest
from fastapi.testclient import TestClient
from openapi_spec_validator import validate
from pydantic import BaseModel, TypeAdapter

from brain_api.app import api_routes, create_app
from tests.support.harness import make_settings

JSON = "application/json"
# Operations whose success is a redirect, never a 2xx: the sign-in forms.
REDIRECTS = {"POST /ui/signin", "POST /ui/signout"}
LOOKUPS = {
    "GET /entries/{entry_id}",
    "POST /entries/{entry_id}/retract",
    "POST /entries/{entry_id}/expire",
    "GET /vault/read",
    "GET /arcs/{cluster_id}",
    "GET /by-key/{key}",
    "GET /ui/project",
}
PROJECT_LOOKUPS = {
    "GET /feed",
    "GET /entries",
    "GET /vault/search",
    "POST /vault/write_inbox",
    "POST /ingest",
    "POST /ingest_with_files",
    "POST /search",
    "POST /recall",
    "POST /pulls",
    "GET /ui/project",
}
SCOPE_REFUSALS = {
    "POST /sessions",
    "POST /marker",
    "GET /feed",
    "GET /entries",
    "POST /entries/{entry_id}/retract",
    "POST /entries/{entry_id}/expire",
    "GET /vault/search",
    "POST /vault/write_inbox",
    "POST /ingest",
    "POST /ingest_with_files",
    "POST /embed",
    "POST /index_artifact",
    "POST /search",
    "POST /recall",
    "POST /pulls",
    "POST /prune",
    "POST /ui/signin",
    "POST /ui/signout",
}
EMBEDDINGS = {"POST /embed", "POST /index_artifact", "POST /search", "POST /recall"}
NO_DATABASE = {
    "GET /health",
    "GET /health/deep",
    "GET /health/ready",
    "GET /signal",
    "GET /ui/signin",
    "POST /ui/signin",
    "POST /ui/signout",
    "GET /ui/style.css",
}


@pytest.fixture(scope="module")
def document(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    settings = make_settings(Path(tmp_path_factory.mktemp("openapi")), None)
    return create_app(settings.with_overrides(tokens=["0penapi-t0ken-0123456789"])).openapi()


def _operations(document: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {f"{method.upper()} {path}": op for path, item in document["paths"].items() for method, op in item.items()}


def _errors(operation: dict[str, Any]) -> set[str]:
    return {status for status in operation["responses"] if status[0] in "45"}


def test_the_document_is_valid_openapi(document: dict[str, Any]) -> None:
    validate(document)  # openapi-spec-validator: the 3.1 schema and its references


def test_operation_ids_are_the_route_functions_names(document: dict[str, Any]) -> None:
    ids = [op["operationId"] for op in _operations(document).values()]
    assert len(ids) == len(set(ids))
    assert {"get_feed", "post_marker", "health", "get_metrics", "list_entries"} <= set(ids)
    assert not [i for i in ids if i.endswith(("_get", "_post"))], ids


def test_auth_errors_and_the_bearer_scheme_only_behind_the_bearer_check(document: dict[str, Any]) -> None:
    assert document["components"]["securitySchemes"]["bearer"] == {"type": "http", "scheme": "bearer", "description": "A token of BRAIN_TOKENS."}
    operations = _operations(document)
    for name in ("GET /health", "GET /health/ready"):
        assert "security" not in operations[name] and not {"401", "403", "413", "422"} & set(operations[name]["responses"]), name
    assert "503" not in operations["GET /health"]["responses"]  # liveness
    for name in ("POST /marker", "GET /feed", "GET /metrics", "GET /health/deep"):
        assert operations[name]["security"] == [{"bearer": []}] and "401" in operations[name]["responses"], name
    for name in ("POST /marker", "GET /feed"):  # 403 is a scope refusal: only where a token bound to projects is refused
        assert "403" in operations[name]["responses"], name
    for name in ("GET /metrics", "GET /health/deep"):
        assert "403" not in operations[name]["responses"], name
    assert "413" in operations["POST /marker"]["responses"] and "413" not in operations["GET /feed"]["responses"]
    assert "422" not in operations["GET /projects"]["responses"]  # nothing to validate
    assert {name for name, op in operations.items() if "security" in op} == {
        name for name in operations if not name.startswith(("GET /health", "GET /ui", "POST /ui"))
    } | {"GET /health/deep"}
    for name, operation in operations.items():
        if "security" in operation:
            assert operation["responses"]["401"]["content"] == {JSON: {"schema": {"$ref": "#/components/schemas/ErrorBody"}}}, name
    assert "security" not in operations["POST /ui/signin"] and set(operations["POST /ui/signin"]["responses"]["401"]["content"]) == {"text/html"}


def _typed(schema: dict[str, Any], document: dict[str, Any]) -> bool:
    """A JSON schema that names its fields: properties, a reference to a schema with them, or a union of those."""
    if "$ref" in schema:
        return _typed(document["components"]["schemas"][schema["$ref"].rsplit("/", 1)[-1]], document)
    if "anyOf" in schema or "oneOf" in schema:
        return all(_typed(s, document) for s in schema.get("anyOf", schema.get("oneOf")))
    return bool(schema.get("properties"))


def test_every_operation_answers_a_typed_success(document: dict[str, Any]) -> None:
    untyped = []
    for name, operation in _operations(document).items():
        successes = {status: answer for status, answer in operation["responses"].items() if status[0] == "2"}
        if name in REDIRECTS:
            assert not successes and "303" in operation["responses"], name
            continue
        if not successes:
            untyped.append(f"{name}: no 2xx")
        for status, answer in successes.items():
            content = answer.get("content") or {}
            if not content:
                untyped.append(f"{name} {status}: no content")
            for media, body in content.items():
                schema = body.get("schema", {})
                ok = _typed(schema, document) if media == JSON else schema.get("type") == "string"
                if not ok:
                    untyped.append(f"{name} {status} {media}: {schema}")
    assert not untyped, "\n".join(untyped)


def test_non_json_answers_declare_their_media_type(document: dict[str, Any]) -> None:
    operations = _operations(document)
    assert set(operations["GET /metrics"]["responses"]["200"]["content"]) == {"text/plain"}
    assert set(operations["GET /ui/style.css"]["responses"]["200"]["content"]) == {"text/css"}
    assert set(operations["GET /ui"]["responses"]["200"]["content"]) == {"text/html"}
    assert set(operations["GET /feed"]["responses"]["200"]["content"]) == {JSON, "text/markdown"}
    feed = operations["GET /feed"]["responses"]["200"]["content"][JSON]["schema"]
    assert {s["$ref"].rsplit("/", 1)[-1] for s in feed["anyOf"]} == {"Feed", "FeedProvenance"}


def test_error_statuses_are_listed_only_where_they_can_happen(document: dict[str, Any]) -> None:
    operations = _operations(document)
    assert {name for name, op in operations.items() if "404" in op["responses"]} == LOOKUPS
    assert {name for name, op in operations.items() if "409" in op["responses"]} == PROJECT_LOOKUPS
    assert {name for name, op in operations.items() if "403" in op["responses"]} == SCOPE_REFUSALS
    assert {name for name, op in operations.items() if "502" in op["responses"]} == EMBEDDINGS
    assert {name for name, op in operations.items() if "503" not in op["responses"]} == NO_DATABASE - {"GET /health/ready"}
    for name, operation in operations.items():
        has_body = "requestBody" in operation
        assert ("413" in operation["responses"]) == has_body, name
        assert not has_body or "400" in operation["responses"], name  # a body that cannot be parsed
        assert ("422" in operation["responses"]) == (has_body or bool(operation.get("parameters"))), name
        assert _errors(operation) <= {"400", "401", "403", "404", "409", "413", "422", "502", "503"}, name


def test_error_bodies_are_the_error_body_or_the_routes_own(document: dict[str, Any]) -> None:
    error_body = {JSON: {"schema": {"$ref": "#/components/schemas/ErrorBody"}}}
    for name, operation in _operations(document).items():
        for status in _errors(operation):
            content = operation["responses"][status]["content"]
            if name.startswith(("GET /ui", "POST /ui")) and status not in ("413", "422", "503", "400"):
                assert set(content) == {"text/html"}, (name, status)  # the pages' own refusals are pages
            elif name == "GET /health/ready":
                assert content == {JSON: {"schema": {"$ref": "#/components/schemas/HealthReport"}}}  # not ready: the report
            else:
                assert content == error_body, (name, status)
    assert "HTTPValidationError" not in document["components"]["schemas"]


# -- real answers against the document ------------------------------------------------------------


def _undeclared(value: Any, where: str = "") -> Iterator[str]:
    """Keys of a validated answer that its model does not declare, with where they are."""
    if isinstance(value, BaseModel):
        yield from (f"{where}.{key}" for key in value.model_extra or {})
        for name in type(value).model_fields:
            yield from _undeclared(getattr(value, name), f"{where}.{name}")
    elif isinstance(value, list):
        for i, item in enumerate(value):
            yield from _undeclared(item, f"{where}[{i}]")
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from _undeclared(item, f"{where}.{key}")


def _declares(model: Any, body: Any) -> list[str]:
    """What of ``body`` the model does not declare (it must validate)."""
    return list(_undeclared(TypeAdapter(model).validate_python(body)))


def _answer_model(method: str, path: str, status: int) -> Any:
    """The model a route documents for ``status``: the one under ``responses``, else its response_model."""
    route = api_routes()[(path, method)]
    model = route.responses.get(status, {}).get("model", route.response_model)
    assert (isinstance(model, type) and issubclass(model, BaseModel)) or get_args(model), (method, path, model)  # never Any
    return model


def test_real_answers_match_their_documented_models(client: TestClient, settings: Any) -> None:
    """Every JSON route's answer, as the app gives it, validates against its model and has no key the model misses."""
    project = {"project": "acme/app"}
    lesson = client.post(
        "/marker", json={"type": "lesson", "content": "Pin the clock.", "attrs": {**project, "commit": "0" * 40, "paths": ["src/a.py"], "session_id": "s-1"}}
    )
    replay = client.post(
        "/marker", json={"type": "lesson", "content": "Pin the clock.", "attrs": {**project, "commit": "0" * 40, "paths": ["src/a.py"], "session_id": "s-1"}}
    )
    keyed = {"X-Idempotency-Key": "k-" + uuid.uuid4().hex}
    client.post("/marker", json={"type": "milestone", "content": "Shipped.", "attrs": project}, headers=keyed)
    mismatch = client.post("/marker", json={"type": "milestone", "content": "Shipped again.", "attrs": project}, headers=keyed)
    assert replay.json()["idempotent_replay"] and mismatch.json()["body_mismatch"]
    entry_id = lesson.json()["entry_id"]
    arc = settings.vault / "clusters" / "2026-01-01" / "arc-one.md"
    arc.parent.mkdir(parents=True, exist_ok=True)
    arc.write_text("---\ncluster_id: arc-one\ntitle: One\nproject: app\ncreated: 2026-01-01T10:00:00Z\n---\nBody.\n")
    tick = client.post("/tick?dry_run=true").json()["job_id"]
    inbox = client.post("/vault/write_inbox", data={"title": "A note", "content": "Some text.", "tags": "a,b"})
    note = inbox.json()["path"]
    calls: list[tuple[str, str, str, dict[str, Any]]] = [
        ("POST", "/marker", "/marker", {"json": {"type": "signal", "content": "Disk full.", "attrs": {**project, "severity": "warning"}}}),
        ("POST", "/sessions", "/sessions", {"json": {"session_id": "s-1", "cwd": "", **project}}),
        ("GET", "/health", "/health", {}),
        ("GET", "/health/deep", "/health/deep", {}),
        ("GET", "/health/ready", "/health/ready", {}),
        ("GET", "/feed", "/feed", {}),
        ("GET", "/feed", "/feed?project=acme/app", {}),
        ("GET", "/feed", "/feed?project=acme/app", {}),  # the stored answer's bytes
        ("GET", "/feed", "/feed?project=nobody/none", {}),
        ("GET", "/feed", "/feed?project=acme/app&format=provenance", {}),
        ("GET", "/entries", "/entries?project=acme/app", {}),
        ("GET", "/entries/{entry_id}", f"/entries/{entry_id.replace('#', '%23')}", {}),
        ("POST", "/entries/{entry_id}/expire", f"/entries/{entry_id.replace('#', '%23')}/expire", {"json": {"reason": "stale", "at": "2099-01-01"}}),
        ("GET", "/entries/{entry_id}", f"/entries/{entry_id.replace('#', '%23')}", {}),
        ("POST", "/entries/{entry_id}/retract", f"/entries/{entry_id.replace('#', '%23')}/retract", {"json": {"reason": "wrong"}}),
        ("GET", "/entries/{entry_id}", f"/entries/{entry_id.replace('#', '%23')}", {}),
        ("GET", "/vault/read", f"/vault/read?path={note}", {}),
        ("GET", "/vault/list", "/vault/list", {}),
        ("GET", "/vault/search", "/vault/search?q=text", {}),
        ("GET", "/vault/search", "/vault/search?q=clock&project=acme/app", {}),
        ("GET", "/signal", "/signal", {}),
        ("GET", "/arcs/{cluster_id}", "/arcs/arc-one", {}),
        ("POST", "/ingest", "/ingest", {"data": {"message": "Remember: the cache is per worker."}}),
        ("POST", "/ingest_with_files", "/ingest_with_files", {"data": {"message": "Notes."}, "files": {"files": ("n.md", b"# N\n\ntext\n")}}),
        ("GET", "/projects", "/projects", {}),
        ("POST", "/tick", "/tick?dry_run=true", {}),
        ("GET", "/tick/{job_id}", f"/tick/{tick}", {}),
        ("GET", "/tick/{job_id}", "/tick/000000000000", {}),
        ("POST", "/embed", "/embed", {"json": {"key": "doc-1", "content": "Some words to embed.", "metadata": project}}),
        ("POST", "/index_artifact", "/index_artifact", {"json": {"key": "doc-2", "content": "More words."}}),
        ("POST", "/search", "/search", {"json": {"query": "words", **project}}),
        ("POST", "/recall", "/recall", {"json": {"session_id": "s-1", "prompt": "the clock"}}),
        ("POST", "/pulls", "/pulls", {"json": {"session_id": "s-1", "project": "acme/app", "entry_ids": [entry_id], "text": "{}", "withheld_text": "{}"}}),
        ("GET", "/by-key/{key}", "/by-key/doc-1", {}),
        ("POST", "/prune", "/prune", {"json": {"producer": "nobody"}}),
    ]
    missed = []
    earlier = [("POST", "/marker", lesson), ("POST", "/marker", replay), ("POST", "/marker", mismatch), ("POST", "/vault/write_inbox", inbox)]
    seen = set()
    for method, path, answer in earlier:
        seen.add(f"{method} {path}")
        missed += [f"{method} {path}: {key}" for key in _declares(_answer_model(method, path, answer.status_code), answer.json())]
    for method, path, url, kwargs in calls:
        answer = client.request(method, url, **kwargs)
        assert answer.status_code < 300, (url, answer.status_code, answer.text)
        seen.add(f"{method} {path}")
        missed += [f"{method} {url}: {key}" for key in _declares(_answer_model(method, path, answer.status_code), answer.json())]
    assert not missed, "\n".join(missed)
    json_routes = {f"{method} {path}" for path, method in api_routes() if not path.startswith("/ui") and path != "/metrics"}
    assert json_routes <= seen, json_routes - seen


def test_answers_that_are_not_json_carry_their_documented_media_type(client: TestClient) -> None:
    client.post("/marker", json={"type": "lesson", "content": "Pin the clock.", "attrs": {"project": "acme/app"}})
    block = client.get("/feed?project=acme/app&format=markdown")
    assert block.headers["content-type"].startswith("text/markdown") and "Pin the clock." in block.text
    assert client.get("/metrics").headers["content-type"].startswith("text/plain")
    assert client.get("/ui/style.css").headers["content-type"].startswith("text/css")
    assert client.get("/ui").headers["content-type"].startswith("text/html")
