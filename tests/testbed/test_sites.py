"""Site configurations on the real testbed: the shapes other sites' Slurm has, on every version.

``conf/sites/untyped.toml`` (GPUs without a type, overlapping partitions mixing hardware, no
partition per model) and ``conf/sites/mixed.toml`` (two GPU types in one node, MIG slices beside
a whole A100, shards, a partition of the site's own mixing types) are brought up as private
testbeds on free ports of their own, once per Slurm version of ``--slurm-versions``. Each test
reads a snapshot and checks it against what Slurm itself says (``scontrol -o show node``,
parsed here on its own), runs a controller cycle, revert and the failsafe, and checks that no
job was ever sent where it cannot run: every pending job's partitions must hold a node with
enough GPUs of a type its request accepts (an independent computation from the node list),
and in the end every job starts.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import subprocess
import sys
import time
from pathlib import Path

import pytest

from slurm_fair.config import validate as validate_controller
from slurm_fair.controller.cycle import run_cycle
from slurm_fair.controller.failsafe import failsafe
from slurm_fair.controller.revert import revert
from slurm_fair.slurm import make_port
from slurm_fair.testbed import Testbed, validate
from slurm_fair.testbed.procs import free_ports
from slurm_fair.testbed.rootfs import version as slurm_version_of
from slurm_fair.toml_schema import read_toml


pytestmark = [pytest.mark.slurm, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]


def _run(argv, env, check=True, timeout=60):
    return subprocess.run(argv, env={**os.environ, **env}, capture_output=True, text=True, timeout=timeout,
                          check=check)


def site_testbed(name: str, slurm: str, tmp: Path, testbeds) -> Testbed:
    """``conf/sites/<name>.toml`` on ``slurm``, in ``tmp``, on free ports. Another version than
    the host's uses the root filesystem of that version's main testbed (made once)."""
    raw = read_toml(REPO / "conf" / "sites" / f"{name}.toml")
    raw["cluster"] = {**raw["cluster"], "slurm": slurm}
    raw["ports"] = free_ports(len(validate(raw, name).nodes))
    cfg = validate(raw, f"conf/sites/{name}.toml (free ports)")
    tb = Testbed(dir=tmp / name, config=cfg)
    if not slurm_version_of(slurm).host:
        main = testbeds(slurm)
        tb.layout.root.mkdir(parents=True, exist_ok=True)
        if not tb.layout.rootfs.exists():
            tb.layout.rootfs.symlink_to(main.layout.rootfs)
    return tb


@pytest.fixture
def site(request, slurm_version, testbeds, tmp_path_factory):
    """``site(name)`` -> that site's testbed, up; taken down after the test."""
    started: list[Testbed] = []

    def bring(name: str) -> Testbed:
        tb = site_testbed(name, slurm_version, tmp_path_factory.mktemp("site"), testbeds)
        started.append(tb)
        tb.up()
        return tb

    yield bring
    for tb in started:
        tb.down()


def run_once_cli(tb: Testbed, tmp_path: Path, **controller) -> dict:
    """``slurm-fair run --once --json`` with the same configuration, in its own process."""
    extra = "".join(f"{k} = {str(v).lower() if isinstance(v, bool) else repr(v)}\n" for k, v in controller.items())
    path = tmp_path / "slurm-fair.toml"
    path.write_text(f"[controller]\nstate_dir = {str(tmp_path / 'state')!r}\naudit_log = "
                    f"{str(tmp_path / 'audit.jsonl')!r}\n{extra}[slurm]\ncommand_timeout_s = 15\n")
    cli = str(Path(sys.executable).parent / "slurm-fair")
    out = _run([cli, "run", "--once", "--json", "--config", str(path)], tb.env, check=False, timeout=180)
    assert out.returncode == 0, (out.returncode, out.stdout[-2000:], out.stderr[-2000:])
    return json.loads(out.stdout)


def controller_config(tmp_path: Path, **controller):
    return validate_controller({
        "controller": {"state_dir": str(tmp_path / "state"), "audit_log": str(tmp_path / "audit.jsonl"),
                       **controller},
        "slurm": {"command_timeout_s": 15},
    }, str(tmp_path / "slurm-fair.toml"))


# --- what Slurm says, read independently of slurm_fair's parsers -------------------------------

def slurm_nodes(tb: Testbed) -> dict[str, dict]:
    """Node -> partitions, configured GPUs per type ("" untyped), shards and allocated GPUs,
    from ``scontrol -o show node``: Gres= for the configuration, AllocTRES= for what is in use."""
    out = {}
    for line in _run(["scontrol", "-o", "show", "node"], tb.env).stdout.splitlines():
        f = dict(re.findall(r"(\w+)=(\S*)", line))
        gpus: dict[str, int] = {}
        shards = 0
        for item in f.get("Gres", "").split(","):
            parts = item.split("(")[0].split(":")
            typ, count = (parts[1], parts[2]) if len(parts) == 3 else ("", parts[1])
            if parts[0] == "shard":
                shards += int(count)
            elif parts[0] == "gpu":
                gpus[typ] = gpus.get(typ, 0) + int(count)
        alloc = dict(kv.split("=", 1) for kv in f.get("AllocTRES", "").split(",") if "=" in kv)
        out[f["NodeName"]] = {"partitions": set(f.get("Partitions", "").split(",")) - {""}, "gpus": gpus, "shards": shards,
                              "used": int(alloc.get("gres/gpu", 0))}
    return out


def can_run(job: dict, nodes: dict[str, dict]) -> bool:
    """A node of one of the job's partitions (and its node list) holds its GPU request."""
    for name, n in nodes.items():
        if not n["partitions"] & set(job["partition"].split(",")):
            continue
        if job["nodelist"] and name not in job["nodelist"]:
            continue
        gres = job["gres"]
        if gres["name"] == "shard":
            if n["shards"] >= gres["count"]:
                return True
            continue
        have = n["gpus"].get(gres["type"], 0) if gres["type"] else sum(n["gpus"].values())
        if have >= gres["count"]:
            return True
    return False


def slurm_jobs(tb: Testbed, ids: list[str]) -> dict[str, dict]:
    """Job -> partition, node list and GPU request (name, type, count), from ``scontrol -o show job``."""
    out = {}
    for jid in ids:
        line = _run(["scontrol", "-o", "show", "job", jid], tb.env).stdout
        f = dict(re.findall(r"(\w+)=(\S*)", line))
        tres = f.get("TresPerNode", "")
        m = re.search(r"(gpu|shard)(?::([^:,=]+))?[:=](\d+)", tres)
        assert m, (jid, tres)
        name, typ, count = m.group(1), m.group(2), int(m.group(3))
        out[jid] = {"partition": f["Partition"], "nodelist": "" if f.get("ReqNodeList") in ("(null)", None)
                    else f["ReqNodeList"], "gres": {"name": name, "type": typ, "count": count},
                    "state": f["JobState"], "reason": f.get("Reason", "")}
    return out


def submit(tb: Testbed, account: str, *args: str, begin: bool = True, wrap: str = "sleep 2") -> str:
    argv = ["sbatch", "--parsable", "-A", account, "-N1", "-o", "/dev/null", *args, "--wrap", wrap]
    if begin:
        argv.insert(2, "--begin=now+7200")
    return _run(argv, tb.env, timeout=30).stdout.strip().split(";")[0]


def wait_all_ran(tb: Testbed, ids: list[str], timeout: float = 90.0) -> dict[str, str]:
    """Let the jobs start now and wait until none is pending: job -> last state seen."""
    _run(["scontrol", "update", f"JobId={','.join(ids)}", "StartTime=now"], tb.env)
    deadline = time.time() + timeout
    states: dict[str, str] = {}
    while time.time() < deadline:
        out = _run(["sacct", "-X", "-n", "-P", "-j", ",".join(ids), "-o", "JobID,State"], tb.env).stdout
        states = dict(line.split("|", 1) for line in out.splitlines() if "|" in line)
        if len(states) == len(ids) and not any(s.startswith("PENDING") for s in states.values()):
            break
        time.sleep(2)
    return states


def view(tb: Testbed, ids: list[str]) -> dict[str, tuple]:
    return {j: (v["partition"], v["nodelist"], tuple(v["gres"].values())) for j, v in slurm_jobs(tb, ids).items()}


def cycle_revert_failsafe(tb: Testbed, ids: list[str], tmp_path: Path, **controller) -> dict:
    """One cycle and the never-stranded check; the failsafe of a controller gone silent (no job
    stranded either); a second cycle, then revert: every job exactly as before."""
    before = view(tb, ids)
    nodes = slurm_nodes(tb)
    config = controller_config(tmp_path, **controller)
    port = make_port(config, env=tb.env)

    def stranded() -> dict:
        return {j: v for j, v in slurm_jobs(tb, ids).items() if not can_run(v, nodes)}

    res = run_cycle(port, config)
    assert res.exit_code == 0, res.to_dict()
    after = slurm_jobs(tb, ids)
    assert not stranded()
    fs = failsafe(port, config, clock=lambda: time.time() + 10**6)
    assert fs.exit_code == 0 and not stranded(), fs.to_dict()
    again = run_once_cli(tb, tmp_path, **controller)  # the command an administrator runs from cron
    assert again["status"] == "ok", again
    assert not stranded()
    rv = revert(port, config)
    assert rv.exit_code == 0, (rv.failed, rv.problems)
    assert view(tb, ids) == before
    return {"cycle": res, "after": after, "before": before, "failsafe": fs}


def test_untyped_site(site, tmp_path):
    tb = site("untyped")
    config = controller_config(tmp_path)
    port = make_port(config, env=tb.env)
    # two jobs hold 4 + 2 untyped GPUs (Slurm prints such a node's type as "(null)")
    busy = [submit(tb, "physics", "--gres=gpu:4", "-w", "uv100-1", begin=False, wrap="sleep 300"),
            submit(tb, "biology", "--gres=gpu:2", "-p", "long", "-w", "uk80-2", begin=False, wrap="sleep 300")]
    deadline = time.time() + 60
    while time.time() < deadline and sum(n["used"] for n in slurm_nodes(tb).values()) < 6:
        time.sleep(1)
    truth = slurm_nodes(tb)
    assert sum(n["used"] for n in truth.values()) == 6
    snap = port.snapshot()
    for node in snap.nodes:
        t = truth[node.name]
        assert dict(node.gpus_total) == {"gpu": 4} and set(node.partitions) == t["partitions"], node
        assert sum(node.gpus_used.values()) == t["used"], (node.name, dict(node.gpus_used), t)
    free = sum(sum(n.gpus_total.values()) - sum(n.gpus_used.values()) for n in snap.nodes)
    assert free == 12 - 6

    tag = secrets.token_hex(2)
    ids = [submit(tb, "physics", "--gres=gpu:2", f"--job-name=u{tag}"),
           submit(tb, "biology", "--gres=gpu:1", "-p", "short"),
           submit(tb, "biology", "--gres=gpu:4", "-p", "long"),
           submit(tb, "physics", "--gres=gpu:1", "-p", "short,long")]
    done = cycle_revert_failsafe(tb, ids, tmp_path)
    # one kind of GPU: nothing to steer between types, nothing moved
    assert {j: v["partition"] for j, v in done["after"].items()} == {j: v[0] for j, v in view(tb, ids).items()}
    _run(["scancel", *busy], tb.env)
    states = wait_all_ran(tb, ids)
    assert all(not s.startswith("PENDING") for s in states.values()) and len(states) == len(ids), states


def test_mixed_site(site, tmp_path):
    tb = site("mixed")
    truth = slurm_nodes(tb)
    config = controller_config(tmp_path)
    port = make_port(config, env=tb.env)
    snap = port.snapshot()
    got = {n.name: dict(n.gpus_total) for n in snap.nodes}
    assert got == {name: t["gpus"] for name, t in truth.items()}
    assert got == {"duo-1": {"v100": 2, "p100": 2}, "mig-1": {"a100": 1, "a100_1g.10gb": 4},
                   "k80-1": {"k80": 4}, "p100-1": {"p100": 4}}  # shards are not GPUs
    for n in snap.nodes:
        assert set(n.partitions) == truth[n.name]["partitions"]

    ids = [submit(tb, "physics", "--gres=gpu:1"),
           submit(tb, "physics", "--gres=gpu:2"),
           submit(tb, "biology", "--gres=gpu:1"),
           submit(tb, "biology", "--gres=gpu:a100_1g.10gb:1"),
           submit(tb, "physics", "--gres=gpu:p100:1", "-p", "mix"),
           submit(tb, "biology", "--gres=gpu:1", "-p", "mix"),
           submit(tb, "physics", "--gres=shard:2"),
           submit(tb, "biology", "--gres=gpu:v100:1", "-p", "v100")]
    shard = ids[6]
    # by partition only (the 22.05 way), then by typing the request where Slurm can undo it
    done = cycle_revert_failsafe(tb, ids, tmp_path / "partition", pin_gres_type=False)
    res, after = done["cycle"], done["after"]
    moved = {j for j in ids if after[j]["partition"] != done["before"][j][0]}
    # untyped jobs of `gpu` and `mix` go to a type-pure partition (p100-1's or k80-1's: the only
    # ones); the user's typed v100 job in its partition and the shard job stay where they are
    assert moved and {after[j]["partition"] for j in moved} <= {"p100", "k80"}, after
    assert {r.action.kind for r in res.results} <= {"set_partition", "set_site_factor"}
    assert not moved & {ids[3], ids[4], ids[7], shard} and shard not in res.plan.jobs
    assert done["failsafe"].lifted is not None  # what it steered was lifted when it went silent
    cycle_revert_failsafe(tb, ids, tmp_path / "auto")
    states = wait_all_ran(tb, ids)
    assert len(states) == len(ids) and all(not s.startswith("PENDING") for s in states.values()), states
