"""The fake loaded from recordings, the problem ``snapshot --json`` prints, and the command."""

from __future__ import annotations

import json
from datetime import datetime

import pytest
from click.testing import CliRunner

from slurm_fair import cli as sf_cli
from slurm_fair.errors import JobGone
from slurm_fair.slurm.fake import FakeSlurm, list_recordings
from slurm_fair.slurm.port import SlurmPort
from slurm_fair.commands.snapshot import controller_problem
from slurm_fair.config import validate

CONSTRUCTED = "constructed-24.05"


@pytest.fixture
def fake() -> FakeSlurm:
    return FakeSlurm.from_recording(CONSTRUCTED)


@pytest.mark.parametrize("name", list_recordings())
def test_every_recording_loads_and_is_a_port(name):
    f = FakeSlurm.from_recording(name)
    assert isinstance(f, SlurmPort)
    snap = f.snapshot()
    assert snap.nodes, "a recording without nodes is useless"
    for job in snap.gpu_jobs():
        assert job.gpu_request.total > 0 and job.account


def test_constructed_formats(fake):
    snap = fake.snapshot()
    nodes = {n.name: n for n in snap.nodes}
    assert dict(nodes["mix-1"].gpus_total) == {"a100": 2, "v100": 2}
    assert nodes["mix-1"].partitions == ("gpu", "a100")  # one sinfo line per partition, merged
    assert {"a100-1", "a100-2"} <= set(nodes)  # hostlist expanded
    # drained, down and not-responding nodes are not capacity
    assert not nodes["v100-2"].schedulable and not nodes["k80-1"].schedulable
    assert not nodes["k80-2"].schedulable
    assert snap.capacity() == {"a100": 2 + 4 + 4, "v100": 2 + 4}
    jobs = {j.job_id: j for j in snap.jobs}
    assert jobs["501"].gpu_type_running == "v100" and jobs["501"].requeue
    assert jobs["502"].gpu_type_running == "a100" and jobs["502"].gpu_request.per == "job"
    assert jobs["503"].gpu_request.total == 4  # --gres=gpu:2 -N 2
    assert jobs["504"].gpu_request.total == 4  # --gpus-per-task=1 -n 4
    assert not jobs["506"].is_gpu_job
    assert jobs["505_2"].comment.startswith("$(touch /tmp/pwned)") and "\n" in jobs["505_2"].comment
    assert jobs["505_2"].name == "array|with|pipes"
    assert jobs["507"].partition == "gpu" and jobs["507"].tags == {"tput": "12.5"}


def test_accounting_keeps_the_comment_with_its_tags(fake):
    """sacct's Comment (last column, user text) reaches the record: reports read fair:class."""
    recs = {r.job_id: r for r in fake.accounting(datetime(2025, 1, 1), datetime(2026, 1, 1))}
    assert recs["401"].comment == "fair:class=resnet50 fair:tput=12.5"
    assert recs["401"].gpu_type == "v100" and recs["401"].gpus == 4
    assert recs["402"].comment == "" and recs["402"].name == "fold\nnewline in name"


def test_writes_change_what_is_read(fake):
    job = fake.job("503")
    fake.set_gpu_type(job, "a100")
    pinned = fake.job("503").gpu_request
    assert (pinned.gpu_type, pinned.count, pinned.per, pinned.raw) == ("a100", 2, "node", "TresPerNode=gres/gpu:a100:2")
    fake.restore_gpu_request(fake.job("503"), job.gpu_request.raw)
    assert fake.job("503").gpu_request == job.gpu_request
    fake.set_priority("503", 77)
    assert fake.job("503").priority == 77
    fake.set_priority("503", None)
    assert fake.job("503").priority == job.priority
    fake.hold("503")
    assert fake.job("503").priority == 0 and fake.job("503").reason == "JobHeldAdmin"
    fake.release("503")
    assert fake.job("503").priority > 0
    fake.update_job("503", {"Partition": "a100", "Features": "a100"})
    assert fake.job("503").partition == "a100" and fake.job_fields["503"]["Features"] == "a100"
    with pytest.raises(ValueError):
        fake.update_job("503", {"Account": "other"})


def test_running_or_finished_job_is_gone(fake):
    with pytest.raises(JobGone):
        fake.set_nice("501", 5)  # running
    fake.finish("503")
    with pytest.raises(JobGone):
        fake.hold("503")


def test_qos_lifecycle(fake):
    fake.ensure_qos("fair-chem", {"gres/gpu:a100": 4, "gres/gpu:v100": 2})
    fake.ensure_qos("fair-chem", {"gres/gpu:v100": None})
    q = {q.name: q for q in fake.qos()}["fair-chem"]
    assert dict(q.grp_tres) == {"gres/gpu:a100": 4}
    fake.attach_qos("chem", "fair-chem")
    acc = {a.name: a for a in fake.accounts()}["chem"]
    assert "fair-chem" in acc.qos and acc.default_qos == "fair-chem"
    fake.delete_qos("fair-chem")
    acc = {a.name: a for a in fake.accounts()}["chem"]
    assert "fair-chem" not in acc.qos and acc.default_qos == ""


def test_submit_each_syntax(fake):
    cases = {
        "--gres=gpu:2": (2, None, "node", 2),
        "--gres=gpu:v100:2 -N 2": (2, "v100", "node", 4),
        "--gpus=3": (3, None, "job", 3),
        "--gpus=a100:3": (3, "a100", "job", 3),
        "--gpus-per-node=v100:1 -N 2": (1, "v100", "node", 2),
        "--gpus-per-task=1 -n 3": (1, None, "task", 3),
    }
    for args, (count, gtype, per, total) in cases.items():
        r = fake.job(fake.submit("bio", args)).gpu_request
        assert (r.count, r.gpu_type, r.per, r.total) == (count, gtype, per, total), args


def test_accounting_window(fake):
    recs = fake.accounting(datetime(2025, 3, 1, 8, 15), datetime(2025, 3, 1, 9, 30))
    assert {r.job_id for r in recs} == {"402", "403"}  # 401 ended before, 501 started after
    by_id = {r.job_id: r for r in fake.accounting(datetime(2025, 3, 1))}
    assert (by_id["401"].gpu_type, by_id["401"].gpus, by_id["401"].gpu_seconds) == ("v100", 4, 4 * 3600)
    assert by_id["402"].name == "fold\nnewline in name" and by_id["402"].state == "CANCELLED"
    assert by_id["403"].gpus == 0


def config_in(tmp_path, **tenants):
    return validate({"controller": {"state_dir": str(tmp_path / "state")}, "tenants": tenants},
                    str(tmp_path / "slurm-fair.toml"))


def test_problem_from_snapshot(fake, tmp_path):
    snap = fake.snapshot()
    problem = controller_problem(fake, config_in(tmp_path, bio={"weight": 3.0}))
    assert dict(problem.gpu_types) == snap.capacity()
    ids = [j.id for j in problem.jobs]
    assert "506" not in ids and set(ids) <= {j.job_id for j in snap.gpu_jobs()}
    assert problem.tenants["physics"] == 2.0  # Slurm shares
    assert problem.tenants["bio"] == 3.0  # config override
    for job in problem.jobs:
        assert set(job.throughput) <= set(snap.capacity())
        assert job.best_throughput > 0
    j503 = next(j for j in problem.jobs if j.id == "503")
    assert j503.gpus == 4 and j503.extra["state"] == "pending" and j503.age_s == 3600
    # 501: fair:class=resnet50 names no class of the table (names match exactly, as in the
    # submit plugin): the type priors, and said so
    j501 = next(j for j in problem.jobs if j.id == "501")
    assert j501.extra["class"] is None and set(j501.extra["sources"].values()) == {"prior"}


@pytest.mark.parametrize("name", list_recordings())
def test_problem_is_accepted_by_the_project_reader(name, tmp_path):
    """snapshot --json must be a valid PROBLEM.json: the project's own reader accepts it."""
    from slurm_fair.problem_io import parse_problem, problem_to_dict

    port = FakeSlurm.from_recording(name)
    problem = controller_problem(port, config_in(tmp_path))
    loaded = parse_problem(json.dumps(problem_to_dict(problem)), source="snapshot")
    assert [j.id for j in loaded.jobs] == [j.id for j in problem.jobs]
    assert {j.tenant for j in loaded.jobs} <= {j.account for j in port.snapshot().gpu_jobs()}
    assert dict(loaded.gpu_types) == dict(problem.gpu_types)


def test_snapshot_command_json_and_tables(fake, monkeypatch):
    monkeypatch.setattr("slurm_fair.commands.snapshot.make_port", lambda cfg: fake)
    runner = CliRunner()
    res = runner.invoke(sf_cli.cli, ["snapshot", "--json"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.output)
    assert doc["gpu_types"] == fake.snapshot().capacity()
    # held jobs are left to Slurm (their owner decides when they run): not in the problem
    assert {j["id"] for j in doc["jobs"]} == {j.job_id for j in fake.snapshot().gpu_jobs() if not j.held}
    assert any(j.held for j in fake.snapshot().gpu_jobs())
    res = runner.invoke(sf_cli.cli, ["snapshot"], terminal_width=200)
    assert res.exit_code == 0 and "GPUs per type" in res.output and "505_2" in res.output
    # the tenants table shows the weight the problem carries (here: Slurm shares or 1)
    assert "Tenants (Slurm accounts): weight and share of the GPUs" in res.output
    rows = {line.strip("│ ").split()[0]: line.split("│") for line in res.output.splitlines()
            if line.strip("│ ").split()[:1] and line.strip("│ ").split()[0] in {a.name for a in fake.accounts()}}
    for tenant, weight in doc["tenants"].items():
        assert f"{weight['weight']:g}" in rows[tenant][2], rows[tenant]
    # every account is listed, with nothing queued too; shares are weight / sum of weights
    assert set(rows) == {a.name for a in fake.accounts()}
    total = sum(a.shares for a in fake.accounts())
    for a in fake.accounts():
        assert rows[a.name][3].strip() == f"{a.shares / total:.0%}", rows[a.name]


def test_snapshot_command_when_slurm_is_missing(tmp_path, capsys):
    conf = tmp_path / "c.toml"
    conf.write_text(f'[slurm]\nbin_dir = "{tmp_path}"\nretries = 0\n')
    code = sf_cli.main(["snapshot", "--config", str(conf)])
    err = capsys.readouterr().err
    assert code == 1 and "not found" in err and "Traceback" not in err


def test_usage_is_clipped_to_the_window(fake):
    from datetime import timedelta

    from slurm_fair.slurm.accounting import usage_by_tenant_type

    since, until = datetime(2025, 3, 1, 7, 30), datetime(2025, 3, 1, 11, 0)
    usage = usage_by_tenant_type(fake.accounting(since, until), since, until)
    # 401: 4 v100 from 07:00:05 to 08:00:05 -> 30 min 5 s inside; 501: 4 v100 from 10:05, running
    assert usage["physics"]["v100"] == 4 * (30 * 60 + 5) + 4 * 55 * 60
    assert usage["bio"] == {"a100": 1 * 600}  # 402, entirely inside
    assert "chem" not in usage  # CPU only
    assert usage_by_tenant_type(fake.accounting(since, until), until, until + timedelta(hours=1)) == {
        "physics": {"v100": 4 * 3600}
    }


def test_snapshot_tenant_table_fits_80_columns(fake, monkeypatch):
    """An admin's terminal: the tenants table and its notes stay within 80 columns."""
    monkeypatch.setattr("slurm_fair.commands.snapshot.make_port", lambda cfg: fake)
    res = CliRunner().invoke(sf_cli.cli, ["snapshot"], terminal_width=80)
    assert res.exit_code == 0, res.output
    lines = res.output.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("Tenants (Slurm accounts)"))
    end = next(i for i, line in enumerate(lines) if line.startswith("GPU jobs ("))
    section = lines[start:end]
    assert len(section) >= 5 and max(len(line) for line in section) <= 80, "\n".join(section)
    # one line per tenant: no cell wrapped onto a second line
    names = {a.name for a in fake.accounts()}
    body = [line for line in section if line.startswith("│")]
    assert len(body) == len(names) and {line.split("│")[1].strip() for line in body} == names
