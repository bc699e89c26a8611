"""Shared fixtures: the real local Slurm testbed, brought up once per test session.

Tests that need Slurm are marked ``@pytest.mark.slurm`` and take the ``testbed`` fixture (a
:class:`slurm_fair.testbed.Testbed`, already up, with ``SLURM_CONF`` exported into
``os.environ`` so plain ``subprocess.run(["sinfo"])`` reaches it). A healthy testbed in the
default directory is reused; one started by the fixture stays up after the session (others may
use it) unless ``$CI`` is set: then the fixture takes it down and asserts that no daemon of it
remains, which is how CI proves ``down``.

``slurm_fair.testbed.jobs`` holds the plain helpers (``submit_job``, ``wait_job_state``), also
exposed here as the ``submit`` and ``wait_state`` fixtures, so every test module submits as a
tenant and waits for a state the same way.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from collections.abc import Set as AbstractSet

import pytest

from slurm_fair.testbed import Testbed
from slurm_fair.testbed.jobs import TERMINAL, submit_job, wait_job_state
from slurm_fair.testbed.procs import owned_process


@pytest.fixture(scope="session")
def testbed() -> Iterator[Testbed]:
    """The local Slurm cluster, up (started or reused), with SLURM_CONF in os.environ."""
    tb = Testbed()
    was_up = tb.is_healthy()
    ci_owned = bool(os.environ.get("CI")) and not was_up
    try:
        tb.up()
    except BaseException:
        if ci_owned:  # leave nothing behind a failed start either
            tb.down()
        raise
    saved = {k: os.environ.get(k) for k in tb.env}
    os.environ.update(tb.env)
    try:
        yield tb
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        if ci_owned:
            tb.down()
            left = [d.name for d in tb.daemons() if owned_process(d) is not None]
            assert not left, f"daemons still running after down: {left}"


@pytest.fixture
def submit(testbed: Testbed) -> Callable[..., int]:
    """``submit(account, wrap="sleep 1", gres=None, partition=None, extra=())`` -> job id."""

    def _submit(account: str, wrap: str = "sleep 1", **kw: object) -> int:
        return submit_job(testbed, account, wrap, **kw)  # type: ignore[arg-type]

    return _submit


@pytest.fixture
def wait_state(testbed: Testbed) -> Callable[..., str]:
    """``wait_state(job_id, states=TERMINAL, timeout=60)`` -> the state reached."""

    def _wait(job_id: int, states: AbstractSet[str] | Callable[[str], bool] = TERMINAL, timeout: float = 60.0) -> str:
        return wait_job_state(testbed, job_id, states, timeout)

    return _wait

