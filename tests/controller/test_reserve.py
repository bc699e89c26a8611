"""Gangs get their turn on Slurm (controller/reserve.py, the rounding step's overdue rule,
plan/order.py's head of line): on fake Slurm and on the pure pieces."""

from __future__ import annotations

from datetime import timedelta

from hypothesis import given, settings, strategies as st
from hypo_profiles import scaled

from slurm_fair.controller.cycle import run_cycle
from slurm_fair.controller.plan.order import natural, site_factors
from slurm_fair.controller.plan.types import JobPlan
from slurm_fair.controller.reserve import overdue
from slurm_fair.model import Job, Problem

from .builders import T0, job
from .conftest import make_config


def _problem(*jobs: Job) -> Problem:
    return Problem({"v100": 8}, {"a": 1.0}, jobs)


def _gang(jid: str, gpus: int = 4, in_system_s: float = 3600.0, ran_s: float = 0.0) -> Job:
    return Job(id=jid, tenant="a", gpus=gpus, throughput={"v100": 1.0}, age_s=in_system_s, attained_s=ran_s)


def test_a_pending_gang_is_overdue_once_its_wait_passes_the_bound_times_its_time_limit() -> None:
    jobs = {
        "g": job("g", "a", gpus=4, time_limit_min=10),                   # waited 3600 >= 2 x 600
        "young": job("young", "a", gpus=4, time_limit_min=40),           # 3600 < 2 x 2400
        "ran": job("ran", "a", gpus=4, time_limit_min=10),               # waited 3600 - 3300 = 300
        "one": job("one", "a", gpus=1, time_limit_min=1),                # a single GPU: never
        "nolimit": job("nolimit", "a", gpus=4, time_limit_min=None),     # no prediction: never
        "running": job("running", "a", gpus=4, state="RUNNING", running_on="v100", time_limit_min=1),
    }
    prob = _problem(_gang("g"), _gang("young"), _gang("ran", ran_s=3300.0), _gang("one", gpus=1),
                    _gang("nolimit"), _gang("running"))
    assert overdue(prob, jobs, round_s=360.0, bound=2.0) == {"g": 6.0}
    assert overdue(prob, jobs, round_s=360.0, bound=0.0) == {}  # off
    # and never before a round of waiting, whatever the ratio
    short = {"g": job("g", "a", gpus=4, time_limit_min=1)}
    assert overdue(_problem(_gang("g", in_system_s=300.0)), short, round_s=360.0, bound=2.0) == {}


def test_a_gang_with_a_limit_of_days_is_overdue_within_the_hours_bound() -> None:
    """Issue 39, item 3: a 3-day time limit makes ``reserve_after_lr = 2`` a 6-day wait; with
    ``reserve_after_h = 4`` the gang is overdue after 4 h of waiting, and not before."""
    days = {"g": job("g", "a", gpus=8, time_limit_min=3 * 24 * 60)}
    cap = 4 * 3600.0
    assert overdue(_problem(_gang("g", in_system_s=3.9 * 3600)), days, 360.0, 2.0, cap) == {}
    got = overdue(_problem(_gang("g", in_system_s=4.1 * 3600)), days, 360.0, 2.0, cap)
    assert list(got) == ["g"] and got["g"] > 2.0
    assert overdue(_problem(_gang("g", in_system_s=4.1 * 3600)), days, 360.0, 2.0) == {}  # limit alone
    # the hours bound never makes a gang wait longer than its limit would
    short = {"g": job("g", "a", gpus=4, time_limit_min=10)}
    assert overdue(_problem(_gang("g")), short, 360.0, 2.0, cap) == {"g": 6.0}


def _fake_scene(fake, tmp_path, reserve_after_lr: float):
    """v100-1 (4 GPUs) holds two running 1-GPU jobs that cannot be stopped; a 4-GPU gang has
    waited an hour (time limit 10 min); two 1-GPU jobs of higher priority arrive behind it."""
    fake.now = T0.replace(tzinfo=None) - timedelta(hours=1)
    gang = fake.submit("alice", "--gres=gpu:4", hold=False, partition="v100", time_limit="10",
                       comment="fair:class=resnet-50-bs32")
    fake.now = T0.replace(tzinfo=None)
    runners = [fake.submit("bob", "--gres=gpu:1", hold=False, partition="v100", comment="fair:class=a3c")
               for _ in range(2)]
    for r in runners:
        fake.start(r, "v100-1", "v100")
    small = [fake.submit("bob", "--gres=gpu:1", hold=False, partition="v100", priority=5000,
                         comment="fair:class=a3c", time_limit="5") for _ in range(2)]
    res = run_cycle(fake, make_config(tmp_path, reserve_after_lr=reserve_after_lr))
    assert res.exit_code == 0, res.message
    return gang, small, res


def _priority(fake, jid: str) -> int:
    return fake.job(jid).priority


def test_an_overdue_gang_becomes_the_top_job_of_its_type_raised_above_the_others(fake, tmp_path) -> None:
    gang, small, res = _fake_scene(fake, tmp_path, reserve_after_lr=2.0)
    assert res.plan is not None and res.plan.jobs[gang].planned_type == "v100"
    assert res.plan.jobs[gang].rank == 1  # first in the plan's line
    assert dict(res.plan.head) == {gang: "v100"}  # recorded with the plan (run --json, the store)
    # the gang is raised just above its highest competitor (5000: a power of two, 4096 > 4000),
    # every competitor is now below it and none needed a push
    assert (fake.job(gang).site_factor or 0) == 4096 and _priority(fake, gang) == 5096
    assert all(_priority(fake, s) < _priority(fake, gang) for s in small)
    assert all((fake.job(s).site_factor or 0) == 0 for s in small)
    # issue 39: a job of the same tenant, QOS and nice submitted after the cycle (no age: at
    # most its pending jobs' priority) is below the gang before any cycle pushes it
    late = fake.submit("bob", "--gres=gpu:1", hold=False, partition="v100", priority=5000,
                       comment="fair:class=a3c", time_limit="5")
    assert _priority(fake, late) < _priority(fake, gang)
    # nothing was cancelled or requeued: the runners cannot be stopped
    assert not [c for c in fake.calls if c[0] in ("scancel", "requeue")]


def test_without_the_bound_the_small_jobs_stay_ahead_of_the_gang(fake, tmp_path) -> None:
    """The control of the test above: the reservation is what changes the order."""
    gang, small, res = _fake_scene(fake, tmp_path, reserve_after_lr=0.0)
    assert res.plan is not None and res.plan.jobs[gang].rank > 1 and not res.plan.head
    assert all(_priority(fake, s) > _priority(fake, gang) for s in small)


@st.composite
def _queues(draw):
    n = draw(st.integers(2, 8))
    prios = draw(st.lists(st.integers(0, 10_000), min_size=n, max_size=n))
    types = draw(st.lists(st.sampled_from(["v100", "k80"]), min_size=n, max_size=n))
    placed = draw(st.lists(st.booleans(), min_size=n, max_size=n))
    heads = draw(st.sets(st.integers(0, n - 1), max_size=2))
    return prios, types, placed, heads


@settings(max_examples=scaled(200), deadline=None)
@given(_queues())
def test_only_heads_are_raised_at_most_to_the_top_and_every_competitor_ends_below_them(q) -> None:
    """Independent of how the factors are computed: only a head is raised, only when a job
    competing for its type was above it and by less than twice what it took (a power of two,
    at least 16); every other written site factor pushes down; after it every other job planned
    for a head's type is below the head."""
    prios, types, placed, heads = q
    jobs = {f"j{i}": job(f"j{i}", "a", priority=p, site_factor=0) for i, p in enumerate(prios)}
    plans = {f"j{i}": JobPlan(f"j{i}", "a", None, i + 1, placed[i], planned_type=types[i]) for i in range(len(prios))}
    head = {f"j{i}": types[i] for i in heads}
    out = site_factors(plans, jobs, {}, {j: ("v100", "k80") for j in jobs}, head=head)
    after = {j: natural(jobs[j], None) + out.get(j, 0) for j in jobs}  # type: ignore[operator]
    assert all(v <= 0 for j, v in out.items() if j not in head)
    for h, k in head.items():
        others = [jobs[j].priority for j in jobs if j not in head and plans[j].planned_type == k]
        need = max(others, default=-1) - jobs[h].priority + 1
        assert out.get(h, 0) == 0 if need <= 0 else need <= out[h] < max(2 * need, 16) + 1
        for j in jobs:
            if j not in head and plans[j].planned_type == k:
                assert after[j] < after[h], (j, h)


def test_an_unplaced_job_keeps_its_push_while_the_plan_keeps_it_unplaced() -> None:
    """A gang the plan holds back keeps the push it carries when its competitors have all
    started (no write every other cycle as new ones come); once placed, the push goes."""
    from slurm_fair.controller.state.fields import Owned

    gang = job("g", "a", gpus=4, priority=9000 - 4096, site_factor=-4096)
    owned = {("g", "site_factor"): Owned("g", "site_factor", "a", "0", written="-4096")}
    alone = {"g": JobPlan("g", "a", None, 1, False, planned_type=None)}
    reach = {"g": ("v100",)}
    assert site_factors(alone, {"g": gang}, owned, reach) == {"g": -4096}
    # placed now: its own priority again
    placed = {"g": JobPlan("g", "a", None, 1, True, planned_type="v100")}
    assert site_factors(placed, {"g": gang}, owned, reach) == {"g": 0}
    # a competitor above the push: the push rises to pass it (a power of two)
    comp = job("c", "a", priority=1000, site_factor=0)
    both = {**alone, "c": JobPlan("c", "a", None, 2, True, planned_type="v100")}
    out = site_factors(both, {"g": gang, "c": comp}, owned, {**reach, "c": ("v100",)})
    assert natural(gang, owned[("g", "site_factor")]) + out["g"] < 1000 and out["g"] == -8192


def test_an_unplaced_gang_is_not_rewritten_every_other_cycle(fake, tmp_path) -> None:
    """Fake Slurm over six cycles: the gang's competitors start and new ones arrive every
    other cycle; its site factor is written once."""
    fake.now = T0.replace(tzinfo=None) - timedelta(hours=1)
    gang = fake.submit("alice", "--gres=gpu:4", hold=False, partition="v100", time_limit="10",
                       comment="fair:class=resnet-50-bs32", priority=9000)
    fake.now = T0.replace(tzinfo=None)
    for r in [fake.submit("bob", "--gres=gpu:1", hold=False, partition="v100", comment="fair:class=a3c")
              for _ in range(2)]:
        fake.start(r, "v100-1", "v100")
    small = [fake.submit("bob", "--gres=gpu:1", hold=False, partition="v100", priority=5000,
                         comment="fair:class=a3c", time_limit="5") for _ in range(2)]
    config = make_config(tmp_path, reserve_after_lr=0)
    writes = []
    for i in range(6):
        res = run_cycle(fake, config)
        assert res.exit_code == 0, res.message
        writes += [r for r in res.results if r.action.job == gang and r.action.kind == "set_site_factor"]
        fake.now += timedelta(seconds=60)
        if i % 2 == 0:
            for j in small:
                if fake.job(j).pending:
                    fake.start(j, "v100-2", "v100")
        else:
            small = [fake.submit("bob", "--gres=gpu:1", hold=False, partition="v100", priority=5000,
                                 comment="fair:class=a3c", time_limit="5") for _ in range(2)]
    assert len(writes) == 1 and (fake.job(gang).site_factor or 0) < 0


def test_a_raised_gang_keeps_its_raise_while_it_waits_and_it_grows_only_past_the_band() -> None:
    """Issue 39: the raise is not lifted when its competitors have all started (no write every
    other cycle as new ones come), kept while it covers the need within the band, and doubled
    (a power of two) once a competitor passes it."""
    from slurm_fair.controller.state.fields import Owned

    gang = job("g", "a", gpus=4, priority=1000 + 4096, site_factor=4096)
    owned = {("g", "site_factor"): Owned("g", "site_factor", "a", "0", written="4096")}
    head = {"g": "v100"}
    plans = {"g": JobPlan("g", "a", None, 1, True, planned_type="v100")}
    reach = {"g": ("v100",), "c": ("v100",)}
    assert site_factors(plans, {"g": gang}, owned, reach, head=head) == {"g": 4096}  # alone: kept
    for top, want in ((4000, 4096), (5000, 4096), (6000, 8192)):
        comp = job("c", "b", priority=top, site_factor=0)
        both = {**plans, "c": JobPlan("c", "b", None, 2, False, planned_type="v100")}
        out = site_factors(both, {"g": gang, "c": comp}, owned, reach, head=head)
        assert out["g"] == want and 1000 + out["g"] > top + out.get("c", 0), (top, out)
