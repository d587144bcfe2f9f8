"""Timestamps in vault files and transcripts (pure): one lenient reader and one writer for the whole core."""

from __future__ import annotations

import datetime as dt
from typing import Any


def parse_time(value: Any) -> dt.datetime | None:
    """An aware UTC datetime from an ISO string, a date or a datetime; None when unreadable."""
    if value is None or value == "":
        return None
    if isinstance(value, dt.datetime):
        stamp = value
    elif isinstance(value, dt.date):
        stamp = dt.datetime(value.year, value.month, value.day)
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        try:
            return dt.datetime.fromtimestamp(float(value), tz=dt.timezone.utc)
        except (OverflowError, OSError, ValueError):
            return None
    else:
        text = str(value).strip()
        if text.endswith("Z"):
            text = text[:-1] + "+00:00"
        try:
            stamp = dt.datetime.fromisoformat(text)
        except ValueError:
            try:
                stamp = dt.datetime.combine(dt.date.fromisoformat(text[:10]), dt.time())
            except ValueError:
                return None
    if stamp.tzinfo is None:
        stamp = stamp.replace(tzinfo=dt.timezone.utc)
    try:
        return stamp.astimezone(dt.timezone.utc)
    except OverflowError:  # 0001-01-01T00:00:00+05:00, 9999-12-31T23:59:59-05:00: outside what UTC can hold
        return None


def iso(value: dt.datetime | None) -> str | None:
    """ISO 8601 in UTC, seconds precision, ``Z`` suffix (what vault files and answers carry); None stays None."""
    if value is None:
        return None
    return value.astimezone(dt.timezone.utc).replace(microsecond=0).isoformat().replace("+00:00", "Z")
