"""The report window ``[since, until)``: parsing ``--since``/``--until`` values.

Admins type both absolute and relative times (``2024-05-01``, ``2024-05-01T08:00``, ``7d``,
``12h``, ``90m``, ``2w``, ``now``), so one parser accepts them all and turns anything else into a
:class:`~slurm_fair.errors.UserError` (exit 2) that shows the accepted forms. Times are naive
local times, like the ``Submit``/``Start``/``End`` columns sacct prints with
``SLURM_TIME_FORMAT=standard``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime, timedelta

from ..errors import UserError

_RELATIVE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhdw])\s*$", re.IGNORECASE)
_UNIT_S = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}

FORMS = "an ISO date/time (2024-05-01, 2024-05-01T08:00:00), a duration ago (7d, 12h, 90m, 2w) or 'now'"


@dataclass(frozen=True)
class Window:
    """A half-open interval of wall-clock time; every figure of a report is clipped to it."""

    since: datetime
    until: datetime

    @property
    def seconds(self) -> float:
        return (self.until - self.since).total_seconds()

    @property
    def hours(self) -> float:
        return self.seconds / 3600.0


def parse_time(text: str, now: datetime, option: str) -> datetime:
    """One ``--since``/``--until`` value, relative ones counted back from ``now``."""
    t = (text or "").strip()
    if t.lower() == "now":
        return now
    m = _RELATIVE.match(t)
    if m:
        return now - timedelta(seconds=float(m.group(1)) * _UNIT_S[m.group(2).lower()])
    try:
        value = datetime.fromisoformat(t)
    except ValueError:
        raise UserError(f"{option} {text!r}: expected {FORMS}") from None
    if value.tzinfo is not None:  # sacct prints local naive times: compare like with like
        value = value.astimezone().replace(tzinfo=None)
    return value


def window(since: str | None, until: str | None, default_days: float, now: datetime | None = None) -> Window:
    """The report window; ``since`` defaults to ``until - default_days`` ([report].window_days)."""
    now = now or datetime.now().replace(microsecond=0)
    end = parse_time(until, now, "--until") if until else now
    start = parse_time(since, now, "--since") if since else end - timedelta(days=default_days)
    if start >= end:
        raise UserError(f"empty window: --since {start.isoformat()} is not before --until {end.isoformat()}")
    return Window(start, end)
