"""What the controller remembers between cycles, read from the state store in one call.

A cycle reads its :class:`History` once, decides from it and the snapshot alone
(:func:`.decide.decide`) and records what changed at the end. ``slurm-fair snapshot --json``
reads the same history (read-only) so that it prints the problem the controller would solve.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Mapping

from ..estimates.online import Online, OnlineUpdate, updated
from ..model import frozen_map
from .state import DB_NAME, StateStore
from .state.identity import check_store
from .state.fields import Owned
from .state.originals import ManagedQos


@dataclass(frozen=True)
class Sighting:
    """When the controller first saw a job, and the type it ran on when last seen (None: not
    running). Slurm resets ``SubmitTime`` on a requeue; the first sighting does not move."""

    first_seen: float
    last_type: str | None = None


@dataclass(frozen=True)
class History:
    """Everything a decision needs from earlier cycles (all read-only)."""

    #: online throughput estimates and the last ``fair:tput`` counted per (job, type)
    online: Online = field(default_factory=dict)
    reported: Mapping[tuple[str, str], float] = field(default_factory=dict)
    #: (job, field) -> the field the controller wrote, its value before and the intent in flight
    owned: Mapping[tuple[str, str], Owned] = field(default_factory=dict)
    #: seconds each job ran per GPU type
    job_service: Mapping[str, Mapping[str, float]] = field(default_factory=dict)
    seen: Mapping[str, Sighting] = field(default_factory=dict)
    #: GPU types Slurm refused a job in (BadConstraints)
    refused: Mapping[str, frozenset[str]] = field(default_factory=dict)
    #: job -> when the controller last requeued it
    last_requeues: Mapping[str, float] = field(default_factory=dict)
    #: job -> when its last turn began and the jobs requeued for it (:meth:`..state.Store.turns`)
    turns: Mapping[str, tuple[float, tuple[str, ...]]] = field(default_factory=dict)
    #: when the previous cycle's snapshot was taken (service is counted from there)
    last_snapshot_at: float | None = None
    round_started_at: float = 0.0
    #: the QOS versions before 0.2 made or changed (given back by every cycle, :mod:`.legacy`)
    managed_qos: Mapping[str, ManagedQos] = field(default_factory=dict)
    #: the configured policy's memory (dynamic policies), plain JSON
    policy_state: Mapping[str, Any] = field(default_factory=dict)
    #: (cycle id, plan as a dict) of the newest good cycle, kept when the policy fails
    last_plan: tuple[str, Mapping[str, Any]] | None = None

    def __post_init__(self) -> None:
        for name in ("online", "reported", "owned", "job_service", "seen", "refused",
                     "last_requeues", "turns", "managed_qos", "policy_state"):
            object.__setattr__(self, name, frozen_map(getattr(self, name)))

    def advanced(
        self, now: float, online: OnlineUpdate, job_service: Mapping[str, Mapping[str, float]],
        running: Mapping[str, str | None], refused: Mapping[str, str],
    ) -> "History":
        """This history with one snapshot counted: new reports folded in, the service run since
        the last snapshot added, every job of the snapshot seen now (with the type it runs on,
        None when pending), the types Slurm just refused added. What the store holds after a
        cycle records it, so a decision and a dry run read the same numbers."""
        service = {j: dict(per) for j, per in self.job_service.items()}
        for j, per in job_service.items():
            for k, s in per.items():
                if s > 0:
                    service.setdefault(j, {})[k] = service.get(j, {}).get(k, 0.0) + s
        seen = dict(self.seen)
        for j, ran_on in running.items():
            first = seen[j].first_seen if j in seen else now
            seen[j] = Sighting(first, ran_on)
        bad = {j: set(ks) for j, ks in self.refused.items()}
        for j, k in refused.items():
            bad.setdefault(j, set()).add(k)
        return replace(
            self, online=updated(self.online, online), reported={**self.reported, **online.reported},
            job_service=service, seen=seen, refused={j: frozenset(ks) for j, ks in bad.items()},
            last_snapshot_at=now,
        )


def policy_state_key(policy: str) -> str:
    return f"policy_state:{policy}"


def read_history(store: StateStore, policy: str) -> History:
    """The history as the store holds it, for the configured ``policy``."""
    raw = store.get_meta(policy_state_key(policy))
    try:
        state = json.loads(raw) if raw else {}
    except json.JSONDecodeError:
        state = {}
    last_at = store.get_meta("last_snapshot_at")
    return History(
        online=store.online_estimates(), reported=store.reported_tputs(),
        owned=store.owned(), job_service=store.job_service(),
        seen={j: Sighting(float(r["first_seen"]), r["last_type"]) for j, r in store.jobs_seen().items()},
        refused={j: frozenset(ks) for j, ks in store.refused_types().items()},
        last_requeues=store.last_requeues(), turns=store.turns(),
        last_snapshot_at=float(last_at) if last_at else None,
        round_started_at=float(store.get_meta("round_started_at") or 0.0),
        managed_qos=store.managed_qos(),
        policy_state=state if isinstance(state, dict) else {},
        last_plan=store.last_plan(),
    )


def read_history_at(state_dir: str | Path, policy: str) -> History:
    """The history in ``state_dir``, opened read-only (never created, migrated or locked);
    empty when the controller never ran there; a UserError when the file there is not a store."""
    path = Path(state_dir) / DB_NAME
    if not check_store(path):
        return History()
    with StateStore.read_only(path) as store:
        return read_history(store, policy)
