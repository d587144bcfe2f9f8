"""What the routes answer, as ``/openapi.json`` documents it: the base of the answer models and the error statuses.

Each route module declares its answer's model next to its handler (as
``MarkerOut`` beside ``POST /marker``), on ``Answer``; this module holds
what they share. The answer models document the shapes clients rely on
field for field, so they must never change one on the wire:

- ``Answer`` keeps keys it does not declare (``extra="allow"``) instead of
  dropping them, as a ``response_model`` otherwise would;
- ``AnsweredRoute`` serialises with ``exclude_unset``, so a key the handler
  left out stays out (a declared default is never added) and one it sent as
  ``null`` stays ``null``;
- fields are declared in the order the handler writes them, as a model
  serialises in its own order.

tests/api/test_openapi.py checks real answers against their models, so a
key the handler adds and the model misses fails there (ADR 0059).

Error statuses: each route lists ``errors(...)`` for the refusals of its own
code (404 for a lookup, 409 for an ambiguous project, 403 for a scope
refusal, ...); ``brain_api.app`` adds those its shape implies (401 behind the
bearer check, 400 and 413 with a body, 422 with input, 503 with a database)
and gives every one of them the error body.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from fastapi.routing import APIRoute
from pydantic import BaseModel, ConfigDict

# Every error body is {"detail": ...}: a string for the kernel's own refusals (upstream's shape), the list of
# field errors for a request that fails validation, plus "candidates" for an ambiguous project (409).
ERROR_BODY = {
    "type": "object",
    "required": ["detail"],
    "properties": {
        "detail": {"anyOf": [{"type": "string"}, {"type": "array", "items": {"$ref": "#/components/schemas/ValidationError"}}]},
        "candidates": {"type": "array", "items": {"type": "string"}},
    },
}
FIELD_ERROR = {
    "type": "object",
    "required": ["loc", "msg", "type"],
    "properties": {
        "loc": {"type": "array", "items": {"anyOf": [{"type": "string"}, {"type": "integer"}]}},
        "msg": {"type": "string"},
        "type": {"type": "string"},
    },
}
ERRORS = {
    400: "The request is refused: a form body that cannot be parsed (JSON that is not JSON is a 422), or the route's own reason (upstream's: marker type, content, attrs' shape, a path out of the vault).",
    401: "Missing or unknown bearer token.",
    403: "The token is bound to other projects.",
    404: "Not found.",
    409: "The project key names several repositories; use one of the candidates.",
    413: "The request body is larger than BRAIN_MAX_BODY_BYTES.",
    422: "Invalid input: the field errors, or why a value cannot be used.",
    502: "The embeddings endpoint failed.",
    503: "The database or the vault is unavailable.",
}
HTML = {"text/html": {"schema": {"type": "string"}}}


def errors(*statuses: int, described: Mapping[int, str] | None = None) -> dict[int | str, dict[str, Any]]:
    """``responses=`` for the refusals a route's own code answers: each status with its usual meaning, or the route's."""
    wording = {**{status: ERRORS[status] for status in statuses}, **(described or {})}
    return {status: {"description": text} for status, text in wording.items()}


def page_errors(*statuses: int, described: Mapping[int, str] | None = None) -> dict[int | str, dict[str, Any]]:
    """``responses=`` for an operator page's refusals, which it answers as HTML pages."""
    return {status: {**entry, "content": HTML} for status, entry in errors(*statuses, described=described).items()}


SIGN_IN_FIRST: dict[int | str, dict[str, Any]] = {303: {"description": "Not signed in: redirected to the sign-in form (Location)."}}


class Answer(BaseModel):
    """The base of every answer model: keys it does not declare are kept, never dropped."""

    model_config = ConfigDict(extra="allow")


class AnsweredRoute(APIRoute):
    """A route whose answer model documents and checks the answer but adds no key to it (``exclude_unset``)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs["response_model_exclude_unset"] = True
        super().__init__(*args, **kwargs)
