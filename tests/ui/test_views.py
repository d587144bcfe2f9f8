"""What the operator pages compute from rows (pure): heat by week, weekly shares, signal ages, the stored dry run."""

from __future__ import annotations

import datetime as dt
import re
from types import SimpleNamespace

from brain_api.ui import charts, views
from brain_core.heat import HeatRules, arc_activity, heat_of, status_of
from brain_core.times import iso

NOW = dt.datetime(2026, 12, 2, 12, 0, tzinfo=dt.timezone.utc)  # a Wednesday


def test_heat_by_week_is_zero_before_the_arc_and_the_keepers_heat_now() -> None:
    meta = {"created": iso(NOW - dt.timedelta(days=20)), "updated": iso(NOW - dt.timedelta(days=10)), "source_sessions": ["a", "b"], "status": "stalled"}
    heat = views.heat_by_week(meta, now=NOW, rules=HeatRules())
    assert len(heat) == views.HEAT_WEEKS
    assert heat[:5] == [0, 0, 0, 0, 0]  # five and more weeks ago the arc did not exist
    activity = arc_activity(meta)
    assert heat[-1] == heat_of(activity, NOW, HeatRules(), status=status_of(activity, NOW))
    assert heat[-2] > heat[-1]  # a week ago it was being worked on; now it has cooled


def test_share_rows_cover_the_weeks_with_none_for_an_empty_week() -> None:
    monday = views.week_start(NOW)
    assert monday == dt.date(2026, 11, 30)
    rows = views.share_rows({"arcs": [SimpleNamespace(week=monday, total=4, attributed=3)]}, now=NOW, weeks=3)
    assert [r.week for r in rows] == [dt.date(2026, 11, 16), dt.date(2026, 11, 23), monday]
    assert rows[-1].share("arcs") == 75.0 and rows[0].share("arcs") is None


def test_signals_are_counted_by_severity_and_age() -> None:
    counts = [(False, "critical", 0, 1), (False, "critical", 1, 2), (True, "info", 3, 1), (True, "odd", 2, 4), (False, "info", 9, 1)]
    tables = views.signal_tables(counts)
    assert tables["all"].severities == ["critical", "info", "odd"]
    assert tables["projects"].counts == {("critical", "under 1 day"): 1, ("critical", "1–7 days"): 2, ("info", "over 30 days"): 1}
    assert tables["fleet-wide"].by_severity == {"info": 1, "odd": 4} and tables["all"].by_severity["info"] == 2


def test_a_dry_run_is_its_plan_lines_and_its_summary() -> None:
    lines = ['{"path": "a.md", "outcome": "changed"}', "progress noise", '{"path": "b.md"}', '{"scanned": 2, "changed": 2}']
    run = views.parse_dry_run(lines, keep=1)
    assert run is not None and run.summary == {"scanned": 2, "changed": 2} and run.planned == 2 and len(run.changes) == 1
    assert views.parse_dry_run(['{"path": "a.md"}']) is None  # an interrupted run: no summary, nothing shown


def test_charts_escape_their_labels() -> None:
    svg = str(charts.bars([("<b>", 3.0)], label='a "chart" <x>'))
    assert "<b>" not in svg and "&lt;b&gt;" in svg and "&lt;x&gt;" in svg
    assert str(charts.sparkline([], label="none")) == ""


def test_a_count_axis_has_whole_gridlines_and_a_measure_keeps_its_own() -> None:
    ticks = lambda svg: re.findall(rf'x="{charts.LEFT - 6}" y="[^"]+" text-anchor="end">([^<]+)<', str(svg))  # noqa: E731 (the y axis's)
    assert ticks(charts.bars([("mon", 1), ("tue", 3)], label="signals")) == ["0", "2", "4"]  # not 1.5 of a signal
    assert ticks(charts.lines(["a", "b"], [("ms", [0.5, 3.0])], label="p95")) == ["0", "1.5", "3"]
