"""Memory planted through the real writers, for the feed tests (the ``planted`` fixture in conftest).

POST /marker for lessons, decisions, signals and milestones; arc files
rendered by ``brain_core.arcs`` (the ``brain cluster`` format); then
``brain tick --no-ai`` scores the arcs, writes intents and refreshes the
index, exactly as in production. ``Planted`` records which tokens each
project owns, so a test can prove a feed holds its own and nothing else.
"""

from __future__ import annotations

import datetime as dt
import json
import uuid
from collections import defaultdict
from dataclasses import dataclass, field

from typer.testing import CliRunner

from brain_cli.cli import app
from brain_core.arcs import ArcSession, build_plan, render_arc
from brain_core.markers import Attribution, parse_request
from brain_core.vault import frontmatter
from brain_core.vault.logs import render_log_entry
from brain_kernel.settings import Settings
from brain_kernel.vault_store import Vault

runner = CliRunner()
NOW = PLANTED_AT = dt.datetime.now(dt.timezone.utc)

# project id -> (attrs sent with markers, arc identity (key, repo))
PROJECTS: dict[str, tuple[dict[str, str], tuple[str, str | None]]] = {
    "org1/api": ({"repo": "org1/api"}, ("api", "org1/api")),
    "org2/api": ({"project": "org2/api"}, ("api", "org2/api")),
    "acme/web": ({"repo": "acme/web"}, ("web", "acme/web")),
    "acme/billing": ({"project": "billing", "repo": "acme/billing"}, ("billing", "acme/billing")),
    "tools/cli": ({"repo": "https://github.com/tools/cli.git"}, ("cli", "tools/cli")),
    "infra": ({"project": "infra"}, ("infra", None)),
}


def token() -> str:
    return "tk" + uuid.uuid4().hex[:14]


@dataclass
class Planted:
    owned: dict[str, set[str]] = field(default_factory=lambda: defaultdict(set))  # project id -> tokens in range
    out_of_range: dict[str, set[str]] = field(default_factory=lambda: defaultdict(set))
    unattributed: set[str] = field(default_factory=set)  # lessons, arcs, decisions, milestones of no project (or an ambiguous key)
    fleet: set[str] = field(default_factory=set)  # fleet-wide signals
    inject_all: set[str] = field(default_factory=set)
    inject_for: dict[str, set[str]] = field(default_factory=lambda: defaultdict(set))
    tombstoned: set[str] = field(default_factory=set)
    survivor: str = ""
    tombstone_id: str = ""

    def everything(self) -> set[str]:
        out = set(self.unattributed) | self.fleet | self.inject_all | self.tombstoned
        for group in (self.owned, self.out_of_range, self.inject_for):
            for tokens in group.values():
                out |= tokens
        return out


def post(client, type_: str, content: str, **attrs: str) -> dict:
    """POST /marker, then wait for the app's search follower (it indexes the file off the request)."""
    r = client.post("/marker", json={"type": type_, "content": content, "attrs": attrs})
    assert r.status_code == 201, r.text
    follower = getattr(client.app.state, "search_follower", None)
    if follower is not None:
        assert follower.flush(timeout=10)
    return r.json()


def arc_session(sid: str, key: str | None, repo: str | None, prompt: str, hours_ago: float, tools: int = 20) -> ArcSession:
    start = NOW - dt.timedelta(hours=hours_ago)
    return ArcSession(
        session_id=sid,
        project=key,
        repo=repo,
        project_source="git" if key else "unresolved",
        cwd=f"/home/op/dev/{key}" if key else f"/tmp/scratch-{sid}",
        start=start,
        end=start + dt.timedelta(minutes=40),
        num_tool_calls=tools,
        num_user_turns=6,
        first_user_prompt=prompt,
    )


def write_arc(vault: Vault, sessions: list[ArcSession]) -> str:
    plan = build_plan(sessions)
    vault.write_atomic(plan.vault_path, render_arc(plan))
    return plan.cluster_id


def plant(client, settings: Settings) -> Planted:
    vault = Vault(settings.vault)
    p = Planted()
    for pid, (attrs, (key, repo)) in PROJECTS.items():
        for i in range(2):
            t = token()
            write_arc(vault, [arc_session(f"{pid}-s{i}", key, repo, f"Implement the {t} pipeline for users", hours_ago=2 + i)])
            p.owned[pid].add(t)
        for _ in range(2):
            t = token()
            post(client, "lesson", f"Lesson learned: {t} matters here.", **attrs)
            p.owned[pid].add(t)
        t = token()
        post(client, "decision", f"We decided on {t} because reasons.", title=f"Adopt {t}", **attrs)
        p.owned[pid].add(t)
        t = token()
        post(client, "signal", f"Watch out for {t}.", title=f"Alert {t}", severity="alert", **attrs)
        p.owned[pid].add(t)
        t = token()
        post(client, "milestone", f"Shipped {t} to production.", **attrs)
        p.owned[pid].add(t)
        # A lesson older than the lesson window (appended through the marker format).
        t = token()
        old = NOW - dt.timedelta(days=40)
        req = parse_request("lesson", f"Ancient lesson {t}.", attrs, max_chars=4096)
        who = Attribution(key, repo)
        vault.append(f"left/reference/lessons-{old.date().isoformat()}.md", render_log_entry("lesson", req, who, marker_id=uuid.uuid4().hex, at=old))
        p.out_of_range[pid].add(t)

    # A merged arc holding web (primary) and billing keeps both projects.
    t = token()
    write_arc(
        vault,
        [
            arc_session("merge-w1", "web", "acme/web", "Unify the checkout flow", hours_ago=1),
            arc_session("merge-w2", "web", "acme/web", f"Unify the {t} checkout", hours_ago=1.5),
            arc_session("merge-b1", "billing", "acme/billing", "Unify the checkout flow", hours_ago=1.2),
        ],
    )
    p.owned["acme/web"].add(t)
    p.owned["acme/billing"].add(t)

    # A tombstone (merged into a live web arc) is not a live entry.
    t = token()
    p.survivor = write_arc(vault, [arc_session("survivor", "web", "acme/web", "Refine the web survivor arc", hours_ago=3)])
    plan = build_plan([arc_session("gone", "cli", "tools/cli", f"Old {t} thread", hours_ago=4)])
    p.tombstone_id = plan.cluster_id
    vault.write_atomic(
        plan.vault_path.replace(".md", ".merged.md"),
        frontmatter.update(render_arc(plan), {"merged_into": p.survivor}),
    )
    p.tombstoned.add(t)

    # Unattributed lesson, arc, decision, milestone; and a lesson naming only the ambiguous key "api".
    for type_ in ("lesson", "decision", "milestone"):
        t = token()
        post(client, type_, f"Nobody owns {t}.", title=f"Orphan {t}")
        p.unattributed.add(t)
    t = token()
    write_arc(vault, [arc_session("orphan", None, None, f"Poke at the {t} script", hours_ago=2)])
    p.unattributed.add(t)
    t = token()
    post(client, "lesson", f"Which api? {t}.", project="api")
    p.unattributed.add(t)

    # Fleet-wide signals: explicit scope fleet, and a signal with no project at all.
    t = token()
    post(client, "signal", f"Fleet-wide {t}.", title=f"Fleet {t}", severity="critical", scope="fleet")
    p.fleet.add(t)
    t = token()
    post(client, "signal", f"Nobody in particular {t}.", title=f"Loose {t}")
    p.fleet.add(t)

    # Inject blocks: one for everyone, one targeted at org1/api.
    t = token()
    vault.write_atomic(
        "brain-feed/inject/all.md", frontmatter.render({"id": "inject-all", "title": f"Everyone {t}", "priority": 9, "target": "all"}, f"Read {t} first.\n")
    )
    p.inject_all.add(t)
    t = token()
    vault.write_atomic("brain-feed/inject/org1.md", frontmatter.render({"id": "inject-org1", "title": f"Org1 {t}", "target": "org1/api"}, f"Only org1 {t}.\n"))
    p.inject_for["org1/api"].add(t)
    return p


def run_cli(settings: Settings, *args: str) -> dict:
    result = runner.invoke(app, [*args, "--vault", str(settings.vault), "--database-url", str(settings.database_url)])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout.strip().splitlines()[-1])


def plant_and_tick(client, settings: Settings) -> Planted:
    """``plant``, then ``brain tick --no-ai`` scores the arcs, writes intents and refreshes the index."""
    p = plant(client, settings)
    summary = run_cli(settings, "tick", "--no-ai")
    assert summary["index"]["refreshed"] is True
    assert set(PROJECTS) <= set(summary["active_projects"])
    return p


def stable(feed: dict) -> dict:
    """A feed answer without its per-response ``generated_at``."""
    return {k: v for k, v in feed.items() if k != "generated_at"}
