"""job_submit.lua in a real slurmctld (JobSubmitPlugins=lua) on a *private* testbed.

The shared testbed (.testbed/) is never touched: this module brings up its own cluster in a
short temporary directory on its own ports, with the rendered job_submit.lua installed beside
slurm.conf, and takes it down at the end. Jobs are submitted to begin two hours ahead so nothing
runs (not held: the plugin leaves a job submitted held alone); what the plugin did is read back
with ``scontrol show job``.
"""

from __future__ import annotations

import random
import re
import socket
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from slurm_fair.config import validate as validate_config
from slurm_fair.deploy import inventory
from slurm_fair.deploy.render import DeployOptions, render_cluster
from slurm_fair.testbed import Testbed
from slurm_fair.testbed import config as tbconfig
from slurm_fair.estimates.gavel import load as load_table

pytestmark = pytest.mark.slurm

DESCRIPTION = {
    "cluster": {"name": "fairjs", "cpus_per_node": 8, "memory_mb": 16000, "job_submit_lua": True},
    "gpu_types": {
        "v100": {"nodes": "jv100-1", "gpus_per_node": 4},
        "p100": {"nodes": "jp100-1", "gpus_per_node": 4},
        "k80": {"nodes": "jk80-1", "gpus_per_node": 4},
    },
    "tenants": {"physics": {"fairshare": 2}, "biology": {"fairshare": 1}},
}


def _free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("0.0.0.0", port))
        except OSError:
            return False
    return True


def free_ports() -> dict[str, int]:
    """Six consecutive free ports in 20000-39999 (other engineers' testbeds run beside us)."""
    rng = random.Random()
    for _ in range(200):
        base = rng.randrange(20000, 39990)
        if all(_free(base + i) for i in range(6)):
            return {"slurmctld": base, "slurmdbd": base + 1, "mariadb": base + 2, "slurmd_base": base + 3}
    pytest.skip("no six consecutive free ports found")


def _need(*programs: str) -> None:
    path = "/usr/sbin:/sbin:/usr/bin:/bin"
    missing = [p for p in programs if shutil.which(p) is None and shutil.which(p, path=path) is None]
    if missing:
        pytest.skip(f"not installed: {', '.join(missing)}")


class Cluster:
    """The private testbed plus the plan file the plugin reads."""

    def __init__(self, tb: Testbed, plan: Path, rendered: dict[str, str]) -> None:
        self.tb, self.plan, self.rendered = tb, plan, rendered

    def write_plan(self, entries: dict[str, str], age_s: int = 0, valid_s: int = 180) -> None:
        """A plan with this cluster's layout (as the controller writes it) plus ``entries``."""
        now = int(time.time()) - age_s
        lines = ['"format": 2', f'"generated_at": {now}', f'"expires_at": {now + valid_s}', '"cycle": "test"']
        lines += [f'"{k}": "{v}"' for k, v in {**LAYOUT, **entries}.items()]
        self.plan.write_text("{\n" + ",\n".join(lines) + "\n}\n")

    def sbatch(self, *args: str) -> subprocess.CompletedProcess:
        argv = ["sbatch", "--parsable", "--begin=now+7200", f"--output={self.tb.layout.log}/job-%j.out", *args,
                "--wrap", "sleep 1"]
        return self.tb.run(argv, timeout=30, check=False)

    def submit(self, *args: str) -> dict[str, str]:
        proc = self.sbatch(*args)
        assert proc.returncode == 0, f"sbatch {args} rejected: {proc.stderr}"
        job = proc.stdout.strip().split(";")[0]
        return self.show(job)

    def show(self, job: str) -> dict[str, str]:
        out = self.tb.run(["scontrol", "show", "job", "-o", job], timeout=15).stdout
        fields: dict[str, str] = {"JobId": job}
        # values may contain spaces (Comment); split on ' Key=' boundaries
        for m in re.finditer(r"(?:^| )([A-Za-z][A-Za-z:/_]*)=(.*?)(?= [A-Za-z][A-Za-z:/_]*=|$)", out.strip()):
            fields[m.group(1)] = m.group(2).strip()
        return fields


@pytest.fixture(scope="module")
def cluster():
    _need("munged", "mariadbd", "slurmctld", "slurmd", "slurmdbd", "sbatch")
    if not list(Path("/usr/lib/x86_64-linux-gnu/slurm-wlm").glob("job_submit_lua.so")) and not list(
        Path("/usr/lib").glob("**/job_submit_lua.so")
    ):
        pytest.skip("Slurm's job_submit_lua plugin is not installed")
    root = Path(tempfile.mkdtemp(prefix="sfjs-", dir="/tmp"))
    state = root / "state"
    state.mkdir()
    config = validate_config({"controller": {"state_dir": str(state), "audit_log": str(root / "audit.jsonl")}})
    inv = inventory.validate(DESCRIPTION)
    # the testbed's controller runs as root (its SlurmUser): no slurm-fair user in its slurmdbd
    rendered = render_cluster(config, inv, load_table(None), DeployOptions(run_as="root"))
    script = root / "job_submit.lua"
    script.write_text(rendered["job_submit.lua"])
    desc = {**DESCRIPTION, "cluster": {**DESCRIPTION["cluster"], "job_submit_script": str(script)},
            "ports": free_ports()}
    tb = Testbed(dir=root / "tb", config=tbconfig.validate(desc, "private job_submit testbed"))
    try:
        tb.up()
        yield Cluster(tb, state / "plan.json", rendered)
    finally:
        try:
            tb.down()
        finally:
            shutil.rmtree(root, ignore_errors=True)


#: what the controller's plan file says about this cluster: one node of 4 GPUs per type
LAYOUT = {"spans/gpu": "k80 p100 v100", **{f"partition/{t}": t for t in ("v100", "p100", "k80")},
          **{f"shapes/{t}": "4x8x16000x1" for t in ("v100", "p100", "k80")},
          "tier/v100": "3", "tier/p100": "2", "tier/k80": "1", "speeds/*": "k80=1 p100=1 v100=1"}
PLAN = {"room/biology": "p100 k80", "room/*": "k80", "speeds/resnet": "k80=0.16 p100=0.63 v100=1"}
MARK = "slurm-fair:partition=gpu slurm-fair:routed=p100,k80"


def test_fresh_plan_steers_an_untyped_gres_request(cluster):
    cluster.write_plan(PLAN)
    job = cluster.submit("-A", "biology", "--gres=gpu:2")
    assert (job["Partition"], job["AdminComment"]) == ("p100,k80", MARK)
    assert job["TresPerNode"] == "gres:gpu:2"  # the request itself stays untyped


def test_fresh_plan_steers_a_gpus_request(cluster):
    cluster.write_plan(PLAN)
    job = cluster.submit("-A", "biology", "--gpus=2")
    assert (job["Partition"], job["TresPerJob"]) == ("p100,k80", "gres:gpu:2")


def test_class_tag_and_other_account(cluster):
    cluster.write_plan(PLAN)
    tagged = cluster.submit("-A", "biology", "--gres=gpu:1", "--comment=fair:class=resnet")
    # biology has room on p100 and k80; resnet is 4x slower on k80: p100 only
    assert tagged["Partition"] == "p100" and tagged["Comment"] == "fair:class=resnet"
    other = cluster.submit("-A", "physics", "--gres=gpu:3")
    assert other["Partition"] == "k80"


def test_a_job_no_single_type_can_hold_stays_where_it_asked(cluster):
    cluster.write_plan(PLAN)
    # two 4-GPU nodes: every type here has one node, only the all-types partition has three
    job = cluster.submit("-A", "biology", "-N", "2", "--gres=gpu:4")
    assert job["Partition"] == "gpu" and job.get("AdminComment", "(null)") == "(null)"


def test_a_job_whose_fit_the_plan_cannot_tell_is_left_to_the_controller(cluster):
    """Memory or CPUs per GPU (what the plan's node shapes cannot check): the plugin reads
    them from the job description slurmctld gives it and leaves the job as submitted."""
    cluster.write_plan(PLAN)
    for extra in ("--mem-per-gpu=1000", "--cpus-per-gpu=2"):
        job = cluster.submit("-A", "biology", "--gres=gpu:1", extra)
        assert job["Partition"] == "gpu" and job.get("AdminComment", "(null)") == "(null)", (extra, job)
    steered = cluster.submit("-A", "biology", "--gres=gpu:1")  # the control: the same job without
    assert steered["Partition"] != "gpu" and steered["AdminComment"].startswith(MARK.split()[0])


def test_typed_request_or_chosen_partition_is_never_changed(cluster):
    cluster.write_plan(PLAN)
    job = cluster.submit("-A", "biology", "--gres=gpu:k80:1")
    assert (job["TresPerNode"], job["Partition"]) == ("gres:gpu:k80:1", "gpu")
    job = cluster.submit("-A", "biology", "-p", "v100", "--gres=gpu:1")
    assert job["Partition"] == "v100" and job.get("AdminComment", "(null)") == "(null)"


def test_plan_of_an_older_version_with_pin_gres_still_only_steers(cluster):
    cluster.write_plan({**PLAN, "pin_gres": "1"})
    job = cluster.submit("-A", "biology", "--gres=gpu:2")
    assert job["TresPerNode"] == "gres:gpu:2" and job["Partition"] != "gpu"


def test_missing_plan_leaves_job_untouched(cluster):
    cluster.plan.unlink(missing_ok=True)
    job = cluster.submit("-A", "biology", "--gres=gpu:2")
    assert (job["TresPerNode"], job["Partition"]) == ("gres:gpu:2", "gpu")


def test_stale_plan_leaves_job_untouched(cluster):
    cluster.write_plan(PLAN, age_s=1000)  # expired 820 s ago
    job = cluster.submit("-A", "biology", "--gres=gpu:2")
    assert job["Partition"] == "gpu"
    cluster.write_plan(PLAN, age_s=400, valid_s=3600)  # not expired, but older than the max age
    job = cluster.submit("-A", "biology", "--gpus=2")
    assert job["Partition"] == "gpu"


@pytest.mark.parametrize("text", ["{\n\"format\": 2,\n\"generated_at\": oops\n", "\x00\x01garbage", "",
                                  "{\n\"format\": 1,\n\"types/*/*\": \"k80\"\n}\n"])
def test_malformed_plan_job_accepted_untouched(cluster, text):
    cluster.plan.write_text(text)
    job = cluster.submit("-A", "biology", "--gres=gpu:2")
    assert (job["TresPerNode"], job["Partition"]) == ("gres:gpu:2", "gpu")


def test_hostile_plan_value_is_not_used(cluster):
    cluster.write_plan({"speeds/*": "v100=1 p100;x=1 k80=oops", "room/biology": "p100:9 k80;x"})
    job = cluster.submit("-A", "biology", "--gres=gpu:2")
    assert job["Partition"] == "v100"  # the only valid speed; no valid room: any type will do


def test_a_users_choice_is_never_narrowed_in_slurmctld(cluster):
    cluster.write_plan(PLAN)
    for args in (["-p", "gpu,k80"], ["-w", "jv100-1"], ["-x", "jk80-1"], ["--hold"]):
        job = cluster.submit("-A", "biology", "--gres=gpu:1", *args)
        assert job.get("AdminComment", "(null)") == "(null)", (args, job)
        assert job["Partition"] in ("gpu", "gpu,k80", "k80,gpu"), (args, job["Partition"])
    first = cluster.submit("-A", "biology", "--gres=gpu:1")
    job = cluster.submit("-A", "biology", "--gres=gpu:1", f"--dependency=afterok:{first['JobId']}")
    assert job["Partition"] == "gpu" and job.get("AdminComment", "(null)") == "(null)"


def test_only_the_pilots_accounts_are_steered_in_slurmctld(cluster):
    cluster.write_plan({**PLAN, "scope/accounts": "physics"})
    assert cluster.submit("-A", "biology", "--gres=gpu:2")["Partition"] == "gpu"
    assert cluster.submit("-A", "physics", "--gres=gpu:2")["Partition"] == "k80"


SITE_SCRIPT = """
function slurm_job_submit(job_desc, part_list, submit_uid)
  if job_desc.comment == "site:reject" then
    slurm.log_user("rejected by the site")
    return slurm.ERROR
  end
  if job_desc.comment == "site:route" then
    job_desc.partition = "gpu"
    job_desc.qos = "siteq"
  end
  return slurm.SUCCESS
end
function slurm_job_modify(job_desc, job_rec, part_list, modify_uid)
  return slurm.SUCCESS
end
return slurm.SUCCESS
"""


def test_the_sites_own_job_submit_lua_runs_first_in_slurmctld(cluster, tmp_path):
    """A site script that sets a partition and a QOS: both stand (the partition is what the job
    asked for, so slurm-fair steers from there); a job it rejects is rejected."""
    site = cluster.tb.dir.parent / "site_job_submit.lua"
    site.write_text(SITE_SCRIPT)
    state = cluster.plan.parent
    config = validate_config({"controller": {"state_dir": str(state), "site_job_submit": str(site)}})
    composed = render_cluster(config, inventory.validate(DESCRIPTION), load_table(None),
                              DeployOptions(run_as="root"))["job_submit.lua"]
    installed = cluster.tb.layout.etc / "job_submit.lua"
    original = installed.read_text()
    run = cluster.tb.run
    run(["sacctmgr", "-i", "add", "qos", "siteq"], timeout=30, check=False)
    run(["sacctmgr", "-i", "modify", "account", "biology", "set", "qos+=siteq"], timeout=30)
    run(["sacctmgr", "-i", "modify", "user", "root", "where", "account=biology", "set", "qos+=siteq"], timeout=30)
    try:
        installed.write_text(composed)  # slurmctld re-reads a changed script
        run(["scontrol", "reconfigure"], timeout=30)
        cluster.write_plan(PLAN)
        deadline = time.time() + 30
        while True:
            job = cluster.submit("-A", "biology", "-p", "v100", "--gres=gpu:2", "--comment=site:route")
            if job["QOS"] == "siteq" or time.time() > deadline:
                break
            time.sleep(2)
        assert job["QOS"] == "siteq"  # the site's QOS stands
        assert (job["Partition"], job["AdminComment"]) == ("p100,k80", MARK)  # steered from the site's gpu
        rejected = cluster.sbatch("-A", "biology", "--gres=gpu:1", "--comment=site:reject")
        assert rejected.returncode != 0 and "rejected by the site" in rejected.stderr
    finally:
        installed.write_text(original)
        run(["scontrol", "reconfigure"], timeout=30)


def test_billing_weights_charge_fast_gpus_more(cluster):
    """The fragment's TRESBillingWeights, applied to the partitions, bill v100 > p100 > k80."""
    lines = [ln for ln in cluster.rendered["slurm-fair.conf"].splitlines() if ln.startswith("PartitionName=")]
    billing = {}
    for ln in lines:
        kv = dict(item.split("=", 1) for item in ln.split())
        part = kv["PartitionName"]
        cluster.tb.run(["scontrol", "update", f"PartitionName={part}",
                        f"TRESBillingWeights={kv['TRESBillingWeights']}"], timeout=15)
        cluster.plan.unlink(missing_ok=True)
        job = cluster.submit("-A", "biology", "-p", part, f"--gres=gpu:{part}:4")
        billing[part] = float(re.search(r"billing=([0-9.]+)", job["TRES"]).group(1))
    print("billing of a 4-GPU job per partition:", billing)
    assert billing["v100"] > billing["p100"] > billing["k80"] > 0


def test_bootstrap_is_idempotent_and_makes_no_qos(cluster):
    script = cluster.tb.dir.parent / "bootstrap.sh"
    script.write_text(cluster.rendered["bootstrap.sh"])
    script.chmod(0o755)
    env = {**cluster.tb.client_env(), "PATH": "/usr/sbin:/usr/bin:/sbin:/bin"}
    before = cluster.tb.run(["sacctmgr", "-n", "-P", "show", "assoc", "format=account,user,qos,defaultqos"],
                            timeout=15).stdout
    first = subprocess.run([str(script)], env=env, capture_output=True, text=True, timeout=120)
    assert first.returncode == 0, first.stderr
    assert "bootstrap done" in first.stdout
    second = subprocess.run([str(script)], env=env, capture_output=True, text=True, timeout=120)
    assert second.returncode == 0, second.stderr
    assert "+ sacctmgr" not in second.stdout  # nothing left to do
    qos = cluster.tb.run(["sacctmgr", "-n", "-P", "show", "qos", "format=name"], timeout=15).stdout.split()
    assert not [q for q in qos if q.startswith("fair_")]
    after = cluster.tb.run(["sacctmgr", "-n", "-P", "show", "assoc", "format=account,user,qos,defaultqos"],
                           timeout=15).stdout
    assert after == before  # no association changed
