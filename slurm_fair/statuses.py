"""The words an allocation and a controller cycle end with: one enum each, one home.

They are ``str`` enums: a member equals its word (``AllocationStatus.FALLBACK == "fallback"``),
is written into JSON and SQLite as that word, and reads back from them as a plain string that
still compares equal, so the state store, the audit log and PROBLEM.json keep their formats.
``str()`` and f-strings give the word on every Python (3.12 changed what ``format`` does for
mixed-in enums, hence :meth:`_Word.__str__` and ``__format__``).
"""

from __future__ import annotations

from enum import Enum


class _Word(str, Enum):
    """A status word."""

    def __str__(self) -> str:
        return str(self.value)

    def __format__(self, spec: str) -> str:
        return format(str(self.value), spec)


class AllocationStatus(_Word):
    """How a policy's answer was reached (``Allocation.status``)."""

    #: an optimal solution of the policy's model(s)
    OPTIMAL = "optimal"
    #: a rule, not an optimisation (fifo, Hadar's prices)
    HEURISTIC = "heuristic"
    #: the model failed; the documented fallback allocation (docs/fairness.md)
    FALLBACK = "fallback"
    #: nothing to allocate this cycle (no GPU jobs)
    EMPTY = "empty"


class CycleStatus(_Word):
    """How a controller cycle ended (the state store's ``cycles.status``, the audit log, ``run``)."""

    RUNNING = "running"
    OK = "ok"
    DRY_RUN = "dry-run"
    DRY_RUN_POLICY_FAILED = "dry-run-policy-failed"
    POLICY_FAILED = "policy-failed"
    PARTIAL = "partial"
    SLURM_UNAVAILABLE = "slurm-unavailable"
    ERROR = "error"


#: cycle statuses that are not failures (docs/controller.md)
OK_CYCLES: frozenset[str] = frozenset({CycleStatus.OK, CycleStatus.DRY_RUN})
