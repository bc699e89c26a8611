"""A private second testbed (own directory, own ports): start, restart a daemon, and prove
that ``down`` leaves no daemon and no job process behind.

The shared testbed in .testbed/ is never taken down here: other tests use it concurrently.
"""

from __future__ import annotations

import time
from pathlib import Path

import psutil
import pytest

from slurm_fair.testbed import Testbed, validate
from slurm_fair.testbed.jobs import submit_job, wait_job_state
from slurm_fair.testbed.procs import free_ports, owned_process, port_open

pytestmark = [pytest.mark.slurm, pytest.mark.slow]






@pytest.fixture
def private(tmp_path: Path):
    cfg = validate(
        {
            "cluster": {"name": "privtb", "cpus_per_node": 4},
            "gpu_types": {
                "v100": {"nodes": "pv100-1", "gpus_per_node": 2},
                "k80": {"nodes": "pk80-1", "gpus_per_node": 4},
            },
            "tenants": {"alpha": {"fairshare": 3}, "beta": {}},
            "ports": free_ports(2),
            "timeouts": {"start_s": 120, "stop_s": 15},
        },
        "<private test testbed>",
    )
    tb = Testbed(dir=tmp_path / "tb", config=cfg)
    try:
        yield tb
    finally:
        tb.down()


def _job_procs(tb: Testbed) -> list[psutil.Process]:
    """Processes whose environment points at this testbed's slurm.conf (daemons, steps, jobs)."""
    found = []
    for p in psutil.process_iter(["pid"]):
        try:
            if p.environ().get("SLURM_CONF") == str(tb.slurm_conf) and p.pid != psutil.Process().pid:
                found.append(p)
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            continue
    return found


def _daemon_procs(tb: Testbed) -> list[psutil.Process]:
    """Any process whose command line mentions this testbed's directory."""
    root = str(tb.dir)
    out = []
    for p in psutil.process_iter(["cmdline"]):
        if any(root in arg for arg in (p.info["cmdline"] or [])):
            out.append(p)
    return out


def test_private_testbed_up_restart_down(private: Testbed) -> None:
    t0 = time.monotonic()
    private.up()
    cold = time.monotonic() - t0
    print(f"cold up: {cold:.1f}s")
    st = private.status()
    assert st.healthy, st
    assert set(st.nodes) == {"pv100-1", "pk80-1"}

    # the shared testbed (if any) is not this one: different conf, different ports
    assert private.env["SLURM_CONF"].startswith(str(private.dir))

    # a long job keeps a slurmstepd and a sleep alive: down must end them too
    job = submit_job(private, "alpha", "sleep 300", gres="gpu:k80:1")
    assert wait_job_state(private, job, {"RUNNING"}, timeout=60) == "RUNNING"

    # stop and restore slurmctld, as the controller tests do mid-cycle
    assert private.stop_daemon("slurmctld") is True
    assert not port_open(private.config.ports["slurmctld"])
    assert private.run(["scontrol", "ping"], check=False).stdout.count("UP") == 0
    private.start_daemon("slurmctld")
    assert "is UP" in private.run(["scontrol", "ping"]).stdout
    assert wait_job_state(private, job, {"RUNNING"}, timeout=30) == "RUNNING"

    pids = {d.name: d.pid for d in private.status().daemons}
    private.up()  # warm: nothing restarted
    assert {d.name: d.pid for d in private.status().daemons} == pids

    # a partly running testbed: `up` starts only what is missing
    assert private.stop_daemon("slurmd:pv100-1") is True
    assert not private.status().all_running
    private.up()
    after = {d.name: d.pid for d in private.status().daemons}
    assert after["slurmd:pv100-1"] not in (None, pids["slurmd:pv100-1"])
    assert {k: v for k, v in after.items() if k != "slurmd:pv100-1"} == {
        k: v for k, v in pids.items() if k != "slurmd:pv100-1"
    }

    stopped = private.down()
    assert set(stopped) == set(private.daemon_names())
    assert not [d.name for d in private.daemons() if owned_process(d) is not None]
    assert _daemon_procs(private) == []
    assert _job_procs(private) == []
    for key, port in private.config.ports.items():
        if key != "slurmd_base":
            assert not port_open(port), f"{key} port {port} still open"
    for node in private.config.nodes:
        assert not port_open(node.port)
    assert private.down() == []  # a second down finds nothing to stop


def test_status_of_a_testbed_never_started(tmp_path: Path) -> None:
    tb = Testbed(dir=tmp_path / "never", config=validate({}, "<defaults>"))
    st = tb.status()
    assert not st.all_running and not st.healthy
    assert all(d.pid is None for d in st.daemons)
    assert st.nodes == {}
