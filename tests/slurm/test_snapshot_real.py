"""`slurm-fair snapshot` against the real testbed: what it prints is what Slurm says."""

from __future__ import annotations

import os
import subprocess

import pytest

from slurm_fair import cli as sf_cli
from slurm_fair.problem_io import parse_problem

pytestmark = pytest.mark.slurm


def test_snapshot_json_matches_slurm(testbed, capsys):
    env = dict(testbed.env)
    out = subprocess.run(
        ["sbatch", "--parsable", "--begin=now+3600", "-A", "physics", "-J", "sf-snap", "-o", "/dev/null",
         "--gpus=2", "--comment=fair:class=a3c", "--wrap", "sleep 1"],
        env={**os.environ, **env}, capture_output=True, text=True, timeout=30, check=True,
    )
    job_id = out.stdout.strip().split(";")[0]
    try:
        code = sf_cli.main(["snapshot", "--json"])
        captured = capsys.readouterr()
        assert code == 0, captured.err
        problem = parse_problem(captured.out, source="snapshot")
        # capacity per type straight from sinfo, independent of the adapter's parser
        gres = subprocess.run(["sinfo", "-N", "-h", "-o", "%N %G %t"], env={**os.environ, **env},
                              capture_output=True, text=True, check=True).stdout.split("\n")
        cap: dict[str, int] = {}
        seen = set()
        for line in filter(None, gres):
            node, g, state = line.split()
            if node in seen or "drain" in state or "down" in state:
                continue
            seen.add(node)
            _, t, n = g.split("(")[0].split(":")
            cap[t] = cap.get(t, 0) + int(n)
        assert dict(problem.gpu_types) == cap
        job = next(j for j in problem.jobs if j.id == job_id)
        assert (job.tenant, job.gpus, job.extra["state"], job.extra["per"]) == ("physics", 2, "pending", "job")
        assert job.extra["tags"] == {"class": "a3c"}
    finally:
        subprocess.run(["scancel", job_id], env={**os.environ, **env}, check=False)


def test_snapshot_tables(testbed, capsys):
    assert sf_cli.main(["snapshot"]) == 0
    out = capsys.readouterr().out
    assert "GPUs per type" in out and "Nodes" in out
