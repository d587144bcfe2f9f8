"""The LLM half of the keeper tick (UPSTREAM.md 5.3 phases 2 to 4): prompt, one chat call, the answer applied.

``brain tick`` without ``--no-ai`` and with an endpoint configured runs the
deterministic pass (its intents derived), then this: the prompt of
``brain_core.tick_prompt`` built from the index the pass just refreshed
(the hottest 250 arcs' files read for their edges, markers and opening
prompt), secrets scrubbed; one ``POST {BRAIN_LLM_BASE_URL}/chat/completions``
(``BRAIN_LLM_MODEL``, 4096 tokens, temperature 0.3, 120 s); the answer
recorded, scrubbed, in ``brain-feed/ticks/<stamp>-ai-output.md`` and applied
by ``brain_ops.keeper.apply`` (the same code as ``brain apply``), whose intents
replace the derived ones for the projects the answer names. The feed files
the answer redraws join the pass's in the tick's ``FeedWriter``, written once
after this (ADR 0039); the prompt reads the pass's fleet intent from it.

It degrades instead of failing (upstream crashed on an empty URL or a read
timeout, and returned early after an AI error; ADR 0017): without an
endpoint the tick stays deterministic; an endpoint that fails or answers
nothing usable leaves the deterministic half's files as they are, with the
error in the summary. A dry run makes no call (upstream's rule).
"""

from __future__ import annotations

import datetime as dt
import time
from typing import Any

import httpx
from sqlalchemy.orm import Session

from brain_core.feed.collect import collect_signals
from brain_core.feed.sections import digest, project_label
from brain_core.progress import SILENT, Progress
from brain_core.redact import scrub
from brain_core.tick_prompt import MAX_ARCS, MAX_SYNTH_ARCS, PromptArc, PromptInputs, PromptSignal, SynthArc, build_prompt, opened_with, previous_intent
from brain_core.vault import frontmatter
from brain_core.vault.inline import parse_markers
from brain_core.vault.layout import FEED_DIR, FLEET_INTENT_FILE
from brain_kernel.feed import feed_repo
from brain_kernel.settings import Settings
from brain_kernel.ticks.llm import DEFAULT_MODEL, LLMError, chat_completion
from brain_kernel.vault_store import Vault
from brain_ops.keeper.apply import apply_ai_output
from brain_ops.keeper.feed_writer import FeedWriter

TIMEOUT_S = 120.0
MAX_TOKENS = 4096
TEMPERATURE = 0.3
LESSON_DAYS = 14
ACTIVE_HOURS = 72
AI_OUTPUT_DIR = f"{FEED_DIR}/ticks"


def _edges_of(cluster_id: str, meta: dict[str, Any], markers: list[Any]) -> list[tuple[str, str, str]]:
    edges = [(cluster_id, str(m.attrs.get("type") or "related").lower(), str(m.attrs["target"])) for m in markers if m.type == "edge" and m.attrs.get("target")]
    for item in meta.get("edges") or []:
        if isinstance(item, dict):
            edges += [(cluster_id, str(kind).lower(), str(target)) for kind, target in item.items() if target]
    return edges


def prompt_inputs(session: Session, vault: Vault, settings: Settings, *, now: dt.datetime, feed: FeedWriter | None = None) -> PromptInputs:
    """What the prompt shows, from the index and the hottest arcs' files; ``feed``: the tick's feed, not written yet."""
    arcs = feed_repo.hot_arcs(session, limit=MAX_ARCS)
    rows: list[PromptArc] = []
    edges: list[tuple[str, str, str]] = []
    synth: list[SynthArc] = []
    for record in arcs:
        d = digest(record)
        try:
            doc = frontmatter.parse(vault.read_text(record.vault_path))
        except (OSError, UnicodeDecodeError):
            doc = frontmatter.Document()
        markers = parse_markers(doc.body)
        sessions = record.meta.get("source_sessions")
        count = len(sessions) if isinstance(sessions, list) else (1 if sessions else 0)
        rows.append(PromptArc(d.cluster_id, d.heat, d.region, d.status, d.title, project_label(record), count, sum(1 for m in markers if m.type != "edge")))
        edges += _edges_of(d.cluster_id, doc.meta, markers)
        if not d.summary and len(synth) < MAX_SYNTH_ARCS:
            of = {kind: tuple(m.content for m in markers if m.type == kind and m.content) for kind in ("decision", "milestone", "lesson")}
            created = str(record.meta.get("created") or "")
            synth.append(SynthArc(d.cluster_id, record.repo or record.project or "-", created, d.heat, d.status, opened_with(doc.body, d.title), **_plural(of)))
    signals = collect_signals(feed_repo.entries_of_kinds(session, ["signal"]), now, stale_days=settings.stale_signal_days).kept
    lessons = feed_repo.recent_of_kind(session, "lesson", since=now - dt.timedelta(days=LESSON_DAYS), limit=50)
    try:
        intent = feed.text(FLEET_INTENT_FILE) if feed is not None else (vault.read_text(FLEET_INTENT_FILE) if vault.exists(FLEET_INTENT_FILE) else None)
        intent_body = frontmatter.parse(intent).body if intent is not None else ""
    except (OSError, UnicodeDecodeError):
        intent_body = ""
    return PromptInputs(
        arcs=rows,
        arcs_total=feed_repo.count_of_kind(session, "arc"),
        edges=edges,
        signals=[PromptSignal(s.severity or "info", str(s.meta.get("source") or "unknown"), s.content or s.title or "") for s in signals],
        lessons=[r.content or r.title or "" for r in lessons],
        lessons_total=feed_repo.count_of_kind(session, "lesson"),
        unsynthesized=synth,
        previous_intent=previous_intent(intent_body),
        projects=sorted(p.id for p in feed_repo.active_projects(session, since=now - dt.timedelta(hours=ACTIVE_HOURS))),
    )


def _plural(of: dict[str, tuple[str, ...]]) -> dict[str, tuple[str, ...]]:
    return {"decisions": of["decision"], "milestones": of["milestone"], "lessons": of["lesson"]}


def run_llm_half(
    session: Session,
    vault: Vault,
    settings: Settings,
    summary: Any,
    *,
    now: dt.datetime,
    dry_run: bool,
    transport: httpx.BaseTransport | None = None,
    progress: Progress = SILENT,
    feed: FeedWriter | None = None,
) -> dict[str, Any]:
    """Phases 2 to 4 of the tick into ``summary`` (a ``keeper.TickSummary``): its ``llm_tick`` report, also returned.

    ``feed``: the tick's feed files, which the answer's join and the tick writes after this.
    """
    report: dict[str, Any] = {}
    summary.llm_tick = report
    if dry_run:
        report["ai"] = {"skipped": "dry run"}
        summary.notes.append("dry run: the LLM half of the tick is skipped (no call, nothing applied)")
        return report
    started = time.monotonic()
    progress.say("building the LLM prompt")
    prompt = build_prompt(prompt_inputs(session, vault, settings, now=now, feed=feed))
    report["prompt_gen"] = {"duration_ms": round((time.monotonic() - started) * 1000), "prompt_length": len(prompt)}
    progress.say(f"asking the LLM ({len(prompt)} characters)")
    started = time.monotonic()
    summary.llm_calls += 1
    try:
        answer = chat_completion(
            settings,
            [{"role": "user", "content": prompt}],
            model=settings.llm_model or DEFAULT_MODEL,
            timeout_s=TIMEOUT_S,
            transport=transport,
            max_tokens=MAX_TOKENS,
            temperature=TEMPERATURE,
        )
    except LLMError as exc:
        summary.llm_error = str(exc)
        report["ai"] = {"duration_ms": round((time.monotonic() - started) * 1000), "error": str(exc)}
        summary.notes.append(f"LLM call failed ({exc}): deterministic tick, intents derived from hot arcs")
        return report
    report["ai"] = {"duration_ms": round((time.monotonic() - started) * 1000), "output_length": len(answer), "error": None}
    if not answer.strip():
        summary.llm_error = "LLM answered nothing"
        summary.notes.append("the LLM answered nothing: deterministic tick, intents derived from hot arcs")
        return report
    stamp = now.astimezone(dt.timezone.utc).strftime("%Y-%m-%dT%H-%M-%SZ")
    audit = f"{AI_OUTPUT_DIR}/{stamp}-ai-output.md"
    vault.write_atomic(audit, scrub(answer))
    summary.vault_writes += 1
    started = time.monotonic()
    applied = apply_ai_output(session, vault, settings, answer, now=now, progress=progress, feed=feed)
    report["apply"] = {"duration_ms": round((time.monotonic() - started) * 1000), "result": applied.as_dict(), "ai_output": audit}
    summary.vault_writes += applied.vault_writes
    summary.files_written.extend(f for f in applied.files_written if f not in summary.files_written)
    for _project in (p for p in applied.intent.get("projects", {}) if p in summary.active_projects):
        earlier = next((source for source in ("derived", "kept") if summary.intent_sources.get(source)), None)
        if earlier is not None:
            summary.intent_sources[earlier] -= 1
            if not summary.intent_sources[earlier]:
                del summary.intent_sources[earlier]
        summary.intent_sources["llm"] = summary.intent_sources.get("llm", 0) + 1
    return report
