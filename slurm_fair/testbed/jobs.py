"""Submit a job as a tenant and wait for its state: helpers shared by tests, the demo, replays.

They are deliberately plain (sbatch/squeue/sacct through :meth:`Testbed.run`) and independent
of the Slurm adapter under test, so tests of the adapter can use them as an outside witness.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from collections.abc import Set as AbstractSet

from .cluster import Testbed

#: job states after which a job does not run again by itself
TERMINAL = frozenset(
    {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY", "PREEMPTED", "BOOT_FAIL", "DEADLINE"}
)


def submit_job(
    tb: Testbed,
    account: str,
    wrap: str = "sleep 1",
    *,
    gres: str | None = None,
    partition: str | None = None,
    extra: Sequence[str] = (),
) -> int:
    """``sbatch -A ACCOUNT [--gres=...] --wrap CMD`` on the testbed; returns the job id.

    Output goes to the testbed's log directory, not to the current directory.
    """
    args = ["-A", account, f"--output={tb.layout.log}/job-%j.out"]
    if gres:
        args.append(f"--gres={gres}")
    if partition:
        args.append(f"--partition={partition}")
    args += [*extra, "--wrap", wrap]
    return int(tb.admin().submit(args))


def job_state(tb: Testbed, job_id: int) -> str:
    """Current state from squeue, else from sacct (after the job left the queue); '' if unknown."""
    return tb.admin(timeout_s=15).job_state(str(job_id))


def wait_job_state(
    tb: Testbed,
    job_id: int,
    states: AbstractSet[str] | Callable[[str], bool] = TERMINAL,
    timeout: float = 60.0,
) -> str:
    """Poll until the job's state is in ``states`` (or the predicate holds); returns the state."""
    ok = states if callable(states) else (lambda s: s in states)
    deadline = time.monotonic() + timeout
    state = ""
    while time.monotonic() < deadline:
        state = job_state(tb, job_id)
        if ok(state):
            return state
        time.sleep(0.5)
    why = tb.admin(timeout_s=15).job_reason(str(job_id))
    raise AssertionError(
        f"job {job_id} still {state or 'unknown'} after {timeout:.0f}s" + (f" (squeue: {why})" if why else "")
    )
