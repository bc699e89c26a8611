"""The hand-computed tiny case shared by the unit tests: two tenants, two GPU types, 10 hours.

alice (w=1): a1 on 2 v100 00:00-05:00 (submitted 00:00); speeds v100 1.0, k80 0.25
bob   (w=1): b1 on 2 k80  00:00-10:00 (submitted 00:00); b2 on 1 v100 05:00-07:00 (submitted
04:00); speeds v100 1.0, k80 0.5. Capacity: 2 v100 + 2 k80. Window 2024-05-01 00:00-10:00.
The expected figures are worked out by hand in test_tables.py.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Sequence

from slurm_fair.report.data import JobSpeed, ReportInputs
from slurm_fair.report.window import Window
from slurm_fair.slurm.model import Account, AccountingRecord, Node

T0 = datetime(2024, 5, 1, 0, 0, 0)
WINDOW = Window(T0, T0 + timedelta(hours=10))
ALICE = {"v100": 1.0, "k80": 0.25}
BOB = {"v100": 1.0, "k80": 0.5}


def h(hours: float) -> datetime:
    return T0 + timedelta(hours=hours)


def record(job_id: str, account: str, gpu_type: str | None, gpus: int, submit: float,
           start: float | None, end: float | None, state: str = "COMPLETED", comment: str = "") -> AccountingRecord:
    elapsed = ((end - start) * 3600.0) if (start is not None and end is not None) else 0.0
    return AccountingRecord(
        job_id=job_id, account=account, user=account[:3], state=state, gpu_type=gpu_type, gpus=gpus,
        submit_time=h(submit), start_time=h(start) if start is not None else None,
        end_time=h(end) if end is not None else None, elapsed_s=elapsed, comment=comment,
    )


RECORDS = (
    record("a1", "alice", "v100", 2, 0, 0, 5),
    record("b1", "bob", "k80", 2, 0, 0, 10),
    record("b2", "bob", "v100", 1, 4, 5, 7),
)


def inputs() -> ReportInputs:
    return ReportInputs(
        window=WINDOW, records=RECORDS, capacity={"v100": 2, "k80": 2},
        weights={"alice": 1.0, "bob": 1.0},
        speeds={"a1": JobSpeed(ALICE, "class-table", "a"), "b1": JobSpeed(BOB, "class-table", "b"),
                "b2": JobSpeed(BOB, "class-table", "b")},
        now=h(12),
    )


class FakePort:
    """Just the read methods the reports use, over fixed records (no Slurm)."""

    def __init__(self, records: Sequence[AccountingRecord] = RECORDS,
                 nodes: Sequence[Node] | None = None, accounts: Sequence[Account] | None = None):
        self.records = list(records)
        self._nodes = list(nodes) if nodes is not None else [
            Node("v-1", "idle", {"v100": 2}), Node("k-1", "idle", {"k80": 2})]
        self._accounts = list(accounts) if accounts is not None else [Account("alice"), Account("bob")]
        self.calls: list[tuple[datetime, datetime | None]] = []

    def nodes(self) -> list[Node]:
        return list(self._nodes)

    def accounts(self) -> list[Account]:
        return list(self._accounts)

    def accounting(self, since: datetime, until: datetime | None = None) -> list[AccountingRecord]:
        self.calls.append((since, until))
        end = until or datetime.max
        return [r for r in self.records
                if (r.end_time is None or r.end_time >= since) and (r.submit_time or since) < end]
