"""The local Slurm testbed: munge, MariaDB, slurmdbd, slurmctld and one slurmd per virtual node.

Everything lives under one state directory (:class:`Layout`) and listens on loopback ports from
the testbed description, so several testbeds can coexist (tests start a private one to prove
``down``) and the system's ``/etc/slurm``, munged and MariaDB are never touched.

``up`` is idempotent: a healthy testbed (every daemon ours and alive, ``scontrol ping`` UP, nodes
responding) returns after a few cheap checks; a partly running one gets only its missing daemons
started. Order matters: munge and MariaDB first, then slurmdbd, then the cluster/accounts are
registered (before slurmctld, which would otherwise add the cluster itself), then slurmctld, then
the slurmds.

What ``up`` writes before starting anything is :mod:`.prepare`; the daemons and the status they
report are :mod:`.daemons`; where the state directory is, :mod:`.layout`.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from ..errors import SlurmCommandError, SlurmError, TestbedError
from ..slurm.admin import SlurmAdmin
from . import accounts, procs, rootfs
from . import config as tbconfig
from .config import TestbedConfig
from .daemons import RESPONDING, DaemonStatus, Status, daemon_specs
from .layout import Layout, default_dir
from .prepare import SAVED_CONFIG, check_binaries, config_changed, create_database, init_mariadb, prepare_dir
from .procs import DaemonSpec
from .render import render_all


class Testbed:
    """One local Slurm cluster in one directory. The Python API behind ``slurm-fair testbed``.

    ``config`` may be a :class:`TestbedConfig`, a path to a TOML file, or None. With None, the
    default directory follows $SLURM_FAIR_TESTBED_CONFIG / conf/testbed.toml / the built-in
    defaults (editing conf/testbed.toml takes effect at the next ``up`` after a ``down``); any other
    directory uses the description saved by its last ``up`` (so ``down``/``status`` of a private
    testbed find its ports), falling back to the same default sources.
    """

    __test__ = False

    def __init__(
        self,
        dir: str | os.PathLike[str] | None = None,
        config: TestbedConfig | str | os.PathLike[str] | None = None,
        slurm: str | None = None,
    ) -> None:
        if slurm is not None:
            rootfs.version(slurm)  # an unknown version fails here, naming the known ones
        self.layout = Layout(Path(dir).resolve() if dir is not None else default_dir(slurm))
        if isinstance(config, TestbedConfig):
            cfg = config
        elif config is not None:
            cfg = tbconfig.load(config)
        elif self.layout.root != default_dir() and (saved := self.layout.root / SAVED_CONFIG).is_file():
            cfg = tbconfig.validate(json.loads(saved.read_text()), str(saved))
        else:
            cfg = tbconfig.load_default()
        self.config = tbconfig.with_slurm(cfg, slurm) if slurm is not None else cfg
        self.version = rootfs.version(self.config.slurm)

    # --- what others use -------------------------------------------------------------------

    @property
    def dir(self) -> Path:
        return self.layout.root

    @property
    def slurm_conf(self) -> Path:
        return self.layout.slurm_conf

    @property
    def bin_dir(self) -> Path | None:
        """Where this testbed's Slurm commands are when they are not the host's (else None)."""
        return None if self.version.host else self.layout.bin

    @property
    def env(self) -> dict[str, str]:
        """Variables a Slurm client needs to talk to this testbed (add them to os.environ).

        ``PATH`` starts with :attr:`bin_dir` for another Slurm version than the host's, and
        holds no other testbed's wrappers (two versions' testbeds used from one process).
        """
        rest = rootfs.without_wrappers(os.environ.get("PATH", ""))
        b = self.bin_dir
        return {"SLURM_CONF": str(self.slurm_conf),
                "PATH": os.pathsep.join([str(b), *rest] if b is not None else rest)}

    @property
    def job_python(self) -> str:
        """The Python a job of this testbed runs with (the root filesystem's own, else this one)."""
        return sys.executable if self.version.host else "/usr/bin/python3"

    def program(self, name: str) -> str:
        """How to call one of the testbed's programs: its wrapper, or the host's own (never
        another testbed's wrapper that happens to be on PATH)."""
        b = self.bin_dir
        if b is not None:
            return str(b / name)
        dirs = rootfs.without_wrappers(os.environ.get("PATH", "") + os.pathsep + "/usr/sbin:/sbin")
        return shutil.which(name, path=os.pathsep.join(dirs)) or name

    def client_env(self) -> dict[str, str]:
        """The current environment plus :attr:`env`: pass as ``env=`` to subprocess."""
        return {**os.environ, **self.env}

    def run(
        self, argv: list[str], timeout: float = 30.0, check: bool = True
    ) -> subprocess.CompletedProcess[str]:
        """Run a Slurm command against this testbed; returns the CompletedProcess (for tests
        that need a command as a user types it; the package's own go through :meth:`admin`)."""
        return procs.run(argv, env=self.client_env(), timeout=timeout, check=check)

    def admin(self, timeout_s: float = 30.0) -> SlurmAdmin:
        """Slurm's commands for this testbed through the Slurm port's runner and parsers."""
        return SlurmAdmin(env=self.client_env(), timeout_s=timeout_s, cluster=self.config.cluster_name)

    def daemon_names(self) -> list[str]:
        return [d.name for d in self.daemons()]

    # --- daemons ---------------------------------------------------------------------------

    def daemons(self) -> list[DaemonSpec]:
        """Every daemon in start order (:func:`.daemons.daemon_specs`)."""
        return daemon_specs(self.config, self.layout, self.program)

    def _spec(self, name: str) -> DaemonSpec:
        for d in self.daemons():
            if d.name == name:
                return d
        raise TestbedError(f"no daemon {name!r} in this testbed; known: {', '.join(self.daemon_names())}")

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        """One ``up``/``down``/start/stop at a time per directory, across processes.

        Several pytest sessions share the default testbed; without this, two sessions finding
        it down would both start munged, MariaDB, ... The lock file lives beside the state.
        """
        self.layout.root.mkdir(parents=True, exist_ok=True)
        with open(self.layout.root / ".lock", "w") as fh:
            deadline = time.monotonic() + self.config.start_timeout_s
            while True:
                try:
                    fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if time.monotonic() > deadline:
                        raise TestbedError(
                            f"another process holds {self.layout.root / '.lock'} (an up/down in progress?)"
                        ) from None
                    time.sleep(0.2)
            try:
                yield
            finally:
                fcntl.flock(fh, fcntl.LOCK_UN)

    def start_daemon(self, name: str) -> None:
        """Start one daemon (no-op if it runs) and wait until it answers."""
        with self._locked():
            self._start_daemon(name)

    def _start_daemon(self, name: str) -> None:
        spec = self._spec(name)
        if procs.owned_process(spec) is not None:
            return
        self._check_port_free(spec)
        procs.start(spec, self.layout.root, self.config.start_timeout_s)
        self._wait_ready(spec)

    def stop_daemon(self, name: str) -> bool:
        """Stop one daemon of ours (SIGTERM, SIGKILL after the stop timeout); True if it ran."""
        with self._locked():
            return procs.stop(self._spec(name), self.config.stop_timeout_s)

    def _check_port_free(self, spec: DaemonSpec) -> None:
        if spec.port is not None and procs.port_open(spec.port):
            raise TestbedError(
                f"cannot start {spec.name}: port {spec.port} on 127.0.0.1 is already in use by "
                f"another process; choose other ports in {self.config.source}"
            )

    def _wait_ready(self, spec: DaemonSpec) -> None:
        t = self.config.start_timeout_s
        if spec.name == "munged":
            procs.wait_for("munged socket", self.layout.munge_socket.exists, t, spec)
        elif (port := spec.port) is not None:
            procs.wait_for(f"{spec.name} on port {port}", lambda: procs.port_open(port), t, spec)
        if spec.name == "slurmctld":
            procs.wait_for("slurmctld to answer scontrol ping", self._ping, t, spec)

    # --- up ----------------------------------------------------------------------------------

    def up(self, progress: Callable[[str], None] | None = None) -> float:
        """Bring the testbed up (or check it is up); returns the seconds it took."""
        say = progress or (lambda _msg: None)
        t0 = time.monotonic()
        if os.geteuid() != 0:
            raise TestbedError("the testbed runs slurmd/slurmctld as root (SlurmUser=root): run `up` as root")
        self.layout.check()
        with self._locked():
            self._up(say)
        return time.monotonic() - t0

    def _up(self, say: Callable[[str], None]) -> None:
        check_binaries(self.version, self.layout, say)
        rendered = render_all(self.config, self.layout)
        running = [d.name for d in self.daemons() if procs.owned_process(d) is not None]
        if running and config_changed(self.layout, rendered):
            raise TestbedError(
                f"the testbed in {self.dir} runs with another configuration ({', '.join(running)} "
                f"running); run `slurm-fair testbed down --dir {self.dir}` first"
            )
        if len(running) == len(self.daemons()) and self._ping():
            say("testbed already running; checking nodes")
            self._wait_nodes()
            accounts.register(self.config, self.client_env())
            return

        prepare_dir(self.config, self.layout, rendered)
        for spec in self.daemons():
            if procs.owned_process(spec) is not None:
                continue
            say(f"starting {spec.name}")
            if spec.name == "mariadbd":
                init_mariadb(self.layout, self.program, self.config.start_timeout_s)
            self._start_daemon(spec.name)
            if spec.name == "mariadbd":
                create_database(self.layout, self.program)
            elif spec.name == "slurmdbd":
                say("registering cluster, accounts and users")
                self._wait_dbd()
                accounts.register(self.config, self.client_env())
        say("waiting for every node to be idle")
        self._wait_nodes()

    def _wait_dbd(self) -> None:
        admin = self.admin(timeout_s=15)

        def ok() -> bool:
            try:
                admin.clusters()
            except SlurmCommandError as exc:
                if "Unable to process configuration" in exc.stderr:
                    raise TestbedError(f"{self.slurm_conf} is not valid for sacctmgr: {exc.stderr}") from None
                return False
            except SlurmError:
                return False
            return True

        procs.wait_for("slurmdbd to answer sacctmgr", ok, self.config.start_timeout_s, self._spec("slurmdbd"))

    def _ping(self) -> bool:
        return self.slurm_conf.is_file() and self.admin(timeout_s=10).responding()

    def node_states(self) -> dict[str, str]:
        """node -> state (sinfo %T, lower case, '*' when not responding); {} if unreachable."""
        return self.admin(timeout_s=10).node_states()

    def _wait_nodes(self) -> None:
        expected = {n.name for n in self.config.nodes}

        def ok() -> bool:
            states = self.node_states()
            return expected <= set(states) and all(states[n] in RESPONDING for n in expected)

        try:
            procs.wait_for("every node to be idle", ok, self.config.start_timeout_s)
        except TestbedError:
            states = self.node_states()
            bad = {n: states.get(n, "missing") for n in sorted(expected) if states.get(n) not in RESPONDING}
            logs = ", ".join(str(self._spec(f"slurmd:{n}").log_file) for n in bad)
            raise TestbedError(
                f"nodes not idle after {self.config.start_timeout_s:.0f}s: "
                + ", ".join(f"{n}={s}" for n, s in bad.items())
                + f"; see {logs} and {self._spec('slurmctld').log_file}"
            ) from None

    # --- down / status -------------------------------------------------------------------------

    def down(self, progress: Callable[[str], None] | None = None) -> list[str]:
        """Stop exactly the daemons this testbed started (and its job steps); returns their names."""
        say = progress or (lambda _msg: None)
        if not self.layout.root.is_dir():
            return []
        with self._locked():
            return self._down(say)

    def _down(self, say: Callable[[str], None]) -> list[str]:
        stopped: list[str] = []
        if self._ping():
            self._cancel_all_jobs(say)
        by_name = {d.name: d for d in self.daemons()}
        # in stages, each in parallel: slurmds with slurmctld, then slurmdbd (which may still
        # receive slurmctld's last records), then what slurmdbd needed
        stages = [
            [d for n, d in by_name.items() if n.startswith("slurmd:") or n == "slurmctld"],
            [by_name["slurmdbd"]],
            [by_name["mariadbd"], by_name["munged"]],
        ]
        for stage in stages:
            for name in procs.stop_many(stage, self.config.stop_timeout_s):
                say(f"stopped {name}")
                stopped.append(name)
        leftovers = procs.job_processes(str(self.slurm_conf), self.layout.spool)
        if leftovers:
            say(f"stopping {len(leftovers)} leftover job processes")
            procs.terminate(leftovers, self.config.stop_timeout_s)
        still = [d.name for d in self.daemons() if procs.owned_process(d) is not None]
        if still:
            raise TestbedError(f"still running after down: {', '.join(still)}")
        return stopped

    def _cancel_all_jobs(self, say: Callable[[str], None]) -> None:
        """scancel every job and give slurmd a moment to end the steps while it still runs."""
        admin = self.admin(timeout_s=15)
        for user in accounts.users():
            admin.cancel_user(user)

        def empty() -> bool:
            return not admin.queued()  # None (squeue failed) or no job left

        try:
            procs.wait_for("jobs to end", empty, min(self.config.stop_timeout_s, 15.0))
        except TestbedError:
            say("some jobs did not end in time; their processes are killed below")

    def status(self) -> Status:
        rows = []
        for spec in self.daemons():
            p = procs.owned_process(spec)
            rows.append(DaemonStatus(spec.name, p is not None, p.pid if p else None, spec.port, spec.log_file))
        ctld = next(r for r in rows if r.name == "slurmctld")
        nodes = self.node_states() if ctld.running else {}
        return Status(self.dir, tuple(rows), nodes)

    def is_healthy(self) -> bool:
        return self.status().healthy
