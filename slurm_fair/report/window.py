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

_RELATIVE = re.compile(r"([0-9]{1,12}(?:\.[0-9]{1,6})?)\s*([smhdw])", re.IGNORECASE | re.ASCII)
_UNIT_S = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}

#: the earliest time a window may reach: Slurm's accounting counts from the Unix epoch, and
#: ``datetime`` arithmetic before year 1 overflows (``--since 99999999999d`` was a traceback)
EARLIEST = datetime(1970, 1, 1)
#: the latest: far beyond any accounting record, far below ``datetime``'s year 9999
LATEST = datetime(9000, 1, 1)

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
    """One ``--since``/``--until`` value, relative ones counted back from ``now``; a UserError
    naming ``option`` for anything else, an empty value, a control character (a pasted
    newline), non-ASCII digits (``１d``) or a time outside [:data:`EARLIEST`, :data:`LATEST`]."""
    t = text.strip(" \t")
    if not t or not t.isprintable():
        raise UserError(f"{option} {text[:40]!r}: expected {FORMS}")
    if t.lower() == "now":
        return now
    m = _RELATIVE.fullmatch(t)
    try:
        if m:
            value = now - timedelta(seconds=float(m.group(1)) * _UNIT_S[m.group(2).lower()])
        elif t.isascii():
            value = datetime.fromisoformat(t)
            if value.tzinfo is not None:  # sacct prints local naive times: compare like with like
                value = value.astimezone().replace(tzinfo=None)
        else:
            raise ValueError(t)
    except ValueError:
        raise UserError(f"{option} {text[:40]!r}: expected {FORMS}") from None
    except OverflowError:
        value = datetime.min
    if not EARLIEST <= value <= LATEST:
        raise UserError(f"{option} {text[:40]!r}: out of range (a time between {EARLIEST:%Y-%m-%d} "
                        f"and {LATEST:%Y-%m-%d})")
    return value


def window(since: str | None, until: str | None, default_days: float, now: datetime | None = None) -> Window:
    """The report window; ``since`` defaults to ``until - default_days`` ([report].window_days)."""
    now = now or datetime.now().replace(microsecond=0)
    end = parse_time(until, now, "--until") if until is not None else now
    if since is not None:
        start = parse_time(since, now, "--since")
    else:
        try:
            start = end - timedelta(days=default_days)
        except (OverflowError, ValueError):  # inf, nan
            start = datetime.min
        if start < EARLIEST:
            raise UserError(f"[report] window_days {default_days:g} before --until {end.isoformat()} reaches "
                            f"back before {EARLIEST:%Y-%m-%d}: give --since")
    if start >= end:
        raise UserError(f"empty window: --since {start.isoformat()} is not before --until {end.isoformat()}")
    return Window(start, end)
