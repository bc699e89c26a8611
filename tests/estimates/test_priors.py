"""Type priors: site spellings normalised to models, every number sourced, unknown types slow."""

from __future__ import annotations

import pytest
from hypothesis import given, strategies as st

from slurm_fair.estimates import priors as pr
from slurm_fair.estimates import priors_table as pt
from slurm_fair.estimates.priors_table import PRIORS


@pytest.mark.parametrize("raw, model, fraction", [
    ("a100", "a100", 1.0),
    ("a100_80g", "a100_80g", 1.0),
    ("A100-80G", "a100_80g", 1.0),
    ("A100-HGX-80G", "a100_80g", 1.0),
    ("nvidia_a100-sxm4-80gb", "a100_80g", 1.0),
    ("nvidia_a100-pcie-40gb", "a100_pcie", 1.0),
    ("h100", "h100", 1.0),
    ("nvidia_h100_80gb_hbm3", "h100", 1.0),
    ("nvidia_h100_pcie", "h100_pcie", 1.0),
    ("L40S", "l40s", 1.0),
    ("l40", "l40", 1.0),
    ("l4", "l4", 1.0),
    ("tesla_v100-sxm2-16gb", "v100", 1.0),
    ("v100-32g", "v100", 1.0),
    ("3g.40gb", "a100_80g", 3 / 7),
    ("nvidia_a100_3g.20gb", "a100", 3 / 7),
    ("a100_1g.10gb", "a100_80g", 1 / 7),
    ("rtx2080", None, 1.0),
    ("gpu", None, 1.0),
])
def test_site_spellings_map_to_models(raw, model, fraction):
    tm = pr.normalise(raw)
    assert tm.model == model
    assert tm.fraction == pytest.approx(fraction)


def test_every_number_has_a_source_and_a_note():
    for model, family, speed, source, note in PRIORS:
        assert speed > 0 and source and note, (model, family)
        assert family in pr.FAMILIES


def test_a_mig_slice_is_slower_than_its_gpu():
    assert pr.prior("3g.40gb") < pr.prior("a100_80g")
    assert pr.prior("h100") > pr.prior("a100") > pr.prior("v100") > pr.prior("k80")


def test_an_unknown_type_is_below_the_slowest_known_never_the_best():
    p = pr.prior_speeds(["h100", "a100", "rtx2080"])
    assert p.speed["h100"] == 1.0
    assert p.speed["rtx2080"] == pr.UNKNOWN_FACTOR * p.speed["a100"] < p.speed["a100"] < 1.0
    assert p.unknown == ("rtx2080",)
    assert "rtx2080" in p.warnings()[0]


def test_no_known_type_at_all_is_slurms_view():
    p = pr.prior_speeds(["gpu", "fast"])
    assert dict(p.speed) == {"gpu": 1.0, "fast": 1.0}


@given(st.text(max_size=40))
def test_normalise_never_fails(text):
    tm = pr.normalise(text)
    assert tm.model is None or tm.model in pr.table()
    assert 0 < tm.fraction <= 1


# --- issue 41: the names sites and NVML write, the ranking rule, the spreads -----------------------

@pytest.mark.parametrize("raw, model, fraction", [
    # A800 / H800 / H20 (export variants): A800 computes as an A100, H800 as an H100 SXM
    ("NVlink_A800_80GB", "a100_80g", 1.0),
    ("nvidia_a800-sxm4-80gb", "a100_80g", 1.0),
    ("nvidia_a800_40gb_pcie", "a100_pcie", 1.0),
    ("nvidia_h800", "h800", 1.0),
    ("nvidia_h20", "h20", 1.0),
    # H100 SXM / PCIe / NVL; "NVlink" in a name is an SXM board, not the NVL card
    ("NVlink_H100_80GB", "h100", 1.0),
    ("nvidia_h100_80gb_hbm3", "h100", 1.0),
    ("nvidia_h100_pcie", "h100_pcie", 1.0),
    ("nvidia_h100_nvl", "h100_pcie", 1.0),
    ("h100-nvl", "h100_pcie", 1.0),
    ("gh200", "gh200", 1.0),
    ("nvidia_gh200_480gb", "gh200", 1.0),
    ("b200", "b200", 1.0),
    ("nvidia_b200", "b200", 1.0),
    ("nvidia_gb200", "b200", 1.0),
    ("l4", "l4", 1.0), ("nvidia_l4", "l4", 1.0), ("l40", "l40", 1.0), ("nvidia_l40s", "l40s", 1.0),
    ("a10", "a10", 1.0), ("nvidia_a10", "a10", 1.0), ("a30", "a30", 1.0), ("nvidia_a30", "a30", 1.0),
    ("a40", "a40", 1.0), ("nvidia_a40", "a40", 1.0),
    # RTX workstation and consumer cards
    ("rtxa6000", "rtx_a6000", 1.0), ("nvidia_rtx_a6000", "rtx_a6000", 1.0), ("a6000", "rtx_a6000", 1.0),
    ("rtxa5000", "rtx_a5000", 1.0), ("nvidia_rtx_a5000", "rtx_a5000", 1.0),
    ("nvidia_rtx_6000_ada_generation", "rtx_6000_ada", 1.0),
    ("quadro_rtx_8000", "quadro_rtx_8000", 1.0), ("rtx8000", "quadro_rtx_8000", 1.0),
    ("nvidia_geforce_rtx_3090", "rtx_3090", 1.0), ("rtx3090", "rtx_3090", 1.0),
    ("nvidia_geforce_rtx_4090", "rtx_4090", 1.0), ("4090", "rtx_4090", 1.0),
    # form factors glued on, sites' own suffixes (Mila's a100l: the 80 GB A100; the Alliance's
    # v100l/p100l: large-memory V100/P100)
    ("a100l", "a100_80g", 1.0), ("a100sxm4", "a100", 1.0), ("a100pcie", "a100_pcie", 1.0),
    ("h100pcie", "h100_pcie", 1.0), ("h100nvl", "h100_pcie", 1.0), ("h100sxm5", "h100", 1.0),
    ("v100l", "v100", 1.0), ("p100l", "p100", 1.0), ("v100s", "v100", 1.0),
    ("NVIDIA H100 NVL", "h100_pcie", 1.0), ("Tesla V100-SXM2-32GB", "v100", 1.0),
    ("nvidia_a100_80gb_pcie", "a100_pcie_80g", 1.0), ("nvidia_a100_80gb_pcie_3g.40gb", "a100_pcie_80g", 3 / 7),
    ("a100l.3g.40gb", "a100_80g", 3 / 7), ("mig_2g.10gb", "a100", 2 / 7),
    ("quadro_rtx_6000", None, 1.0),  # Turing, not the Ada card: no prior
    ("rtx30", None, 1.0), ("m60", None, 1.0), ("rtx_a4000", None, 1.0), ("nvidia_a10g", None, 1.0),
    # AMD: MI250X and MI250 one GCD per device; MI210 and MI300X the whole card
    ("mi250x", "mi250x", 1.0), ("mi250", "mi250x", 1.0), ("amd_instinct_mi210", "mi210", 1.0),
    ("mi300x", "mi300x", 1.0),
    # MIG slices of every parent: compute slices of 7 (A30: of 4)
    ("nvidia_a30_1g.6gb", "a30", 1 / 4),
    ("nvidia_a30_2g.12gb", "a30", 2 / 4),
    ("nvidia_a30_4g.24gb", "a30", 1.0),
    ("nvidia_a100_3g.40gb", "a100_80g", 3 / 7),
    ("nvidia_a100_2g.10gb", "a100", 2 / 7),
    ("nvidia_h100_80gb_hbm3_3g.40gb", "h100", 3 / 7),
    ("nvidia_h100_80gb_hbm3_1g.10gb", "h100", 1 / 7),
    ("nvidia_h100_nvl_1g.12gb", "h100_pcie", 1 / 7),
    ("nvidia_h200_3g.71gb", "h200", 3 / 7),
    ("nvidia_h200_1g.18gb", "h200", 1 / 7),
    ("a100_1c.3g.20gb", "a100", 1 / 7),  # compute instance 1 of a 3g GPU instance
    ("nvidia_a100_1g.10gb+me", "a100_80g", 1 / 7),
    # bare profiles: the slowest GPU that offers the profile
    ("1g.6gb", "a30", 1 / 4),
    ("2g.35gb", "h200", 2 / 7),
    ("1g.5gb", "a100", 1 / 7),
    ("1g.12gb", "h100_pcie", 1 / 7),
    ("1g.23gb", "b200", 1 / 7),
    ("9g.99gb", None, 1.0),
    ("5g.41gb", None, 1.0),
])
def test_names_sites_and_nvml_write(raw, model, fraction):
    tm = pr.normalise(raw)
    assert (tm.model, tm.fraction) == (model, pytest.approx(fraction))


def test_a30_slice_is_an_a30_slice_not_an_a100_one():
    assert pr.prior("nvidia_a30_1g.6gb") == pytest.approx(pr.prior("a30") / 4)
    assert pr.prior("nvidia_a30_1g.6gb") < pr.prior("nvidia_a100_1g.5gb")


def test_nvlink_h100_is_the_sxm_h100_and_nvl_is_not():
    assert pr.prior("NVlink_H100_80GB") == pr.prior("h100") > pr.prior("nvidia_h100_nvl")


def test_every_model_of_the_table_has_a_training_number():
    for model, by in pr.table().items():
        assert any(f in by for f in ("transformer", "cnn")), model


KNOWN_NAMES = ["h100", "a100", "nvidia_a100-sxm4-80gb", "v100", "k80", "t4", "l4", "mi210", "rtxa5000",
               "NVlink_A800_80GB", "nvidia_a30_1g.6gb", "3g.40gb", "gh200", "b200", "a40"]
UNKNOWN_NAMES = st.from_regex(r"(site|rtx|gpu|model)_?[a-z0-9]{1,6}", fullmatch=True).filter(
    lambda t: pr.normalise(t).model is None)


@given(st.lists(st.sampled_from(KNOWN_NAMES), unique=True, max_size=6),
       st.lists(UNKNOWN_NAMES, unique=True, max_size=4), st.sampled_from(pr.FAMILIES + (pr.GENERIC,)))
def test_unknown_types_never_rank_at_or_above_the_slowest_known(known, unknown, family):
    types = known + [u for u in unknown if u not in known]
    if not types:
        return
    p = pr.prior_speeds(types, family)
    assert set(p.unknown) == set(types) - set(known)
    assert all(0 < v <= 1 for v in p.speed.values())
    if known:
        slowest = min(p.speed[k] for k in known)
        assert max(p.speed[k] for k in known) == 1.0
        assert all(p.speed[u] < slowest for u in p.unknown)
        if len(known) == 1:  # alone with one known type: never at 1.0
            assert all(p.speed[u] == pr.UNKNOWN_FACTOR for u in p.unknown)
    else:  # no known type: nothing ranks them, every type 1.0 (Slurm's view), each warned about
        assert set(p.speed.values()) == {1.0} and len(p.warnings()) == len(types)


@given(st.lists(st.sampled_from(KNOWN_NAMES), unique=True, min_size=1, max_size=6),
       st.lists(UNKNOWN_NAMES, unique=True, min_size=1, max_size=3), st.randoms(use_true_random=False))
def test_unknown_types_do_not_move_the_known_and_order_does_not_matter(known, unknown, rnd):
    alone = pr.prior_speeds(known).speed
    types = known + [u for u in unknown if u not in known]
    shuffled = list(types)
    rnd.shuffle(shuffled)
    with_unknown = pr.prior_speeds(types).speed
    assert {k: with_unknown[k] for k in known} == dict(alone)
    assert dict(pr.prior_speeds(shuffled).speed) == dict(with_unknown)


def test_the_issues_clusters():
    assert dict(pr.prior_speeds(["a100", "rtx30"]).speed) == {"a100": 1.0, "rtx30": 0.5}
    p = pr.prior_speeds(["h100", "rtxa5000", "mi210"])
    assert p.unknown == () and p.speed["h100"] == 1.0 > p.speed["mi210"] > p.speed["rtxa5000"]
    p = pr.prior_speeds(["h100", "rtxa5000", "m60"])
    assert p.speed["m60"] < p.speed["rtxa5000"] < 1.0


def test_spreads_say_where_a_family_scatters():
    assert pr.spread("t4", "transformer") == 1.0  # 0.09 (Sia, BERT) .. 0.63 (a small model)
    assert pr.spread("a100_80g", "transformer") < pr.spread("v100", "transformer") < pr.spread("t4", "transformer")
    assert pr.spread("l40", "cnn") == pt.DERIVED_SPREAD  # derived from peaks
    assert pr.spread("a30", "transformer") == pt.DEFAULT_SPREAD  # measured (MLPerf)
    assert pr.spread("a30") == pr.spread("a30", "inference") == pt.GENERIC_SPREAD  # no family number
    assert pr.spread("rtx30") is None
    for model, family, _, _, _ in PRIORS:
        assert 0 < pr.spread(model, family) <= 1.5
    for (model, family) in pt.SPREADS:
        assert (model, family) in {(m, f) for m, f, _, _, _ in PRIORS}, (model, family)
