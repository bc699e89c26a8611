"""What an operator of a test cluster runs besides the controller's reads and writes: submit and
cancel jobs, ask one job's state, check the cluster answers, reset fair-share usage.

The local testbed and the replay use these instead of running Slurm's commands themselves, so
every command goes through the one :class:`~slurm_fair.slurm.run.Runner` (argv lists, a timeout
on every call, typed errors) and its output through the parsers of :mod:`slurm_fair.slurm.parse`
(records split on a random separator a user's job name cannot hold).
"""

from __future__ import annotations

import secrets
from collections.abc import Mapping, Sequence

from ..errors import JobGone, SlurmError
from .cli import SlurmCli
from .parse.records import split_records
from .run import Runner
from .sacctmgr import Sacctmgr


class SlurmAdmin:
    """The operator's commands against one cluster (``env``: its ``SLURM_CONF`` and the like).

    ``retries`` is 0 by default: a test cluster that does not answer is reported at once (its
    callers poll with their own deadlines)."""

    def __init__(self, env: Mapping[str, str | None] | None = None, timeout_s: float = 30.0,
                 retries: int = 0, cluster: str = "", runner: Runner | None = None) -> None:
        self.runner = runner or Runner(env=env, timeout_s=timeout_s, retries=retries)
        self.cli = SlurmCli(runner=self.runner, cluster=cluster)
        self.sacctmgr = Sacctmgr(self.runner, cluster)
        self.cluster = cluster

    # --- jobs ----------------------------------------------------------------------------------
    def submit(self, args: Sequence[str]) -> str:
        """``sbatch --parsable ARGS``; the new job's id."""
        return self.runner.run(["sbatch", "--parsable", *args]).strip().split(";")[0]

    def cancel(self, job_ids: Sequence[str]) -> None:
        """``scancel`` the jobs; one that already ended is not an error."""
        if job_ids:
            try:
                self.runner.run(["scancel", *job_ids])
            except SlurmError:
                pass  # scancel fails for jobs that are gone; the others were cancelled

    def cancel_user(self, user: str) -> None:
        """Every job of ``user``."""
        try:
            self.runner.run(["scancel", "--quiet", "-u", user])
        except SlurmError:
            pass

    def job_state(self, job_id: str) -> str:
        """The job's state from squeue, else from sacct once it left the queue; '' if unknown."""
        try:
            return self.cli.job_outlook(job_id).state
        except JobGone:
            pass
        except SlurmError:
            return ""
        try:
            out = self.runner.run(["sacct", "-n", "-X", "-P", "-j", job_id, "-o", "State"])
        except SlurmError:
            return ""
        return out.strip().split(" ")[0] if out.strip() else ""

    def job_reason(self, job_id: str) -> str:
        """``STATE REASON`` of a job still queued ('' when it is not)."""
        try:
            o = self.cli.job_outlook(job_id)
        except SlurmError:
            return ""
        return f"{o.state} {o.reason}".strip()

    def queued(self, states: Sequence[str] = ()) -> dict[str, tuple[str, str]] | None:
        """``{job id: (state, reason)}`` of every job (array tasks one by one) in ``states``
        (all when empty); None when squeue failed."""
        fs = f"|{secrets.token_hex(8)}|"
        argv = ["squeue", "-h", "-r", "-o", f"%i{fs}%T{fs}%r"]
        if states:
            argv += ["-t", ",".join(states)]
        try:
            out = self.runner.run(argv)
        except SlurmError:
            return None
        return {r[0].strip(): (r[1].strip(), r[2].strip()) for r in split_records(out, fs, 3)}

    # --- the cluster ---------------------------------------------------------------------------
    def responding(self) -> bool:
        """slurmctld answers ``scontrol ping``."""
        try:
            return "is UP" in self.runner.run(["scontrol", "ping"])
        except SlurmError:
            return False

    def node_states(self) -> dict[str, str]:
        """node -> state (lower case, '*' when not responding); {} when sinfo fails."""
        fs = f"|{secrets.token_hex(8)}|"
        try:
            out = self.runner.run(["sinfo", "-h", "-N", "-o", f"%N{fs}%T"])
        except SlurmError:
            return {}
        return {r[0].strip(): r[1].strip().lower() for r in split_records(out, fs, 2)}

    def clusters(self) -> set[str]:
        """Clusters slurmdbd knows (raises the typed error when sacctmgr cannot ask it)."""
        return set(self.sacctmgr.show("cluster", ["cluster"]).split())

    def reset_usage(self, account: str) -> None:
        """Set the account's fair-share usage back to 0 (RawUsage=0) on this cluster."""
        self.sacctmgr.run("modify", "account", "where", f"name={account}", f"cluster={self.cluster}",
                          "set", "RawUsage=0")
