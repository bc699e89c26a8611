"""The controller of a replay with a policy: its configuration, its process, its revert.

``slurm-fair run --loop`` runs as a subprocess in its own session (a Ctrl-C in the terminal must
not stop it halfway: the replay's cleanup stops it), with its state in the run directory; at the
end ``slurm-fair revert`` with the same configuration leaves Slurm as it was.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
from pathlib import Path
from typing import Any, Mapping

from .plan import ReplaySpec
from .submit import TIME_LIMIT_SLACK
from ...statuses import CycleStatus

#: real seconds from a requeue to a restart besides Slurm's hold (scheduling, launch, resume)
RESTART_REAL_S = 2.0
#: real seconds for ``slurm-fair revert`` at the end of a run (the testbed's takes a few seconds)
REVERT_TIMEOUT_S = 120.0


def controller_config(spec: ReplaySpec, cluster: str, weights: Mapping[str, float], solver: str,
                      plan_file: Path | None = None, hold_real_s: float = 11.0) -> str:
    """TOML of the controller for this run: its state stays in the run directory; the plan file
    goes where the testbed's job_submit.lua reads it. Times are real seconds (the trace's round
    and interval divided by the time scale); a requeue costs the testbed's hold plus a restart."""
    lines = [
        "[cluster]", f"name = {json.dumps(cluster)}", "",
        "[controller]",
        f"policy = {json.dumps(spec.policy)}",
        f"solver = {json.dumps(solver)}",
        f"interval_s = {spec.interval_real_s!r}",
        f"round_s = {spec.round_real_s!r}",
        f"time_limit_s = {max(1.0, spec.interval_real_s)!r}",
        f"requeue_cost_s = {hold_real_s + RESTART_REAL_S!r}",
        # the replay's time limits are SLACK x the run on the slowest type: a wait of 2 / SLACK
        # limits is twice that run, the simulator's latency-ratio bound of 2 on the slowest type
        f"reserve_after_lr = {2.0 / TIME_LIMIT_SLACK!r}",
        f"state_dir = {json.dumps(str(spec.run_dir / 'controller'))}",
        f"audit_log = {json.dumps(str(spec.run_dir / 'controller' / 'audit.jsonl'))}",
        *([f"plan_file = {json.dumps(str(plan_file))}"] if plan_file else []),
        "",
        # the learned speed table: refreshed every round from the last two days of the testbed's
        # accounting (a site's daily refresh, at the replay's time scale)
        "[throughput]", f"learn_refresh_h = {spec.round_real_s / 3600.0!r}", "learn_days = 2.0", "",
    ]
    for tenant, w in sorted(weights.items()):
        lines += [f"[tenants.{tenant}]", f"weight = {float(w)!r}", ""]
    return "\n".join(lines)


class ControllerProcess:
    """``slurm-fair run --loop`` for one replay on one testbed (``tb``), started at most once."""

    def __init__(self, tb: Any, spec: ReplaySpec) -> None:
        self.tb, self.spec = tb, spec
        self.config_path = spec.run_dir / "controller.toml"
        self.log_path = spec.run_dir / "controller.log"
        #: real seconds the controller gets to finish its cycle after SIGTERM before SIGKILL
        self.grace_s = min(30.0, max(10.0, 2.0 * spec.interval_real_s))
        self.process: subprocess.Popen | None = None
        #: cycles counted so far by :meth:`cycles_so_far`, and how far into the log that read
        self._counted, self._offset = 0, 0

    @property
    def started(self) -> bool:
        return self.process is not None

    def _cli_argv(self, *args: str) -> list[str]:
        return [self.spec.python, "-m", "slurm_fair.cli", *args]

    def start(self, weights: Mapping[str, float]) -> None:
        """Write the run's controller.toml and start the loop (output to controller.log)."""
        from ...solver import fastest_available

        solver = self.spec.solver or fastest_available()
        (self.spec.run_dir / "controller").mkdir(exist_ok=True)
        self.config_path.write_text(controller_config(
            self.spec, self.tb.config.cluster_name, weights, solver, self.tb.layout.plan_file,
            self.tb.config.cred_expire_s + 1.0))
        with open(self.log_path, "ab") as log:
            self.process = subprocess.Popen(
                self._cli_argv("run", "--loop", "--interval", repr(self.spec.interval_real_s), "--json",
                               "--config", str(self.config_path)),
                stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=self.tb.client_env(),
                start_new_session=True,
            )

    def stop(self) -> tuple[int | None, bool]:
        """Stop the controller; (its exit code, whether it had to be killed).

        SIGTERM first: the loop finishes the cycle in progress and exits between cycles. When it
        is not gone after :attr:`grace_s`, SIGKILL to its whole process group (it runs in its own
        session, so the group is its pid): a solver or Slurm command it started dies with it.
        Stragglers of the group are killed either way, so nothing of it outlives the run.
        """
        p = self.process
        if p is None:
            return None, False
        killed = False
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)  # a no-op when it has just exited
            try:
                p.wait(timeout=self.grace_s)
            except subprocess.TimeoutExpired:
                killed = True
                _killpg(p.pid, signal.SIGKILL)
                try:
                    p.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    pass  # unkillable (uninterruptible sleep): reported as exit None
        _killpg(p.pid, signal.SIGKILL)
        return p.returncode, killed

    def revert(self) -> str:
        """``slurm-fair revert`` with the run's controller config; its output goes to revert.log.

        Own session, like the controller: a second Ctrl-C in the terminal must not stop it halfway.
        """
        log = self.spec.run_dir / "revert.log"
        try:
            proc = subprocess.run(
                self._cli_argv("revert", "--config", str(self.config_path)),
                env=self.tb.client_env(), capture_output=True, text=True, timeout=REVERT_TIMEOUT_S,
                stdin=subprocess.DEVNULL, start_new_session=True,
            )
        except subprocess.TimeoutExpired:
            log.write_text(f"revert timed out after {REVERT_TIMEOUT_S:.0f} s\n")
            return f"timed out after {REVERT_TIMEOUT_S:.0f} s (see {log})"
        except OSError as exc:
            return f"failed: {exc}"
        log.write_text(proc.stdout + proc.stderr)
        return "ok" if proc.returncode == 0 else f"exit {proc.returncode} (see {log})"

    def cycles_so_far(self) -> int:
        """Cycles the controller has reported until now (its --json lines), reading only what
        the log gained since the last call: a progress display asks every half second."""
        try:
            with open(self.log_path, "rb") as log:
                log.seek(self._offset)
                new = log.read()
        except OSError:
            return self._counted
        complete = new[:new.rfind(b"\n") + 1]  # a line still being written counts next time
        self._offset += len(complete)
        self._counted += sum(1 for line in complete.splitlines() if line.startswith(b"{"))
        return self._counted

    def cycles(self) -> dict[str, Any]:
        """Counts from the controller's --json output lines (one JSON object per cycle)."""
        cycles = ok = requeues = retypes = 0
        seconds: list[float] = []
        if self.log_path.is_file():
            for line in self.log_path.read_text(errors="replace").splitlines():
                if not line.startswith("{"):
                    continue
                try:
                    c = json.loads(line)
                except json.JSONDecodeError:
                    continue
                cycles += 1
                ok += c.get("status") == CycleStatus.OK
                seconds.append(sum(c.get("timings_s", {}).values()))
                for a in c.get("actions", []):
                    if a.get("applied") and a.get("kind") == "requeue":
                        requeues += 1
                    if a.get("applied") and a.get("kind") in ("set_partition", "set_gpu_type"):
                        retypes += 1  # steered to a type's partition, or its gres pinned
        return {"cycles": cycles, "cycles_ok": ok, "requeues": requeues, "gpu_type_steers": retypes,
                "cycle_seconds_mean": (sum(seconds) / len(seconds)) if seconds else None,
                "cycle_seconds_max": max(seconds, default=None)}


def _killpg(pgid: int, signum: int) -> None:
    """Signal a process group that may be gone already (called right after its leader was
    reaped: the group id cannot have been reused while members remain)."""
    try:
        os.killpg(pgid, signum)
    except (ProcessLookupError, PermissionError):
        pass
