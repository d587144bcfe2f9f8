"""The wall clock, as a value entry points pass in: production reads the real time, tests move it.

The app (``create_app(settings, clock=...)``) and the jobs take the clock as
an argument instead of calling ``datetime.now()`` deep inside, so a test of
time-dependent behaviour (a stored answer leaving its window) advances a
clock instead of sleeping.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable

Clock = Callable[[], dt.datetime]


def utc_now() -> dt.datetime:
    """The current time, timezone-aware UTC."""
    return dt.datetime.now(dt.timezone.utc)
