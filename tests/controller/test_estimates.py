"""Phase 3: the order of precedence of throughput estimates, and hostile tags."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from hypothesis import given, settings, strategies as st
from hypo_profiles import scaled

from slurm_fair.estimates import gavel as throughput_table
from slurm_fair.config import validate
from slurm_fair.errors import ConfigError, InputError
from slurm_fair.estimates.classes import ClassTable, gavel_class_name, load_class_table
from slurm_fair.estimates.estimate import estimate_job
from slurm_fair.estimates.rules import Rules
from slurm_fair.estimates.tags import preemptible, tag_tput
from slurm_fair.slurm.parse.tags import parse_tags

from .builders import job

TYPES = ["k80", "p100", "v100"]
TABLE = ClassTable({"resnet": {"k80": 1.0, "p100": 4.0, "v100": 8.0},
                    "lm": {"k80": 20.0, "p100": 60.0, "v100": 65.0}}, "test")
REPO = Path(__file__).resolve().parents[2]


NO_RULES = Rules()


def est(j, rules=NO_RULES, online=None, types=TYPES, table=TABLE):
    warnings: set[str] = set()
    return estimate_job(j, types, table, rules, online or {}, warnings), warnings


def test_no_class_takes_the_type_priors():
    e, _ = est(job("1", "a"))
    assert e.throughput["v100"] == 1.0 > e.throughput["p100"] > e.throughput["k80"] > 0
    assert e.source == "prior" and e.klass is None


def test_no_class_and_no_known_model_is_flat_on_every_type():
    e, _ = est(job("1", "a"), types=["gpu", "fast"])
    assert dict(e.throughput) == {"gpu": 1.0, "fast": 1.0} and e.source == "flat"


def test_no_class_uses_its_groups_learned_speeds():
    warnings: set[str] = set()
    j = job("1", "a")
    learned = {(j.user, j.name, 1): {"k80": 1.0, "p100": 0.5, "v100": 0.25}}
    e = estimate_job(j, TYPES, TABLE, Rules(), {}, warnings, learned)
    assert dict(e.throughput) == learned[(j.user, j.name, 1)] and e.source == "learned"


def test_tag_looks_up_class_table():
    e, _ = est(job("1", "a", comment="fair:class=resnet"))
    assert dict(e.throughput) == dict(TABLE.rows["resnet"])
    assert (e.klass, e.class_source, e.source) == ("resnet", "tag", "class-table")


def test_observed_beats_table_per_type_only():
    online = {"resnet": {"v100": 10.0}}
    e, _ = est(job("1", "a", comment="fair:class=resnet"), online=online)
    assert e.throughput["v100"] == 10.0 and e.sources["v100"] == "observed"
    assert e.throughput["k80"] == 1.0 and e.sources["k80"] == "class-table"
    assert e.source == "observed"


def test_tag_beats_rules_and_rules_beat_default():
    rules = Rules(account_classes={"a": "lm"}, name_classes=(("bert*", "resnet"),), default_class="resnet")
    assert est(job("1", "a", comment="fair:class=resnet"), rules)[0].klass == "resnet"
    assert est(job("1", "a"), rules)[0].class_source == "rule:account"
    e, _ = est(job("1", "b", name="bert-large"), rules)
    assert (e.klass, e.class_source) == ("resnet", "rule:name=bert*")
    assert est(job("1", "b", name="other"), rules)[0].class_source == "default_class"


def test_unknown_class_warns_and_falls_through():
    rules = Rules(account_classes={"a": "lm"})
    e, warnings = est(job("1", "a", comment="fair:class=nosuch"), rules)
    assert e.klass == "lm"
    assert any("nosuch" in w for w in warnings)


def test_type_missing_from_table_is_scaled_by_its_prior():
    e, _ = est(job("1", "a", comment="fair:class=resnet"), types=["v100", "a100", "l4"])
    assert e.throughput["a100"] > 8.0 > e.throughput["l4"] and e.sources["a100"] == "prior"


def test_type_missing_from_table_without_a_prior_is_below_the_slowest_never_the_best():
    e, _ = est(job("1", "a", comment="fair:class=resnet"), types=["k80", "v100", "rtx2080"])
    slowest = min(e.throughput["k80"], e.throughput["v100"])
    assert e.throughput["rtx2080"] == 0.5 * slowest and e.sources["rtx2080"] == "assumed"


def test_unclassified_job_uses_its_own_observations():
    e, _ = est(job("7", "a"), online={"job:7": {"v100": 3.0}})
    assert e.throughput["v100"] == 3.0 and e.online_key == "job:7"


HOSTILE = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=200)


@settings(max_examples=scaled(150), deadline=None)
@given(HOSTILE)
def test_any_comment_gives_a_finite_positive_estimate(comment):
    e, _ = est(job("1", "a", comment=comment))
    assert set(e.throughput) == set(TYPES)
    assert all(math.isfinite(v) and v > 0 for v in e.throughput.values())


def test_hostile_tags_are_ignored():
    for bad in ["fair:tput=nan", "fair:tput=inf", "fair:tput=-3", "fair:tput=1e400", "fair:tput=$(rm)",
                "fair:tput=1e12"]:
        assert tag_tput(parse_tags(bad)) is None, bad
    assert tag_tput(parse_tags("x fair:tput=2.5 y")) == 2.5
    e, w = est(job("1", "a", comment="fair:class=../../etc;rm fair:class=lm"))
    # the first class tag wins and is malformed: ignored, nothing else is believed
    assert e.klass is None and w


def test_a_bare_class_flag_names_no_class():
    """A bare ``fair:class`` has no value: no class named "true", no warning (the adapter's
    parser used to invent the value "true"), and a bare ``fair:preemptible`` still opts in."""
    j = job("1", "a", comment="fair:class fair:preemptible", requeue=True)
    e, w = est(j, Rules(default_class="lm"))
    assert (e.klass, e.class_source, w) == ("lm", "default_class", set())
    assert preemptible(j)


def test_rules_validation_names_the_key():
    """A bad class name is refused when the configuration is read, not at the first cycle."""
    with pytest.raises(ConfigError) as exc:
        validate({"throughput": {"account_classes": {"phys": "bad name!"}}}, "x.toml")
    assert "throughput.account_classes" in exc.value.message() and "'phys' = 'bad name!'" in exc.value.message()


def test_conf_classes_csv_matches_the_embedded_measurements():
    """The shipped table is the Gavel measurements (every gang size) under tag-friendly names."""
    shipped = load_class_table(REPO / "conf" / "classes.csv")
    gavel = throughput_table.load(None)
    checked = 0
    for job_type in gavel.job_types:
        name = gavel_class_name(job_type)
        if name in shipped:
            for g in (1, 2, 4, 8):
                for k in ("k80", "p100", "v100"):
                    if gavel.is_measured(job_type, g, k):
                        assert math.isclose(shipped.row(name, g)[k], gavel.lookup(job_type, g, k), rel_tol=1e-5)
                        checked += 1
    assert len(shipped.rows) == len(load_class_table(None).rows) >= 20
    assert checked > 3 * 20 * 2 and len(shipped.sizes) >= 15


def test_a_gang_uses_the_row_measured_at_its_size():
    table = ClassTable({"big": {"k80": 0.35, "p100": 1.6, "v100": 2.5}}, "test",
                       {"big": {2: {"k80": 0.0, "p100": 2.9, "v100": 4.2}, 8: {"k80": 0.0, "p100": 9.9, "v100": 10.3}}})
    for gpus, row in [(1, "big"), (2, 2), (3, 2), (7, 2), (8, 8), (16, 8)]:
        e, _ = est(job("1", "a", gpus=gpus, comment="fair:class=big"), table=table)
        want = table.rows["big"] if row == "big" else table.sizes["big"][row]
        assert dict(e.throughput) == dict(want), gpus
        assert e.online_key == ("big" if gpus == 1 else f"big@{gpus}")
    # 0 on k80 for a gang: the problem sees a type where the job cannot run
    e, _ = est(job("1", "a", gpus=4, comment="fair:class=big"), table=table)
    assert e.throughput["k80"] == 0.0 and e.sources["k80"] == "class-table"
    # a gang's observations are its size's own: 1-GPU observations do not touch it
    e, _ = est(job("1", "a", gpus=4, comment="fair:class=big"), table=table,
               online={"big": {"v100": 99.0}, "big@4": {"p100": 7.0}})
    assert e.throughput["v100"] == 4.2 and e.throughput["p100"] == 7.0
    # a class with only larger sizes measured: the smallest there is
    only = ClassTable({}, "test", {"x": {4: {"v100": 4.0, "k80": 1.0}}})
    assert "x" in only and dict(only.row("x", 1)) == {"v100": 4.0, "k80": 1.0}


def test_embedded_table_keeps_a_class_off_a_type_it_cannot_run_on_at_its_size():
    table = load_class_table(None)
    assert table.row("resnet-50-bs128", 1)["k80"] > 0
    assert table.row("resnet-50-bs128", 4)["k80"] == 0 and table.row("resnet-50-bs128", 4)["v100"] > 0
    e, _ = est(job("1", "a", gpus=4, comment="fair:class=resnet-50-bs128"), table=table)
    assert e.throughput["k80"] == 0 and e.throughput["v100"] > e.throughput["p100"] > 0


def test_class_table_gpus_column(tmp_path):
    p = tmp_path / "c.csv"
    p.write_text("class,gpus,v100,k80\nm,,2,1\nm,4,6,0\n")
    t = load_class_table(p)
    assert dict(t.rows["m"]) == {"v100": 2.0, "k80": 1.0} and dict(t.row("m", 5)) == {"v100": 6.0, "k80": 0.0}
    p.write_text("class,gpus,v100\nm,4,1\nm,4,2\nn,two,1\nn,0,1\n")
    try:
        load_class_table(p)
    except InputError as exc:
        msg = exc.message()
        assert "line 3.class" in msg and "4 GPUs" in msg and "line 4.gpus" in msg and "line 5.gpus" in msg
    else:
        raise AssertionError("bad table accepted")


def test_bad_class_table_lists_every_problem(tmp_path):
    p = tmp_path / "c.csv"
    p.write_text("class,v100,k80\nok,1,2\nbad name,1,1\nneg,-1,x\n")
    try:
        load_class_table(p)
    except InputError as exc:
        msg = exc.message()
        assert "line 3.class" in msg and "line 4.v100" in msg and "line 4.k80" in msg
    else:
        raise AssertionError("bad table accepted")


def test_a_type_the_group_fails_on_is_zero_whatever_the_table_says_and_runs_are_shown():
    from slurm_fair.estimates.learn import GroupSpeeds

    j = job("1", "a", comment="fair:class=resnet")
    learned = {(j.user, j.name, 1): GroupSpeeds({"k80": 0.0, "p100": 0.5, "v100": 1.0},
                                                {"p100": 2, "v100": 3}, {"k80": 1})}
    e = estimate_job(j, TYPES, TABLE, Rules(), {}, set(), learned)
    assert e.throughput["k80"] == 0 and e.sources["k80"] == "fails" and e.throughput["v100"] == 8.0
    assert e.labels()["k80"] == "fails (1 run)" and e.labels()["v100"] == "class-table"
    untagged = job("2", "a")
    e = estimate_job(untagged, TYPES, TABLE, Rules(), {}, set(), learned)
    assert dict(e.throughput) == {"k80": 0.0, "p100": 0.5, "v100": 1.0}
    assert e.labels() == {"k80": "fails (1 run)", "p100": "learned (2 runs)", "v100": "learned (3 runs)"}
    assert e.to_dict()["runs"] == {"k80": 1, "p100": 2, "v100": 3}
    # only an observation on the type (the job reports progress there) beats a failure
    e = estimate_job(untagged, TYPES, TABLE, Rules(), {"job:2": {"k80": 3.0}}, set(), learned)
    assert e.throughput["k80"] == 3.0 and e.sources["k80"] == "observed"


def test_a_group_that_never_completed_takes_its_names_pool_over_users():
    from slurm_fair.estimates.learn import GroupSpeeds

    j = job("1", "a")
    pool = GroupSpeeds({"k80": 0.4, "p100": 0.7, "v100": 1.0}, {"k80": 2, "v100": 3}, pooled=True)
    e = estimate_job(j, TYPES, TABLE, Rules(), {}, set(), {("*", j.name, 1): pool})
    assert dict(e.throughput) == dict(pool) and e.source == "pooled"
    assert e.labels() == {"k80": "pooled (2 runs, all users)", "p100": "prior", "v100": "pooled (3 runs, all users)"}
    own = GroupSpeeds({"k80": 0.2, "p100": 0.5, "v100": 1.0}, {"k80": 1, "p100": 1, "v100": 1})
    e = estimate_job(j, TYPES, TABLE, Rules(), {}, set(), {("*", j.name, 1): pool, (j.user, j.name, 1): own})
    assert dict(e.throughput) == dict(own) and e.source == "learned"
    other = estimate_job(job("2", "a", name="infer"), TYPES, TABLE, Rules(), {}, set(), {("*", j.name, 1): pool})
    assert other.source == "prior"
