"""Both backends read the same cluster the same way: a busy testbed, compared field by field.

The queue holds running jobs filling GPUs of every type and many pending jobs of the three
tenants in every GPU syntax (typed and untyped gres, ``--gpus``, gangs ``-N 2
--gpus-per-node``, ``--gpus-per-task``), held, waiting for a begin time or a dependency,
eligible in a DOWN partition with a site factor and a nice, a pending job array, node lists,
exclude lists, a constraint, a time limit, several partitions, a hostile comment and name.
:class:`SlurmCli` (squeue, sinfo, scontrol, sacctmgr) and :class:`PyslurmPort` (libslurm: its job
records read directly and its site factors through sprio's RPC in process, and without those
through pyslurm's legacy read, here and in the side process, and sprio) must give equal
snapshots, every field of every job, node, partition, account and QOS, and the
controller must build the same Problem from both.

With ``SLURM_FAIR_RECORD_PYSLURM=FILE`` the raw pyslurm records of that moment and the command
line's snapshot are saved (``tests/slurm/recorded_pyslurm.json``) for the fast test of the
conversion, ``tests/slurm/test_pyslurm_records.py``.
"""

from __future__ import annotations

import dataclasses
import os
import subprocess
import time
from contextlib import suppress

import pytest

from slurm_fair.commands.snapshot import controller_problem
from slurm_fair.config import validate
from slurm_fair.problem_io import problem_to_dict
from slurm_fair.slurm.cli import SlurmCli

from slurm_harness import both_backends

pytestmark = pytest.mark.slurm


def _sbatch(env, *args: str) -> str:
    argv = ["sbatch", "--parsable", "-o", "/dev/null", *args]
    if "--wrap" not in args:
        argv += ["--wrap", "sleep 600"]
    out = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, (argv, out.stderr)
    return out.stdout.strip().split(";")[0]


def _busy_queue(env, tenants: list[str], down: str) -> list[str]:
    """Submit the busy queue (module docstring); the ids submitted."""
    ids = []
    a, b, c = tenants[:3]
    # running: fill GPUs of each type, one gang over both v100 nodes
    ids.append(_sbatch(env, "-A", a, "-t", "30", "--gpus-per-node=v100:2", "-N", "2"))
    ids.append(_sbatch(env, "-A", b, "-t", "30", "--gres=gpu:k80:3", "--comment=fair:class=resnet50"))
    ids.append(_sbatch(env, "-A", c, "-t", "30", "--gpus=p100:3", "-n", "1"))
    ids.append(_sbatch(env, "-A", a, "-t", "30", "--gpus-per-task=1", "-n", "2", "-p", "p100"))
    later = ["--begin=now+3600"]
    syntaxes = ["--gres=gpu:1", "--gres=gpu:v100:2", "--gpus=3", "--gpus=k80:2", "--gpus-per-node=2 -N 2",
                "--gpus-per-node=p100:1 -N 2", "--gpus-per-task=1 -n 3", "--gres=gpu:p100:1 --mem=2000 -c 2",
                "--gres=gpu:1 --mem-per-cpu=500 -n 2"]
    for tenant in (a, b, c):
        for s in syntaxes:
            ids.append(_sbatch(env, "-A", tenant, *later, *s.split()))
    ids.append(_sbatch(env, "-A", a, "--hold", "--gres=gpu:2", "-x", "v100-1", "-t", "90"))
    ids.append(_sbatch(env, "-A", b, "--hold", "--gpus=v100:1", "-w", "v100-2", "--constraint=v100"))
    ids.append(_sbatch(env, "-A", c, *later, "--gres=gpu:1", "-p", "v100,p100", "--nice=30"))
    ids.append(_sbatch(env, "-A", a, *later, "--array=0-6:2", "--gres=gpu:k80:1"))
    ids.append(_sbatch(env, "-A", b, "--dependency=afterok:" + ids[0], "--gres=gpu:1"))
    ids.append(_sbatch(env, "-A", c, *later, "-J", "evil|name;$(x)\nline2",
                       "--comment=fair:class=a3c |x|\n2|PD|forged ${HOME}", "--gpus=1"))
    ids.append(_sbatch(env, "-A", a, *later, "-n", "1"))  # no GPU
    ended = _sbatch(env, "-A", b, *later, "--gres=gpu:1")  # slurmctld keeps it a while; squeue -t does not list it
    subprocess.run(["scancel", ended], env=env, check=True, capture_output=True, timeout=30)
    for tenant in (a, b, c):  # eligible (sprio lists them): site factor and nice differ
        for _ in range(3):
            ids.append(_sbatch(env, "-A", tenant, "-p", down, "--gres=gpu:1"))
    subprocess.run(["scontrol", "update", f"JobId={ids[-1]}", "SiteFactor=-300"], env=env, check=True,
                   capture_output=True, timeout=30)
    subprocess.run(["scontrol", "update", f"JobId={ids[-2]}", "Nice=15"], env=env, check=True,
                   capture_output=True, timeout=30)
    return ids


def _as_dict(x) -> dict:
    """Every field of a model object (mappings as dicts, a node's partitions as a sorted list:
    sinfo lists them in an order of its own, which nothing reads)."""
    d = {f.name: getattr(x, f.name) for f in dataclasses.fields(x)}
    d = {k: dict(v) if hasattr(v, "keys") else v for k, v in d.items()}
    if hasattr(x, "gpus_total"):
        d["partitions"] = sorted(d["partitions"])
    return d


def _differences(a, b) -> list[str]:
    """Every field where the two snapshots differ (empty: equal)."""
    out = []
    for kind in ("nodes", "jobs", "partitions", "accounts", "qos"):
        key = "job_id" if kind == "jobs" else "name"
        left = {getattr(x, key): _as_dict(x) for x in getattr(a, kind)}
        right = {getattr(x, key): _as_dict(x) for x in getattr(b, kind)}
        if set(left) != set(right):
            out.append(f"{kind}: only cli {sorted(set(left) - set(right))}, only pyslurm {sorted(set(right) - set(left))}")
        for k in sorted(set(left) & set(right)):
            for f in left[k]:
                if left[k][f] != right[k][f]:
                    out.append(f"{kind} {k}.{f}: cli {left[k][f]!r} != pyslurm {right[k][f]!r}")
    return out


def _equal_soon(cli, ps) -> list[str]:
    """The differences of both backends' snapshots, read again while a job starts or the age
    factor ticks between two reads (empty: equal)."""
    diffs: list[str] = []
    for _ in range(5):
        diffs = _differences(cli.snapshot(), ps.snapshot())
        if not diffs:
            break
        time.sleep(1)
    return diffs


def _with_side(ps) -> None:
    """pyslurm's side process up (a big queue starts it by itself)."""
    from slurm_fair.slurm import pyslurm_port

    pyslurm_port._side_process(ps.conf, start=True)
    deadline = time.monotonic() + 60
    while pyslurm_port._side_process(ps.conf, start=False) is None:
        assert time.monotonic() < deadline, "pyslurm's side process did not start"
        time.sleep(0.2)


def _direct_read_is_pyslurms(ps) -> None:
    """The direct read of libslurm's records gives, for every job, the very values of pyslurm's
    ``Jobs.load`` attributes and of its legacy read's fields (jobs in the same state in the
    three reads, which a starting job may not be)."""
    from slurm_fair.slurm import pyslurm_port, pyslurm_side

    values, extra = ps._call("job", lambda: ps._field_reader().read(pyslurm_port._FAST_ATTRS))
    loaded = {v[0]: v for v in map(pyslurm_port._fast_values, ps.ps.Jobs.load().values())}
    legacy = {int(i): tuple(r.get(k) for k in pyslurm_side.FIELDS) for i, r in ps.ps.job().get().items()}
    direct = {v[0]: v for v in values}
    same = [i for i in direct if i in loaded and i in legacy and direct[i][1] == loaded[i][1] == legacy[i][-1]]
    assert len(same) >= len(direct) - 2 and len(same) > 20
    # an empty string: None from the direct read, None or "" from pyslurm (its to_unicode's test
    # for "" depends on the Cython it was built with: 0.29 on 22.05's host, 3 on 24.11's Python
    # 3.13); the job built is the same ("" either way)
    def plain(values):
        return tuple(None if v == "" else v for v in values)

    assert {i: direct[i] for i in same} == {i: plain(loaded[i]) for i in same}
    assert {i: extra[i] for i in same} == {i: legacy[i] for i in same}


def test_cli_and_pyslurm_snapshots_are_equal_field_by_field_on_a_busy_cluster(testbed, slurm_version, tmp_path):
    env, cli, ps = both_backends(testbed, slurm_version)
    from slurm_fair.slurm.pyslurm_port import PyslurmPort

    # the same backend without the direct read of libslurm's records (pyslurm's legacy read,
    # alone or in the side process), as where Slurm's header is not installed
    legacy = PyslurmPort(SlurmCli(env=dict(testbed.env), timeout_s=60))
    legacy._reader.append(None)
    legacy._prio.append(None)  # and its site factors through sprio (the RPC's are ps's)
    tenants = sorted(x.name for x in cli.accounts())
    node = sorted(n.name for n in cli.nodes())[0]
    down = f"sfagree{os.getpid() % 10000}"
    subprocess.run(["scontrol", "create", f"PartitionName={down}", f"Nodes={node}", "State=DOWN"], env=env,
                   check=True, capture_output=True, timeout=30)
    ids: list[str] = []
    try:
        ids = _busy_queue(env, tenants, down)
        time.sleep(2)  # let the scheduler start what it can
        config = validate({"controller": {"state_dir": str(tmp_path / "state")}}, "slurm-fair.toml")
        diffs: list[str] = []
        for _ in range(5):  # a job may start or the age factor tick between two reads: read again
            a, b = cli.snapshot(), ps.snapshot()
            diffs = _differences(a, b)
            if not diffs:
                break
            time.sleep(1)
        assert diffs == []
        assert ps._field_reader() is not None, "libslurm's job records were not read directly"
        assert ps._prio_reader() is not None, "the site factors were not read through sprio's RPC"
        _direct_read_is_pyslurms(ps)
        assert _equal_soon(cli, legacy) == []
        if record := os.environ.get("SLURM_FAIR_RECORD_PYSLURM"):
            from pyslurm_recording import save

            save(record, ps, a)
        ours = [j for j in a.jobs if j.job_id.split("_")[0] in ids]
        states = {j.state for j in ours}
        assert len(ours) >= len(ids) + 3 and {"RUNNING", "PENDING"} <= states  # the array's 4 tasks
        assert {j.gpu_request.per for j in ours if j.gpu_request} == {"node", "job", "task"}
        assert any(j.site_factor == -300 for j in ours) and any(j.nice == 15 for j in ours)
        assert any(n.gpus_used and sum(n.gpus_used.values()) for n in a.nodes)
        for _ in range(5):
            p, q = (problem_to_dict(controller_problem(port, config)) for port in (cli, ps))
            for doc in (p, q):
                for job in doc["jobs"]:
                    job.pop("age_s", None)  # when each read happened
            if p == q:
                break
            time.sleep(1)
        assert p == q
        # the direct read warm, and without it a big queue's way (the side process's legacy read
        # beside Jobs.load), warm (each job's conversion kept), then after a user changes pending
        # jobs' requests between two reads
        _with_side(legacy)
        for _ in range(2):
            assert _equal_soon(cli, ps) == []
            assert _equal_soon(cli, legacy) == []
        pending = [j for j in cli.jobs(("PENDING",)) if j.job_id in ids and j.gpu_request is not None]
        per_job = next(j for j in pending if j.gpu_request.per == "job" and j.gpu_request.count == 3)
        per_node = next(j for j in pending if j.gpu_request.raw.endswith("gpu:1") and j.gpu_request.per == "node")
        per_task = next(j for j in pending if j.gpu_request.per == "task")
        prefix = per_job.gpu_request.raw.split("=", 1)[-1].split("gpu", 1)[0]  # gres: (22.05), gres/ (24.11)
        for job, change in ((per_job, f"TresPerJob={prefix}gpu:2"), (per_node, "Gres=gpu:2"),
                            (per_task, "NumTasks=2"), (per_node, "TimeLimit=45")):
            subprocess.run(["scontrol", "update", f"JobId={job.job_id}", change], env=env, check=True,
                           capture_output=True, timeout=30)
        changed = {j.job_id: j for j in cli.jobs(("PENDING",))}
        assert changed[per_job.job_id].gpu_request.count == 2 and changed[per_node.job_id].gpu_request.count == 2
        assert _equal_soon(cli, ps) == []
        assert _equal_soon(cli, legacy) == []
        for port in (ps, legacy):
            assert {j.job_id: j.gpu_request for j in port.jobs(("PENDING",))}[per_job.job_id].count == 2
        # the side process killed between two reads: the next read is made here, the same
        from slurm_fair.slurm import pyslurm_port

        side = pyslurm_port._sides[legacy.conf]
        side.proc.kill()
        side.proc.wait(timeout=30)
        assert _equal_soon(cli, legacy) == []
        assert legacy.conf not in pyslurm_port._sides
    finally:
        for i in range(0, len(ids), 100):
            subprocess.run(["scancel", *ids[i:i + 100]], env=env, capture_output=True, timeout=60)
        with suppress(Exception):
            subprocess.run(["scontrol", "delete", f"PartitionName={down}"], env=env, capture_output=True, timeout=30)
