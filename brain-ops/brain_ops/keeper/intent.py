"""Per-project intent for the keeper: derived from hot arcs, or one LLM call for all projects.

Without an LLM endpoint (``settings.llm_base_url`` unset, or ``--no-ai``) each
project's intent is derived from its hottest arcs by
``brain_core.intent.derive_intent``. With an OpenAI-compatible endpoint the
keeper makes exactly one chat completion call per tick, asking for a JSON
object mapping project id -> intent; every answer is capped at a sentence
boundary by the same core function, and any project the answer leaves out
(or a failed call) falls back to the derived intent, so a tick always writes
one intent per active project.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import httpx

from brain_core.feed.intent import INTENT_MAX_CHARS, ArcDigest, derive_intent, intent_prompt, parse_intent_map
from brain_kernel.errors import BrainError
from brain_kernel.settings import Settings
from brain_kernel.ticks.llm import LLMError, chat_completion

SYSTEM_PROMPT = (
    "You summarise what an operator is working on, per software project, for AI coding agents "
    "starting a session. Be concrete, one to three complete sentences per project. Answer with JSON only."
)
DEFAULT_TIMEOUT_S = 60.0


class IntentError(BrainError):
    """The LLM endpoint failed or answered something unusable."""


@dataclass
class IntentResult:
    """Intents per project id, and how each was made."""

    intents: dict[str, str] = field(default_factory=dict)
    sources: dict[str, str] = field(default_factory=dict)
    llm_calls: int = 0
    error: str | None = None


def llm_intent_map(
    settings: Settings,
    projects: Mapping[str, Sequence[ArcDigest]],
    *,
    max_chars: int = INTENT_MAX_CHARS,
    transport: httpx.BaseTransport | None = None,
    timeout_s: float = DEFAULT_TIMEOUT_S,
) -> dict[str, str]:
    """One chat completion call returning {project id: intent}; IntentError on any failure."""
    messages = [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": intent_prompt(projects, max_chars)}]
    try:
        answer = chat_completion(
            settings,
            messages,
            model=settings.llm_model or "default",
            timeout_s=timeout_s,
            transport=transport,
            temperature=0.2,
            response_format={"type": "json_object"},
        )
    except LLMError as exc:
        raise IntentError(str(exc)) from None
    return parse_intent_map(answer, projects.keys(), max_chars)


def project_intents(
    settings: Settings,
    projects: Mapping[str, Sequence[ArcDigest]],
    *,
    use_ai: bool,
    max_chars: int = INTENT_MAX_CHARS,
    transport: httpx.BaseTransport | None = None,
) -> IntentResult:
    """One intent per project: from the LLM when configured and allowed, else (or on failure) derived."""
    result = IntentResult()
    answered: dict[str, str] = {}
    if use_ai and settings.llm_base_url and projects:
        result.llm_calls = 1
        try:
            answered = llm_intent_map(settings, projects, max_chars=max_chars, transport=transport)
        except IntentError as exc:
            result.error = str(exc)
    for project, arcs in sorted(projects.items()):
        if project in answered:
            result.intents[project], result.sources[project] = answered[project], "llm"
        else:
            result.intents[project] = derive_intent(arcs, subject=project, max_chars=max_chars)
            result.sources[project] = "derived"
    return result
