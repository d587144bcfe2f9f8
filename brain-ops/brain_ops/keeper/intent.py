"""Per-project intent for the keeper: derived from hot arcs, or one LLM call for all projects.

Without an LLM endpoint (``settings.llm_base_url`` unset, or ``--no-ai``) each
project's intent is derived from its hottest arcs by
``brain_core.intent.derive_intent``. With an OpenAI-compatible endpoint the
keeper makes exactly one chat completion call per tick, asking for a JSON
object mapping project id -> intent; every answer is capped at a sentence
boundary by the same core function, and any project the answer leaves out
(or a failed call) falls back to the derived intent, so a tick always writes
one intent per active project.

A deterministic tick (no model this tick, or its call failed) never writes
over what a model wrote while it is current: a project intent whose
``source`` is ``llm`` stays until a newer model intent replaces it or it is
older than ``BRAIN_INTENT_MODEL_MAX_AGE_HOURS`` (then the derived one);
the fleet ``intent.md`` follows upstream's rule, where only a model's apply
writes over a model's intent.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import httpx

from brain_core.feed.intent import INTENT_MAX_CHARS, ArcDigest, derive_intent, intent_prompt, parse_intent_map
from brain_core.times import parse_time
from brain_core.vault import frontmatter
from brain_kernel.errors import BrainError
from brain_kernel.settings import Settings
from brain_kernel.ticks.llm import DEFAULT_MODEL, LLMError, chat_completion

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
            model=settings.llm_model or DEFAULT_MODEL,
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


MODEL_SOURCE = "llm"  # the ``source`` of an intent a model wrote (brain apply, the LLM tick)
DERIVED_SOURCE = "derived"


def written_by_model(text: str | None) -> bool:
    """Whether a fleet ``intent.md`` is a model's: ours say ``source: llm``, upstream's (only its AI apply wrote one) say none."""
    if text is None:
        return False
    return str(frontmatter.parse(text).meta.get("source") or MODEL_SOURCE) != DERIVED_SOURCE


def model_intent_current(text: str | None, now: dt.datetime, max_age: dt.timedelta) -> bool:
    """Whether a project intent file holds a model's intent generated at most ``max_age`` ago (a deterministic tick keeps it)."""
    if text is None:
        return False
    meta = frontmatter.parse(text).meta
    generated = parse_time(meta.get("generated"))
    return str(meta.get("source") or "") == MODEL_SOURCE and generated is not None and now - generated <= max_age
