"""The API's OpenAPI document: valid by a maintained validator, readable operation ids, auth where it applies."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from openapi_spec_validator import validate

from brain_api.app import create_app
from tests.support.harness import make_settings


@pytest.fixture(scope="module")
def document(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    settings = make_settings(Path(tmp_path_factory.mktemp("openapi")), None)
    return create_app(settings.with_overrides(tokens=["0penapi-t0ken-0123456789"])).openapi()


def _operations(document: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {f"{method.upper()} {path}": op for path, item in document["paths"].items() for method, op in item.items()}


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
        assert operations[name]["security"] == [{"bearer": []}] and {"401", "403"} <= set(operations[name]["responses"]), name
    assert "413" in operations["POST /marker"]["responses"] and "413" not in operations["GET /feed"]["responses"]
    assert "422" not in operations["GET /projects"]["responses"]  # nothing to validate
