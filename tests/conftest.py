"""Shared fixtures: the real local Slurm testbeds, each brought up once per test session.

Every test that takes the ``testbed`` fixture runs once per Slurm version of
``--slurm-versions`` (default: every version the testbed knows, 22.05, 24.11 and 26.05; ``make
test`` and CI run all three): pytest groups them by version, so each testbed comes up once.

Tests that need Slurm are marked ``@pytest.mark.slurm`` and take the ``testbed`` fixture (a
:class:`slurm_fair.testbed.Testbed`, already up, with ``SLURM_CONF`` exported into
``os.environ`` so plain ``subprocess.run(["sinfo"])`` reaches it). A healthy testbed in the
default directory is reused; one started by the fixture stays up after the session (others may
use it) unless ``$CI`` is set: then the fixture takes it down and asserts that no daemon of it
remains, which is how CI proves ``down``.

``slurm_fair.testbed.jobs`` holds the plain helpers (``submit_job``, ``wait_job_state``), also
exposed here as the ``submit`` and ``wait_state`` fixtures, so every test module submits as a
tenant and waits for a state the same way.

``--slurm-lane a|b`` splits the real tests of one Slurm version over two testbeds (CI's two
22.05 lanes, ``scripts/ci-lanes.sh``): ``b`` keeps the tests that ``tests/slurm-lane-b.txt`` names
(test files, or single tests by node id), ``a`` every other one, so each test lands in exactly one
half and a new test file lands in ``a`` until the list names it.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from collections.abc import Set as AbstractSet

import hypo_profiles  # noqa: F401  (registers and loads the Hypothesis profile)
import pytest
from slurm_lanes import ListError, in_lane_b, lane_b_entries

from slurm_fair.testbed import Testbed
from slurm_fair.testbed.jobs import TERMINAL, submit_job, wait_job_state
from slurm_fair.testbed.procs import owned_process
from slurm_fair.testbed.rootfs import VERSIONS


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--slurm-versions", default=os.environ.get("SLURM_FAIR_TEST_VERSIONS", ",".join(VERSIONS)),
        help="comma-separated Slurm versions the real-testbed tests run on (default: "
        "$SLURM_FAIR_TEST_VERSIONS, else all: " + ",".join(VERSIONS) + ")",
    )
    parser.addoption(
        "--slurm-lane", choices=("a", "b"), default=None,
        help="run only one half of the tests: b those tests/slurm-lane-b.txt names, a all others "
        "(CI's two lanes of one Slurm version, each on its own testbed)",
    )


def slurm_versions(config: pytest.Config) -> list[str]:
    wanted = [v.strip() for v in str(config.getoption("--slurm-versions")).split(",") if v.strip()]
    unknown = [v for v in wanted if v not in VERSIONS]
    if unknown:
        raise pytest.UsageError(f"--slurm-versions: unknown {unknown}; known: {list(VERSIONS)}")
    return wanted


def pytest_configure(config: pytest.Config) -> None:
    slurm_versions(config)  # a typo in --slurm-versions is a usage error before anything runs
    if config.getoption("--slurm-lane"):
        try:  # and a stale entry of the lane list
            lane_b_entries()
        except ListError as exc:
            raise pytest.UsageError(str(exc)) from None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    lane = config.getoption("--slurm-lane")
    if not lane:
        return
    entries = lane_b_entries()
    keep, drop = [], []
    for item in items:
        (keep if in_lane_b(item.nodeid, entries) == (lane == "b") else drop).append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "slurm_version" in metafunc.fixturenames:
        versions = slurm_versions(metafunc.config)
        metafunc.parametrize("slurm_version", versions, indirect=True, scope="session",
                             ids=[f"slurm{v}" for v in versions])


@pytest.fixture(scope="session")
def slurm_version(request: pytest.FixtureRequest) -> str:
    """The Slurm version of the ``testbed`` a test runs on (a session-wide parameter)."""
    return str(request.param)


class _Testbeds:
    """Each version's testbed, brought up once when a test first needs it.

    A healthy testbed in the default directory is reused and left up; one started here stays up
    too unless ``$CI`` is set: then it is taken down at the end of the session and no daemon of
    it may remain, which is how CI proves ``down``.
    """

    def __init__(self) -> None:
        self.started: dict[str, Testbed] = {}
        self.owned: list[Testbed] = []

    def __call__(self, version: str) -> Testbed:
        if version in self.started:
            return self.started[version]
        tb = Testbed(slurm=version)
        ci_owned = bool(os.environ.get("CI")) and not tb.is_healthy()
        try:
            tb.up()
        except BaseException:
            if ci_owned:  # leave nothing behind a failed start either
                tb.down()
            raise
        if ci_owned:
            self.owned.append(tb)
        self.started[version] = tb
        return tb

    def close(self) -> None:
        left: list[str] = []
        for tb in self.owned:
            tb.down()
            left += [f"{tb.config.slurm}:{d.name}" for d in tb.daemons() if owned_process(d) is not None]
        assert not left, f"daemons still running after down: {left}"


@pytest.fixture(scope="session")
def testbeds() -> Iterator[Callable[[str], Testbed]]:
    """``testbeds(version)`` -> that version's testbed, up (for fixtures that pick a version)."""
    found = _Testbeds()
    try:
        yield found
    finally:
        found.close()


@pytest.fixture(scope="session")
def testbed(slurm_version: str, testbeds: Callable[[str], Testbed]) -> Iterator[Testbed]:
    """The local Slurm cluster of ``slurm_version``, up (started or reused), with its
    ``SLURM_CONF`` (and, for another version than the host's, ``PATH``) in os.environ."""
    tb = testbeds(slurm_version)
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

