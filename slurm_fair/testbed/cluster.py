"""The local Slurm testbed: munge, MariaDB, slurmdbd, slurmctld and one slurmd per virtual node.

Everything lives under one state directory (:class:`Layout`) and listens on loopback ports from
the testbed description, so several testbeds can coexist (tests start a private one to prove
``down``) and the system's ``/etc/slurm``, munged and MariaDB are never touched.

``up`` is idempotent: a healthy testbed (every daemon ours and alive, ``scontrol ping`` UP, nodes
responding) returns after a few cheap checks; a partly running one gets only its missing daemons
started. Order matters: munge and MariaDB first, then slurmdbd, then the cluster/accounts are
registered (before slurmctld, which would otherwise add the cluster itself), then slurmctld, then
the slurmds.
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
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

from ..errors import ConfigError, Finding, TestbedError
from . import accounts, procs, rootfs
from . import config as tbconfig
from .config import TestbedConfig
from .layout import DIR_ENV, Layout
from .procs import DaemonSpec
from ..templating import repo_root
from .render import render_all

#: node states (sinfo %T, lower case) that mean "slurmd registered and responding"
RESPONDING = {"idle", "mixed", "allocated", "completing", "reserved", "planned", "drained", "draining"}
_SAVED_CONFIG = "testbed.json"


@dataclass(frozen=True)
class DaemonStatus:
    name: str
    running: bool
    pid: int | None
    port: int | None
    log_file: Path


@dataclass(frozen=True)
class Status:
    """What runs: each daemon, and the node states when slurmctld answers."""

    dir: Path
    daemons: tuple[DaemonStatus, ...]
    nodes: Mapping[str, str]  # node -> state ({} when slurmctld is not reachable)

    @property
    def all_running(self) -> bool:
        return all(d.running for d in self.daemons)

    @property
    def healthy(self) -> bool:
        return self.all_running and bool(self.nodes) and all(
            s in RESPONDING for s in self.nodes.values()
        )


def default_dir(slurm: str | None = None) -> Path:
    """$SLURM_FAIR_TESTBED_DIR, else ``.testbed/`` in the repo root (source checkout) or cwd.

    Another Slurm version than the default gets a sibling of its own (``.testbed-24.11``), so
    both versions run at once from the same checkout.
    """
    if env := os.environ.get(DIR_ENV):
        found = Path(env).resolve()
    else:
        root = repo_root()
        base = root if (root / "templates").is_dir() else Path.cwd()
        found = (base / ".testbed").resolve()
    if slurm and slurm != rootfs.DEFAULT_VERSION:
        found = found.with_name(f"{found.name}-{slurm}")
    return found


def default_config_path() -> Path | None:
    """$SLURM_FAIR_TESTBED_CONFIG, else conf/testbed.toml of the checkout, else built-in defaults."""
    if env := os.environ.get(tbconfig.CONFIG_ENV):
        return Path(env)
    candidate = repo_root() / "conf" / "testbed.toml"
    return candidate if candidate.is_file() else None


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
        elif self.layout.root != default_dir() and (saved := self.layout.root / _SAVED_CONFIG).is_file():
            cfg = tbconfig.validate(json.loads(saved.read_text()), str(saved))
        else:
            cfg = tbconfig.load(default_config_path())
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
        """Run a Slurm command against this testbed; returns the CompletedProcess."""
        return procs.run(argv, env=self.client_env(), timeout=timeout, check=check)

    def daemon_names(self) -> list[str]:
        return [d.name for d in self.daemons()]

    # --- daemons ---------------------------------------------------------------------------

    def daemons(self) -> list[DaemonSpec]:
        """Every daemon in start order."""
        L = self.layout
        conf = str(L.slurm_conf)
        slurm_env = {"SLURM_CONF": conf}
        specs = [
            DaemonSpec(
                "munged", "munged",
                (self.program("munged"), f"--socket={L.munge_socket}", f"--key-file={L.munge_key}",
                 f"--pid-file={L.pid_file('munged')}", f"--log-file={L.log_file('munged')}",
                 f"--seed-file={L.run / 'munged.seed'}", "--force"),
                L.pid_file("munged"), L.log_file("munged"),
                markers=(f"--socket={L.munge_socket}",),
            ),
            DaemonSpec(
                "mariadbd", "mariadbd",
                (self.program("mariadbd"), f"--defaults-file={L.my_cnf}"),
                L.pid_file("mariadbd"), L.log_file("mariadbd"), port=self.config.ports["mariadb"],
                forks=False, markers=(f"--defaults-file={L.my_cnf}",),
            ),
            DaemonSpec(
                "slurmdbd", "slurmdbd", (self.program("slurmdbd"),),
                L.pid_file("slurmdbd"), L.log_file("slurmdbd"), port=self.config.ports["slurmdbd"],
                env_conf=conf, env=slurm_env,
            ),
            DaemonSpec(
                "slurmctld", "slurmctld", (self.program("slurmctld"), "-f", conf),
                L.pid_file("slurmctld"), L.log_file("slurmctld"), port=self.config.ports["slurmctld"],
                markers=(conf,), env=slurm_env,
            ),
        ]
        for node in self.config.nodes:
            name = f"slurmd:{node.name}"
            specs.append(
                DaemonSpec(
                    name, "slurmd", (self.program("slurmd"), "-f", conf, "-N", node.name),
                    L.pid_file(name), L.log_file(name), port=node.port,
                    markers=(conf, node.name), env=slurm_env,
                )
            )
        return specs

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
        self._check_binaries(say)
        rendered = render_all(self.config, self.layout)
        running = [d.name for d in self.daemons() if procs.owned_process(d) is not None]
        if running and self._config_changed(rendered):
            raise TestbedError(
                f"the testbed in {self.dir} runs with another configuration ({', '.join(running)} "
                f"running); run `slurm-fair testbed down --dir {self.dir}` first"
            )
        if len(running) == len(self.daemons()) and self._ping():
            say("testbed already running; checking nodes")
            self._wait_nodes()
            accounts.register(self.config, self.client_env())
            return

        self._prepare(rendered)
        for spec in self.daemons():
            if procs.owned_process(spec) is not None:
                continue
            say(f"starting {spec.name}")
            if spec.name == "mariadbd":
                self._init_mariadb()
            self._start_daemon(spec.name)
            if spec.name == "mariadbd":
                self._create_database()
            elif spec.name == "slurmdbd":
                say("registering cluster, accounts and users")
                self._wait_dbd()
                accounts.register(self.config, self.client_env())
        say("waiting for every node to be idle")
        self._wait_nodes()

    def _check_binaries(self, say: Callable[[str], None] = lambda _m: None) -> None:
        if not self.version.host:
            rootfs.ensure(self.layout.rootfs, self.version, say)
            rootfs.write_wrappers(self.layout.bin, self.layout.rootfs, self.version, (self.layout.root,))
            return
        needed = ["munged", "mariadbd", "mariadb-install-db", "mariadb", "slurmdbd", "slurmctld",
                  "slurmd", "sacctmgr", "scontrol", "sinfo"]
        path = os.environ.get("PATH", "") + os.pathsep + "/usr/sbin" + os.pathsep + "/sbin"
        missing = [b for b in needed if shutil.which(b, path=path) is None]
        if missing:
            raise TestbedError(
                f"missing programs: {', '.join(missing)}; run scripts/system-packages.sh as root"
            )
        if "/usr/sbin" not in os.environ.get("PATH", "").split(os.pathsep):
            os.environ["PATH"] = path  # daemons live in /usr/sbin, not on every user's PATH

    def _config_changed(self, rendered: Mapping[str, str]) -> bool:
        for name, text in rendered.items():
            path = self.layout.etc / name
            if not path.is_file() or path.read_text() != text:
                return True
        return False

    def _prepare(self, rendered: Mapping[str, str]) -> None:
        """Directories, fake GPU devices, munge key, rendered configs, the saved description."""
        L = self.layout
        L.make_dirs()
        for node in self.config.nodes:
            L.node_dev(node.name).mkdir(parents=True, exist_ok=True)
            for f in L.device_files(node.name, node.gpus):
                f.touch()
        if not L.munge_key.exists():
            fd = os.open(L.munge_key, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o400)
            with os.fdopen(fd, "wb") as fh:
                fh.write(os.urandom(1024))
        for name, text in rendered.items():
            path = L.etc / name
            path.write_text(text)
            path.chmod(0o600 if name == "slurmdbd.conf" else 0o644)
        if self.config.job_submit_lua and not self.config.job_submit_script:
            from ..deploy.render import render_template

            (L.etc / "job_submit.lua").write_text(render_template(
                "deploy/job_submit.lua.j2", {"plan_path": str(L.plan_file), "max_age_s": 180}))
        elif self.config.job_submit_lua:
            script = Path(self.config.job_submit_script)
            if not script.is_absolute():
                script = repo_root() / script
            if not script.is_file():
                raise ConfigError(
                    self.config.source, [Finding("cluster.job_submit_script", f"{script} not found")]
                )
            shutil.copyfile(script, L.etc / "job_submit.lua")
        raw = dict(self.config.raw) or {}
        (L.root / _SAVED_CONFIG).write_text(json.dumps(raw, indent=1))

    def _init_mariadb(self) -> None:
        if (self.layout.mysql_data / "mysql").is_dir():
            return
        procs.run(
            [self.program("mariadb-install-db"), f"--defaults-file={self.layout.my_cnf}", "--skip-test-db",
             "--auth-root-authentication-method=socket"],
            timeout=self.config.start_timeout_s,
        )

    def _mariadb(self, sql: str) -> None:
        procs.run([self.program("mariadb"), f"--defaults-file={self.layout.my_cnf}", "-uroot", "-e", sql], timeout=30)

    def _create_database(self) -> None:
        pw = self.layout.db_password()
        stmts = ["CREATE DATABASE IF NOT EXISTS slurm_acct_db"]
        for host in ("127.0.0.1", "localhost"):
            stmts += [
                f"CREATE USER IF NOT EXISTS 'slurm'@'{host}' IDENTIFIED BY '{pw}'",
                f"ALTER USER 'slurm'@'{host}' IDENTIFIED BY '{pw}'",
                f"GRANT ALL ON slurm_acct_db.* TO 'slurm'@'{host}'",
            ]
        self._mariadb("; ".join(stmts) + ";")

    def _wait_dbd(self) -> None:
        def ok() -> bool:
            proc = self.run(["sacctmgr", "-n", "show", "cluster"], timeout=15, check=False)
            if "Unable to process configuration" in proc.stderr:
                raise TestbedError(f"{self.slurm_conf} is not valid for sacctmgr: {proc.stderr.strip()}")
            return proc.returncode == 0

        procs.wait_for("slurmdbd to answer sacctmgr", ok, self.config.start_timeout_s, self._spec("slurmdbd"))

    def _ping(self) -> bool:
        if not self.slurm_conf.is_file():
            return False
        try:
            out = self.run(["scontrol", "ping"], timeout=10, check=False).stdout
        except TestbedError:
            return False
        return "is UP" in out

    def node_states(self) -> dict[str, str]:
        """node -> state (sinfo %T, lower case, '*' when not responding); {} if unreachable."""
        try:
            proc = self.run(["sinfo", "-h", "-N", "-o", "%N|%T"], timeout=10, check=False)
        except TestbedError:
            return {}
        if proc.returncode != 0:
            return {}
        states: dict[str, str] = {}
        for line in proc.stdout.splitlines():
            if "|" in line:
                name, state = line.split("|", 1)
                states[name.strip()] = state.strip().lower()
        return states

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
        for user in accounts.users():
            self.run(["scancel", "--quiet", "-u", user], timeout=15, check=False)

        def empty() -> bool:
            out = self.run(["squeue", "-h", "-o", "%i"], timeout=10, check=False)
            return out.returncode != 0 or not out.stdout.strip()

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
