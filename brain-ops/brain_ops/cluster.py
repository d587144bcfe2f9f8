"""Clustering job: an extract bundle -> arc files under ``clusters/<date>/<cluster_id>.md``.

The plan comes from ``brain_core.arcs`` (group by canonical project, then time
gap, then compaction bridges); this module only reads the arcs already in the
vault and writes through ``brain_kernel.vault_store.Vault`` (temp file + rename).

Why a rerun is safe: a cluster's id is a hash of its sorted session ids, so
the same sessions give the same file, and an arc that already holds any of a
cluster's sessions is extended in place with targeted frontmatter edits
(session-derived keys only) instead of getting a second file. A session
already in some arc, live or merged, is never put in another one.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sqlalchemy.orm import Session

from brain_core.arcs import DEFAULT_GAP_MINUTES, ArcPlan, ArcSession, build_plan, plan_clusters, refresh_changes, render_arc
from brain_core.progress import SILENT, Progress
from brain_core.vault import frontmatter
from brain_core.vault.layout import CLUSTERS_DIR, REGION_DIRS, is_tombstone
from brain_core.vault.regions import live_paths
from brain_kernel.errors import ConfigError
from brain_kernel.index.changes import sync_changes
from brain_kernel.vault_store import Vault


def vault_for(out_dir: Path) -> Vault:
    """The vault to write into: ``out_dir`` itself, or its parent when ``out_dir`` is its ``clusters`` folder."""
    root = Path(out_dir).expanduser()
    if root.name == "clusters":
        root = root.parent
    return Vault(root)


@dataclass
class ExistingArcs:
    """Which arc file already holds each session, in ``clusters/`` or wherever the keeper moved it
    (tombstones included, so merged sessions stay put)."""

    owner: dict[str, str] = field(default_factory=dict)
    tombstones: set[str] = field(default_factory=set)

    @classmethod
    def scan(cls, vault: Vault) -> ExistingArcs:
        """Read the frontmatter of every arc file in the vault.

        A file the keeper never reads counts as a tombstone here, never as a session's live home: one beside
        a ``.merged.md`` tombstone of its id, or a second copy of an arc (``regions.live_paths``); new
        activity written there would land where no tick, feed or search looks.
        """
        found = cls()
        arcs: dict[str, dict[str, Any]] = {}
        listed: list[str] = []
        for path in (p for prefix in (CLUSTERS_DIR, *REGION_DIRS) if vault.exists(prefix) for p in vault.iter_files(prefix)):
            rel = vault.rel(path)
            listed.append(rel)
            try:
                meta = frontmatter.parse(path.read_text(encoding="utf-8", errors="replace")).meta
            except OSError:
                continue
            if meta.get("source_sessions"):  # else not an arc of sessions (standing documents, logs, signals)
                arcs[rel] = meta
        scan = live_paths(listed, arcs)
        unread = set(scan.suppressed) | set(scan.duplicates)
        for rel, meta in arcs.items():
            if is_tombstone(rel) or meta.get("merged_into") or rel in unread:
                found.tombstones.add(rel)
            for sid in meta.get("source_sessions") or []:
                current = found.owner.get(str(sid))
                # Prefer a live arc over a tombstone as a session's home.
                if current is None or (current in found.tombstones and rel not in found.tombstones):
                    found.owner[str(sid)] = rel
        return found


def sessions_of(bundle: Mapping[str, Any]) -> tuple[list[ArcSession], int]:
    """The bundle's sessions as ArcSession values, and how many entries were unusable."""
    out: list[ArcSession] = []
    bad = 0
    for raw in bundle.get("sessions") or []:
        if not isinstance(raw, Mapping) or not raw.get("session_id"):
            bad += 1
            continue
        try:
            out.append(ArcSession.from_mapping(raw))
        except (TypeError, ValueError):
            bad += 1
    return out, bad


def _decide(plan: ArcPlan, existing: ExistingArcs) -> tuple[str, str, ArcPlan | None]:
    """(action, vault path, plan to apply) for one planned cluster."""
    owners: dict[str, int] = {}
    for sid in plan.session_ids:
        rel = existing.owner.get(sid)
        if rel is not None:
            owners[rel] = owners.get(rel, 0) + 1
    live = {rel: n for rel, n in owners.items() if rel not in existing.tombstones}
    if live:
        target = sorted(live, key=lambda rel: (-live[rel], rel))[0]
        keep = [s for s in plan.sessions if existing.owner.get(s.session_id) in (None, target)]
        return "update", target, build_plan(keep)
    fresh = [s for s in plan.sessions if s.session_id not in existing.owner]
    if not fresh:
        return "unchanged", plan.vault_path, None
    final = plan if len(fresh) == len(plan.sessions) else build_plan(fresh)
    return "create", final.vault_path, final


def run_cluster(
    bundle: Mapping[str, Any],
    out_dir: Path,
    dry_run: bool = False,
    *,
    db: Session | None = None,
    gap_minutes: int = DEFAULT_GAP_MINUTES,
    progress: Progress = SILENT,
) -> dict[str, Any]:
    """Write (or, with ``dry_run``, only report) the arcs of a bundle; returns a JSON-ready summary.

    With ``db`` every arc written is upserted into the index (the caller commits).
    """
    if not isinstance(bundle, Mapping) or not isinstance(bundle.get("sessions", []), list):
        raise ConfigError("the bundle is not an extract bundle: expected a JSON object with a sessions list")
    vault = vault_for(out_dir)
    sessions, bad = sessions_of(bundle)
    plans = plan_clusters(sessions, gap_minutes=gap_minutes)
    existing = ExistingArcs.scan(vault) if vault.root.is_dir() else ExistingArcs()
    counts = {"create": 0, "update": 0, "unchanged": 0}
    arcs: list[dict[str, Any]] = []
    written: list[str] = []
    for index, plan in enumerate(plans, 1):
        progress.step(index, len(plans))
        action, rel, final = _decide(plan, existing)
        text: str | None = None
        if action == "update" and final is not None:
            current = vault.read_text(rel)
            changes = refresh_changes(frontmatter.parse(current).meta, final)
            if changes:
                text = frontmatter.update(current, changes)
            else:
                action = "unchanged"
        elif action == "create" and final is not None:
            if vault.exists(rel):
                current = vault.read_text(rel)
                if current == render_arc(final):
                    action = "unchanged"
                else:
                    changes = refresh_changes(frontmatter.parse(current).meta, final)
                    action, text = ("update", frontmatter.update(current, changes)) if changes else ("unchanged", None)
            else:
                text = render_arc(final)
        counts[action] += 1
        shown = final or plan
        arcs.append(
            {
                "action": action,
                "cluster_id": Path(rel).name.removesuffix(".md"),
                "vault_path": rel,
                "title": shown.title,
                "project": shown.project,
                "repo": shown.repo,
                "sessions": len(shown.sessions),
            }
        )
        if text is not None and not dry_run:
            vault.write_atomic(rel, text)
            written.append(rel)
        for sid in (final or plan).session_ids:
            existing.owner.setdefault(sid, rel)
    if db is not None and not dry_run:
        sync_changes(db, vault, written)  # the feed sees the arcs before the next reindex
    return {
        "dry_run": dry_run,
        "vault": str(vault.root),
        "sessions": len(sessions),
        "invalid_sessions": bad,
        "clusters": len(plans),
        "created": counts["create"],
        "updated": counts["update"],
        "unchanged": counts["unchanged"],
        "arcs": arcs,
    }
