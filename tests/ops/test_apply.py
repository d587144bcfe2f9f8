"""brain apply and the LLM tick: recorded AI answers (tests/data/ai_output) applied to a real vault and index,
through the CLI and HTTP, and through brain tick against a real local OpenAI-compatible stub (tests/support/openai_stub.py).

One world per test: four arcs of two projects (agentihooks, openrig) written
by the ``brain cluster`` renderer with inline markers, indexed by a
``--no-ai`` tick. The answers use bullets, backticks, ``->`` and ``→``.
"""

from __future__ import annotations

import datetime as dt
import json
import shutil
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import pytest
from sqlalchemy.orm import Session

from brain_core.arcs import ArcSession, build_plan, render_arc
from brain_core.vault import frontmatter
from brain_kernel.settings import Settings
from brain_kernel.vault_store import Vault
from brain_ops.keeper.apply import apply_ai_output
from brain_ops.keeper.tick import run_tick
from tests.support.harness import brain
from tests.support.openai_stub import OpenAIStub

DATA = Path(__file__).parent.parent / "data" / "ai_output"
NOW = dt.datetime.now(dt.timezone.utc).replace(microsecond=0)
HOOKS, RIG = "the-cloud-clockwork/agentihooks", "the-cloud-clockwork/openrig"

SIGNAL_A = '<!-- @signal severity=warning source=disk-full verify="df -h /" -->\nDisk almost full on the runner\n<!-- @/signal -->'
LESSON = "<!-- @lesson -->\nPin the hook version in every rig.\n<!-- @/lesson -->"
SIGNAL_B = "<!-- @signal severity=warning source=stale-cache -->\nRig cache is stale\n<!-- @/signal -->"


def _arc(vault: Vault, sid: str, repo: str, prompt: str, *, hours_ago: float, extra: str = "", worktree: str | None = None) -> str:
    start = NOW - dt.timedelta(hours=hours_ago)
    session = ArcSession(
        session_id=sid,
        project=repo.rsplit("/", 1)[-1],
        repo=repo,
        worktree=worktree,
        project_source="git",
        cwd=f"/home/op/dev/{repo.rsplit('/', 1)[-1]}",
        start=start,
        end=start + dt.timedelta(minutes=30),
        num_tool_calls=50,
        first_user_prompt=prompt,
    )
    plan = build_plan([session])
    vault.write_atomic(plan.vault_path, render_arc(plan).rstrip("\n") + "\n\n" + extra + "\n")
    return plan.cluster_id


@dataclass
class World:
    settings: Settings
    vault: Vault
    db: Session
    ids: dict[str, str]

    def answer(self, name: str, tmp: Path) -> Path:
        text = (DATA / name).read_text()
        for key, value in self.ids.items():
            text = text.replace("{" + key + "}", value)
        out = tmp / name
        out.write_text(text)
        return out

    def path_of(self, cluster_id: str) -> str:
        return next(self.vault.rel(p) for p in self.vault.iter_files("") if p.name == f"{cluster_id}.md")

    def apply(self, answer: Path, *flags: str) -> dict:
        result = brain(self.settings, "apply", "--ai-output", str(answer), *flags)
        assert result.exit_code == 0, result.stderr
        return json.loads(result.stdout.strip().splitlines()[-1])


@pytest.fixture
def world(settings: Settings, db: Session) -> World:
    vault = Vault(settings.vault)
    ids = {
        "A": _arc(vault, "hooks-1", HOOKS, "Build the hook relay for agents", hours_ago=30, extra=f"{SIGNAL_A}\n\n{LESSON}", worktree="relay-wt"),
        "B": _arc(
            vault,
            "rig-1",
            RIG,
            "Wire the relay into the rig runner tkrigtoken",
            hours_ago=28,
            extra=f"{LESSON}\n\n{SIGNAL_B}\n\n<!-- @edge type=sibling target=x -->",
        ),
        "C": _arc(vault, "hooks-2", HOOKS, "Set up the hook test harness", hours_ago=40),
        "D": _arc(vault, "rig-2", RIG, "Document the rig runner configuration", hours_ago=50),
    }
    a = next(p for p in vault.iter_files("clusters") if p.name == f"{ids['A']}.md")
    vault.write_atomic(vault.rel(a), frontmatter.update(a.read_text(), {"summary": "The hook relay."}))
    run_tick(db, vault, settings, now=NOW, use_ai=False)
    db.commit()
    return World(settings, vault, db, ids)


def _snapshot(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_apply_reads_bullets_backticks_and_both_arrows_and_applies_each_section(world: World, tmp_path: Path, client) -> None:
    answer = world.answer("bullets_and_arrows.md", tmp_path)
    before = _snapshot(world.settings.vault)
    dry = world.apply(answer, "--dry-run")
    assert _snapshot(world.settings.vault) == before  # a dry run writes nothing
    assert dry["dry_run"] is True and dry["vault_writes"] == 0 and dry["merges_applied"] == 1

    out = world.apply(answer)
    a, b, c, d = (world.ids[k] for k in "ABCD")
    assert out["sections"] == [1, 2, 3, 4, 5, 6]
    # Edges: the strongest type per pair, targets checked, self-loops refused.
    assert {(e["source"], e["type"], e["target"], e["result"]) for e in out["edges"]} == {(c, "parent", a, "added"), (d, "sibling", a, "added")}
    reasons = {r["reason"] for r in out["refused"]}
    assert "self-loop" in reasons and "unknown arc 2026-01-01-no-such-arc-000000000000" in reasons
    assert "<!-- @edge type=parent target=" + a + " -->" in world.vault.read_text(world.path_of(c))
    # MERGE: a name for a title; B tombstoned once; A holds both projects, repos, worktrees and sessions.
    merge = out["merges"][0]
    assert merge["result"] == "merged" and merge["title"] == "Hook relay for rigs"
    a_doc = frontmatter.parse(world.vault.read_text(world.path_of(a)))
    assert a_doc.meta["title"] == "Hook relay for rigs" and a_doc.meta["project"] == "agentihooks"
    assert a_doc.meta["projects"] == ["agentihooks", "openrig"] and a_doc.meta["repos"] == [HOOKS, RIG]
    assert a_doc.meta["repo"] == HOOKS and a_doc.meta["worktrees"] == ["relay-wt"]
    assert a_doc.meta["source_sessions"] == ["hooks-1", "rig-1"] and a_doc.meta["merged_from"] == [b]
    assert f"## Merged from {b}" in a_doc.body and "tkrigtoken" in a_doc.body
    assert a_doc.body.count("Pin the hook version") == 1  # B's duplicate lesson dropped
    assert "target=x" not in a_doc.body  # B's edges dropped
    tombstones = [world.vault.rel(p) for p in world.vault.iter_files("") if p.name.startswith(b)]
    assert tombstones == [merge["tombstone"]] and tombstones[0].endswith(f"{b}.merged.md")
    assert frontmatter.parse(world.vault.read_text(tombstones[0])).meta["merged_into"] == a
    # SPLIT refused with a reason.
    assert out["splits"] == [{"arc": c, "detail": "the sessions cover two unrelated topics", "result": "refused", "reason": out["splits"][0]["reason"]}]
    assert "brain cluster" in out["splits"][0]["reason"]
    # ESCALATE keeps the other attributes; CLEAR reaches the signal A absorbed from B.
    assert '<!-- @signal severity=critical source=disk-full verify="df -h /" -->' in a_doc.body
    assert "<!-- @signal severity=resolved source=stale-cache -->" in a_doc.body and "(CLEARED: fixed by the cache flush)" in a_doc.body
    assert out["signals_applied"] == 2
    # Intent: fleet paragraph and per-project files; an unknown project refused.
    fleet = frontmatter.parse(world.vault.read_text("brain-feed/intent.md"))
    assert "wiring agent hooks into the rig fleet" in fleet.body and fleet.meta["source"] == "llm"
    hooks_intent = frontmatter.parse(world.vault.read_text(f"brain-feed/projects/{HOOKS}/intent.md"))
    assert hooks_intent.body.strip() == "Finish the hook relay and ship it to the rigs. Then tidy the tests." and hooks_intent.meta["source"] == "llm"
    assert world.vault.exists(f"brain-feed/projects/{RIG}/intent.md")
    assert {"section": "intent", "line": "nobody/unknown", "reason": "not exactly one known project"} in out["refused"]
    # Health with the index's real counts, recorded once.
    assert out["health"] == {"score": 7, "reason": "healthy, one stale signal", "arcs": 3, "signals": 1, "lessons": 1}
    rows = [json.loads(line) for line in world.vault.read_text("brain-feed/health.jsonl").splitlines()]
    assert len(rows) == 1 and rows[0]["arcs"] == 3
    # Summaries: D gets one; A's existing summary is never overwritten.
    assert out["summaries"] == [{"arc": d, "result": "added"}, {"arc": a, "result": "has a summary"}]
    d_meta = frontmatter.parse(world.vault.read_text(world.path_of(d))).meta
    assert d_meta["summary"] == "Documents the rig runner's configuration knobs." and d_meta["synthesized"] is True

    # The index followed in the same run: both projects' feeds hold A, neither holds B; /arcs/B is A.
    for project in ("agentihooks", RIG):
        feed = client.get("/feed", params={"project": project}, headers={"Cache-Control": "no-cache"}).json()
        held = {x["cluster_id"] for x in feed["arcs"]}
        assert a in held and b not in held, (project, held)
    hot = world.vault.read_text("brain-feed/hot-arcs.md")
    assert b not in hot and f"| {HOOKS}, openrig |" in hot
    arc = client.get(f"/arcs/{b}").json()
    assert arc["cluster_id"] == a and arc["requested"] == b and arc["merged_from"] == [b]
    found = [h["path"] for h in client.get("/vault/search", params={"q": "tkrigtoken"}).json()["results"]]
    assert found == [world.path_of(a)]

    # A rerun of the same answer writes nothing.
    settled = _snapshot(world.settings.vault)
    again = world.apply(answer)
    assert again["vault_writes"] == 0 and again["files_written"] == [] and _snapshot(world.settings.vault) == settled
    assert again["merges"][0]["result"] == "already merged"
    # ... and the next incremental tick finds the file stats current (it reads no file); it only rescores A, which now holds two sessions.
    tick = run_tick(world.db, world.vault, world.settings, now=NOW, use_ai=False)
    assert tick.read_files == 0 and tick.skipped == [] and tick.stats["arcs_scanned"] == 3
    assert [m for m in tick.moves if b in m["from"]] == [] and tick.arcs_updated <= 1


def test_an_exact_upstream_answer_and_a_messy_one(world: World, tmp_path: Path) -> None:
    out = world.apply(world.answer("upstream_exact.md", tmp_path))
    c, d = world.ids["C"], world.ids["D"]
    assert out["edges_applied"] == 1 and out["merges"][0]["title"] == "Test harness" and out["merges_applied"] == 1
    assert out["signals"][0]["severity"] == "critical" and out["signals_applied"] == 1
    assert out["health"]["score"] == 6 and out["health"]["reason"] == "two threads merged, nothing urgent"
    assert out["intent"]["fleet"] == "written"
    assert "consolidating test tooling" in world.vault.read_text("brain-feed/intent.md")
    c_meta = frontmatter.parse(world.vault.read_text(world.path_of(c))).meta
    assert c_meta["projects"] == ["agentihooks", "openrig"] and c_meta["merged_from"] == [d]

    messy = world.apply(world.answer("messy.md", tmp_path))
    assert messy["sections"] == [1, 2, 3, 5] and messy["edges_applied"] == 1  # two lines for one pair: one edge, parent
    reasons = {(r["section"], r["reason"]) for r in messy["refused"]}
    assert ("edges", "unknown edge type 'depends'") in reasons and ("signals", "unknown severity 'apocalyptic'") in reasons
    assert ("signals", "no signal has that exact source") in reasons  # "disk" is not "disk-full": sources match exactly
    assert messy["unparsed"] == [{"section": "edges", "line": "this line is not an edge"}]
    assert messy["health"]["score"] == 4 and messy["health"]["reason"] == "the vault is drifting"


def test_a_kernel_that_is_not_the_keeper_refuses_to_apply_and_writes_nothing(world: World, tmp_path: Path) -> None:
    answer = world.answer("upstream_exact.md", tmp_path)
    before = _snapshot(world.vault.path(""))
    follower = world.settings.with_overrides(vault_keeper=False)
    refused = brain(follower, "apply", "--ai-output", str(answer))
    assert refused.exit_code == 2 and "not the vault's keeper" in refused.stderr, refused.stderr
    assert _snapshot(world.vault.path("")) == before
    dry = brain(follower, "apply", "--ai-output", str(answer), "--dry-run")
    assert dry.exit_code == 0 and json.loads(dry.stdout.strip().splitlines()[-1])["merges_applied"] == 1


# -- the LLM half of brain tick ----------------------------------------------------------------------------

SECRET = "sk-ant-api03-abcdefghijklmnopqrstuvwx"


class _Keeper(OpenAIStub):
    """A chat endpoint answering one recorded six-section answer."""

    def __init__(self, answer: str) -> None:
        super().__init__()
        self.answer = answer

    def respond(self, body: dict) -> tuple[int, dict]:
        return 200, {"id": "x", "object": "chat.completion", "choices": [{"index": 0, "message": {"role": "assistant", "content": self.answer}}]}


def test_llm_tick_prompts_once_with_a_scrubbed_project_table_and_applies_the_answer(world: World, tmp_path: Path) -> None:
    _arc(world.vault, "leak-1", HOOKS, f"Rotate the key {SECRET} used by the relay", hours_ago=3)
    answer = world.answer("bullets_and_arrows.md", tmp_path).read_text() + f"\n(the model echoed {SECRET})\n"
    with _Keeper(answer) as stub:
        settings = world.settings.with_overrides(llm_base_url=stub.url, llm_api_key="sk-test", llm_model="brain-keeper")
        summary = run_tick(world.db, world.vault, settings, now=NOW + dt.timedelta(minutes=5), use_ai=True)
    world.db.commit()
    assert summary.llm_calls == 1 and len(stub.requests) == 1 and summary.llm_error is None
    body = stub.requests[0]["body"]
    assert body["model"] == "brain-keeper" and body["max_tokens"] == 4096 and body["temperature"] == 0.3
    prompt = body["messages"][0]["content"]
    assert "| # | Arc ID | Heat | Region | Status | Project | Title | Sessions | Markers |" in prompt
    assert f"| {HOOKS} |" in prompt and "## Unsynthesized Arcs" in prompt and "Respond ONLY with the 6 sections" in prompt
    assert SECRET not in prompt and "<REDACTED_SECRET>" in prompt  # the prompt is scrubbed (ADR 0017)
    applied = summary.llm_tick["apply"]["result"]
    assert applied["merges_applied"] == 1 and applied["edges_applied"] == 2 and applied["health"]["score"] == 7
    audit = summary.llm_tick["apply"]["ai_output"]
    assert audit.startswith("brain-feed/ticks/") and SECRET not in world.vault.read_text(audit)
    assert summary.intent_sources == {"llm": 2}
    intent = frontmatter.parse(world.vault.read_text(f"brain-feed/projects/{HOOKS}/intent.md"))
    assert intent.meta["source"] == "llm" and intent.body.strip().startswith("Finish the hook relay")
    assert world.ids["B"] not in world.vault.read_text("brain-feed/hot-arcs.md")


def _feed_files(root: Path) -> dict[str, str]:
    """``brain-feed/`` (the recorded answers aside) and the day dashboards."""
    feed = [p for p in (root / "brain-feed").rglob("*") if p.is_file() and "ticks" not in p.relative_to(root).parts]
    return {p.relative_to(root).as_posix(): p.read_text() for p in sorted([*feed, *root.glob("clusters/*/_dashboard.md")])}


def test_a_tick_with_the_llm_half_writes_each_feed_file_once_with_the_texts_the_answer_leaves(
    world: World, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    answer = world.answer("bullets_and_arrows.md", tmp_path).read_text()
    root, later = world.settings.vault, NOW + dt.timedelta(minutes=5)
    _arc(world.vault, "hooks-3", HOOKS, "Ship the relay to the first rig", hours_ago=2)  # the pass redraws the hot table and intents
    shutil.copytree(root, tmp_path / "before")  # mtimes kept: the file stats still match
    written: Counter[str] = Counter()
    write_atomic = Vault.write_atomic
    monkeypatch.setattr(Vault, "write_atomic", lambda self, rel, text: (written.update([str(rel)]), write_atomic(self, rel, text))[1])

    savepoint = world.db.begin_nested()
    with _Keeper(answer) as stub:
        settings = world.settings.with_overrides(llm_base_url=stub.url, llm_api_key="sk-test", llm_model="brain-keeper")
        summary = run_tick(world.db, world.vault, settings, now=later, use_ai=True)
    once = _feed_files(root)
    savepoint.rollback()
    feed_writes = {rel: n for rel, n in written.items() if rel in once}
    assert summary.llm_tick["apply"]["result"]["merges_applied"] == 1
    assert {"brain-feed/hot-arcs.md", "brain-feed/signals.md", "brain-feed/intent.md", "brain-feed/last-tick-diff.md"} <= set(feed_writes)
    assert set(feed_writes.values()) == {1}, feed_writes  # both halves redraw these; each reaches the disk once

    # What the tick wrote before the halves shared one writer: the pass's files, then brain apply's over them.
    shutil.rmtree(root)
    shutil.copytree(tmp_path / "before", root)
    run_tick(world.db, world.vault, world.settings, now=later, use_ai=False)
    apply_ai_output(world.db, world.vault, world.settings, answer, now=later)
    assert _feed_files(root) == once

    # The next tick's pass derives the intents again, the answer says the same: no intent file is written.
    written.clear()
    with _Keeper(answer) as stub:
        settings = world.settings.with_overrides(llm_base_url=stub.url, llm_api_key="sk-test", llm_model="brain-keeper")
        again = run_tick(world.db, world.vault, settings, now=later + dt.timedelta(minutes=1), use_ai=True)
    assert again.llm_tick["apply"]["result"]["intent"] == {"fleet": "unchanged", "projects": dict.fromkeys([HOOKS, RIG], "unchanged")}
    assert not [rel for rel in written if rel.endswith("intent.md")] and again.intent_sources == {"llm": 2}
    assert frontmatter.parse(world.vault.read_text("brain-feed/intent.md")).meta["source"] == "llm"


def test_without_an_llm_the_tick_is_deterministic_and_says_so(world: World) -> None:
    summary = run_tick(world.db, world.vault, world.settings, now=NOW, use_ai=True)
    assert summary.llm_calls == 0 and summary.llm_tick == {} and summary.intent_sources == {"derived": 2}
    assert any("no LLM configured" in note for note in summary.notes)


def test_an_unreachable_llm_leaves_the_deterministic_tick(world: World) -> None:
    settings = world.settings.with_overrides(llm_base_url="http://127.0.0.1:9/v1")  # discard port: connection refused
    summary = run_tick(world.db, world.vault, settings, now=NOW, use_ai=True)
    assert summary.llm_calls == 1 and summary.llm_error and summary.llm_error.startswith("LLM endpoint unreachable")
    assert summary.llm_tick["ai"]["error"] and "apply" not in summary.llm_tick and summary.intent_sources == {"derived": 2}
    assert frontmatter.parse(world.vault.read_text(f"brain-feed/projects/{HOOKS}/intent.md")).meta["source"] == "derived"


def test_a_deterministic_tick_after_brain_apply_keeps_the_models_intent(world: World, tmp_path: Path) -> None:
    """A --no-ai tick derived every intent again, over what brain apply wrote; upstream's deterministic tick never does."""
    world.apply(world.answer("bullets_and_arrows.md", tmp_path))
    hooks, fleet = f"brain-feed/projects/{HOOKS}/intent.md", "brain-feed/intent.md"
    by_model = {rel: world.vault.read_text(rel) for rel in (hooks, fleet)}
    assert {frontmatter.parse(text).meta["source"] for text in by_model.values()} == {"llm"}

    kept = run_tick(world.db, world.vault, world.settings, now=NOW + dt.timedelta(hours=1), use_ai=False)
    world.db.commit()
    assert kept.intent_sources == {"kept": 2} and {rel: world.vault.read_text(rel) for rel in by_model} == by_model

    # Older than BRAIN_INTENT_MODEL_MAX_AGE_HOURS: the project's intent is derived again; a model's intent.md stays (upstream's rule).
    aged = world.settings.with_overrides(intent_model_max_age_hours=1)
    later = run_tick(world.db, world.vault, aged, now=NOW + dt.timedelta(hours=3), use_ai=False)
    assert later.intent_sources == {"derived": 2}
    assert frontmatter.parse(world.vault.read_text(hooks)).meta["source"] == "derived"
    assert world.vault.read_text(fleet) == by_model[fleet]
