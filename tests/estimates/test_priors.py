"""Type priors: site spellings normalised to models, every number sourced, unknown types slow."""

from __future__ import annotations

import pytest
from hypothesis import given, strategies as st

from slurm_fair.estimates import priors as pr
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
