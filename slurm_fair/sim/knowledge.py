"""What the policies know about job speeds in a simulation (``simulate --knowledge``).

* ``oracle``: every job's true ``T_jk`` from the throughput table (what every simulated gain
  assumed before: perfect knowledge);
* ``untagged``: what a real site's controller would see with no job tagged: the type priors for
  the cluster's types (:mod:`slurm_fair.estimates.priors`), then what it learns from the jobs
  that finished, grouped by tenant + job type + GPUs (standing for user + job name + GPUs; the
  class itself stays hidden) through the controller's own learner
  (:func:`slurm_fair.estimates.learn.learn`);
* ``tagged=F``: a seeded fraction F of the jobs carry their class tag (the truth), the others
  are untagged as above.

The engine still runs every job at its true speed; only the problem the policy solves changes.
A type where a job's true throughput is 0 although its gang fits the nodes (the table's
"cannot run there": out of memory) is *not* given away to an untagged job: it believes the
type's prior there like anywhere. If it is placed there it makes no progress for that round and
the engine reports the failed run (:meth:`Knowledge.failed`, an OUT_OF_MEMORY to the learner),
which marks the (group, type) and shows 0 there from then on; so a policy pays one round per
group for not knowing, and no job waits forever on a type it cannot run on.
A believed ``T_jk`` is the believed relative speed times the job's true best throughput, so a
policy's arithmetic stays in the trace's units in every mode. Job sizes are hidden from the jobs
the policy does not know (issue 39): such a job shows no ``remaining_work``, only a time limit
(``extra['time_limit_s']``, :meth:`Knowledge.time_limit`) as its user would write it, a seeded
over-estimate of its run time alone on its fastest type, rounded up to the quarter hour; every
decision reads sizes through :func:`slurm_fair.fairness.known_remaining` (every policy, and the
engine's gang reservation on the engine's one view of a job, ``Simulator._seen``), so each takes
its remaining-time arithmetic from it, as the controller does from Slurm's ``TimeLimit``.
A hidden job's limit is corrected by its group's history (:mod:`slurm_fair.estimates.runtime`):
the use ratios (seconds run / time limit) of the jobs of its group, its job name's pool or the
whole run that *finished*, as the controller reads them from the accounting
(:meth:`Knowledge.ran`); a job's own run time counts only once it finished.

A finished job is one observation of its group: the time it ran, on the type it ran on most,
with the minutes it spent on other types converted by the belief the last decision read (a job
time-shared between types still says how long its work takes). The belief is learned again when
a decision next reads it, not after each finished job, and a finished run adds its use ratio to
its four keys only (:class:`slurm_fair.estimates.runtime.RatioBook`): a run of ``n`` jobs learns
its sizes in time linear in ``n`` and its speeds once per decision with news, not ``n`` times.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass
from typing import Mapping, Sequence

from ..errors import UserError
from ..estimates.learn import Failure, Learned, Model, Run, equivalent_seconds, learn
from ..estimates.priors import prior_speeds
from ..estimates.runtime import EXTRA_KEY, RatioBook, sample
from ..inputs import parse_number

MODES = ("oracle", "untagged", "tagged")
#: time limits are written in quarter hours
LIMIT_STEP_S = 900.0


@dataclass(frozen=True)
class KnowledgeSpec:
    """``oracle``, ``untagged`` or ``tagged`` with the fraction of jobs tagged."""

    mode: str = "oracle"
    fraction: float = 0.0

    def __str__(self) -> str:
        return f"tagged={self.fraction:g}" if self.mode == "tagged" else self.mode


def parse_knowledge(text: str) -> KnowledgeSpec:
    """``oracle`` | ``untagged`` | ``tagged=F`` (0 <= F <= 1); a UserError otherwise."""
    t = text.strip().lower()
    if t in ("oracle", "untagged"):
        return KnowledgeSpec(t)
    name, sep, value = t.partition("=")
    f = parse_number(value) if sep and name == "tagged" else None
    if f is None or not 0 <= f <= 1:
        raise UserError(f"--knowledge {text[:40]!r}: expected oracle, untagged or tagged=F with 0 <= F <= 1")
    return KnowledgeSpec("tagged", float(f))


GroupKey = tuple[str, str, int]


class Knowledge:
    """The belief of one simulation run: asked for each job's believed ``T_jk``, told of every
    job that finished."""

    def __init__(self, spec: KnowledgeSpec, types: Sequence[str], job_ids: Sequence[str], seed: int = 0) -> None:
        self.spec = spec
        self.seed = seed
        self.types = list(types)
        rng = random.Random(f"knowledge-{seed}")
        self.tagged = {j for j in job_ids if spec.mode == "tagged" and rng.random() < spec.fraction}
        self.priors = prior_speeds(self.types).speed
        self.runs: list[Run] = []
        self.failures: list[Failure] = []
        self._model: Model | None = None
        #: the runs or failures changed since :attr:`model` was learned
        self._stale = False
        self.version = 0
        #: the finished jobs' (group, seconds run, time limit), oldest first, and their use ratios
        self.ended: list[tuple[GroupKey, float, float | None]] = []
        self.book = RatioBook()

    def knows(self, job_id: str) -> bool:
        return self.spec.mode == "oracle" or job_id in self.tagged

    def time_limit(self, job_id: str, alone_s: float) -> float:
        """The time limit the user of ``job_id`` wrote for a run of ``alone_s`` seconds: over-estimated
        by a seeded factor of 1.2-5 (users ask for more than they need, often much more, so that
        the job is not killed), rounded up to the quarter hour. The same for a job every round."""
        factor = 1.2 + 3.8 * random.Random(f"limit-{self.seed}-{job_id}").random()
        return LIMIT_STEP_S * math.ceil(factor * max(alone_s, 1.0) / LIMIT_STEP_S)

    def sizes(self, job_id: str, remaining: float, alone_s: float,
              group: GroupKey | None = None) -> tuple[float | None, dict[str, object]]:
        """What the policy sees of a job's size: ``(remaining_work, extra)``; the truth when it
        knows the job, else no remaining work, a time limit (:meth:`time_limit`) and the use
        ratios of the finished jobs of its ``group`` (its pool's, the site's:
        :func:`slurm_fair.estimates.runtime.sample`), never anything of its own true size."""
        if self.knows(job_id):
            return remaining, {}
        limit = self.time_limit(job_id, alone_s)
        seen: dict[str, object] = {"time_limit_s": limit}
        ratios = sample(self.ratios, group, limit) if group is not None else ()
        if ratios:
            seen[EXTRA_KEY] = ratios
        return None, seen

    def ran(self, group: GroupKey, seconds: float, limit_s: float | None) -> None:
        """A job of ``group`` finished after running ``seconds`` (its elapsed time, as the
        accounting records it) under time limit ``limit_s``: one use ratio of its group."""
        self.ended.append((group, float(seconds), limit_s))
        self.book.add(group, float(seconds), limit_s)  # its four keys only: linear over a run
        self.version += 1

    @property
    def ratios(self) -> Mapping[GroupKey, tuple[float, ...]]:
        """:func:`slurm_fair.estimates.runtime.learn_ratios` of the finished runs so far."""
        return self.book.ratios

    def relative(self, group: GroupKey, fresh: bool = True) -> Mapping[str, float]:
        """The believed relative speeds (fastest 1.0) of a group: learned (its own runs, else
        its job type's pool over tenants), else the priors. ``fresh=False``: the belief as last
        learned, without the changes since (what a decision last read)."""
        model = self.model if fresh else self._model
        got = model.belief(group) if model is not None else None
        return got.speed if got is not None else self.priors

    def believed(self, job_id: str, group: GroupKey, true: Mapping[str, float],
                 fits: Sequence[str] | None = None) -> dict[str, float]:
        """What the policy is shown for a job whose true speeds are ``true`` (0 where it cannot
        run); ``fits``: the types whose nodes hold its gang (a controller knows its nodes; by
        default the types where ``true`` > 0)."""
        if self.knows(job_id):
            return dict(true)
        rel = self.relative(group)
        scale = max(true.values(), default=0.0)
        room = set(fits) if fits is not None else {k for k, v in true.items() if v > 0}
        return {k: (rel.get(k, 0.0) * scale if k in room else 0.0) for k in self.types}

    def failed(self, job_id: str, group: GroupKey, gpu_type: str) -> None:
        """A job of ``group`` was placed on ``gpu_type`` and could not run there."""
        if any(f.group == group and f.gpu_type == gpu_type for f in self.failures):
            return
        self.failures.append(Failure(group, gpu_type, "OUT_OF_MEMORY", job_id))
        self._relearn()

    def finished(self, job_id: str, group: GroupKey, seconds_on: Mapping[str, float]) -> None:
        """Learn from a finished job that ran ``seconds_on[type]`` seconds on each type, its
        minutes on other types converted by the belief the last decision read (as the controller
        learns once a cycle: the jobs that finish between two decisions cost one learning)."""
        rel = self.relative(group, fresh=False)
        ran = {k: s for k, s in seconds_on.items() if s > 0 and rel.get(k, 1.0) > 0}
        if not ran:
            return
        main, equivalent = equivalent_seconds(ran, rel)
        self.runs.append(Run(group, main, equivalent, (), job_id))
        self._relearn()

    def _relearn(self) -> None:
        """The runs or failures changed: the model is learned again when next read (:attr:`model`),
        so the jobs that finish between two decisions cost one learning, not one each; what is
        read is the same as learning after every change."""
        self._stale = True
        self.version += 1

    @property
    def model(self) -> Model | None:
        """What :func:`slurm_fair.estimates.learn.learn` makes of every run and failure so far
        (None before the first)."""
        if self._stale:
            self._model = learn(self.runs, self.types, self.failures)
            self._stale = False
        return self._model

    @property
    def learned(self) -> dict[GroupKey, Learned]:
        """The learned groups of :attr:`model`."""
        model = self.model
        return dict(model.groups) if model is not None else {}
