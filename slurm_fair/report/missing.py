"""A figure the report could not compute, and why.

Every table builder appends to one list of these instead of raising for missing data, so
the report always renders and says what it left out (:attr:`~.tables.Report.not_computed`).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class NotComputed:
    """A figure the report could not compute, and why (shown in every format)."""

    figure: str
    reason: str

    def to_dict(self) -> dict[str, str]:
        return {"figure": self.figure, "reason": self.reason}
