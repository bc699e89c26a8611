"""A cycle triggered by job ends: the controller's mirror of Hops' re-plan inside a round.

Hops re-plans when GPUs free up instead of waiting for the next round (docs/policies/hops.md);
the controller's cycles are periodic (``[controller] interval_s``). Between two cycles the loop
polls the running jobs (one ``squeue -t RUNNING`` through the port) every ``poll_s`` and asks
:class:`JobEndTrigger` whether to run a cycle now: when a job that was running is gone (it
ended, or was requeued by someone else) and at least ``min_gap_s`` passed since the last cycle
(so a burst of completions makes one cycle, not one per job), or when the period is over. Pure:
the caller passes the running job ids and the time.

Plugs into the controller's loop (``controller/cycle.py``'s caller, ``commands/run.py``'s loop):
``trigger.cycled(running_ids, now)`` after each cycle, and instead of sleeping ``interval_s``,
``while not trigger.due(port_running_ids(), now): sleep(poll_s)``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Collection


@dataclass
class JobEndTrigger:
    """Whether a cycle is due: the period is over, or a running job ended after ``min_gap_s``."""

    interval_s: float
    min_gap_s: float = 30.0
    last_cycle: float | None = None
    running: frozenset[str] = field(default_factory=frozenset)
    #: why the last ``due`` said yes (``period`` or ``job end``), for the audit log
    reason: str = ""

    def cycled(self, running: Collection[str], now: float) -> None:
        """A cycle ran at ``now`` and left these jobs running."""
        self.last_cycle = now
        self.running = frozenset(running)

    def ended(self, running: Collection[str]) -> frozenset[str]:
        """The jobs running after the last cycle that are not running now."""
        return self.running - frozenset(running)

    def due(self, running: Collection[str], now: float) -> bool:
        """Run a cycle now? Always before the first one."""
        if self.last_cycle is None or now - self.last_cycle >= self.interval_s:
            self.reason = "period"
            return True
        if now - self.last_cycle >= self.min_gap_s and self.ended(running):
            self.reason = "job end"
            return True
        return False
