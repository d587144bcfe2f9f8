"""Dataclasses as JSON-ready values: one serialiser for the job summaries and the answers built from dataclasses.

A dataclass becomes an object of its fields in declaration order (so the
field order is the order of the keys a command prints); nested dataclasses,
mappings, lists and tuples are converted likewise, sets become sorted lists
and datetimes ISO strings (``brain_core.times.iso``). A mapping field whose
keys a summary prints sorted (counts by kind) says so in its metadata:
``field(default_factory=dict, metadata=SORTED_KEYS)``.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from dataclasses import fields, is_dataclass
from typing import Any

from brain_core.times import iso

_SORT = "jsonable.sort_keys"
SORTED_KEYS: Mapping[str, Any] = {_SORT: True}


def to_json(value: Any) -> Any:
    """``value`` as plain JSON-ready data (module docstring); other values are returned as they are."""
    if is_dataclass(value) and not isinstance(value, type):
        return json_object(value)
    if isinstance(value, dt.datetime):
        return iso(value)
    if isinstance(value, Mapping):
        return {key: to_json(item) for key, item in value.items()}
    if isinstance(value, set | frozenset):
        return [to_json(item) for item in sorted(value)]
    if isinstance(value, list | tuple):
        return [to_json(item) for item in value]
    return value


def json_object(obj: Any) -> dict[str, Any]:
    """A dataclass instance as a JSON object: its fields in order, those marked ``SORTED_KEYS`` with sorted keys."""
    out: dict[str, Any] = {}
    for spec in fields(obj):
        value = getattr(obj, spec.name)
        if spec.metadata.get(_SORT) and isinstance(value, Mapping):
            value = dict(sorted(value.items()))
        out[spec.name] = to_json(value)
    return out


class JobSummary:
    """The base of a job's summary dataclass: ``as_dict`` is the JSON the command prints as its last line."""

    def as_dict(self) -> dict[str, Any]:
        """The JSON summary: the fields in order (``json_object``)."""
        return json_object(self)
