"""Processes of the testbed: run commands, start daemons, find and stop exactly our own.

A pid file alone is not proof: after a reboot or a crash the pid may belong to anything. A
daemon counts as ours only when the process behind the pid has the expected executable name
*and* carries a marker of this testbed (its config path on the command line, or ``SLURM_CONF``
in its environment). ``down`` signals nothing else.
"""

from __future__ import annotations

import os
import random
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import psutil

from ..errors import TestbedError


@dataclass(frozen=True)
class DaemonSpec:
    """How to start one daemon and how to recognise it afterwards."""

    name: str  # munged, mariadbd, slurmdbd, slurmctld, slurmd:NODE
    exe: str  # expected process name
    argv: tuple[str, ...]
    pid_file: Path
    log_file: Path
    port: int | None = None
    forks: bool = True  # daemonizes itself (the started process exits, the pid file names the daemon)
    markers: tuple[str, ...] = ()  # all must be elements of the command line ...
    env_conf: str | None = None  # ... or, if set, SLURM_CONF in its environment must equal this
    env: Mapping[str, str] = field(default_factory=dict)


def run(
    argv: Sequence[str],
    *,
    env: Mapping[str, str] | None = None,
    timeout: float = 30.0,
    check: bool = True,
    input: str | None = None,
) -> subprocess.CompletedProcess[str]:
    """Run a command (argv list, timeout, never a shell); failures become TestbedError."""
    try:
        proc = subprocess.run(
            list(argv),
            env=dict(env) if env is not None else None,
            capture_output=True,
            text=True,
            timeout=timeout,
            input=input,
            check=False,
            stdin=None if input is not None else subprocess.DEVNULL,
        )
    except FileNotFoundError:
        raise TestbedError(
            f"{argv[0]} not found: install the Slurm/munge/MariaDB packages (scripts/system-packages.sh)"
        ) from None
    except subprocess.TimeoutExpired:
        raise TestbedError(f"{' '.join(argv[:3])} timed out after {timeout:.0f}s") from None
    if check and proc.returncode != 0:
        err = (proc.stderr or proc.stdout).strip()
        raise TestbedError(f"{' '.join(argv[:3])} failed (exit {proc.returncode}): {err}")
    return proc


def read_pid(pid_file: Path) -> int | None:
    try:
        return int(pid_file.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def owned_process(spec: DaemonSpec) -> psutil.Process | None:
    """The running process of this daemon if its pid file names one that is really ours."""
    pid = read_pid(spec.pid_file)
    if pid is None:
        return None
    try:
        proc = psutil.Process(pid)
        if proc.status() == psutil.STATUS_ZOMBIE or proc.name() != spec.exe:
            return None
        cmdline = proc.cmdline()
        if spec.markers and all(m in cmdline for m in spec.markers):
            return proc
        if spec.env_conf is not None and proc.environ().get("SLURM_CONF") == spec.env_conf:
            return proc
    except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
        return None
    return None


def bindable(port: int, host: str = "127.0.0.1") -> bool:
    """True when nothing holds ``host:port`` now (a bind succeeds)."""
    with socket.socket() as s:
        try:
            s.bind((host, port))
        except OSError:
            return False
    return True


def ephemeral_low(default: int = 32768) -> int:
    """The first port of the kernel's ephemeral range (Linux's ip_local_port_range)."""
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return default


def free_ports(n_slurmd: int, low: int = 20000, high: int | None = None) -> dict[str, int]:
    """Ports for a private testbed (``[ports]`` of a description): three single ports and a run
    of ``n_slurmd`` consecutive ones, all free right now, at a random place in ``[low, high)`` so
    that testbeds made at the same time rarely collide. ``high`` defaults to the start of the
    kernel's ephemeral range: any outgoing connection (a client to another testbed's slurmctld or
    MariaDB) may take a port of that range between this check and the daemon's bind."""
    if high is None:
        high = min(60000, max(ephemeral_low(), low + 100))
    rng = random.Random()
    for _ in range(200):
        base = rng.randrange(low, high - 3 - n_slurmd, 10)
        if all(bindable(p) for p in range(base, base + 3 + n_slurmd)):
            return {"slurmctld": base, "slurmdbd": base + 1, "mariadb": base + 2, "slurmd_base": base + 3}
    raise TestbedError(f"no {3 + n_slurmd} consecutive free ports found in {low}-{high}")


def port_open(port: int, host: str = "127.0.0.1", timeout: float = 0.5) -> bool:
    """True when something accepts TCP connections on host:port."""
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


def log_tail(path: Path, lines: int = 8) -> str:
    try:
        text = path.read_text(errors="replace").splitlines()
    except OSError:
        return "(no log yet)"
    return "\n".join("    " + line for line in text[-lines:]) or "(log empty)"


def wait_for(
    what: str, ready: Callable[[], bool], timeout: float, spec: DaemonSpec | None = None
) -> None:
    """Poll ``ready`` until true; on timeout name the daemon and show its log."""
    deadline = time.monotonic() + timeout
    delay = 0.05
    while time.monotonic() < deadline:
        if ready():
            return
        time.sleep(delay)
        delay = min(delay * 1.5, 0.5)
    if ready():
        return
    msg = f"timed out after {timeout:.0f}s waiting for {what}"
    if spec is not None:
        msg += f"; see {spec.log_file}:\n{log_tail(spec.log_file)}"
    raise TestbedError(msg)


def start(spec: DaemonSpec, cwd: Path, timeout: float) -> psutil.Process:
    """Start a daemon and wait until its pid file names a live process of ours."""
    spec.log_file.parent.mkdir(parents=True, exist_ok=True)
    spec.pid_file.unlink(missing_ok=True)
    env = {**os.environ, **spec.env}
    with open(spec.log_file, "ab") as log:
        try:
            proc = subprocess.Popen(
                list(spec.argv),
                cwd=cwd,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        except FileNotFoundError:
            raise TestbedError(
                f"{spec.argv[0]} not found: install the testbed packages (scripts/system-packages.sh)"
            ) from None
    if spec.forks:
        try:
            rc = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            rc = None
        if rc:
            raise TestbedError(
                f"{spec.name} failed to start (exit {rc}); see {spec.log_file}:\n{log_tail(spec.log_file)}"
            )
    found: list[psutil.Process] = []

    def alive() -> bool:
        if not spec.forks and proc.poll() is not None:
            raise TestbedError(
                f"{spec.name} exited at start (exit {proc.returncode}); see {spec.log_file}:\n"
                + log_tail(spec.log_file)
            )
        p = owned_process(spec)
        if p is not None:
            found.append(p)
        return p is not None

    wait_for(f"{spec.name} to write {spec.pid_file}", alive, timeout, spec)
    return found[-1]


def stop(spec: DaemonSpec, timeout: float) -> bool:
    """SIGTERM our daemon, wait, SIGKILL after ``timeout``; True if one was running."""
    return bool(stop_many([spec], timeout))


def stop_many(specs: Sequence[DaemonSpec], timeout: float) -> list[str]:
    """Stop several daemons at once (each takes ~2 s to shut down; in parallel, not in a row).

    Returns the names of those that were running. Pid files of all are removed.
    """
    running: list[tuple[DaemonSpec, psutil.Process]] = []
    for spec in specs:
        proc = owned_process(spec)
        if proc is not None:
            running.append((spec, proc))
    terminate([p for _, p in running], timeout)
    for spec in specs:
        spec.pid_file.unlink(missing_ok=True)
    return [spec.name for spec, _ in running]


def terminate(procs: list[psutil.Process], timeout: float) -> None:
    """SIGTERM, wait up to ``timeout``, then SIGKILL whatever is left."""
    for p in procs:
        try:
            p.send_signal(signal.SIGTERM)
        except psutil.NoSuchProcess:
            pass
    _, alive = psutil.wait_procs(procs, timeout=timeout)
    for p in alive:
        try:
            p.kill()
        except psutil.NoSuchProcess:
            pass
    psutil.wait_procs(alive, timeout=5)


def job_processes(slurm_conf: str, spool: Path) -> list[psutil.Process]:
    """slurmstepd processes of this testbed and all their descendants.

    A slurmstepd is ours when its inherited environment names our ``slurm.conf`` or it listens
    on a unix socket in our spool directory. Its environment must be read raw: slurmstepd
    rewrites its process title over the start of the environment block, and psutil's
    ``environ()`` then returns nothing. Only slurmstepd and what it spawned: a user's shell may
    also carry SLURM_CONF (after ``eval "$(slurm-fair testbed env)"``) and is never touched.
    """
    marker = b"SLURM_CONF=" + slurm_conf.encode() + b"\0"
    found: dict[int, psutil.Process] = {}
    for p in psutil.process_iter(["name"]):
        try:
            if p.info["name"] != "slurmstepd":
                continue
            if not (_raw_environ_has(p.pid, marker) or _listens_under(p, spool)):
                continue
            found[p.pid] = p
            for c in p.children(recursive=True):
                found[c.pid] = c
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            continue
    return list(found.values())


def _raw_environ_has(pid: int, marker: bytes) -> bool:
    try:
        with open(f"/proc/{pid}/environ", "rb") as fh:
            return marker in fh.read()
    except OSError:
        return False


def _listens_under(proc: psutil.Process, directory: Path) -> bool:
    prefix = str(directory) + os.sep
    return any(c.laddr and str(c.laddr).startswith(prefix) for c in proc.net_connections(kind="unix"))
