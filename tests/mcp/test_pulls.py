"""MCP memory reads are recorded as pulls (ADR 0061): one ``injections`` row each, with the reading project's arm.

The tools run in-process over a real kernel (Postgres, a vault folder, the
offline embedder); the records are read back from the table. A control
project's read keeps its answer's shape and loses its memory; a record that
cannot be written (a database that does not exist) never fails the read.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url

from brain_core.identity import ProjectIdentity
from brain_core.trial import CONTROL, TREATMENT, UNASSIGNABLE, TrialConfig, seed_of
from brain_kernel.db.engine import make_engine, session_factory, unit_of_work
from brain_kernel.identity.sessions import record_session
from brain_kernel.settings import Settings
from brain_kernel.trial.outcomes import injected_by_session
from brain_kernel.trial.report import Period, trial_report
from brain_mcp import answers, tools
from brain_mcp.answers import NO_MEMORY, to_json
from tests.mcp.test_mcp import _plant

SALT = "pepper-0123456789"


def _pulls(database_url: str) -> list[dict[str, Any]]:
    engine = create_engine(database_url)
    try:
        with engine.connect() as conn:
            return [dict(r) for r in conn.execute(text("SELECT * FROM injections ORDER BY id")).mappings()]
    finally:
        engine.dispose()


def _session(kernel: tools.Kernel, session_id: str, key: str, repo: str) -> None:
    identity = ProjectIdentity(key, repo, f"/dev/{key}", None, f"/dev/{key}", "git")
    with unit_of_work(kernel.sessions) as db:
        record_session(db, session_id, identity, agent="claude")


def _lesson(kernel: tools.Kernel, content: str) -> str:
    written = tools.brain_marker(kernel, "lesson", content, {"repo": "org1/api"})
    return str(written["entry_id"])


def _control_with_memory(settings: Settings, *, session: bool = False) -> tuple[Settings, str, str]:
    """Settings with every assignable read in control, and org1/api's lesson and arc planted (its session ``s-api`` too,
    when asked): (settings, the arc's cluster id, the word that finds it)."""
    control = settings.with_overrides(trial_control_percent=100, trial_salt=SALT)
    kernel = tools.Kernel.open(control)
    try:
        _lesson(kernel, "The api cache must be warmed before the load test.")
        cluster_id, word = _plant(control)
        if session:
            _session(kernel, "s-api", "api", "org1/api")
    finally:
        kernel.close()
    return control, cluster_id, word


def test_every_memory_read_is_a_pull_with_what_it_served_and_no_trial_changes_no_answer(settings: Settings) -> None:
    settings = settings.with_overrides(trial_salt=SALT)  # a salt, no percentage: every project is treated
    kernel = tools.Kernel.open(settings)
    try:
        lesson = _lesson(kernel, "The api cache must be warmed before the load test.")
        cluster_id, word = _plant(settings)
        _session(kernel, "s-web", "web", "org2/web")
        found = tools.kb_search(kernel, word, project="org1/api")
        arcs = tools.brain_search_arcs(kernel, f"{word} pipeline", project="org1/api", session_id="s-api")
        arc = tools.brain_get_arc(kernel, cluster_id)
        feed = tools.brain_feed(kernel, "org1/api", session_id="s-web")  # the session's project decides the arm
        block = tools.memory_block(kernel, "org1/api")
        everything = tools.kb_search(kernel, word)  # no project, no session: unassignable, served as usual
        tools.brain_marker(kernel, "lesson", "a write is no read", {"repo": "org1/api"})
        assert "error" in tools.brain_feed(kernel, "not a project!")  # a refusal served nothing: no record
    finally:
        kernel.close()
    assert found["count"] and arcs["count"] and arc["path"] and "note" not in found
    rows = _pulls(settings.database_url or "")
    assert [r["kind"] for r in rows] == ["pull"] * 6 and {r["agent"] for r in rows} == {"mcp"}
    search, listed, opened, fed, blocked, wide = rows
    assert (search["project"], search["repo"], search["session_id"], search["arm"]) == ("api", "org1/api", None, TREATMENT)
    assert search["bytes"] == len(to_json(found).encode()) and search["entry_ids"] == answers.served_ids(found)
    assert any(e.startswith("arc:") for e in search["entry_ids"]) and search["text_served"] is None
    assert (listed["session_id"], listed["project"], listed["basis"]) == ("s-api", "api", "repo")  # an unknown session: the project
    assert listed["entry_ids"] == [f"arc:{a['path']}" for a in arcs["arcs"]]
    assert (opened["project"], opened["entry_ids"]) == ("api", [f"arc:{arc['path']}"])
    assert (fed["session_id"], fed["project"], fed["repo"]) == ("s-web", "web", "org2/web") and fed["entry_ids"] == answers.served_ids(feed)
    assert lesson in fed["entry_ids"] and lesson in blocked["entry_ids"] and blocked["bytes"] == len(block["markdown"].encode())
    assert (wide["project"], wide["arm"], wide["entry_ids"]) == (None, UNASSIGNABLE, answers.served_ids(everything))
    assert {(r["control_percent"], r["salt_id"]) for r in rows} == {(0, TrialConfig(0, SALT).salt_id)}
    assert rows[0]["seed"] == seed_of("org1/api", SALT)


def test_a_control_project_reads_no_memory_through_mcp_and_its_pulls_say_so(settings: Settings) -> None:
    settings = settings.with_overrides(trial_control_percent=100, trial_salt=SALT)  # every assignable project is control
    kernel = tools.Kernel.open(settings)
    try:
        _lesson(kernel, "The api cache must be warmed before the load test.")
        cluster_id, word = _plant(settings)
        _session(kernel, "s-api", "api", "org1/api")
        found = tools.kb_search(kernel, word, session_id="s-api")  # no project named: the session's decides
        brief = tools.kb_brief(kernel, word, session_id="s-api")
        arcs = tools.brain_search_arcs(kernel, word, project="org1/api")
        arc = tools.brain_get_arc(kernel, cluster_id)
        feed = tools.brain_feed(kernel, "org1/api")
        block = tools.memory_block(kernel, "org1/api")
        wide = tools.kb_search(kernel, word)  # no project, no session: unassignable, never in an arm
        by_key = tools.memory_block(kernel, "api")  # another spelling of the project: the same text
    finally:
        kernel.close()
    assert by_key == block and "recalled state for org1/api," in block["markdown"]
    assert found == {"query": word, "count": 0, "results": [], "sources_searched": ["artifact", "obsidian"], "note": NO_MEMORY}
    assert brief["hits"] == [] and arcs["arcs"] == [] and arcs["note"] == NO_MEMORY
    assert arc == {"cluster_id": cluster_id, "source": "vault", "path": None, "content": "", "note": NO_MEMORY}
    assert feed["entries"] == feed["hot_arcs"] == feed["inject_blocks"] == [] and feed["project"]["repo"] == "org1/api"
    assert "No memory is shown in this block." in block["markdown"] and "cache" not in block["markdown"]
    assert wide["count"] > 0  # what the trial cannot place is answered as usual
    for answer, model in ((found, answers.KbSearch), (arcs, answers.SearchArcs), (arc, answers.Arc), (feed, answers.Feed)):
        model.model_validate(json.loads(to_json(answer)))  # the output schema still holds: a well-formed answer
    rows = _pulls(settings.database_url or "")
    assert [r["arm"] for r in rows] == [CONTROL] * 6 + [UNASSIGNABLE] + [CONTROL]
    assert all(r["entry_ids"] == [] and r["text_served"] for r in rows[:6]) and rows[6]["text_served"] is None
    assert rows[0]["session_id"] == rows[1]["session_id"] == "s-api" and rows[0]["project"] == "api"
    assert rows[5]["text_served"] == block["markdown"]


def test_a_pull_that_cannot_be_recorded_never_fails_the_read(settings: Settings) -> None:
    kernel = tools.Kernel.open(settings)
    nowhere = make_engine(make_url(settings.database_url or "").set(database="brain_no_such_database").render_as_string(hide_password=False), pool_size=1)
    try:
        _lesson(kernel, "The api cache must be warmed before the load test.")
        broken = dataclasses.replace(kernel, sessions=session_factory(nowhere))  # the record's unit of work cannot connect
        feed = tools.brain_feed(broken, "org1/api")
        block = tools.memory_block(broken, "org1/api")
    finally:
        nowhere.dispose()
        kernel.close()
    assert feed["entry_count"] >= 1 and "warmed" in block["markdown"]
    assert _pulls(settings.database_url or "") == []


def test_pulls_are_no_trial_sessions_but_what_they_served_counts_for_recall_used(settings: Settings) -> None:
    """The report's sessions are those served a block; a session that only pulled is not in the trial. The entries a
    pull served it are among those its recall used is estimated over."""
    settings = settings.with_overrides(trial_control_percent=50, trial_salt=SALT)
    kernel = tools.Kernel.open(settings)
    try:
        lesson = _lesson(kernel, "The api cache must be warmed before the load test.")
        _session(kernel, "s-api", "api", "org1/api")
        tools.brain_feed(kernel, "org1/api", session_id="s-api")
        with kernel.reads() as db:
            report = trial_report(db, Period(50, TrialConfig(50, SALT).salt_id), rounds=10)
            served = injected_by_session(db, ["s-api"])
    finally:
        kernel.close()
    [pull] = _pulls(settings.database_url or "")
    assert pull["arm"] == TREATMENT and pull["seed"] == seed_of("org1/api", SALT) >= 50
    assert [e.entry_id for e in served["s-api"]] == [lesson]
    assert all(arm["sessions"] == 0 and arm["without_outcomes"] == 0 for arm in report["arms"].values()) and report["periods"] == []


# -- brain mcp --remote: the same records through POST /pulls ------------------------------------------------


def test_remote_reads_are_recorded_by_the_kernel_and_a_control_project_reads_no_memory(settings: Settings) -> None:
    from brain_mcp.remote import Remote
    from tests.support.harness import serve_brain
    from tests.support.servers import stop

    served, cluster_id, word = _control_with_memory(settings, session=True)
    proc, base = serve_brain(served, workers=1)
    remote = Remote(base, None)
    try:
        found = remote.kb_search(word, 10, True, True, 0.0, None, "s-api")
        arc = remote.brain_get_arc(cluster_id)
        feed = remote.brain_feed("org1/api")
        block = remote.memory_block("org1/api")
        by_key = remote.memory_block("api")  # another spelling of the project: the same text
        wide = remote.kb_search(word, 10, True, True, 0.0, None)  # unassignable: served as usual
        # a session id the route cannot take names no session, as in-process: never a read served undecided
        odd = [remote.kb_search(word, 10, True, True, 0.0, "org1/api", sid) for sid in ("", "x" * 301)]
        bad = remote.kb_search("", 10, True, True, 0.0, "Bad Project!!")  # refused by the kernel: the read's answer
    finally:
        remote.close()
        stop(proc, 15)
    assert all(o["count"] == 0 and o["note"] == NO_MEMORY for o in odd), odd
    assert "error" in bad and "Bad Project" in bad["error"], bad
    assert found == {"query": word, "count": 0, "results": [], "sources_searched": ["artifact", "obsidian"], "note": NO_MEMORY}
    assert arc["note"] == NO_MEMORY and arc["content"] == "" and feed["entries"] == [] and feed["note"] == NO_MEMORY
    assert "No memory is shown in this block." in block["markdown"] and wide["count"] > 0
    assert by_key == block and "recalled state for org1/api," in block["markdown"]
    pulled = _pulls(served.database_url or "")
    assert pulled[4]["text_served"] == block["markdown"]  # the key's read: the same text recorded
    rows = [*pulled[:4], pulled[5]]
    assert [(r["kind"], r["agent"], r["arm"]) for r in rows] == [("pull", "mcp", CONTROL)] * 4 + [("pull", "mcp", UNASSIGNABLE)]
    assert (rows[0]["session_id"], rows[0]["project"], rows[0]["repo"]) == ("s-api", "api", "org1/api")
    assert rows[1]["repo"] == "org1/api" and all(r["entry_ids"] == [] for r in rows[:4])
    assert json.loads(rows[0]["text_served"]) == found and rows[3]["text_served"] == block["markdown"]
    assert rows[4]["entry_ids"] == answers.served_ids(wide) and rows[4]["text_served"] is None


def test_a_read_naming_no_project_takes_the_arm_of_the_folder_the_server_runs_in(settings: Settings) -> None:
    settings, _cluster_id, word = _control_with_memory(settings)
    answers_of: dict[str | None, dict[str, Any]] = {}
    for folder in ("org1/api", "nobody/elsewhere", None):  # the repository's, one the kernel never saw, none (ADR 0066)
        in_folder = tools.Kernel.open(settings, folder=folder)
        try:
            answers_of[folder] = tools.kb_search(in_folder, word)
        finally:
            in_folder.close()
    assert answers_of["org1/api"]["count"] == 0 and answers_of["org1/api"]["note"] == NO_MEMORY
    assert answers_of["nobody/elsewhere"]["count"] > 0 and answers_of[None]["count"] > 0  # unassignable: answered as usual
    rows = _pulls(settings.database_url or "")
    assert [(r["arm"], r["project"], r["repo"]) for r in rows] == [(CONTROL, "api", "org1/api"), (UNASSIGNABLE, None, None), (UNASSIGNABLE, None, None)]


def test_a_remote_read_sends_its_folder_and_the_kernel_assigns_it(settings: Settings) -> None:
    from brain_mcp.remote import Remote
    from tests.support.harness import serve_brain
    from tests.support.servers import stop

    served, _cluster_id, word = _control_with_memory(settings)
    proc, base = serve_brain(served, workers=1)
    in_repo, elsewhere = Remote(base, None, folder="org1/api"), Remote(base, None, folder="not a project!")
    try:
        withheld = in_repo.kb_search(word, 10, True, True, 0.0, None)
        usual = elsewhere.kb_search(word, 10, True, True, 0.0, None)  # a folder the kernel cannot name: a hint ignored, no refusal
    finally:
        in_repo.close()
        elsewhere.close()
        stop(proc, 15)
    assert withheld["count"] == 0 and withheld["note"] == NO_MEMORY and usual["count"] > 0
    rows = _pulls(served.database_url or "")
    assert [(r["arm"], r["project"], r["repo"]) for r in rows] == [(CONTROL, "api", "org1/api"), (UNASSIGNABLE, None, None)]
