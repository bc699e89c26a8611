"""One change, many pending jobs: ``scontrol update JobId=a,b,c Key=Value`` and its per-job answer.

What Slurm does with a job list (checked on the 22.05 and 24.11 testbeds, the outputs recorded
in ``tests/slurm/recorded_writes.json``; 26.05 prints the same lines, checked by hand):

* every listed job is updated on its own: a job that cannot take the change does not stop the
  others (not all-or-nothing);
* each job that was *not* changed gets one line ``<message> for job <id>`` on stderr, and the
  exit status is 1 (``Job is no longer pending execution for job 4``, ``Job has already
  finished for job 5``, ``Invalid partition name specified for job 1``, on 24.11 ``Invalid
  GRES specification (with and without type identification) for job 11``); a job not named
  was changed;
* a failure of the call itself has no such line (``scontrol: error: Invalid job ID 1,2`` for a
  node list, which Slurm takes for one job only, or Slurm unreachable).

So a failed call is settled per job from its lines; a failure no line explains is settled by
updating the chunk's jobs one at a time, so every job ends with its own outcome and the
controller's ownership records stay exact (:mod:`slurm_fair.controller.apply`).

Chunks are :data:`BATCH_JOBS` long: slurmctld handles one call in one RPC under its job write
lock, so a bounded chunk keeps other clients (squeue, sbatch) waiting at most a fraction of a
second, and an argv stays a few KB.
"""

from __future__ import annotations

import re
from typing import Sequence

from ..errors import JobGone, SlurmCommandError, SlurmError
from .parse.gres import parse_tres_map
from .parse.records import split_records
from .run import JOB_GONE, Runner

#: jobs per ``scontrol update`` (module docstring)
BATCH_JOBS = 500

#: scontrol's per-job error line for a job list: "<message> for job <id>"
_PER_JOB = re.compile(r"^\s*(?P<msg>\S.*?)\s+for job (?P<job>\d+(?:_\d+)?(?:\+\d+)?)\s*$", re.M)


def chunks(ids: Sequence[str], size: int = BATCH_JOBS) -> list[list[str]]:
    """``ids`` without repeats, cut into lists of at most ``size``."""
    unique = list(dict.fromkeys(ids))
    return [unique[i:i + size] for i in range(0, len(unique), max(1, size))]


def per_job_errors(text: str, chunk: Sequence[str]) -> dict[str, str]:
    """scontrol's ``<message> for job <id>`` lines about jobs of ``chunk``."""
    wanted = set(chunk)
    return {m["job"]: m["msg"] for m in _PER_JOB.finditer(text) if m["job"] in wanted}


def job_error(job: str, message: str, returncode: int = 1) -> SlurmError:
    """The error of one job named by a per-job line: :class:`JobGone` for a job that ended or
    started meanwhile, :class:`SlurmCommandError` for a refusal."""
    if JOB_GONE.search(message):
        return JobGone(f"job {job} is gone or no longer pending: {message}")
    return SlurmCommandError(["scontrol", "update", f"JobId={job}"], returncode, message)


def update(runner: Runner, ids: Sequence[str], items: Sequence[str]) -> dict[str, SlurmError]:
    """``scontrol update JobId=<chunk> *items`` for every chunk of ``ids`` (checked ids and
    ``Key=Value`` items); the jobs that were not changed, each with its error.
    :class:`~slurm_fair.errors.SlurmUnavailable` propagates: what was sent may have happened."""
    failed: dict[str, SlurmError] = {}
    for chunk in chunks(ids):
        argv = ["scontrol", "update", "JobId=" + ",".join(chunk), *items]
        try:
            runner.run(argv, job_id=chunk[0] if len(chunk) == 1 else None)
        except JobGone as exc:
            failed[chunk[0]] = exc
        except SlurmCommandError as exc:
            lines = per_job_errors(exc.stderr, chunk)
            if lines:
                failed.update({job: job_error(job, msg, exc.returncode) for job, msg in lines.items()})
            else:
                failed.update(one_by_one(runner, chunk, items))
    return failed


def one_by_one(runner: Runner, ids: Sequence[str], items: Sequence[str]) -> dict[str, SlurmError]:
    """The jobs of ``ids`` updated one at a time; those that failed, with their errors."""
    out: dict[str, SlurmError] = {}
    for job in ids:
        try:
            runner.run(["scontrol", "update", f"JobId={job}", *items], job_id=job)
        except (JobGone, SlurmCommandError) as exc:
            out[job] = exc
    return out


def typed_gpus(runner: Runner, ids: Sequence[str], fs: str) -> dict[str, frozenset[str]]:
    """The GPU types Slurm will schedule each listed job by (``tres-alloc`` of a pending job is
    its request), one ``squeue`` per chunk; a job squeue does not list is missing."""
    out: dict[str, frozenset[str]] = {}
    for chunk in chunks(ids):
        try:  # squeue skips an unknown id of a list, but fails on a single one
            text = runner.run(["squeue", "-h", "-j", ",".join(chunk), "-O", f"JobID:0{fs},tres-alloc:0"],
                              job_id=chunk[0] if len(chunk) == 1 else None)
        except JobGone:
            continue
        for job, tres in split_records(text, fs, 2):
            typed = {k.split(":", 1)[1] for k, v in parse_tres_map(tres).items()
                     if k.startswith("gres/gpu:") and v != "0"}
            out[job.strip()] = frozenset(typed)
    return out
