"""The papers' reproductions (``benchmarks/reproduce_*.py``) on tiny configurations, and the
synthetic job mixes they draw from.

The scripts' numbers are ``simulate``'s numbers: the Hops script's printed ``simulate`` command,
run through the CLI, must give the script's figures, so a script that drifts from the command it
documents fails here.
"""

from __future__ import annotations

import json
import math
import shlex
import sys
from collections import Counter
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import given, settings, strategies as st
from hypo_profiles import scaled

from slurm_fair.cli import cli, main
from slurm_fair.errors import UserError
from slurm_fair.estimates import gavel as tt
from slurm_fair.sim.synthetic import GAVEL_GPUS, MIXES, generate

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"
sys.path.insert(0, str(BENCH))

import reproduce_common as common  # noqa: E402
import reproduce_gavel  # noqa: E402
import reproduce_hadar  # noqa: E402
import reproduce_hops  # noqa: E402

TABLE = tt.load()
REF = [k for k in TABLE.gpu_types if not k.endswith("_unconsolidated")]


def _alone_s(job) -> float:
    """Duration alone on the job's fastest type, recomputed from the table."""
    return job.total_steps / max(TABLE.lookup(job.job_type, job.gpus, k) for k in REF)


def test_gavel_mix_follows_gavels_generator() -> None:
    """GPU counts with Gavel's probabilities; durations in Gavel's two log-uniform ranges, the
    long one (17 h - 7 days) about 20 % of jobs."""
    jobs = generate(4000, 3, 7, 50.0, TABLE, mix="gavel").jobs
    counts = Counter(j.gpus for j in jobs)
    for g, p in GAVEL_GPUS:
        sd = math.sqrt(p * (1 - p) / len(jobs))
        assert abs(counts[g] / len(jobs) - p) < 4 * sd, (g, counts[g])
    alone = [_alone_s(j) for j in jobs]
    assert min(alone) >= 60 * 10 ** 1.5 * 0.999 and max(alone) <= 60 * 10 ** 4 * 1.001
    long_share = sum(a > 60 * 1000 for a in alone) / len(alone)
    assert abs(long_share - 0.2) < 4 * math.sqrt(0.16 / len(alone))
    assert {j.job_type for j in jobs} == set(TABLE.job_types)


def test_gavel_single_is_one_gpu_and_philly_is_unchanged() -> None:
    assert {j.gpus for j in generate(300, 2, 1, 10.0, TABLE, mix="gavel-single").jobs} == {1}
    # the default mix draws exactly what it drew before --job-mix existed
    assert generate(50, 2, 3, 10.0, TABLE).jobs == generate(50, 2, 3, 10.0, TABLE, mix="philly").jobs
    with pytest.raises(UserError):
        generate(5, 1, 1, 1.0, TABLE, mix="nope")


@settings(max_examples=scaled(30), deadline=None)
@given(n=st.integers(1, 60), seed=st.integers(0, 10**6), rate=st.floats(0.5, 2000),
       mix=st.sampled_from(MIXES), cap_h=st.one_of(st.none(), st.floats(0.1, 50)))
def test_synthetic_invariants(n: int, seed: int, rate: float, mix: str, cap_h: float | None) -> None:
    """Any mix: n jobs, first arrival at 0, arrivals in order, durations within the cap."""
    jobs = generate(n, 3, seed, rate, TABLE, cap_h * 3600 if cap_h else None, mix).jobs
    assert len(jobs) == n and jobs[0].arrival_s == 0
    assert all(a.arrival_s <= b.arrival_s for a, b in zip(jobs, jobs[1:]))
    if cap_h:
        assert max(_alone_s(j) for j in jobs) <= cap_h * 3600 * (1 + 1e-6) + 1e-3


def test_job_mix_option(tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    result = CliRunner().invoke(cli, ["simulate", "--synthetic", "6", "--job-mix", "gavel", "--max-duration-h", "1",
                                      "--cluster", "8:8:8", "--policy", "fifo", "--json", "-o", str(out), "--quiet"],
                                catch_exceptions=False)
    assert result.exit_code == 0, result.output
    assert "mix=gavel" in json.dumps(json.loads(out.read_text())["workload"])
    assert main(["simulate", "--synthetic", "6", "--job-mix", "bogus", "--cluster", "8:8:8", "--policy", "fifo"]) == 2


def test_missing_metric_shows_a_dash() -> None:
    col = common.Column("x", ("not_yet", "avg_jct_s"), "h")
    assert col.show({"avg_jct_s": 7200}) == "2.00"
    assert col.show({}) == "-" and common.ratio(None, 2) == "-" and common.ratio(3, 0) == "-"


def test_hops_quick_matches_its_simulate_command(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The script's table, the paper's rows, and the same figures from the printed command."""
    out = reproduce_hops.main(["--quick", "--jobs", "8", "--seeds", "1", "--policy", "gavel-mmf", "--policy", "fifo"])
    printed = capsys.readouterr().out
    assert "| paper: Hops | 10.48 | 2.24 | 0.87 | 3.22 |" in out["text"]
    assert "| hops / gavel-mmf |" not in out["text"]  # no hops run asked for
    command = next(line.split(": ", 1)[1] for line in printed.splitlines() if line.startswith("one seed as simulate"))
    args = shlex.split(command)[1:] + ["-o", str(tmp_path / "r.json"), "--quiet"]
    result = CliRunner().invoke(cli, args, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    doc = json.loads((tmp_path / "r.json").read_text())
    assert doc["cluster"]["nodes"] == {"k80": "2x8", "p100": "2x8", "v100": "4x8"}
    assert doc["cluster"]["node_speeds"] == {"v100-3": 0.9, "v100-4": 1.1}
    for name in ("gavel-mmf", "fifo"):
        for key in ("avg_jct_s", "makespan_s", "jobs_completed"):
            assert out["data"][name][key] == pytest.approx(doc["policies"][name][key]), (name, key)


def test_hops_cluster_is_the_papers_shape() -> None:
    """64 nodes of 8 GPUs (k80 : p100 : v100 = 16 : 16 : 32 nodes), 8 v100 nodes at 0.9 and 8 at 1.1."""
    c = reproduce_hops.cluster()
    assert c.spec == "v100=32x8,p100=16x8,k80=16x8"
    assert Counter(c.node_speeds.values()) == {0.9: 8, 1.1: 8}


def test_hops_sweep_writes_a_plot(tmp_path: Path) -> None:
    png = tmp_path / "s.png"
    out = reproduce_hops.main(["--sweep", "--quick", "--jobs", "6", "--rates", "80,400", "--seeds", "1",
                               "--policy", "gavel-mmf", "--plot", str(png)])
    assert png.stat().st_size > 1000
    assert "| gavel-mmf | avg JCT h |" in out["text"]


def test_gavel_quick(tmp_path: Path) -> None:
    out = reproduce_gavel.main(["--quick", "--jobs", "5", "--plot", str(tmp_path / "g.png")])
    assert "agnostic / gavel-mmf" in out["text"] and (tmp_path / "g.png").exists()
    for by_rate in out["data"].values():
        for res in by_rate.values():
            assert set(res) == {"gavel-mmf", "agnostic"}


def test_hadar_quick() -> None:
    out = reproduce_hadar.main(["--quick", "--policy", "hadar", "--policy", "gavel-mmf"])
    assert "| paper |" in out["text"] and "1.20x" in out["text"]
    assert all(set(r) == {"hadar", "gavel-mmf"} for r in out["data"].values())
