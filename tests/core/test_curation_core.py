"""Curation in the pure core (ADR 0048): what a marker's attrs say, and what a file's text says of its entries' state."""

from __future__ import annotations

import datetime as dt

from brain_core import curation
from brain_core.feed.collect import collect_signals
from brain_core.markers import Attribution, parse_request
from brain_core.vault import frontmatter, logs, records

AT = dt.datetime(2026, 12, 1, 9, 30, tzinfo=dt.timezone.utc)
LOG = "left/reference/lessons-2026-12-01.md"


def _lesson(content: str, marker_id: str, **attrs: object) -> str:
    req = parse_request("lesson", content, {"project": "api", **attrs}, max_chars=4096)
    return logs.render_log_entry("lesson", req, Attribution("api"), marker_id=marker_id, at=AT)


def test_supersedes_is_read_leniently() -> None:
    assert curation.supersedes_refs("lesson:a.md#1, ADR-7  decision:b.md") == ("lesson:a.md#1", "ADR-7", "decision:b.md")
    assert curation.supersedes_refs(["ADR-7", 3, "", "ADR-7", None]) == ("ADR-7",)
    assert curation.supersedes_refs({"a": 1}) == () and curation.supersedes_refs(None) == ()
    assert len(curation.supersedes_refs([f"id{i}" for i in range(50)])) == curation.MAX_SUPERSEDES
    assert curation.adr_number_of("adr-0012") == 12 and curation.adr_number_of("ADR-x") is None


def test_a_date_is_valid_through_its_day_and_ttl_days_count_from_the_write() -> None:
    until, days = curation.expiry_attrs({"valid_until": "2026-12-03", "ttl_days": "5"})
    assert until == dt.datetime(2026, 12, 4, tzinfo=dt.timezone.utc) and days == 5.0
    assert curation.valid_until(until, days, AT) == "2026-12-04T00:00:00Z"  # the earlier of the two
    assert curation.valid_until(None, 1.5, AT) == "2026-12-02T21:30:00Z"
    assert curation.expiry_attrs({"valid_until": "soon", "ttl_days": -1}) == (None, None)
    assert curation.expiry_attrs({"ttl_days": True}) == (None, None)
    last, _ = curation.expiry_attrs({"valid_until": "9999-12-31"})  # no next midnight: through its last second
    assert last == dt.datetime(9999, 12, 31, 23, 59, 59, tzinfo=dt.timezone.utc)


def test_a_retraction_record_in_a_log_is_the_entrys_state_and_no_entry_of_its_own() -> None:
    text = _lesson("Pin the digest.", "m1") + _lesson("Cache wheels.", "m2", ttl_days=2)
    first, second = records.lesson_records(text, LOG)
    assert second.meta["valid_until"] == "2026-12-03T09:30:00Z"
    entry = {"id": first.id, "title": first.title, "kind": "lesson"}
    retracted = logs.render_curation_entry("retracted", entry, at=AT, who=Attribution("api"), by="t0123456789ab", reason="## Wrong:\nit broke updates")
    superseded = logs.render_curation_entry(
        "superseded", {"id": second.id, "title": second.title}, at=AT, who=Attribution("api"), by="operator", successor="lesson:x"
    )
    after = records.lesson_records(text + retracted + superseded, LOG)
    assert [r.id for r in after] == [first.id, second.id]  # the records are no entries
    assert after[0].status == "retracted" and after[0].meta["retracted_reason"] == "## Wrong:\nit broke updates"
    assert after[0].meta["retracted_by"] == "t0123456789ab" and after[0].meta["retracted_at"] == "2026-12-01T09:30:00Z"
    assert after[1].status == "superseded" and after[1].meta["superseded_by"] == ["lesson:x"]
    assert curation.state_of(after[1].status, after[1].meta, AT) == "superseded"
    assert curation.state_of(None, second.meta, AT + dt.timedelta(days=3)) == "expired"
    assert records.entry_line_spans(LOG, text + retracted).keys() == {first.id, second.id}


def test_signal_and_decision_files_carry_their_state_in_frontmatter() -> None:
    req = parse_request("signal", "Disk full on build-3", {"project": "api", "severity": "critical"}, max_chars=4096)
    text = logs.render_signal(req, Attribution("api"), marker_id="s1", at=AT)
    path = "amygdala/20261201-093000-critical-disk.md"
    assert records.signal_record(text, path).status is None
    retracted = frontmatter.update(text, {"status": "retracted", "retracted_reason": "false alarm", "retracted_by": "operator"})
    record = records.signal_record(retracted, path)
    assert record.status == "retracted" and record.meta["retracted_reason"] == "false alarm"
    withdrawn = collect_signals([record], AT, stale_days=7)
    assert withdrawn.kept == [] and withdrawn.cleared == 1  # the keeper's signals.md leaves it out too
    live = records.signal_record(text, path)
    assert [r.id for r in collect_signals([live], AT, stale_days=7).kept] == [live.id]

    req = parse_request("decision", "Queue in Postgres", {"project": "api", "supersedes": "ADR-3"}, max_chars=4096)
    adr = logs.render_decision(req, Attribution("api"), number=4, marker_id="d1", at=AT)
    assert records.decision_record(adr, "left/decisions/ADR-0004-queue.md").meta["supersedes"] == ["ADR-3"]
    old = frontmatter.update(adr, {"status": "superseded", "superseded_by": "ADR-0005"})
    record = records.decision_record(old, "left/decisions/ADR-0004-queue.md")
    assert record.status == "superseded" and record.meta["superseded_by"] == ["ADR-0005"]


def test_an_audit_line_names_who_and_never_more() -> None:
    line = curation.audit_line("retracted", "lesson:x", at=AT, by="t0123456789ab", project="org1/api", vault_path=LOG, reason="wrong")
    assert line.endswith("\n") and "\n" not in line[:-1]
    assert '"by": "t0123456789ab"' in line and "superseded_by" not in line
    assert curation.audit_path(AT) == "audit/curation-2026-12.jsonl"


def test_a_log_reads_a_retracted_successor_off_its_entry_and_reinstates_it_when_none_is_left() -> None:
    text = _lesson("Pin the digest.", "m1")
    [entry] = records.lesson_records(text, LOG)
    who, named = Attribution("api"), {"id": entry.id, "title": entry.title, "kind": "lesson"}
    later = AT + dt.timedelta(hours=1)
    for successor in ("lesson:b", "lesson:c"):
        text += logs.render_curation_entry("superseded", named, at=AT, who=who, by="operator", successor=successor)
    text += logs.render_curation_entry("successor_retracted", named, at=later, who=who, by="operator", successor="lesson:b")
    [one_left] = records.lesson_records(text, LOG)
    assert one_left.status == "superseded" and one_left.meta["superseded_by"] == ["lesson:c"] and "reinstated_at" not in one_left.meta
    text += logs.render_curation_entry("reinstated", named, at=later, who=who, by="t0123456789ab", successor="lesson:c")
    [back] = records.lesson_records(text, LOG)
    assert back.status is None and "superseded_by" not in back.meta
    assert (back.meta["reinstated_after"], back.meta["reinstated_by"], back.meta["reinstated_at"]) == ("lesson:c", "t0123456789ab", "2026-12-01T10:30:00Z")
    assert back.meta["superseded_at"] == "2026-12-01T09:30:00Z"  # the history still shows the supersession
    # A record naming a successor the entry never had changes nothing.
    stray = logs.render_curation_entry("reinstated", named, at=later, who=who, by="operator", successor="lesson:zz")
    assert records.lesson_records(text + stray, LOG) == [back]


def test_a_files_own_status_is_kept_while_superseded_and_restored_when_reinstated() -> None:
    meta = {"status": "accepted"}
    first = curation.superseded_changes(meta, "ADR-0005", at=AT, by="operator")
    assert first["status"] == "superseded" and first["status_before_superseded"] == "accepted" and first["superseded_by"] == "ADR-0005"
    both = {**meta, **first}
    second = curation.superseded_changes(both, "lesson:x", at=AT, by="operator")
    assert second["superseded_by"] == ["ADR-0005", "lesson:x"] and "status_before_superseded" not in second  # kept from the first
    both.update(second)
    action, changes, drop = curation.unsuperseded_changes(both, "ADR-0005", at=AT, by="operator")
    assert (action, changes, drop) == ("successor_retracted", {"superseded_by": "lesson:x"}, ())
    both.update(changes)
    action, changes, drop = curation.unsuperseded_changes(both, "lesson:x", at=AT, by="operator")
    assert action == "reinstated" and changes["status"] == "accepted" and changes["reinstated_after"] == "lesson:x"
    assert set(drop) == {"superseded_by", "status_before_superseded"}
    _, changes, drop = curation.unsuperseded_changes({"status": "superseded", "superseded_by": "x"}, "x", at=AT, by="operator")
    assert "status" not in changes and "status" in drop  # a signal had no status of its own: it goes
