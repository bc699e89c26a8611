from datetime import datetime, timedelta

import pytest

from slurm_fair.errors import UserError
from slurm_fair.report.window import window

NOW = datetime(2024, 5, 10, 12, 0, 0)


@pytest.mark.parametrize("text, expected", [
    ("7d", NOW - timedelta(days=7)),
    ("12h", NOW - timedelta(hours=12)),
    ("90m", NOW - timedelta(minutes=90)),
    ("2w", NOW - timedelta(days=14)),
    ("2024-05-01", datetime(2024, 5, 1)),
    ("2024-05-01T08:30:00", datetime(2024, 5, 1, 8, 30)),
])
def test_since_forms(text, expected):
    assert window(text, None, 7, now=NOW).since == expected


def test_default_window_uses_window_days():
    w = window(None, None, 3, now=NOW)
    assert (w.since, w.until) == (NOW - timedelta(days=3), NOW)
    assert w.hours == 72


def test_default_since_counts_back_from_until():
    w = window(None, "2024-05-02", 1, now=NOW)
    assert w.since == datetime(2024, 5, 1)


@pytest.mark.parametrize("since, until", [("yesterday", None), ("7x", None), (None, "soon"), ("1d", "2d")])
def test_bad_values_are_user_errors(since, until):
    with pytest.raises(UserError) as e:
        window(since, until, 7, now=NOW)
    assert e.value.exit_code == 2
