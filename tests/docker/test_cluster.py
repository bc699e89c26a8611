"""The docker-compose cluster, built and run for real in a private dockerd (issue 17).

Offline from start to end: the base image ``debian:bookworm`` is a cached debootstrap root file
system with every Debian package of the image (``docker import``), slurm-fair and its
dependencies come from cached wheels (``pip --no-index``), the image build runs with
``network: none`` and the cluster's compose network is internal. Per compose client (v2, v1):
bring the cluster up, wait for every node to be idle, submit untyped GPU jobs of two tenants,
see the controller steer them (single-type partition or typed gres) without making any QOS,
read ``slurm-fair report`` inside the controller container, and take it all down
(containers, networks, volumes; the daemon at the end of the session). See docs/deployment.md.
"""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest

from . import images
from .conftest import Phases
from .daemon import PrivateDocker, run

yaml = pytest.importorskip("yaml")

pytestmark = [pytest.mark.docker, pytest.mark.slow]

PROJECT = "sfdocker"
NODES = ("v100-1", "v100-2", "p100-1", "p100-2", "k80-1")
TYPES = ("v100", "p100", "k80")
TENANTS = ("biology", "chemistry")
JOBS_PER_TENANT = 6  # of 4 GPUs each: 48 GPUs wanted, 24 there, so jobs pend and get steered
INTERVAL_S = 10  # the controller's cycle in the test (SLURM_FAIR_INTERVAL)


@pytest.fixture(scope="session")
def context(engine: PrivateDocker, phases: Phases, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The build context copy, with debian:bookworm imported into the private engine."""
    with phases.run("base root file system (made or from the cache)"):
        tar = images.base_tar(phases.say)
    with phases.run("docker import debian:bookworm"):
        engine.docker("import", str(tar), "debian:bookworm", timeout_s=300)
    with phases.run("wheels + build context"):
        wheels = images.wheelhouse(phases.say)
        ctx = images.build_context(tmp_path_factory.mktemp("ctx") / "slurm-fair", wheels)
    # the test's only addition to docker-compose.yml: every image build without a network
    compose = yaml.safe_load((ctx / "docker-compose.yml").read_text())
    override = {"services": {name: {"build": {"network": "none"}}
                             for name, svc in compose["services"].items() if "build" in svc}}
    (ctx / "compose.offline.yml").write_text(yaml.safe_dump(override))
    return ctx


class Compose:
    def __init__(self, client: list[str], ctx: Path, engine: PrivateDocker) -> None:
        self.argv = [*client, "-f", str(ctx / "docker-compose.yml"), "-f", str(ctx / "compose.offline.yml"),
                     "-p", PROJECT]
        self.ctx = ctx
        self.env = {**engine.env, "SLURM_FAIR_INTERVAL": str(INTERVAL_S)}

    def __call__(self, *args: str, timeout_s: float = 120.0, check: bool = True):
        return run([*self.argv, *args], env=self.env, timeout_s=timeout_s, check=check, cwd=self.ctx)

    def exec(self, service: str, *argv: str, timeout_s: float = 60.0, check: bool = True):
        return self("exec", "-T", service, *argv, timeout_s=timeout_s, check=check)


def _wait(what: str, probe, timeout_s: float, every_s: float = 2.0):
    deadline = time.monotonic() + timeout_s
    last = None
    while time.monotonic() < deadline:
        last = probe()
        if last:
            return last
        time.sleep(every_s)
    raise AssertionError(f"timed out after {timeout_s:.0f}s waiting for {what}")


def _nodes_idle(c: Compose) -> bool:
    out = c.exec("slurmctld", "sinfo", "-h", "-N", "-o", "%N %t", check=False).stdout
    states = dict(line.split() for line in out.splitlines() if len(line.split()) == 2)
    return set(states) == set(NODES) and all(s == "idle" for s in states.values())


def _jobs(c: Compose) -> list[dict[str, str]]:
    out = c.exec("slurmctld", "squeue", "-h", "-o", "%i|%a|%P|%b|%T|%q").stdout
    keys = ("id", "account", "partition", "gres", "state", "qos")
    return [dict(zip(keys, line.split("|"))) for line in out.splitlines() if line.count("|") == 5]


def _steered(job: dict[str, str]) -> bool:
    return job["partition"] in TYPES or re.search(r"gpu:({})".format("|".join(TYPES)), job["gres"]) is not None


def _qos_names(c: Compose) -> list[str]:
    return c.exec("slurmctld", "sacctmgr", "-n", "-P", "show", "qos", "format=name").stdout.split()


def test_cluster(compose_client: list[str], context: Path, engine: PrivateDocker, phases: Phases) -> None:
    c = Compose(compose_client, context, engine)
    label = "compose " + c("version", "--short").stdout.strip()
    try:
        with phases.run(f"[{label}] compose build"):
            built = c("build", timeout_s=900)
        notes = sorted({ln.strip() for ln in (built.stdout + built.stderr).splitlines()
                        if re.search(r"buildx|BuildKit|legacy builder", ln, re.I)})
        if notes:
            phases.say(f"[{label}] build says: " + " | ".join(notes)[:300])
        with phases.run(f"[{label}] compose up"):
            c("up", "-d", timeout_s=600)
        with phases.run(f"[{label}] every node idle"):
            _wait("every node idle", lambda: _nodes_idle(c), 240)
        # the fake GPUs: NVIDIA character devices the container made (slurmd only stats them)
        assert c.exec("k80-1", "stat", "-c", "%F %t", "/dev/nvidia7").stdout.split() == ["character", "special",
                                                                                           "file", "c3"]
        gres = c.exec("slurmctld", "sinfo", "-h", "-N", "-o", "%N %G").stdout
        assert "k80-1 gpu:k80:8" in gres and "v100-1 gpu:v100:4" in gres, gres
        with phases.run(f"[{label}] first controller cycle (plan.json)"):
            _wait("the controller's plan.json", lambda: c.exec(
                "controller", "test", "-s", "/var/lib/slurm-fair/plan.json", check=False).returncode == 0,
                180)
        with phases.run(f"[{label}] submit + steer"):
            qos_before = _qos_names(c)
            for tenant in TENANTS:
                for _ in range(JOBS_PER_TENANT):
                    c.exec("slurmctld", "sbatch", "-A", tenant, "--gres=gpu:4", "-N1", "-n1",
                           "-o", "/dev/null", "--wrap", "sleep 900")

            def steered():
                jobs = _jobs(c)
                by_tenant = {t: [j for j in jobs if j["account"] == t and _steered(j)] for t in TENANTS}
                # a pending job on one type's partition: the controller's doing (Slurm only
                # picks one partition of a list when it starts the job)
                pending = [j for j in jobs if j["state"] == "PENDING" and _steered(j)]
                return by_tenant if all(by_tenant.values()) and pending else None

            steered_jobs = _wait("jobs of both tenants steered", steered, 6 * INTERVAL_S + 60, 3)
            assert _qos_names(c) == qos_before  # slurm-fair 0.2 makes no QOS
            assert all(j["qos"] == "normal" for j in _jobs(c))
            phases.say(f"[{label}] steered: " + "; ".join(
                f"{t}: " + ", ".join(f"{j['id']} {j['partition']} {j['gres']}" for j in js)
                for t, js in steered_jobs.items()))
        with phases.run(f"[{label}] slurm-fair report"):
            # tenants with GPU-hours (the running jobs' tenants) and the controller's cycles. The
            # report reads the accounting, where slurmdbd records a start a moment after
            # slurmctld: a job started a second ago may not be there yet
            running = {j["account"] for j in _jobs(c) if j["state"] == "RUNNING"}
            assert running

            def reported() -> str | None:
                out = c.exec("controller", "slurm-fair", "report", timeout_s=180).stdout
                return out if all(t in out for t in running) else None

            try:
                report = _wait("the report to show the running jobs' tenants", reported, 60, 3)
            except AssertionError:
                raise AssertionError(c.exec("controller", "slurm-fair", "report", timeout_s=180).stdout[-3000:]) from None
            assert re.search(r"Controller: \d+ cycles \(0 failed\)", report), report[-3000:]
    except BaseException:
        logs = c("logs", "--no-color", "--tail", "40", check=False, timeout_s=60)
        print(logs.stdout[-20000:])
        raise
    finally:
        with phases.run(f"[{label}] compose down -v"):
            c("down", "-v", "--remove-orphans", "-t", "5", timeout_s=300, check=False)
    assert engine.docker("ps", "-aq").stdout.strip() == ""
    assert engine.docker("volume", "ls", "-q").stdout.strip() == ""
    networks = engine.docker("network", "ls", "--format", "{{.Name}}").stdout.split()
    assert set(networks) <= {"host", "none", "bridge"}, networks
