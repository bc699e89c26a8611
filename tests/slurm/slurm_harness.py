"""Cluster harnesses of the contract suite: the fake or a real Slurm behind one interface."""

from __future__ import annotations

import contextlib
import os
import secrets
import subprocess
from typing import Iterator, Sequence

from slurm_fair.slurm.cli import SlurmCli
from slurm_fair.slurm.fake import FakeSlurm, list_recordings
from slurm_fair.slurm.model import Partition, SlurmJob

#: recorded from the testbed when available (the fake then mirrors the real cluster)
REAL_RECORDING = "testbed-22.05"


class Harness:
    """What a contract test needs: the port under test plus submit/cancel/read-back."""

    tenants: tuple[str, ...] = ()
    real = False

    def __init__(self, port) -> None:
        self.port = port
        self.qos_created: list[str] = []

    def submit(self, account: str, gpu_args: str, *, held: bool = False, name: str = "sf-test",
               comment: str = "", eligible: bool = False) -> str:
        """A pending job; ``eligible``: neither held nor waiting for a begin time (submit it
        to :meth:`down_partition` so it stays pending)."""
        raise NotImplementedError

    def down_partition(self, rules: str = "") -> "contextlib.AbstractContextManager[str]":
        """A partition (with ``scontrol create``'s ``rules``) that is DOWN for the test: jobs
        submitted there pend, eligible (sprio lists them), and it is deleted afterwards."""
        raise NotImplementedError

    def cancel(self, job_id: str) -> None:
        raise NotImplementedError

    def job(self, job_id: str) -> SlurmJob:
        for j in self.port.jobs():
            if j.job_id == job_id:
                return j
        raise LookupError(f"job {job_id} not in the queue")

    def new_qos_name(self) -> str:
        name = f"sftest{secrets.token_hex(3)}"
        self.qos_created.append(name)
        return name

    def close(self) -> None:
        for q in self.qos_created:
            for a in self.tenants:
                try:
                    self.port.detach_qos(a, q)
                except Exception:  # noqa: BLE001 - best-effort cleanup
                    pass
            try:
                self.port.delete_qos(q)
            except Exception:  # noqa: BLE001
                pass


class FakeHarness(Harness):
    def __init__(self) -> None:
        name = REAL_RECORDING if REAL_RECORDING in list_recordings() else "constructed-24.05"
        fake = FakeSlurm.from_recording(name)
        super().__init__(fake)
        self.tenants = tuple(sorted(a.name for a in fake.accounts()))[:3]

    def submit(self, account, gpu_args, *, held=False, name="sf-test", comment="", eligible=False):
        acc = {a.name: a for a in self.port.accounts()}.get(account)
        qos = acc.default_qos if acc and acc.default_qos else "normal"
        return self.port.submit(account, gpu_args, hold=held, name=name, comment=comment, qos=qos)

    @contextlib.contextmanager
    def down_partition(self, rules: str = "") -> Iterator[str]:
        name = f"sftest{secrets.token_hex(3)}"
        node = sorted(n.name for n in self.port.nodes())[0]
        self.port.set_partition(Partition(name, (node,), state="DOWN"))
        try:
            yield name
        finally:
            self.port._partitions.pop(name, None)

    def cancel(self, job_id):
        self.port.finish(job_id)

    def run_to_completion(self, account, gpu_type, gpus=1, comment=""):
        job_id = self.port.submit(account, f"--gres=gpu:{gpu_type}:{gpus}", hold=False, comment=comment)
        node = next(n.name for n in self.port.nodes() if gpu_type in n.gpus_total)
        self.port.start(job_id, node, gpu_type)
        from datetime import timedelta

        job = self.port.job(job_id)
        self.port.finish(job_id, end=job.start_time + timedelta(seconds=2))
        return job_id


def pyslurm_skip_reason(version: str | None) -> str:
    """Why the pyslurm arm cannot run on Slurm ``version`` in this process ("" when it can):
    pyslurm not installed, or built for another Slurm (its major.minor must be Slurm's; libslurm
    24.11 does not load into the host's Python, so that arm runs inside the 24.11 root
    filesystem: docs/slurm-adapter.md)."""
    from slurm_fair.slurm.pyslurm_port import installed_version, major_minor

    have = installed_version()
    if have is None:
        return ("pyslurm is not installed: `make test` builds it from ../shared/vendor when that is present "
                "(scripts/build-pyslurm.sh; docs/slurm-adapter.md)")
    if version is not None and major_minor(have) != major_minor(version):
        return (f"pyslurm {have} is built for Slurm {major_minor(have)}, not {version}: a pyslurm for "
                f"Slurm {version} runs where its libslurm is (docs/slurm-adapter.md)")
    return ""


def both_backends(testbed, slurm_version: str | None):
    """``(env, cli, pyslurm port)`` on a real testbed, both backends over its environment; the
    test is skipped, saying why, where the pyslurm arm cannot run (:func:`pyslurm_skip_reason`).
    ``env``: the process environment with the testbed's, for the commands a test runs itself."""
    import pytest

    why = pyslurm_skip_reason(slurm_version)
    if why:
        pytest.skip(why)
    from slurm_fair.slurm.pyslurm_port import PyslurmPort

    env = {**os.environ, **testbed.env}
    return env, SlurmCli(env=dict(testbed.env), timeout_s=60), PyslurmPort(SlurmCli(env=dict(testbed.env), timeout_s=60))


def make_real_port(env: dict[str, str], backend: str = "cli"):
    """The port a real harness tests: Slurm's commands, or pyslurm over them (its side process
    started by the first job read, not only at a big queue, so that the reads after it go the
    way a big queue's do: docs/slurm-adapter.md)."""
    cli = SlurmCli(env=env, timeout_s=30, retries=2)
    if backend == "cli":
        return cli
    from slurm_fair.slurm.pyslurm_port import PyslurmPort

    return PyslurmPort(cli, side_after_s=0.0, side_after_reads=1)


class RealHarness(Harness):
    real = True

    def __init__(self, env: dict[str, str], backend: str = "cli") -> None:
        super().__init__(make_real_port(env, backend))
        self.env = {**os.environ, **env}
        self.submitted: list[str] = []
        accounts = [a.name for a in self.port.accounts()]
        self.tenants = tuple(sorted(accounts))[:3]

    def submit(self, account, gpu_args, *, held=False, name="sf-test", comment="", eligible=False):
        argv = ["sbatch", "--parsable", "-A", account, "-J", name, "-o", "/dev/null"]
        if "-t" not in gpu_args.split():
            argv += ["-t", "10"]
        # pending without hold: a begin time in the future keeps it from starting
        if not eligible:
            argv += ["--hold"] if held else ["--begin=now+3600"]
        if comment:
            argv.append(f"--comment={comment}")
        argv += gpu_args.split()
        argv += ["--wrap", "sleep 600"]
        out = subprocess.run(argv, env=self.env, capture_output=True, text=True, timeout=30)
        if out.returncode != 0:
            raise RuntimeError(f"sbatch failed: {out.stderr.strip()}")
        job_id = out.stdout.strip().split(";")[0]
        self.submitted.append(job_id)
        return job_id

    def cancel(self, job_id):
        subprocess.run(["scancel", job_id], env=self.env, capture_output=True, timeout=30)
        for _ in range(50):  # wait until squeue no longer shows it
            if all(j.job_id != job_id for j in self.port.jobs()):
                return
            subprocess.run(["sleep", "0.2"], check=False)

    def run_to_completion(self, account, gpu_type, gpus=1, comment=""):
        argv = ["sbatch", "--parsable", "--wait", "-A", account, "-J", "sf-acct", "-o", "/dev/null",
                f"--gres=gpu:{gpu_type}:{gpus}", "--wrap", "sleep 2"]
        if comment:
            argv.append(f"--comment={comment}")
        out = subprocess.run(argv, env=self.env, capture_output=True, text=True, timeout=120)
        if out.returncode != 0:
            raise RuntimeError(f"sbatch failed: {out.stderr.strip()}")
        return out.stdout.strip().split(";")[0]

    @contextlib.contextmanager
    def down_partition(self, rules: str = "") -> Iterator[str]:
        name = f"sftest{secrets.token_hex(3)}"
        node = sorted(n.name for n in self.port.nodes())[0]
        argv = ["scontrol", "create", f"PartitionName={name}", f"Nodes={node}", "State=DOWN", *rules.split()]
        subprocess.run(argv, env=self.env, check=True, capture_output=True, timeout=30)
        try:
            yield name
        finally:
            jobs = [j.job_id for j in self.port.jobs() if j.partition == name]
            for j in jobs:
                self.cancel(j)
            subprocess.run(["scontrol", "delete", f"PartitionName={name}"], env=self.env,
                           capture_output=True, timeout=30)

    def close(self):
        if self.submitted:
            subprocess.run(["scancel", *self.submitted], env=self.env, capture_output=True, timeout=60)
        super().close()


def gpu_types_of(h: Harness) -> Sequence[str]:
    return sorted(h.port.snapshot().capacity())
