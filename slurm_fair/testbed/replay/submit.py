"""The replay's Slurm commands: submit a job, poll the queue, cancel, reset fair-share usage.

They run through :meth:`Testbed.run <slurm_fair.testbed.Testbed.run>` (this is test
infrastructure, like the testbed itself); only accounting goes through the real adapter
(:mod:`.score`). A job is submitted *untyped* (``--gres=gpu:N`` per node), requeueable and tagged
with its class; its batch script execs the emulator.
"""

from __future__ import annotations

import hashlib

import math
import shlex
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from ...errors import SlurmError, TestbedError
from .. import emulator
from .plan import ReplayJob, ReplaySpec

#: squeue states in which a job of the run is not finished yet
ACTIVE_STATES = (
    "PENDING", "RUNNING", "CONFIGURING", "COMPLETING", "REQUEUED", "REQUEUE_HOLD", "REQUEUE_FED",
    "RESIZING", "SIGNALING", "STAGE_OUT", "SUSPENDED", "STOPPED",
)
#: every job of a replay is named ``sfr-<trace job>`` (slurm-fair replay)
JOB_NAME_PREFIX = "sfr"


def emulator_argv(job: ReplayJob, spec: ReplaySpec, node_types: Mapping[str, str], checkpoint: Path) -> list[str]:
    """The emulator as a script (standard library only): a testbed of another Slurm version runs
    its jobs inside a root filesystem whose Python has none of this host's packages."""
    return [
        spec.job_python or spec.python, "-I", str(Path(emulator.__file__).resolve()),
        "--steps", repr(float(job.total_steps)),
        "--tput", ",".join(f"{k}={v!r}" for k, v in sorted(job.tput.items())),
        "--node-types", ",".join(f"{n}={k}" for n, k in sorted(node_types.items())),
        "--time-scale", repr(float(spec.time_scale)),
        "--checkpoint", str(checkpoint),
        "--tick", repr(float(spec.tick_real_s)),
    ]


def batch_script(argv: Sequence[str]) -> str:
    """A POSIX sh batch script that execs the emulator (every argument quoted)."""
    return "#!/bin/sh\nexec " + " ".join(shlex.quote(a) for a in argv) + "\n"


#: a replayed job's time limit is this many times its run on the slowest type it can use
TIME_LIMIT_SLACK = 4.0


def time_limit_minutes(job: ReplayJob, time_scale: float, slack: float = TIME_LIMIT_SLACK) -> int:
    """A generous Slurm time limit: ``slack`` times the run on the slowest usable type, +2 min."""
    slowest = max(job.expected_s(k) for k, t in job.tput.items() if t > 0)
    return int(math.ceil(slowest / time_scale * slack / 60.0)) + 2


def job_name(job: ReplayJob, untagged: bool) -> str:
    """Tagged: one name per job. Untagged: the name recurs for a tenant's jobs of one class, as a
    user's script name does (a digest of the class: the controller never reads a class from it)."""
    if not untagged:
        return f"{JOB_NAME_PREFIX}-{job.slug}"
    return f"{JOB_NAME_PREFIX}-{job.account}-{hashlib.sha1(job.klass.encode()).hexdigest()[:8]}"


def sbatch_args(job: ReplayJob, script: Path, run_dir: Path, time_scale: float, untagged: bool = False) -> list[str]:
    """sbatch's arguments for one replayed job (``--parsable`` is :meth:`SlurmAdmin.submit`'s)."""
    comment = "fair:preemptible" if untagged else f"fair:class={job.klass} fair:preemptible"
    return [
        "-A", job.account, "-J", job_name(job, untagged),
        "-N", str(job.nodes), "-n", str(job.nodes), f"--gres=gpu:{job.per_node}", "--requeue",
        "--comment", comment,
        "-t", str(time_limit_minutes(job, time_scale)),
        "--chdir", str(run_dir), "-o", str(run_dir / "out" / f"{job.slug}.out"), "--open-mode=append",
        str(script),
    ]


def submit(tb: Any, job: ReplayJob, spec: ReplaySpec, node_types: Mapping[str, str],
           clock: Callable[[], float]) -> None:
    """Write the job's batch script and sbatch it; sets ``job.slurm_id`` and ``job.submitted_wall``."""
    d = spec.run_dir
    ck = d / "ckpt" / f"{job.slug}.json"
    script = d / "scripts" / f"{job.slug}.sh"
    script.write_text(batch_script(emulator_argv(job, spec, node_types, ck)))
    script.chmod(0o755)
    try:
        job.slurm_id = tb.admin(timeout_s=60).submit(sbatch_args(job, script, d, spec.time_scale, spec.untagged))
    except SlurmError as exc:
        raise TestbedError(f"sbatch of {job.trace_id} failed: {exc}") from None
    job.submitted_wall = clock()


def poll(tb: Any, ids: set[str]) -> dict[str, tuple[str, str]] | None:
    """State and reason of the jobs of ``ids`` Slurm still has; None when squeue failed."""
    queued = tb.admin().queued(ACTIVE_STATES)
    return None if queued is None else {j: s for j, s in queued.items() if j in ids}


def active(tb: Any, ids: set[str]) -> set[str]:
    """Ids of ``ids`` that Slurm still has pending/running (all of them when unsure)."""
    polled = poll(tb, ids)
    return set(ids) if polled is None else set(polled)


def reset_slurm(tb: Any, accounts: Sequence[str]) -> None:
    """Every run starts from the same Slurm: no plan left for the submit plugin (Slurm alone
    must not be steered by an earlier run's plan) and the fair-share usage of every account
    reset, as an admin comparing two schedulers would."""
    tb.layout.plan_file.unlink(missing_ok=True)
    admin = tb.admin(timeout_s=60)
    for account in accounts:
        try:
            admin.reset_usage(account)
        except SlurmError as exc:
            raise TestbedError(f"cannot reset the fair-share usage of {account}: {exc}") from None


def cancel(tb: Any, ids: Sequence[str]) -> None:
    """scancel ``ids`` (jobs already gone are not an error)."""
    tb.admin().cancel(list(ids))


def job_id_key(job_id: str) -> tuple[int, str]:
    """Slurm job ids sort as numbers."""
    head = job_id.split("_")[0]
    return (int(head) if head.isdigit() else 0, job_id)
