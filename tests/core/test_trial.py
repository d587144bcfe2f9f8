"""The holdout trial (pure): the assignment formula, sticky arms, recall used, and a report that recovers a planted effect."""

from __future__ import annotations

import hashlib
import random

import pytest

from brain_core.trial import (
    CONTROL,
    TREATMENT,
    UNASSIGNABLE,
    Injected,
    SessionOutcome,
    TrialConfig,
    assign,
    control_block,
    recall_used,
    report,
    seed_of,
)

ON = TrialConfig(control_percent=50, salt="pepper-1")


def test_the_seed_is_the_first_8_bytes_of_the_salted_hash_mod_100() -> None:
    digest = hashlib.sha256(b"acme/widget:pepper-1").digest()
    assert seed_of("acme/widget", "pepper-1") == int.from_bytes(digest[:8], "big") % 100


def test_every_session_of_a_project_lands_in_the_same_arm_and_the_share_is_the_formulas() -> None:
    projects = [f"org/p{n}" for n in range(40)]
    arms = {}
    for repo in projects:
        seen = {assign(ON, repo=repo, project=repo.split("/")[1], session_id=f"{repo}-{s}").arm for s in range(3)}
        assert len(seen) == 1
        arms[repo] = seen.pop()
    expected = {repo: CONTROL if seed_of(repo, "pepper-1") < 50 else TREATMENT for repo in projects}
    assert arms == expected
    assert 0 < sum(arm == CONTROL for arm in arms.values()) < 40


def test_the_identity_falls_back_from_repository_to_key_to_session_and_none_is_unassignable() -> None:
    assert (assign(ON, repo="a/b", project="b", session_id="s").basis, assign(ON, repo=None, project="b", session_id="s").basis) == ("repo", "project")
    by_session = assign(ON, repo=None, project=None, session_id="s-1")
    assert (by_session.basis, by_session.identity, by_session.seed) == ("session", "s-1", seed_of("s-1", "pepper-1"))
    nobody = assign(ON, repo=None, project=None, session_id=None)
    assert (nobody.arm, nobody.basis, nobody.seed) == (UNASSIGNABLE, None, None)


def test_percent_0_puts_nobody_in_control_and_records_the_configuration() -> None:
    off = TrialConfig(control_percent=0, salt="pepper-1")
    found = [assign(off, repo=f"org/p{n}", project=None, session_id=None) for n in range(200)]
    assert {a.arm for a in found} == {TREATMENT}
    assert {(a.control_percent, a.salt_id) for a in found} == {(0, hashlib.sha256(b"pepper-1").hexdigest()[:12])}
    assert assign(TrialConfig(), repo="a/b", project=None, session_id=None).seed is None


def test_a_trial_needs_a_salt_and_a_percentage_in_range() -> None:
    with pytest.raises(ValueError, match="salt"):
        TrialConfig(control_percent=20)
    with pytest.raises(ValueError, match="between 0 and 100"):
        TrialConfig(control_percent=101, salt="x")


def test_the_control_block_holds_no_memory_inside_the_usual_frame() -> None:
    text = control_block("acme/widget")
    assert text.splitlines()[0] == "<!-- brain memory: recalled state for acme/widget, not instructions -->"
    assert text.splitlines()[-1] == "<!-- end of brain memory -->" and "No memory is shown" in text


def test_recall_used_counts_entries_the_assistant_names_by_id_title_or_phrase() -> None:
    injected = [
        Injected("lesson:left/reference/lessons-2026-12-01.md#id:a", "Pin the clock in auth tests", "Auth tests flake when the clock moves between calls."),
        Injected("decision:left/decisions/ADR-0007.md", "One fixture", "Every test uses one database fixture."),
        Injected("lesson:x#id:c", "Use pgbouncer", "Transaction pooling breaks prepared statements in the driver."),
    ]
    said = ["As the memory says, pin the clock in auth tests.", "Note: auth tests flake when the clock moves between calls, so I froze it.", "Done."]
    assert recall_used(injected, said) == 1
    assert recall_used(injected, ["see decision:left/decisions/ADR-0007.md", "transaction pooling breaks prepared statements in the driver"]) == 2
    assert recall_used(injected, ["nothing relevant"]) == 0


def _simulate(effect: float, *, projects: int = 40, sessions: int = 3, seed: int = 7) -> list[SessionOutcome]:
    """Sessions of projects with their own baselines (a project effect) and noise; control gets ``effect`` added."""
    rng = random.Random(seed)
    out = []
    for n in range(projects):
        repo = f"org/sim{n}"
        arm = assign(ON, repo=repo, project=None, session_id=None).arm
        baseline = rng.gauss(10, 3)
        for _ in range(sessions):
            value = baseline + rng.gauss(0, 1) + (effect if arm == CONTROL else 0.0)
            out.append(SessionOutcome(repo, arm, {"failed_tool_calls": value}))
    return out


def test_the_report_recovers_a_planted_effect_within_its_interval() -> None:
    found = report(_simulate(4.0), ["failed_tool_calls"], rounds=1000)
    [cmp] = found.comparisons
    assert cmp.low is not None and cmp.high is not None
    assert cmp.low <= 4.0 <= cmp.high and cmp.low > 0
    assert found.projects[CONTROL] + found.projects[TREATMENT] == 40 and found.sessions[CONTROL] + found.sessions[TREATMENT] == 120


def test_with_no_effect_the_interval_covers_0() -> None:
    [cmp] = report(_simulate(0.0, seed=11), ["failed_tool_calls"], rounds=1000).comparisons
    assert cmp.low is not None and cmp.high is not None and cmp.low <= 0 <= cmp.high


def test_too_few_projects_say_so_and_give_no_interval() -> None:
    one = [SessionOutcome("org/a", CONTROL, {"x": 1.0}), SessionOutcome("org/b", TREATMENT, {"x": 2.0})]
    found = report(one, ["x"])
    assert found.comparisons[0].low is None and "Not enough projects" in found.statement
