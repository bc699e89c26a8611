"""``simulate --draws K --bf-jitter S``: each policy over draws of the unseen speeds and the
modelled Slurm's backfill phase, reduced to a mean and range (``sim/spread.py``)."""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path

import pytest
from test_accounting import history_text

from slurm_fair.cli import main
from slurm_fair.sim.spread import bf_intervals


@pytest.fixture()
def history_file(tmp_path):
    path = tmp_path / "h.txt"
    path.write_text(history_text())
    return path


@pytest.fixture(scope="module")
def site_file(tmp_path_factory):
    """A generated history (150 jobs, 3 accounts, 32 GPUs in 4-GPU nodes) on which draws and
    backfill phases move the average JCT."""
    sys.path.insert(0, str(Path(__file__).parents[2] / "benchmarks"))
    from make_site_history import generate

    site = generate(3, 150, 1, 32, 4, 3, 0.9, 4)
    path = tmp_path_factory.mktemp("site") / "site.txt"
    path.write_text("\n".join(site.lines) + "\n")
    return path


def _doc(path, out, *extra):
    assert main(["simulate", "--sacct-file", str(path), "--json", "-o", str(out), "--quiet", *extra]) == 0
    return json.loads(out.read_text())


def test_bf_intervals_around_the_sites():
    assert bf_intervals(30.0, 0.0) == [30.0]
    assert bf_intervals(30.0, 2.0) == [30.0, 28.0, 29.0, 31.0, 32.0]
    assert bf_intervals(2.0, 4.0) == [2.0, 1.0, 4.0, 6.0]  # never below a second, no repeats


def test_the_spread_is_the_separate_runs_mean_and_range(site_file, tmp_path):
    history_file = site_file
    # two draws and five backfill intervals: agnostic's spread is that of the ten separate runs
    # (simulate --seed D --slurm-bf-interval B), computed here from them
    doc = _doc(history_file, tmp_path / "s.json", "--policy", "agnostic", "--policy", "fifo", "--draws", "2",
               "--bf-jitter", "2", "--slurm-bf-interval", "30")
    spread = doc["spread"]
    assert spread["draws"] == 2 and spread["bf_intervals_s"] == [30.0, 28.0, 29.0, 31.0, 32.0]
    runs = [_doc(history_file, tmp_path / f"r{d}-{bf}.json", "--policy", "agnostic", "--seed", str(d),
                 "--slurm-bf-interval", str(bf))["policies"]["agnostic"]
            for d in (0, 1) for bf in (30, 28, 29, 31, 32)]
    agn = spread["policies"]["agnostic"]
    assert agn["runs"] == 10
    jcts = [r["avg_jct_s"] for r in runs]
    assert min(jcts) < max(jcts)  # the runs differ: the check below can tell draws apart
    assert agn["avg_jct_s"] == pytest.approx({"mean": statistics.fmean(jcts), "min": min(jcts), "max": max(jcts)})
    for t in runs[0]["tenants"]:
        vals = [r["tenants"][t]["avg_wait_s"] for r in runs]
        assert agn["tenants"][t]["avg_wait_s"] == pytest.approx(
            {"mean": statistics.fmean(vals), "min": min(vals), "max": max(vals)})
    # fifo (slurm-fair's, no backfill timer): one run per draw; the table's figures stay the first draw's
    fifos = [_doc(history_file, tmp_path / f"o{d}.json", "--policy", "fifo", "--seed", str(d))["policies"]["fifo"]
            for d in (0, 1)]
    assert spread["policies"]["fifo"]["runs"] == 2
    assert spread["policies"]["fifo"]["avg_jct_s"]["mean"] == pytest.approx(
        statistics.fmean(o["avg_jct_s"] for o in fifos))
    assert doc["policies"]["fifo"]["avg_jct_s"] == pytest.approx(fifos[0]["avg_jct_s"])


def test_parallel_processes_give_the_same_spread(site_file, tmp_path):
    history_file = site_file
    args = ("--policy", "agnostic", "--policy", "fifo", "--draws", "2", "--bf-jitter", "2")
    one = _doc(history_file, tmp_path / "1.json", *args)["spread"]
    two = _doc(history_file, tmp_path / "2.json", *args, "--jobs", "2")["spread"]
    assert one == two


def test_the_what_if_shows_the_range_per_tenant(history_file, tmp_path):
    out = tmp_path / "w.html"
    assert main(["simulate", "--sacct-file", str(history_file), "--policy", "agnostic", "--quiet", "--draws", "2",
                 "--bf-jitter", "2", "--what-if", str(out)]) == 0
    html = out.read_text()
    assert "average JCT over 2 draw(s) and 5 backfill intervals (agnostic): mean (least-most)" in html
    assert main(["simulate", "--sacct-file", str(history_file), "--policy", "agnostic", "--quiet", "--draws", "2",
                 "--what-if", str(tmp_path / "w.json")]) == 0
    assert json.loads((tmp_path / "w.json").read_text())["spread"]["policies"]["agnostic"]["runs"] == 2


@pytest.mark.parametrize("args, message", [
    (["--cluster", "a100=8", "--synthetic", "5", "--draws", "2"], "--draws and --bf-jitter vary a replay"),
    (["--sacct-file", "{h}", "--bf-jitter", "2", "--agnostic-as", "policy"], "--bf-jitter varies the modelled"),
    (["--sacct-file", "{h}", "--draws", "2", "--array-script", "{d}/s.sh"], "--array-script sweeps draws as tasks"),
    (["--sacct-file", "{h}", "--draws", "0"], "--draws"),
])
def test_mistakes_exit_2(history_file, tmp_path, args, message, capsys):
    argv = [a.format(h=history_file, d=tmp_path) for a in args]
    assert main(["simulate", "--policy", "agnostic", "--quiet", *argv]) == 2
    assert message in capsys.readouterr().err
