"""The chat-completion client of an OpenAI-compatible endpoint, shared by the keeper and the MCP tools.

One call, one answer text. Every failure is an ``LLMError`` saying what went
wrong (an HTTP status with the start of the reply, an unreachable endpoint,
an answer that is not a chat completion); callers turn it into their own
fallback (a derived intent, upstream's bracketed brief strings).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import httpx

from brain_kernel import http_client
from brain_kernel.errors import BrainError
from brain_kernel.settings import Settings

# The model asked for when ``BRAIN_LLM_MODEL`` (``BRAIN_BRIEF_MODEL``) is unset: upstream's canonical name for the
# keeper's tick, the one its gateways route (UPSTREAM.md 6), so a deployment moved from upstream keeps its LLM half.
DEFAULT_MODEL = "brain-brief"


class LLMError(BrainError):
    """The chat endpoint failed; ``status`` is its HTTP status when it answered one, ``detail`` the reply's start."""

    def __init__(self, message: str, *, status: int | None = None, detail: str = "") -> None:
        super().__init__(message)
        self.status, self.detail = status, detail


def _headers(settings: Settings) -> dict[str, str]:
    headers = {"Content-Type": "application/json"}
    if settings.llm_api_key:
        headers["Authorization"] = f"Bearer {settings.llm_api_key}"
    return headers


def models_check(settings: Settings, *, timeout_s: float, transport: httpx.BaseTransport | None = None) -> dict[str, object]:
    """Deep health's ``inference`` check, upstream's shape (UPSTREAM.md 1.3): ``GET <base>/models``.

    ``{ok, url, http_status}``, with ``model_count``, ``classify_model`` and
    ``classify_model_available`` (some ``data[].id`` is it) on a 200, or
    ``{ok: false, url, error}`` when the endpoint cannot be reached. Never raises.
    """
    url = f"{(settings.llm_base_url or '').rstrip('/')}/models"
    try:
        with http_client.using("llm", transport) as client:
            response = client.get(url, headers=_headers(settings), timeout=timeout_s)
    except httpx.HTTPError as exc:
        return {"ok": False, "url": url, "error": f"{type(exc).__name__}: {exc}"[:300]}
    out: dict[str, object] = {"ok": response.status_code == 200, "url": url, "http_status": response.status_code}
    if response.status_code == 200:
        try:
            data = response.json().get("data")
        except (ValueError, AttributeError):
            data = None
        ids = [m.get("id") for m in data if isinstance(m, dict)] if isinstance(data, list) else []
        out.update(model_count=len(ids), classify_model=settings.classify_model, classify_model_available=settings.classify_model in ids)
    return out


def completions_url(base_url: str) -> str:
    """The chat completions URL of an OpenAI-compatible base URL (``.../v1``)."""
    base = base_url.rstrip("/")
    return base if base.endswith("/chat/completions") else f"{base}/chat/completions"


def chat_completion(
    settings: Settings,
    messages: Sequence[dict[str, str]],
    *,
    model: str,
    timeout_s: float,
    transport: httpx.BaseTransport | None = None,
    **options: Any,
) -> str:
    """One completion of ``messages`` at ``settings.llm_base_url``: its text ("" for a null content), or LLMError.

    ``options`` join the request body (temperature, max_tokens, response_format).
    """
    if not settings.llm_base_url:
        raise LLMError("no LLM endpoint configured (BRAIN_LLM_BASE_URL)")
    headers = _headers(settings)
    body = {"model": model, "messages": list(messages), **options}
    try:
        with http_client.using("llm", transport) as client:
            response = client.post(completions_url(settings.llm_base_url), json=body, headers=headers, timeout=timeout_s)
    except httpx.HTTPError as exc:
        raise LLMError(f"LLM endpoint unreachable: {type(exc).__name__}", detail=str(exc)) from None
    if response.status_code >= 400:
        raise LLMError(f"LLM endpoint answered {response.status_code}", status=response.status_code, detail=" ".join(response.text.split())[:200])
    try:
        answer = response.json()["choices"][0]["message"]["content"]
    except (ValueError, KeyError, IndexError, TypeError):
        raise LLMError("LLM answer is not a chat completion") from None
    if answer is None:
        return ""  # a null content is an empty reply, which the callers have a fallback for
    if not isinstance(answer, str):
        raise LLMError("LLM answer has no text content")
    return answer
