"""The rendered job_submit.lua's logic, run by the Lua 5.1 interpreter slurmctld's plugin links.

``lua_driver.lua`` loads the script with a stub ``slurm`` table and runs one case given on its
argv (no shell). The same script is exercised inside a real slurmctld by
``test_job_submit_slurm.py``.
"""

from __future__ import annotations

import shutil
import subprocess
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st
from hypo_profiles import scaled

from slurm_fair.config import validate as validate_config
from slurm_fair.deploy import inventory
from slurm_fair.deploy.render import DeployOptions, render_cluster
from slurm_fair.estimates.gavel import load as load_table

LUA = shutil.which("lua5.1")
DRIVER = Path(__file__).with_name("lua_driver.lua")
pytestmark = pytest.mark.skipif(LUA is None, reason="lua5.1 not installed (scripts/system-packages.sh)")

NOW = 1_800_000_000


def render_plugin(tmp_path, site: str = "") -> tuple[Path, Path]:
    """The rendered plugin (plan in tmp_path/state; ``site``: the site's own script's text)."""
    state = tmp_path / "state"
    state.mkdir(exist_ok=True)
    controller = {"state_dir": str(state), "interval_s": 60}
    if site:
        (tmp_path / "site.lua").write_text(site)
        controller["site_job_submit"] = str(tmp_path / "site.lua")
    config = validate_config({"controller": controller})
    inv = inventory.validate({"gpu_types": {"v100": {"nodes": "a", "gpus_per_node": 4},
                                            "k80": {"nodes": "b", "gpus_per_node": 4}}})
    text = render_cluster(config, inv, load_table(None), DeployOptions())["job_submit.lua"]
    path = tmp_path / "job_submit.lua"
    path.write_text(text)
    return path, state / "plan.json"


@pytest.fixture
def script(tmp_path) -> tuple[Path, Path]:
    """The rendered plugin (plan in tmp_path/state) and the plan path."""
    return render_plugin(tmp_path)


def lua(script: Path, *args: str) -> dict[str, list[str]]:
    proc = subprocess.run([LUA, str(DRIVER), str(script), *args], capture_output=True, text=True, timeout=30)
    assert proc.returncode == 0, proc.stderr
    out: dict[str, list[str]] = {}
    for line in proc.stdout.splitlines():
        k, _, v = line.partition("=")
        out.setdefault(k, []).append(v)
    assert out["load_rc"] == ["0"]  # the script returns slurm.SUCCESS when loaded
    return out


def one(out: dict[str, list[str]], key: str) -> str:
    return out[key][0]


#: the shape of the testbed: one partition of three types, a partition per type (tiers by
#: speed), node sizes, flat speeds and room everywhere unless a test says otherwise
LAYOUT = {"spans/gpu": "k80 p100 v100", "partition/v100": "v100", "partition/p100": "p100",
          "partition/k80": "k80", "tier/v100": "3", "tier/p100": "2", "tier/k80": "1",
          "shapes/v100": "4x16x64000x2", "shapes/p100": "4x16x64000x2", "shapes/k80": "8x16x64000x1",
          "speeds/*": "k80=1 p100=1 v100=1", "room/*": "k80 p100 v100"}


def plan_text(generated: int, valid: int = 180, layout: bool = True, **entries: str) -> str:
    lines = ['"format": 2', f'"generated_at": {generated}', f'"expires_at": {generated + valid}',
             '"cycle": "c1"'] + [f'"{k}": "{v}"' for k, v in {**(LAYOUT if layout else {}), **entries}.items()]
    return "{\n" + ",\n".join(lines) + "\n}\n"


@pytest.mark.parametrize(
    "elem,kind,prefix,count",
    [
        ("gres:gpu:2", "untyped", "gres:", ":2"),
        ("gres/gpu:2", "untyped", "gres/", ":2"),
        ("gpu:2", "untyped", "", ":2"),
        ("gres:gpu", "untyped", "gres:", ""),
        ("gres:gpu:v100:2", "typed", "nil", "nil"),
        ("gres/gpu:a100", "typed", "nil", "nil"),
        ("gres:gpu:0", "other", "nil", "nil"),
        ("gres:shard:2", "other", "nil", "nil"),
        ("gres:gpuxyz:2", "other", "nil", "nil"),
    ],
)
def test_classify(script, elem, kind, prefix, count):
    out = lua(script[0], "classify", elem)
    assert (one(out, "kind"), one(out, "prefix"), one(out, "count")) == (kind, prefix, count)


@pytest.mark.parametrize(
    "comment,expected",
    [("fair:class=resnet-50_bs32", "resnet-50_bs32"), ("x fair:class=a.b+c y", "a.b+c"),
     ("fair:class=", "*"), ("fair:class=-bad", "*"), ("nothing", "*"), ("fair:class=" + "a" * 65, "*")],
)
def test_job_class(script, comment, expected):
    assert one(lua(script[0], "class", comment), "class") == expected


def test_read_plan_fresh_stale_expired_malformed(script):
    path, plan = script
    plan.write_text(plan_text(NOW - 10, **{"types/*/*": "k80"}))
    out = lua(path, "read_plan", str(plan), str(NOW))
    assert one(out, "ok") == "true" and one(out, "plan.types/*/*") == "k80"
    assert one(lua(path, "read_plan", str(plan), str(NOW + 200)), "why").startswith("stale")  # expired
    plan.write_text(plan_text(NOW - 200, valid=3600))  # not expired but older than max age 180
    assert one(lua(path, "read_plan", str(plan), str(NOW)), "why").startswith("stale")
    plan.write_text(plan_text(NOW)[:-3])  # truncated: no closing brace
    assert one(lua(path, "read_plan", str(plan), str(NOW)), "ok") == "false"
    plan.write_text('{\n"format": 1,\n"generated_at": 1,\n"expires_at": 2\n}\n')
    assert one(lua(path, "read_plan", str(plan), str(NOW)), "why").startswith("unknown format")
    plan.unlink()
    assert one(lua(path, "read_plan", str(plan), str(NOW)), "why") == "missing or unreadable"


def submit(script, now, **fields) -> dict[str, list[str]]:
    return lua(script[0], "submit", str(now), *(f"{k}={v}" for k, v in fields.items()))


def test_submit_steers_by_class_speed_and_tenant_room(script):
    _, plan = script
    plan.write_text(plan_text(NOW, **{"speeds/resnet": "k80=0.16 p100=0.63 v100=1",
                                      "speeds/rec": "k80=0.49 p100=1 v100=0.51",
                                      "room/bio": "k80", "room/chem": "p100 v100"}))
    # bio has room on k80 only: its job goes there (flat speeds: nothing is much slower)
    out = submit(script, NOW, account="bio", tres_per_node="gres:gpu:2")
    assert (one(out, "rc"), one(out, "partition"), one(out, "admin_comment")) == (
        "0", "k80", "slurm-fair:partition=gpu slurm-fair:routed=k80")
    assert one(out, "tres_per_node") == "gres:gpu:2" and one(out, "comment") == "nil"  # request untouched
    # chem has room on v100 and p100: resnet is 1.6x faster on v100, so v100 only
    out = submit(script, NOW, account="CHEM", tres_per_job="gres:gpu:4", comment="fair:class=resnet")
    assert one(out, "partition") == "v100" and one(out, "tres_per_job") == "gres:gpu:4"
    # rec is fastest on p100, and v100 (tried first by Slurm, higher tier) is half as fast
    out = submit(script, NOW, account="chem", tres_per_task="gres:gpu:1", comment="fair:class=rec")
    assert one(out, "partition") == "p100"
    # a tenant the plan does not know: room/* (the free GPUs, here everywhere), flat speeds
    out = submit(script, NOW, default_account="other", tres_per_socket="gres:gpu:1", partition="gpu")
    assert one(out, "partition") == "v100,p100,k80"
    assert any("partitions v100,p100,k80" in line for line in out["log"])


def test_a_gang_reads_the_speeds_measured_at_its_size(script):
    _, plan = script
    # one GPU of "big" runs on k80; two or more do not (Gavel: out of memory), and at 4+ GPUs
    # p100 scales better than v100
    plan.write_text(plan_text(NOW, **{"speeds/big": "k80=0.14 p100=0.63 v100=1",
                                      "speeds/big@2": "p100=0.68 v100=1",
                                      "speeds/big@4": "p100=1 v100=0.8", "room/bio": ""}))
    one_gpu = submit(script, NOW, account="bio", tres_per_node="gres:gpu:1", comment="fair:class=big")
    assert one(one_gpu, "partition") == "v100,p100,k80"
    for fields, expected in [
        ({"tres_per_node": "gres:gpu:2"}, "v100,p100"),  # no k80: the class cannot run there at 2
        ({"tres_per_node": "gres:gpu:3"}, "v100,p100"),  # 3 reads the row of 2
        ({"tres_per_node": "gres:gpu:2", "min_nodes": "2"}, "p100"),  # 2 x 2 = 4 GPUs: p100 best
        ({"tres_per_job": "gres:gpu:4"}, "p100"),
        ({"tres_per_task": "gres:gpu:1", "num_tasks": "2"}, "v100,p100"),
    ]:
        out = submit(script, NOW, account="bio", comment="fair:class=big", **fields)
        assert one(out, "partition") == expected, fields


def test_no_room_anywhere_offers_every_type(script):
    _, plan = script
    plan.write_text(plan_text(NOW, **{"speeds/resnet": "k80=0.16 p100=0.63 v100=1", "room/bio": ""}))
    # over its share everywhere: any free GPU will do, still never v100-then-much-slower by tier
    out = submit(script, NOW, account="bio", tres_per_node="gres:gpu:1", comment="fair:class=resnet")
    assert one(out, "partition") == "v100,p100,k80"


def test_only_partitions_that_can_hold_the_job(script):
    _, plan = script
    plan.write_text(plan_text(NOW))
    # 8 GPUs on one node: only the k80 node has 8
    assert one(submit(script, NOW, account="a", tres_per_node="gres:gpu:8"), "partition") == "k80"
    # two nodes of 4: not k80 (one node)
    assert one(submit(script, NOW, account="a", tres_per_node="gres:gpu:4", min_nodes="2"), "partition") == "v100,p100"
    # --gpus=8 without -N: counted as one node (the safe side)
    assert one(submit(script, NOW, account="a", tres_per_job="gres:gpu:8"), "partition") == "k80"
    # --gpus=8 -N 2: 4 per node, any type with two nodes
    assert one(submit(script, NOW, account="a", tres_per_job="gres:gpu:8", max_nodes="2", min_nodes="2"),
               "partition") == "v100,p100"
    # more CPUs or memory per node than any node has: untouched
    for extra in ({"pn_min_cpus": "32"}, {"pn_min_memory": "128000"}):
        out = submit(script, NOW, account="a", tres_per_node="gres:gpu:1", **extra)
        assert (one(out, "partition"), one(out, "admin_comment")) == ("nil", "nil")
    # memory per CPU (Slurm's flag bit) is not compared with node memory
    out = submit(script, NOW, account="a", tres_per_node="gres:gpu:1", pn_min_memory=str(2**63 + 1000))
    assert one(out, "partition") == "v100,p100,k80"
    # 16 GPUs on a node: nowhere; untouched, Slurm decides
    assert one(submit(script, NOW, account="a", tres_per_node="gres:gpu:16"), "partition") == "nil"
    # the best type cannot hold the gang: the best of those that can (an 8-GPU resnet gang on k80)
    plan.write_text(plan_text(NOW, **{"speeds/resnet": "k80=0.16 p100=0.63 v100=1"}))
    out = submit(script, NOW, account="a", tres_per_node="gres:gpu:8", comment="fair:class=resnet")
    assert one(out, "partition") == "k80"


def test_submit_leaves_untouched(script):
    _, plan = script
    plan.write_text(plan_text(NOW))
    typed = submit(script, NOW, account="bio", tres_per_node="gres:gpu:k80:2", tres_per_job="gres:gpu:1")
    assert (one(typed, "tres_per_node"), one(typed, "partition"), one(typed, "comment")) == (
        "gres:gpu:k80:2", "nil", "nil")
    cpu_only = submit(script, NOW, account="bio")
    assert (one(cpu_only, "partition"), one(cpu_only, "admin_comment")) == ("nil", "nil")
    stale = submit(script, NOW + 1000, account="bio", tres_per_node="gres:gpu:2")
    assert (one(stale, "rc"), one(stale, "partition")) == ("0", "nil")
    # the user chose a partition of one type (or one the plan does not know): left as asked
    assert one(submit(script, NOW, account="bio", tres_per_node="gres:gpu:2", partition="k80"), "partition") == "k80"
    mixed = submit(script, NOW, account="bio", tres_per_node="gres:gpu:2", partition="gpu,debug")
    assert one(mixed, "partition") == "gpu,debug"
    # no default partition known: untouched
    assert one(submit(script, NOW, account="bio", tres_per_node="gres:gpu:2", default_part="cpu"), "partition") == "nil"
    plan.write_text(plan_text(NOW, **{"speeds/*": "v100;rm=1 k80=x"}))  # no valid speed: no type
    bad = submit(script, NOW, account="bio", tres_per_node="gres:gpu:2")
    assert one(bad, "partition") == "nil"
    plan.write_text(plan_text(NOW, **{"partition/v100": "v100;rm", "partition/p100": "a b",
                                      "partition/k80": ""}))  # invalid partitions: never used
    assert one(submit(script, NOW, account="bio", tres_per_node="gres:gpu:2"), "partition") == "nil"
    plan.write_text("not a plan at all\n")
    bad = submit(script, NOW, account="bio", tres_per_node="gres:gpu:2")
    assert (one(bad, "rc"), one(bad, "tres_per_node"), one(bad, "partition")) == ("0", "gres:gpu:2", "nil")


@pytest.mark.parametrize("field,value", [
    ("partition", "v100,p100"), ("req_nodes", "k80-1"), ("exc_nodes", "v100-1"), ("reservation", "maint"),
    ("features", "nvlink"), ("dependency", "afterok:7"), ("priority", "0"),
])
def test_a_users_choice_of_where_to_run_is_never_narrowed(script, field, value):
    """-p a,b, -w, -x, --reservation, -C, --dependency, -H: the job goes through as submitted."""
    _, plan = script
    plan.write_text(plan_text(NOW, **{"spans/v100": "v100", "spans/p100": "p100"}))
    out = submit(script, NOW, account="bio", tres_per_node="gres:gpu:1", **{field: value})
    assert (one(out, "rc"), one(out, "admin_comment")) == ("0", "nil")
    assert one(out, "partition") == (value if field == "partition" else "nil")


def test_only_the_pilots_accounts_are_steered(script):
    _, plan = script
    plan.write_text(plan_text(NOW, **{"scope/accounts": "bio chem"}))
    assert one(submit(script, NOW, account="BIO", tres_per_node="gres:gpu:1"), "partition") == "v100,p100,k80"
    out = submit(script, NOW, account="physics", tres_per_node="gres:gpu:1")
    assert (one(out, "partition"), one(out, "admin_comment")) == ("nil", "nil")


def test_partition_tier_and_limits_decide_what_is_offered(script):
    _, plan = script
    # v100's partition is above the asked one's tier; p100's MaxTime is 60 min; k80 takes 1 node
    plan.write_text(plan_text(NOW, **{"spantier/gpu": "2", "tier/v100": "3", "tier/p100": "2", "tier/k80": "1",
                                      "maxtime/p100": "60", "maxnodes/k80": "1"}))
    assert one(submit(script, NOW, account="a", tres_per_node="gres:gpu:1", time_limit="30"), "partition") == "p100,k80"
    assert one(submit(script, NOW, account="a", tres_per_node="gres:gpu:1", time_limit="120"), "partition") == "k80"
    # no time limit asked: the partition's own default applies there, within its MaxTime
    assert one(submit(script, NOW, account="a", tres_per_node="gres:gpu:1"), "partition") == "p100,k80"
    out = submit(script, NOW, account="a", tres_per_node="gres:gpu:2", min_nodes="2", time_limit="120")
    assert one(out, "partition") == "nil"


SITE = """
function slurm_job_submit(job_desc, part_list, submit_uid)
  if job_desc.comment == "site:reject" then return slurm.ERROR end
  if job_desc.account == "bio" then job_desc.qos = "siteqos" end
  if job_desc.comment == "site:gpu" then job_desc.partition = "gpu" end
  return slurm.SUCCESS
end
function slurm_job_modify(job_desc, job_rec, part_list, modify_uid)
  return 7
end
return slurm.SUCCESS
"""


def test_the_sites_own_plugin_runs_first_and_its_choices_count(tmp_path):
    path, plan = render_plugin(tmp_path, SITE)
    plan.write_text(plan_text(NOW, **{"room/bio": "k80"}))
    # the site sets a QOS: kept; our steering follows
    out = submit((path, plan), NOW, account="bio", tres_per_node="gres:gpu:1")
    assert (one(out, "qos"), one(out, "partition")) == ("siteqos", "k80")
    # the site sets the partition (over the user's one-type choice): that is what the job asked for
    out = submit((path, plan), NOW, account="bio", tres_per_node="gres:gpu:1", partition="v100", comment="site:gpu")
    assert (one(out, "partition"), one(out, "admin_comment")) == ("k80", "slurm-fair:partition=gpu slurm-fair:routed=k80")
    # the site rejects: rejected, untouched by us
    out = submit((path, plan), NOW, account="bio", tres_per_node="gres:gpu:1", comment="site:reject")
    assert (one(out, "rc"), one(out, "partition")) == ("-1", "nil")
    assert one(lua(path, "modify"), "rc") == "7"  # the site's modify hook is the answer


def test_a_site_plugin_that_cannot_load_rejects_rather_than_skipping_its_policy(tmp_path):
    path, plan = render_plugin(tmp_path, "this is not lua (")
    plan.write_text(plan_text(NOW))
    out = submit((path, plan), NOW, account="bio", tres_per_node="gres:gpu:1")
    assert one(out, "rc") == "-1" and any("cannot be loaded" in line for line in out["log"])


def test_never_types_the_request_itself(script):
    """Also with an old plan file that still says pin_gres=1: revert could not undo it."""
    _, plan = script
    plan.write_text(plan_text(NOW, pin_gres="1", **{"room/bio": "k80"}))
    out = submit(script, NOW, account="bio", tres_per_node="gres:gpu:2")
    assert (one(out, "tres_per_node"), one(out, "partition")) == ("gres:gpu:2", "k80")


def test_existing_admin_comment_is_kept(script):
    _, plan = script
    plan.write_text(plan_text(NOW))
    out = submit(script, NOW, account="bio", tres_per_node="gres:gpu:1", admin_comment="ticket-42")
    assert one(out, "admin_comment") == "ticket-42 slurm-fair:partition=gpu slurm-fair:routed=v100,p100,k80"


def test_plugin_error_never_rejects(script):
    out = lua(script[0], "submit_error")
    assert one(out, "rc") == "0"
    assert any("error, job left as submitted" in line for line in out["log"])
    assert one(lua(script[0], "modify"), "rc") == "0"


def test_real_time_plan_from_controller_renderer(script):
    """A plan written by the controller's own planfile.render parses and steers."""
    from slurm_fair.controller import planfile

    _, plan = script
    now = int(time.time())
    plan.write_text(planfile.render({**LAYOUT, "room/bio": "v100 p100"}, now, 180, "cyc-1"))
    out = submit(script, now, account="bio", tres_per_node="gres:gpu:2")
    assert one(out, "partition") == "v100,p100"


TYPES = ["a100", "v100", "p100", "k80"]


@settings(max_examples=scaled(150), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    speed=st.fixed_dictionaries({k: st.sampled_from([0.0, 0.16, 0.5, 0.63, 0.9, 0.95, 1.0]) for k in TYPES}),
    tiers=st.fixed_dictionaries({k: st.integers(0, 3) for k in TYPES}),
    room=st.sets(st.sampled_from(TYPES)),
)
def test_lua_prefer_is_the_controllers_prefer(script, speed, tiers, room):
    """The plugin's choice and planfile.prefer (whose Slurm property is tested with the
    controller) give the same list for the same inputs."""
    from slurm_fair.controller.planfile import prefer

    cands = [k for k in sorted(TYPES) if speed[k] > 0]
    out = lua(script[0], "prefer", " ".join(cands), " ".join(f"{k}={v}" for k, v in speed.items() if v > 0),
              " ".join(sorted(room)), " ".join(f"{k}={v}" for k, v in tiers.items()))
    want = prefer(cands, speed, {k: 1 for k in room}, tiers)
    assert one(out, "offered").split() == want


#: a job description's fields as a user sets them at submission (None: not given)
_DESC = {
    "partition": st.sampled_from([None, "gpu", "v100", "gpu,v100"]),
    "req_nodes": st.sampled_from([None, "v100-1"]),
    "exc_nodes": st.sampled_from([None, "k80-1"]),
    "reservation": st.sampled_from([None, "maint"]),
    "features": st.sampled_from([None, "nvlink"]),
    "dependency": st.sampled_from([None, "afterok:12"]),
    "priority": st.sampled_from([None, "0", "4294967294"]),  # -H, unset (NO_VAL)
}


def _job_as_slurm_shows_it(desc: dict[str, str | None]):
    """The job Slurm lists right after accepting ``desc``: held by its user when submitted
    with priority 0, pending on its dependency (not met at submission) otherwise."""
    from slurm_fair.slurm.model import GpuRequest, SlurmJob

    reason = "JobHeldUser" if desc["priority"] == "0" else "Dependency" if desc["dependency"] else "Priority"
    return SlurmJob(
        job_id="1", name="j", user="u", account="bio", partition=desc["partition"] or "gpu", qos="normal",
        state="PENDING", reason=reason, gpu_request=GpuRequest(1, None, "node", 1, "TresPerNode=gres:gpu:1"),
        req_nodes=tuple(filter(None, [desc["req_nodes"]])), exc_nodes=tuple(filter(None, [desc["exc_nodes"]])),
        reservation=desc["reservation"] or "", features=desc["features"] or "", dependency=desc["dependency"] or "",
    )


@settings(max_examples=scaled(120), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(desc=st.fixed_dictionaries(_DESC))
def test_lua_user_choice_is_the_controllers(script, desc):
    """The plugin and the controller (:func:`steer.user_choice`) call the same jobs the user's
    choice, for the same reason: a hold is priority 0 at submission and the hold reason later;
    a dependency at submission is one Slurm has not found met."""
    from slurm_fair.controller.steer import user_choice
    from slurm_fair.slurm.parse.fields import fold_hostlist

    job = _job_as_slurm_shows_it(desc)
    want = user_choice(job, job.partition, fold_hostlist(job.req_nodes))
    out = lua(script[0], "user_choice", *(f"{k}={v}" for k, v in desc.items() if v is not None))
    assert one(out, "choice") == (want or "nil"), (desc, want)


def test_fits_the_plan_shapes_cannot_tell_are_left_to_the_controller(script):
    cases = {
        "tres_per_node=gres:gpu:2,gres:nvme:1": "asks for nvme (not GPUs)",
        "tres_per_node=gres/gpu:2,gres/shard:1": "asks for shard (not GPUs)",
        "tres_per_job=gres:gpu:2 mem_per_tres=gres:gpu:8000": "asks for memory per GPU",
        "tres_per_job=gres:gpu:2 cpus_per_tres=gres:gpu:4": "asks for CPUs per GPU",
        "tres_per_node=gres:gpu:1 licenses=matlab:1": "asks for licences",
        "tres_per_node=gres:gpu:2 tres_per_task=cpu=4": "nil",  # -c on Slurm >= 23.11: no gres
    }
    for fields, want in cases.items():
        assert one(lua(script[0], "user_choice", *fields.split()), "beyond") == want, fields
    # and the whole decision leaves such a job untouched
    _, plan = script
    plan.write_text(plan_text(NOW))
    out = submit(script, NOW, account="bio", tres_per_node="gres:gpu:1", licenses="matlab:1")
    assert (one(out, "partition"), one(out, "admin_comment")) == ("nil", "nil")
    assert any("left to the controller: asks for licences" in line for line in out["log"])


@settings(max_examples=scaled(150), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    sizes=st.lists(st.tuples(st.sampled_from([2, 4, 8]), st.sampled_from([0, 8, 16]),
                             st.sampled_from([0, 32000, 64000])), min_size=1, max_size=5),
    gpus=st.integers(1, 8), nodes=st.integers(1, 3), cpus=st.sampled_from([0, 8, 12, 16]),
    mem=st.sampled_from([0, 16000, 48000]),
)
def test_lua_fits_is_the_controllers_partition_holds(script, sizes, gpus, nodes, cpus, mem):
    """A per-node GPU request (``--gres=gpu:G -N n``, CPUs and memory per node): the plugin's
    fit on the plan's shapes (:func:`planfile._shapes`) and :func:`steer.partition_holds` on
    the nodes themselves agree."""
    from slurm_fair.controller.planfile import _shapes
    from slurm_fair.controller.steer import partition_holds
    from slurm_fair.slurm.model import GpuRequest, Node, SlurmJob

    ns = [Node(f"n{i}", "idle", {"v100": g}, {}, ("v100",), (), c, m) for i, (g, c, m) in enumerate(sizes)]
    job = SlurmJob(job_id="1", name="j", user="u", account="bio", partition="gpu", qos="normal", state="PENDING",
                   gpu_request=GpuRequest(gpus, None, "node", nodes, f"TresPerNode=gres:gpu:{gpus}"),
                   min_cpus=cpus, min_memory_mb=mem)
    want = partition_holds(job, "v100", ns)
    out = lua(script[0], "fits", _shapes(ns, "v100", "v100"), str(gpus), str(nodes), str(cpus), str(mem))
    assert one(out, "fits") == str(want).lower(), (sizes, gpus, nodes, cpus, mem)
